/* Fuzz target: a client fed a sequence of server messages, each prefixed with its length byte,
 * under the golden vectors' schema, with a small entity table so that growth and its limit are
 * reached. Between messages it builds an ACK, a PING and a COMMAND and reads its view; the view
 * must stay within the table, the ACK within its size. */
#include "golden_schema.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_schemas();
    nf_client_config cfg = {g_file_schema, NULL, 2, 64};
    nf_client *c;
    if (nf_client_create(&cfg, &c) != NF_OK)
        abort();
    size_t at = 0;
    int64_t now = 0;
    while (at < size) {
        size_t n = data[at++];
        if (n > size - at)
            n = size - at;
        nf_client_handle(c, data + at, n, now);
        at += n;
        now += 16;
        uint8_t buf[NF_MAX_ACK_BYTES + NF_MAX_COMMAND_BYTES];
        int len = nf_client_ack(c, buf, sizeof buf);
        if (len < 0 || len > NF_MAX_ACK_BYTES)
            abort();
        if (nf_client_ping_due(c, now) && nf_client_ping(c, now, buf, sizeof buf) != NF_PING_BYTES)
            abort();
        if (nf_client_command(c, data, n < 255 ? n : 255, buf, sizeof buf, NULL) < 0)
            abort();
        uint32_t cursor = 0, seen = 0;
        nf_entity e;
        while (nf_client_entity_next(c, &cursor, &e)) {
            seen++;
            double f;
            uint8_t bytes[16];
            for (int i = 0; i < 6; i++) {
                nf_entity_float(c, &e, i, &f);
                nf_entity_bytes(c, &e, i, bytes, sizeof bytes);
            }
            uint32_t ticks[NF_HISTORY_DEPTH];
            if (nf_client_entity_history(c, e.id, ticks, NULL, NF_HISTORY_DEPTH) > NF_HISTORY_DEPTH)
                abort();
        }
        if (seen != nf_client_entity_count(c) || seen > 64)
            abort();
    }
    nf_client_destroy(c);
    return 0;
}
