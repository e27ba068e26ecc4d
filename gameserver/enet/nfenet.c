#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <time.h>

#include "nfenet.h"

/* The host being serviced on this thread. ENet's intercept callback only gets
 * the ENetHost, which has no user-data field; enet_host_service runs entirely
 * inside nfe_host_service on one thread, so a thread-local finds the wrapper. */
static __thread nfe_host *nfe_servicing;

ENetVersion
nfe_header_version(void)
{
    return ENET_VERSION;
}

static uint64_t
nfe_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* lowbias32 finaliser: spreads neighbouring addresses over the sets. */
static enet_uint32
nfe_hash(enet_uint32 x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* nfe_admit takes one token from the source's bucket, creating the bucket (full)
 * on first sight. Returns 1 when the CONNECT may pass. */
static int
nfe_admit(nfe_host *h, enet_uint32 ip)
{
    double rate, burst;
    nfe_bucket *set, *b = NULL, *victim = NULL;
    uint64_t now;
    int i;

    __atomic_load(&h->rate, &rate, __ATOMIC_RELAXED);
    __atomic_load(&h->burst, &burst, __ATOMIC_RELAXED);
    if (!(rate > 0))
        return 1;

    if (h->buckets == NULL) {
        h->buckets = calloc(NFE_BUCKETS, sizeof(nfe_bucket));
        /* Fail open: without memory ENet cannot allocate the peer either. */
        if (h->buckets == NULL)
            return 1;
    }

    now = nfe_now_ns();
    set = &h->buckets[(nfe_hash(ip ^ h->seed) % (NFE_BUCKETS / NFE_WAYS)) * NFE_WAYS];
    for (i = 0; i < NFE_WAYS; i++) {
        nfe_bucket *e = &set[i];

        if (e->used && e->ip == ip) {
            b = e;
            break;
        }
        if (victim == NULL || (victim->used && !e->used) ||
            (victim->used == e->used && e->last_ns < victim->last_ns))
            victim = e;
    }

    if (b == NULL) {
        b = victim;
        b->used = 1;
        b->ip = ip;
        b->tokens = burst;
    } else {
        b->tokens += (double) (now - b->last_ns) / 1e9 * rate;
    }
    if (b->tokens > burst)
        b->tokens = burst;
    b->last_ns = now;

    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        return 1;
    }
    return 0;
}

/* nfe_inspect classifies one received datagram before ENet parses it. Returns
 * 1 to drop it, 0 to let ENet handle it. Every read is bounds-checked. */
static int
nfe_inspect(nfe_host *h, enet_uint32 ip, const enet_uint8 *data, size_t len)
{
    enet_uint16 field;
    size_t header;

    if (data == NULL || len < offsetof(ENetProtocolHeader, sentTime))
        goto malformed;

    field = (enet_uint16) ((data[0] << 8) | data[1]);
    /* No netfleet host installs a compressor, so ENet would discard these;
     * they are counted rather than silently ignored. */
    if (field & ENET_PROTOCOL_HEADER_FLAG_COMPRESSED)
        goto malformed;

    header = (field & ENET_PROTOCOL_HEADER_FLAG_SENT_TIME)
                 ? sizeof(ENetProtocolHeader)
                 : offsetof(ENetProtocolHeader, sentTime);
    if (len < header)
        goto malformed;
    if (len == header)
        return 0;

    /* ENet only allocates a peer for a CONNECT that is the first command. */
    if ((data[header] & ENET_PROTOCOL_COMMAND_MASK) != ENET_PROTOCOL_COMMAND_CONNECT)
        return 0;
    if (nfe_admit(h, ip))
        return 0;

    __atomic_fetch_add(&h->refusals, 1, __ATOMIC_RELAXED);
    return 1;

malformed:
    __atomic_fetch_add(&h->malformed, 1, __ATOMIC_RELAXED);
    return 1;
}

static int ENET_CALLBACK
nfe_intercept(ENetHost *host, ENetEvent *event)
{
    nfe_host *h = nfe_servicing;

    (void) event;
    if (h == NULL || h->host != host)
        return 0;
    return nfe_inspect(h, host->receivedAddress.host, host->receivedData,
                       host->receivedDataLength);
}

nfe_host *
nfe_host_create(const ENetAddress *address, size_t peers, size_t channels,
                enet_uint32 incoming, enet_uint32 outgoing,
                size_t max_packet, size_t max_waiting,
                enet_uint32 seed, int *err)
{
    nfe_host *h = calloc(1, sizeof(*h));

    if (h == NULL) {
        *err = ENOMEM;
        return NULL;
    }

    errno = 0;
    h->host = enet_host_create(address, peers, channels, incoming, outgoing);
    if (h->host == NULL) {
        *err = errno;
        free(h);
        return NULL;
    }

    if (max_packet != 0)
        h->host->maximumPacketSize = max_packet;
    if (max_waiting != 0)
        h->host->maximumWaitingData = max_waiting;
    h->host->intercept = nfe_intercept;
    h->seed = seed;
    return h;
}

void
nfe_host_destroy(nfe_host *h)
{
    enet_host_destroy(h->host);
    free(h->buckets);
    free(h);
}

int
nfe_host_service(nfe_host *h, enet_uint32 timeout_ms)
{
    int r;

    nfe_servicing = h;
    errno = 0;
    r = enet_host_service(h->host, &h->event, timeout_ms);
    nfe_servicing = NULL;
    if (r >= 0)
        return r;

    /* ENet fails the whole call, without a failing system call, when a datagram
     * is larger than its 4096-byte receive buffer (MSG_TRUNC). The datagram is
     * already consumed, so it is counted as malformed and the call reports no
     * event; errno then holds only what a successful path left behind. */
    if (errno == 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        __atomic_fetch_add(&h->malformed, 1, __ATOMIC_RELAXED);
        h->event.type = ENET_EVENT_TYPE_NONE;
        return 0;
    }
    h->last_errno = errno;
    return -1;
}

int
nfe_host_check_events(nfe_host *h)
{
    return enet_host_check_events(h->host, &h->event);
}

void
nfe_set_connect_rate(nfe_host *h, double rate, double burst)
{
    __atomic_store(&h->rate, &rate, __ATOMIC_RELAXED);
    __atomic_store(&h->burst, &burst, __ATOMIC_RELAXED);
}

uint64_t
nfe_connect_refusals(nfe_host *h)
{
    return __atomic_load_n(&h->refusals, __ATOMIC_RELAXED);
}

uint64_t
nfe_malformed(nfe_host *h)
{
    return __atomic_load_n(&h->malformed, __ATOMIC_RELAXED);
}

int
nfe_peer_send(ENetPeer *peer, enet_uint8 channel, const void *data, size_t len,
              enet_uint32 flags)
{
    ENetPacket *packet = enet_packet_create(data, len, flags);

    if (packet == NULL)
        return NFE_SEND_NO_MEMORY;
    if (enet_peer_send(peer, channel, packet) == 0)
        return NFE_SEND_OK;

    /* A refused packet holds no ENet reference: it is still ours to free. */
    if (packet->referenceCount == 0)
        enet_packet_destroy(packet);

    if (peer->state != ENET_PEER_STATE_CONNECTED)
        return NFE_SEND_NOT_CONNECTED;
    if (channel >= peer->channelCount)
        return NFE_SEND_BAD_CHANNEL;
    if (len > peer->host->maximumPacketSize)
        return NFE_SEND_TOO_LARGE;
    return NFE_SEND_REFUSED;
}

uint64_t
nfe_heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();

    return (uint64_t) mi.uordblks + (uint64_t) mi.hblkhd;
}
