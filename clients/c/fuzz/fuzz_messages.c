/* Fuzz target: the RESET and CLOSE decoders and the message type, which a client reads before
 * anything else, and the schema-less client's handling of any message. */
#include "golden_schema.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_schemas();
    int t = nf_message_type(data, size);
    if (t != NF_ERR_MALFORMED && (t < 1 || t > 7))
        abort();
    uint32_t tick, code;
    const uint8_t *reason;
    size_t rlen;
    if (nf_decode_reset(data, size, &tick) == NF_OK && size != 5)
        abort();
    if (nf_decode_close(data, size, &code, &reason, &rlen) == NF_OK) {
        if (reason + rlen != data + size)
            abort();
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < rlen; i++)
            sum ^= reason[i];
        (void)sum;
    }
    nf_client_config cfg = {g_none_schema, NULL, 1, 8};
    nf_client *c;
    if (nf_client_create(&cfg, &c) != NF_OK)
        abort();
    nf_client_handle(c, data, size, 0);
    const char *r;
    if (nf_client_closed(c, &code, &r) && strlen(r) > 255)
        abort();
    nf_client_destroy(c);
    return 0;
}
