/* nfbench: the C client's decode throughput and memory per connection over a recorded stream.
 *
 *   nfbench --schema schema.json --stream FILE [--runs 3] [--clients 20]
 *   nfbench --schema schema.json --stream FILE --dump
 *
 * FILE holds server messages, each a 16-bit little-endian length and the message. Each run feeds
 * the whole stream to a new client (nf_client_handle: decode and apply, as a game's loop does,
 * with an ACK built after each packet); the best run gives records per second. Then --clients
 * clients each take the stream, and their memory (nf_client_memory: every byte the client holds
 * from its allocator) is averaged. It writes one JSON object to standard output. With --dump it
 * feeds the stream once and writes the client's view instead: every live entity, the last ACK
 * and the counters, to compare with another client's. */
#include "netfleet.h"
#include "schema_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct stream {
    uint8_t *data;
    size_t len;
} stream;

/* feed gives the client every message; it returns the records applied, or -1 on an error. */
static long feed(nf_client *c, const stream *s)
{
    uint8_t ack[NF_MAX_ACK_BYTES];
    size_t at = 0;
    while (at + 2 <= s->len) {
        size_t n = (size_t)s->data[at] | (size_t)s->data[at + 1] << 8;
        at += 2;
        if (n > s->len - at)
            return -1;
        if (nf_client_handle(c, s->data + at, n, 0) < 0)
            return -1;
        if (nf_client_ack(c, ack, sizeof ack) < 0)
            return -1;
        at += n;
    }
    nf_client_stats st;
    nf_client_stats_get(c, &st);
    return (long)(st.records_applied + st.records_stale + st.records_unapplied);
}

/* dump_view feeds the stream to a client, with an ACK after each message, and writes its view. */
static int dump_view(const nf_client_config *cfg, const stream *s)
{
    nf_client *c;
    if (nf_client_create(cfg, &c) != NF_OK)
        return 1;
    uint8_t ack[NF_MAX_ACK_BYTES];
    int ack_len = 0;
    size_t at = 0;
    while (at + 2 <= s->len) {
        size_t n = (size_t)s->data[at] | (size_t)s->data[at + 1] << 8;
        at += 2;
        if (n > s->len - at)
            return 1;
        nf_client_handle(c, s->data + at, n, 0);
        int k = nf_client_ack(c, ack, sizeof ack);
        if (k > 0)
            ack_len = k;
        at += n;
    }
    nf_client_stats st;
    nf_client_stats_get(c, &st);
    int resync;
    int need = nf_client_need_full(c, &resync);
    uint16_t input = 0;
    int has_input = nf_client_input_ack(c, &input);
    printf("{\"applied\":%" PRIu64 ",\"stale\":%" PRIu64 ",\"unapplied\":%" PRIu64 ",\"resets\":%" PRIu64
           ",\"malformed\":%" PRIu64 ",\"needFull\":%d,\"resync\":%s,\"inputAck\":%d,\"lastAppliedTick\":%u,\"ack\":\"",
           st.records_applied, st.records_stale, st.records_unapplied, st.resets, st.malformed, need,
           resync ? "true" : "false", has_input ? (int)input : -1, nf_client_last_applied_tick(c));
    for (int i = 0; i < ack_len; i++)
        printf("%02x", ack[i]);
    printf("\",\"entities\":[");
    uint32_t cursor = 0;
    nf_entity e;
    int first = 1;
    while (nf_client_entity_next(c, &cursor, &e)) {
        printf("%s{\"id\":%u,\"kind\":%u,\"tick\":%u,\"pos\":[%d,%d,%d],\"rot\":%u,\"vel\":[%d,%d,%d],\"fields\":[",
               first ? "" : ",", e.id, e.kind, e.tick, e.t.pos[0], e.t.pos[1], e.t.pos[2], e.t.rot, e.t.vel[0],
               e.t.vel[1], e.t.vel[2]);
        for (uint32_t w = 0; w < e.field_words; w++)
            printf("%s%u", w ? "," : "", e.fields[w]);
        printf("]}");
        first = 0;
    }
    printf("]}\n");
    nf_client_destroy(c);
    return 0;
}

int main(int argc, char **argv)
{
    const char *schema_path = NULL, *stream_path = NULL;
    int runs = 3, clients = 20, dump = 0;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--dump") == 0) {
            dump = 1;
            i--;
        } else if (i + 1 >= argc)
            break;
        else if (strcmp(argv[i], "--schema") == 0)
            schema_path = argv[i + 1];
        else if (strcmp(argv[i], "--stream") == 0)
            stream_path = argv[i + 1];
        else if (strcmp(argv[i], "--runs") == 0)
            runs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--clients") == 0)
            clients = atoi(argv[i + 1]);
    }
    if (!schema_path || !stream_path || runs < 1 || clients < 1) {
        fprintf(stderr, "usage: nfbench --schema FILE --stream FILE [--runs N] [--clients N]\n");
        return 2;
    }
    char err[256];
    nf_schema *schema;
    if (schema_load(schema_path, &schema, err, sizeof err) != 0) {
        fprintf(stderr, "nfbench: %s\n", err);
        return 1;
    }
    FILE *f = fopen(stream_path, "rb");
    if (!f) {
        fprintf(stderr, "nfbench: cannot open %s\n", stream_path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    stream s = {NULL, (size_t)ftell(f)};
    fseek(f, 0, SEEK_SET);
    s.data = malloc(s.len ? s.len : 1);
    if (!s.data || fread(s.data, 1, s.len, f) != s.len) {
        fprintf(stderr, "nfbench: cannot read %s\n", stream_path);
        return 1;
    }
    fclose(f);
    nf_client_config cfg = {schema, NULL, 0, 0};
    if (dump)
        return dump_view(&cfg, &s);
    double best = 0;
    long records = 0;
    for (int r = 0; r < runs; r++) {
        nf_client *c;
        if (nf_client_create(&cfg, &c) != NF_OK)
            return 1;
        double t0 = now_s();
        records = feed(c, &s);
        double dt = now_s() - t0;
        nf_client_destroy(c);
        if (records < 0) {
            fprintf(stderr, "nfbench: the stream does not decode\n");
            return 1;
        }
        if (best == 0 || dt < best)
            best = dt;
    }
    size_t total = 0;
    nf_client **cs = calloc((size_t)clients, sizeof *cs);
    for (int i = 0; i < clients; i++) {
        if (nf_client_create(&cfg, &cs[i]) != NF_OK || feed(cs[i], &s) < 0)
            return 1;
        total += nf_client_memory(cs[i]);
    }
    uint32_t entities = nf_client_entity_count(cs[0]);
    for (int i = 0; i < clients; i++)
        nf_client_destroy(cs[i]);
    free(cs);
    printf("{\"records\":%ld,\"bytes\":%zu,\"seconds\":%.6f,\"recordsPerSec\":%.0f,\"entities\":%u,"
           "\"memoryPerClientBytes\":%zu}\n",
           records, s.len, best, (double)records / best, entities, total / (size_t)clients);
    free(s.data);
    nf_schema_destroy(schema);
    return 0;
}
