/*
 * C half of netfleet's libenet binding: a wrapper around ENetHost that owns the
 * event buffer, the connect-rate limiter run from ENet's intercept callback, and
 * the counters the Go side reads. Every symbol carries the nfe_ prefix.
 */
#ifndef NETFLEET_ENET_H
#define NETFLEET_ENET_H

#include <stddef.h>
#include <stdint.h>
#include <enet/enet.h>

/* Source-address table: NFE_BUCKETS entries in sets of NFE_WAYS; a full set
 * evicts its least recently seen entry. */
enum {
    NFE_BUCKETS = 4096,
    NFE_WAYS = 8
};

/* Results of nfe_peer_send. */
enum {
    NFE_SEND_OK = 0,
    NFE_SEND_NOT_CONNECTED = 1,
    NFE_SEND_BAD_CHANNEL = 2,
    NFE_SEND_TOO_LARGE = 3,
    NFE_SEND_NO_MEMORY = 4,
    NFE_SEND_REFUSED = 5
};

typedef struct nfe_bucket {
    enet_uint32 ip;      /* network byte order, as in ENetAddress */
    enet_uint32 used;
    uint64_t last_ns;    /* CLOCK_MONOTONIC of the last CONNECT seen */
    double tokens;
} nfe_bucket;

typedef struct nfe_host {
    ENetHost *host;
    ENetEvent event;     /* filled by service/check_events, read by Go */
    int last_errno;      /* errno of the last failed call */
    enet_uint32 seed;    /* keys the set hash so sources cannot aim at one set */

    /* Written with __atomic builtins: set and read from any thread. */
    double rate;         /* CONNECTs per second per source; 0 = limiter off */
    double burst;
    uint64_t refusals;
    uint64_t malformed;

    /* Owned by the servicing thread; allocated on the first limited CONNECT so
     * hosts that never limit (clients) do not pay for the table. */
    nfe_bucket *buckets;
} nfe_host;

ENetVersion nfe_header_version(void);
nfe_host *nfe_host_create(const ENetAddress *address, size_t peers, size_t channels,
                          enet_uint32 incoming, enet_uint32 outgoing,
                          size_t max_packet, size_t max_waiting,
                          enet_uint32 seed, int *err);
void nfe_host_destroy(nfe_host *h);
int nfe_host_service(nfe_host *h, enet_uint32 timeout_ms);
int nfe_host_check_events(nfe_host *h);
void nfe_set_connect_rate(nfe_host *h, double rate, double burst);
uint64_t nfe_connect_refusals(nfe_host *h);
uint64_t nfe_malformed(nfe_host *h);
int nfe_peer_send(ENetPeer *peer, enet_uint8 channel, const void *data, size_t len,
                  enet_uint32 flags);
uint64_t nfe_heap_in_use(void);

#endif
