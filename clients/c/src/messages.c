/* Messages other than SNAPSHOT: RESET and CLOSE decoding, HELLO encoding, close codes. */
#include "internal.h"

int nf_message_type(const uint8_t *data, size_t len)
{
    if (!data || len == 0)
        return NF_ERR_MALFORMED;
    if (data[0] >> 4 != NF_PROTOCOL_VERSION)
        return NF_ERR_MALFORMED;
    int t = data[0] & 15;
    if (t < NF_MSG_SNAPSHOT || t > NF_MSG_CLOSE)
        return NF_ERR_MALFORMED;
    return t;
}

int nf_decode_reset(const uint8_t *data, size_t len, uint32_t *tick)
{
    if (nf_message_type(data, len) != NF_MSG_RESET || len != 5)
        return NF_ERR_MALFORMED;
    if (tick)
        *tick = nf_rd32(data + 1);
    return NF_OK;
}

int nf_decode_close(const uint8_t *data, size_t len, uint32_t *code, const uint8_t **reason,
                    size_t *reason_len)
{
    if (nf_message_type(data, len) != NF_MSG_CLOSE || len < 6 || len != 6 + (size_t)data[5])
        return NF_ERR_MALFORMED;
    if (code)
        *code = nf_rd32(data + 1);
    if (reason)
        *reason = data + 6;
    if (reason_len)
        *reason_len = data[5];
    return NF_OK;
}

int nf_encode_hello(uint64_t hash, const uint8_t *token, size_t token_len, uint8_t *buf, size_t cap)
{
    if (token_len > 255 || (token_len && !token) || !buf)
        return NF_ERR_ARGUMENT;
    size_t n = 9 + (token_len ? 1 + token_len : 0);
    if (cap < n)
        return NF_ERR_BUFFER;
    buf[0] = NF_TYPE_BYTE(NF_MSG_HELLO);
    nf_wr64(buf + 1, hash);
    if (token_len) {
        buf[9] = (uint8_t)token_len;
        memcpy(buf + 10, token, token_len);
    }
    return (int)n;
}

typedef struct close_code {
    uint32_t code;
    int retry;
    const char *name, *meaning;
} close_code;

static const close_code codes[] = {
    {1001, 1, "going away", "the server shut down, or the session ended normally"},
    {1008, 0, "abuse", "the client kept sending more than its inbound budget allows"},
    {1011, 0, "game error", "the game failed to admit the client; the server logs why"},
    {1013, 1, "try again later",
     "the session could not keep up for too long, or the server has no room; retry with back-off"},
    {4001, 0, "no ping", "the client stopped sending PING"},
    {4002, 0, "handshake", "no HELLO within 2 s of connecting, or a malformed HELLO"},
    {4003, 0, "refused", "the game refused the player's join, or removed the player"},
    {4004, 0, "schema", "the client's schema is not the server's: rebuild the client with the game's schema"},
    {4005, 0, "token missing", "the server requires a connect token and the HELLO carried none"},
    {4006, 0, "token invalid", "the connect token is malformed or forged"},
    {4007, 1, "token expired", "the connect token expired: get a new one from the matchmaker"},
    {4008, 0, "token for another server", "the connect token was issued for another game server"},
    {4009, 0, "token for another allocation", "the connect token was issued for another allocation of this server"},
    {4010, 1, "token replayed", "the connect token was already used from another address: get a new one"},
};

static const close_code *find_code(uint32_t code)
{
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].code == code)
            return &codes[i];
    return NULL;
}

const char *nf_close_name(uint32_t code)
{
    const close_code *c = find_code(code);
    if (c)
        return c->name;
    if (code >= 4100 && code <= 4999)
        return "game code";
    if (code >= 4000 && code <= 4099)
        return "netfleet (reserved)";
    return "unknown";
}

const char *nf_close_meaning(uint32_t code)
{
    const close_code *c = find_code(code);
    if (c)
        return c->meaning;
    if (code >= 4100 && code <= 4999)
        return "the game's own refusal or removal code; its meaning is the game's";
    if (code >= 4000 && code <= 4099)
        return "a code reserved for netfleet that this library does not know";
    return "a close code netfleet does not define";
}

int nf_close_retry(uint32_t code)
{
    const close_code *c = find_code(code);
    return c ? c->retry : 0;
}

int nf_encode_ack(uint16_t latest, uint64_t received, uint32_t last_applied_tick, int resync,
                  const uint16_t *need_full, size_t count, uint8_t *buf, size_t cap)
{
    if (!buf || count > NF_MAX_NEED_FULL || (count && !need_full))
        return NF_ERR_ARGUMENT;
    size_t n = 17 + 2 * count;
    if (cap < n)
        return NF_ERR_BUFFER;
    buf[0] = NF_TYPE_BYTE(NF_MSG_ACK);
    nf_wr16(buf + 1, latest);
    nf_wr64(buf + 3, received);
    nf_wr32(buf + 11, last_applied_tick);
    buf[15] = resync ? 1 : 0;
    buf[16] = (uint8_t)count;
    for (size_t i = 0; i < count; i++)
        nf_wr16(buf + 17 + 2 * i, need_full[i]);
    return (int)n;
}

int nf_encode_ping(uint32_t client_time_ms, uint32_t last_applied_tick, uint8_t *buf, size_t cap)
{
    if (!buf)
        return NF_ERR_ARGUMENT;
    if (cap < NF_PING_BYTES)
        return NF_ERR_BUFFER;
    buf[0] = NF_TYPE_BYTE(NF_MSG_PING);
    nf_wr32(buf + 1, client_time_ms);
    nf_wr32(buf + 5, last_applied_tick);
    return NF_PING_BYTES;
}

int nf_encode_command(uint16_t seq, uint32_t tick, const uint8_t *payload, size_t len, uint8_t *buf, size_t cap)
{
    if (!buf || len > NF_MAX_COMMAND_PAYLOAD || (len && !payload))
        return NF_ERR_ARGUMENT;
    if (cap < 8 + len)
        return NF_ERR_BUFFER;
    buf[0] = NF_TYPE_BYTE(NF_MSG_COMMAND);
    nf_wr16(buf + 1, seq);
    nf_wr32(buf + 3, tick);
    buf[7] = (uint8_t)len;
    if (len)
        memcpy(buf + 8, payload, len);
    return (int)(8 + len);
}
