/* An ENet connection driving an nf_client (docs/protocol.md, "transport", "a client's loop"). */
#include "internal.h"

#include <enet/enet.h>

struct nf_conn {
    nf_allocator alloc;
    int has_alloc;
    ENetHost *host;
    ENetPeer *peer;
    nf_client *client;
    nf_conn_state state;
    uint32_t close_code;
    size_t token_len;
    uint8_t token[255];
    uint8_t buf[NF_MAX_HELLO_BYTES > NF_MAX_COMMAND_BYTES ? NF_MAX_HELLO_BYTES : NF_MAX_COMMAND_BYTES];
};


int nf_conn_create(const nf_conn_config *cfg, const char *host, uint16_t port, nf_conn **out)
{
    if (!out)
        return NF_ERR_ARGUMENT;
    *out = NULL;
    if (!cfg || !cfg->schema || !host || cfg->token_len > 255 || (cfg->token_len && !cfg->token))
        return NF_ERR_ARGUMENT;
    if (cfg->rate_class != 0 && cfg->rate_class != 1 && cfg->rate_class != 2 && cfg->rate_class != 4)
        return NF_ERR_ARGUMENT;
    if (cfg->connect_data & 0x0F000000u)
        return NF_ERR_ARGUMENT;
    nf_conn *c = nf_mem_alloc(cfg->allocator, sizeof *c);
    if (!c)
        return NF_ERR_NOMEM;
    memset(c, 0, sizeof *c);
    if (cfg->allocator) {
        c->alloc = *cfg->allocator;
        c->has_alloc = 1;
    }
    c->token_len = cfg->token_len;
    if (cfg->token_len)
        memcpy(c->token, cfg->token, cfg->token_len);
    nf_client_config cc = {cfg->schema, cfg->allocator, cfg->initial_entities, cfg->max_entities};
    int err = nf_client_create(&cc, &c->client);
    if (err) {
        nf_mem_free(cfg->allocator, c, sizeof *c);
        return err;
    }
    /* enet_initialize is per call on Windows (WSAStartup, reference-counted) and does nothing
     * elsewhere; it is paired with enet_deinitialize in nf_conn_destroy. */
    if (enet_initialize() != 0) {
        nf_conn_destroy(c);
        return NF_ERR_ENET;
    }
    c->host = enet_host_create(NULL, 1, 2, 0, 0);
    ENetAddress addr;
    if (!c->host || enet_address_set_host(&addr, host) != 0) {
        nf_conn_destroy(c);
        return NF_ERR_ENET;
    }
    addr.port = port;
    uint32_t data = cfg->connect_data | (cfg->rate_class << 24);
    c->peer = enet_host_connect(c->host, &addr, 2, data);
    if (!c->peer) {
        nf_conn_destroy(c);
        return NF_ERR_ENET;
    }
    c->state = NF_CONN_CONNECTING;
    *out = c;
    return NF_OK;
}

void nf_conn_destroy(nf_conn *c)
{
    if (!c)
        return;
    if (c->host) {
        if (c->peer && c->state != NF_CONN_CLOSED)
            enet_peer_disconnect_now(c->peer, NF_CLOSE_GOING_AWAY);
        enet_host_destroy(c->host);
        enet_deinitialize();
    }
    nf_client_destroy(c->client);
    nf_allocator a = c->alloc;
    nf_mem_free(c->has_alloc ? &a : NULL, c, sizeof *c);
}

static int conn_send(nf_conn *c, const uint8_t *m, size_t n, int reliable)
{
    ENetPacket *p = enet_packet_create(m, n, reliable ? ENET_PACKET_FLAG_RELIABLE : 0);
    if (!p)
        return NF_ERR_ENET;
    if (enet_peer_send(c->peer, 0, p) != 0) {
        enet_packet_destroy(p);
        return NF_ERR_ENET;
    }
    return NF_OK;
}

int nf_conn_service(nf_conn *c, uint32_t timeout_ms, int64_t now)
{
    if (!c)
        return NF_ERR_ARGUMENT;
    if (c->state == NF_CONN_CLOSED)
        return NF_ERR_STATE;
    int handled = 0;
    ENetEvent ev;
    int r = enet_host_service(c->host, &ev, timeout_ms);
    while (r > 0) {
        switch (ev.type) {
        case ENET_EVENT_TYPE_CONNECT: {
            c->state = NF_CONN_CONNECTED;
            int n = nf_client_hello(c->client, c->token, c->token_len, c->buf, sizeof c->buf);
            if (n < 0 || conn_send(c, c->buf, (size_t)n, 1) != NF_OK)
                return NF_ERR_ENET;
            break;
        }
        case ENET_EVENT_TYPE_RECEIVE:
            nf_client_handle(c->client, ev.packet->data, ev.packet->dataLength, now);
            enet_packet_destroy(ev.packet);
            handled++;
            break;
        case ENET_EVENT_TYPE_DISCONNECT:
            c->state = NF_CONN_CLOSED;
            c->close_code = ev.data;
            c->peer = NULL;
            return handled;
        default:
            break;
        }
        r = enet_host_check_events(c->host, &ev);
    }
    if (r < 0)
        return NF_ERR_ENET;
    if (c->state == NF_CONN_CONNECTED) {
        if (nf_client_ack_due(c->client)) {
            int n = nf_client_ack(c->client, c->buf, sizeof c->buf);
            if (n > 0 && conn_send(c, c->buf, (size_t)n, 0) != NF_OK)
                return NF_ERR_ENET;
        }
        if (nf_client_ping_due(c->client, now)) {
            int n = nf_client_ping(c->client, now, c->buf, sizeof c->buf);
            if (n > 0 && conn_send(c, c->buf, (size_t)n, 0) != NF_OK)
                return NF_ERR_ENET;
        }
        enet_host_flush(c->host);
    }
    return handled;
}

int nf_conn_command(nf_conn *c, const uint8_t *payload, size_t len, int reliable)
{
    if (!c)
        return NF_ERR_ARGUMENT;
    if (c->state != NF_CONN_CONNECTED)
        return NF_ERR_STATE;
    uint16_t seq;
    int n = nf_client_command(c->client, payload, len, c->buf, sizeof c->buf, &seq);
    if (n < 0)
        return n;
    int err = conn_send(c, c->buf, (size_t)n, reliable);
    if (err)
        return err;
    enet_host_flush(c->host);
    return seq;
}

void nf_conn_disconnect(nf_conn *c, uint32_t timeout_ms)
{
    if (!c || c->state == NF_CONN_CLOSED || !c->peer)
        return;
    enet_peer_disconnect(c->peer, NF_CLOSE_GOING_AWAY);
    ENetEvent ev;
    uint32_t waited = 0;
    while (waited < timeout_ms) {
        int r = enet_host_service(c->host, &ev, 10);
        waited += 10;
        if (r < 0)
            break;
        if (r > 0 && ev.type == ENET_EVENT_TYPE_RECEIVE)
            enet_packet_destroy(ev.packet);
        if (r > 0 && ev.type == ENET_EVENT_TYPE_DISCONNECT) {
            c->peer = NULL;
            break;
        }
    }
    if (c->peer)
        enet_peer_reset(c->peer);
    c->peer = NULL;
    c->state = NF_CONN_CLOSED;
}

nf_conn_state nf_conn_get_state(const nf_conn *c) { return c ? c->state : NF_CONN_CLOSED; }
uint32_t nf_conn_close_code(const nf_conn *c) { return c ? c->close_code : 0; }

const char *nf_conn_close_reason(const nf_conn *c)
{
    const char *reason = "";
    if (c)
        nf_client_closed(c->client, NULL, &reason);
    return reason;
}

nf_client *nf_conn_client(nf_conn *c) { return c ? c->client : NULL; }
uint32_t nf_conn_rtt_ms(const nf_conn *c) { return c && c->peer ? c->peer->roundTripTime : 0; }
