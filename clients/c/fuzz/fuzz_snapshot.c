/* Fuzz target: the SNAPSHOT decoder and delta resolution. The first byte picks the schema (odd:
 * the golden vectors' schema, even: a game that declares none); the rest is the packet. Every
 * record is read and every delta resolved against a fixed baseline of each kind: no input may
 * read out of bounds, and a packet either decodes to its end op or is malformed. */
#include "golden_schema.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_schemas();
    if (size < 1)
        return 0;
    const nf_schema *s = data[0] & 1 ? g_file_schema : g_none_schema;
    const uint8_t *pkt = data + 1;
    size_t len = size - 1;
    nf_snapshot_reader r;
    nf_snapshot_header h;
    nf_record rec;
    if (nf_snapshot_begin(&r, s, pkt, len, &h) != NF_OK)
        return 0;
    int err;
    static const uint8_t try_kinds[] = {1, 2, 7, 9};
    while ((err = nf_snapshot_next(&r, &rec)) == 1) {
        if (rec.op != NF_OP_DELTA)
            continue;
        for (size_t k = 0; k < sizeof try_kinds; k++) {
            nf_transform base = {{1, -1, 5}, 0xe0080200u, {3, 0, -3}}, out;
            uint32_t bw[NF_MAX_FIELD_WORDS] = {0}, ow[NF_MAX_FIELD_WORDS];
            uint32_t mask;
            if (nf_delta_apply(s, pkt, len, &rec, try_kinds[k], &base, bw, &out, ow, &mask) == NF_OK) {
                if (out.pos[0] < -131072 || out.pos[0] > 131071)
                    abort();
            }
        }
    }
    if (err != 0 && err != NF_ERR_MALFORMED)
        abort();
    return 0;
}
