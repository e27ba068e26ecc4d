/* Checks the library against the golden vectors the Go tests check
 * (gameserver/protocol/testdata/golden/vectors.json): the schema's hash, every message decoded to
 * its meaning, every client message encoded to its bytes, and the quantization results. */
#include "check.h"
#include "json.h"
#include "netfleet.h"
#include "schema_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s) / 2;
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n;
}

static uint64_t hex64(const char *s) { return strtoull(s, NULL, 16); }
static double num(const json *o, const char *k) { const json *v = json_get(o, k); return v ? v->number : -1; }
static const char *str(const json *o, const char *k) { const json *v = json_get(o, k); return v && v->string ? v->string : ""; }

static nf_schema *file_schema, *none_schema;

/* state_of reads a vector state: transform and words. */
static void state_of(const json *st, nf_transform *t, uint32_t *words, int *nwords)
{
    memset(t, 0, sizeof *t);
    const json *pos = json_get(st, "pos"), *vel = json_get(st, "vel"), *w = json_get(st, "words");
    for (int i = 0; i < 3; i++) {
        t->pos[i] = (int32_t)json_at(pos, (size_t)i)->number;
        t->vel[i] = (int32_t)json_at(vel, (size_t)i)->number;
    }
    t->rot = (uint32_t)hex64(str(st, "rot"));
    *nwords = 0;
    for (const json *e = w ? w->child : NULL; e; e = e->next)
        words[(*nwords)++] = (uint32_t)e->number;
}

static int same_transform(const nf_transform *a, const nf_transform *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void check_snapshot(const char *name, const json *v)
{
    uint8_t pkt[2048];
    size_t len = unhex(str(v, "hex"), pkt, sizeof pkt);
    const nf_schema *s = strcmp(str(v, "schema"), "file") == 0 ? file_schema : none_schema;
    const json *m = json_get(v, "snapshot");
    nf_snapshot_reader r;
    nf_snapshot_header h;
    int err = nf_snapshot_begin(&r, s, pkt, len, &h);
    CHECK(err == NF_OK, "%s: begin: %s", name, nf_error_string(err));
    CHECK(h.tick == (uint32_t)num(m, "tick"), "%s: tick %u", name, h.tick);
    CHECK(h.server_time_ms == (uint32_t)num(m, "serverTimeMs"), "%s: server time", name);
    CHECK(h.seq == (uint16_t)num(m, "seq"), "%s: seq", name);
    CHECK(h.flags == (uint8_t)num(m, "flags"), "%s: flags", name);
    if (json_get(m, "inputSeq"))
        CHECK(h.input_seq == (uint16_t)num(m, "inputSeq"), "%s: input seq", name);
    const json *recs = json_get(m, "records");
    size_t i = 0;
    nf_record rec;
    while ((err = nf_snapshot_next(&r, &rec)) == 1) {
        const json *want = json_at(recs, i);
        CHECK(want != NULL, "%s: record %zu not in the vector", name, i);
        if (!want)
            break;
        const char *op = str(want, "op");
        int wop = strcmp(op, "spawn") == 0 ? NF_OP_SPAWN : strcmp(op, "delta") == 0 ? NF_OP_DELTA : NF_OP_DESPAWN;
        CHECK((int)rec.op == wop, "%s: record %zu: op %d, want %s", name, i, rec.op, op);
        CHECK(rec.id == (uint16_t)num(want, "id"), "%s: record %zu: id %u", name, i, rec.id);
        nf_transform wt;
        uint32_t ww[NF_MAX_FIELD_WORDS];
        int nw;
        if (rec.op == NF_OP_SPAWN) {
            CHECK(rec.kind == (uint8_t)num(want, "kind"), "%s: record %zu: kind %u", name, i, rec.kind);
            state_of(json_get(want, "state"), &wt, ww, &nw);
            CHECK(same_transform(&rec.state, &wt), "%s: record %zu: spawn transform", name, i);
            CHECK(nw == nf_schema_field_words(s, rec.kind), "%s: record %zu: %d words", name, i, nw);
            CHECK(memcmp(rec.fields, ww, sizeof(uint32_t) * (size_t)nw) == 0, "%s: record %zu: fields", name, i);
        } else if (rec.op == NF_OP_DELTA) {
            CHECK(rec.baseline_tick == (uint32_t)num(want, "baselineTick"), "%s: record %zu: baseline %u",
                  name, i, rec.baseline_tick);
            nf_transform bt, out;
            uint32_t bw[NF_MAX_FIELD_WORDS], ow[NF_MAX_FIELD_WORDS], mask = 0;
            int nb;
            state_of(json_get(want, "base"), &bt, bw, &nb);
            state_of(json_get(want, "state"), &wt, ww, &nw);
            uint8_t kind = (uint8_t)num(want, "kind");
            if (kind == 0)
                kind = 1; /* no schema: every kind is the same */
            err = nf_delta_apply(s, pkt, len, &rec, kind, &bt, bw, &out, ow, &mask);
            CHECK(err == NF_OK, "%s: record %zu: apply: %s", name, i, nf_error_string(err));
            CHECK(same_transform(&out, &wt), "%s: record %zu: delta transform", name, i);
            CHECK(memcmp(ow, ww, sizeof(uint32_t) * (size_t)nw) == 0, "%s: record %zu: delta fields", name, i);
            uint32_t wmask = 0;
            const json *fc = json_get(want, "fieldsChanged");
            for (const json *f = fc ? fc->child : NULL; f; f = f->next)
                wmask |= 1u << nf_schema_field_index(s, kind, f->string);
            CHECK(mask == wmask, "%s: record %zu: fields changed %#x, want %#x", name, i, mask, wmask);
        }
        i++;
    }
    CHECK(err == 0, "%s: records end: %s", name, nf_error_string(err));
    CHECK(i == recs->len, "%s: %zu records, want %zu", name, i, recs->len);

    /* Every strict prefix, and the packet with a byte more, is malformed. */
    for (size_t n = 0; n < len; n++) {
        int e = nf_snapshot_begin(&r, s, pkt, n, &h);
        if (e == NF_OK)
            while ((e = nf_snapshot_next(&r, &rec)) == 1)
                ;
        CHECK(e == NF_ERR_MALFORMED, "%s: prefix of %zu bytes decoded", name, n);
    }
    pkt[len] = 0;
    int e = nf_snapshot_begin(&r, s, pkt, len + 1, &h);
    if (e == NF_OK)
        while ((e = nf_snapshot_next(&r, &rec)) == 1)
            ;
    CHECK(e == NF_ERR_MALFORMED, "%s: a byte after the end decoded", name);
}

static void check_vector(const json *v)
{
    const char *name = str(v, "name");
    uint8_t want[2048], got[2048];
    size_t len = unhex(str(v, "hex"), want, sizeof want);
    const json *m;
    int n;
    if ((m = json_get(v, "hello"))) {
        uint8_t token[255];
        size_t tlen = json_get(m, "token") ? unhex(str(m, "token"), token, sizeof token) : 0;
        n = nf_encode_hello(hex64(str(m, "schemaHash")), tlen ? token : NULL, tlen, got, sizeof got);
        CHECK(n == (int)len && memcmp(got, want, len) == 0, "%s: encoding", name);
        CHECK(nf_schema_hash(file_schema) == hex64(str(m, "schemaHash")), "%s: hash of the file's schema", name);
        CHECK(nf_message_type(want, len) == NF_MSG_HELLO, "%s: type", name);
    } else if ((m = json_get(v, "close"))) {
        uint32_t code;
        const uint8_t *reason;
        size_t rlen;
        CHECK(nf_decode_close(want, len, &code, &reason, &rlen) == NF_OK, "%s: decode", name);
        CHECK(code == (uint32_t)num(m, "code"), "%s: code %u", name, code);
        CHECK(rlen == strlen(str(m, "reason")) && memcmp(reason, str(m, "reason"), rlen) == 0, "%s: reason", name);
        CHECK(nf_decode_close(want, len - 1, &code, &reason, &rlen) == NF_ERR_MALFORMED, "%s: short", name);
    } else if ((m = json_get(v, "reset"))) {
        uint32_t tick;
        CHECK(nf_decode_reset(want, len, &tick) == NF_OK && tick == (uint32_t)num(m, "tick"), "%s: decode", name);
        CHECK(nf_decode_reset(want, len + 1, &tick) == NF_ERR_MALFORMED, "%s: long", name);
    } else if ((m = json_get(v, "ping"))) {
        n = nf_encode_ping((uint32_t)num(m, "clientTimeMs"), (uint32_t)num(m, "lastAppliedTick"), got, sizeof got);
        CHECK(n == (int)len && memcmp(got, want, len) == 0, "%s: encoding", name);
    } else if ((m = json_get(v, "ack"))) {
        uint16_t need[NF_MAX_NEED_FULL];
        const json *nf = json_get(m, "needFull");
        size_t count = 0;
        for (const json *e = nf->child; e; e = e->next)
            need[count++] = (uint16_t)e->number;
        const json *rs = json_get(m, "resync");
        n = nf_encode_ack((uint16_t)num(m, "latest"), hex64(str(m, "received")), (uint32_t)num(m, "lastAppliedTick"),
                          rs && rs->number != 0, need, count, got, sizeof got);
        CHECK(n == (int)len && memcmp(got, want, len) == 0, "%s: encoding", name);
    } else if ((m = json_get(v, "command"))) {
        uint8_t payload[256];
        size_t plen = unhex(str(m, "payload"), payload, sizeof payload);
        n = nf_encode_command((uint16_t)num(m, "seq"), (uint32_t)num(m, "tick"), payload, plen, got, sizeof got);
        CHECK(n == (int)len && memcmp(got, want, len) == 0, "%s: encoding", name);
    } else if (json_get(v, "snapshot")) {
        check_snapshot(name, v);
        return;
    } else {
        CHECK(0, "%s: a vector of no known message", name);
    }
}

/* A client receiving a CLOSE, RESET or SNAPSHOT vector handles it; a client message it receives
 * is unexpected, and counted. */
static void check_client_handles(const json *vectors)
{
    nf_client_config cfg = {file_schema, NULL, 0, 0};
    for (const json *v = vectors->child; v; v = v->next) {
        nf_client *c;
        if (strcmp(str(v, "schema"), "none") == 0)
            cfg.schema = none_schema;
        else
            cfg.schema = file_schema;
        CHECK(nf_client_create(&cfg, &c) == NF_OK, "create");
        uint8_t pkt[2048];
        size_t len = unhex(str(v, "hex"), pkt, sizeof pkt);
        int t = nf_message_type(pkt, len);
        int got = nf_client_handle(c, pkt, len, 0);
        nf_client_stats st;
        nf_client_stats_get(c, &st);
        if (t == NF_MSG_SNAPSHOT || t == NF_MSG_RESET || t == NF_MSG_CLOSE)
            CHECK(got == t && st.malformed == 0, "%s: handled %d", str(v, "name"), got);
        else
            CHECK(got == NF_ERR_UNEXPECTED && st.malformed == 1, "%s: handled %d", str(v, "name"), got);
        nf_client_destroy(c);
    }
}

static void check_quantization(const json *q)
{
    for (const json *e = json_get(q, "positions")->child; e; e = e->next)
        CHECK(nf_quantize_position((float)num(e, "in")) == (int32_t)num(e, "units"), "position %.17g",
              num(e, "in"));
    for (const json *e = json_get(q, "velocities")->child; e; e = e->next)
        CHECK(nf_quantize_velocity((float)num(e, "in")) == (int32_t)num(e, "units"), "velocity %.17g",
              num(e, "in"));
    for (const json *e = json_get(q, "pack")->child; e; e = e->next) {
        const json *qu = json_get(e, "quat");
        uint32_t got = nf_rotation_pack(json_at(qu, 0)->number, json_at(qu, 1)->number, json_at(qu, 2)->number,
                                        json_at(qu, 3)->number);
        CHECK(got == (uint32_t)hex64(str(e, "packed")), "pack: %08x, want %s", got, str(e, "packed"));
    }
    for (const json *e = json_get(q, "unpack")->child; e; e = e->next) {
        double out[4];
        nf_rotation_unpack((uint32_t)hex64(str(e, "packed")), out);
        const json *qu = json_get(e, "quat");
        for (size_t i = 0; i < 4; i++)
            CHECK(out[i] == json_at(qu, i)->number, "unpack %s[%zu]: %.17g, want %.17g", str(e, "packed"), i,
                  out[i], json_at(qu, i)->number);
    }
    /* The spec's own examples. */
    CHECK(nf_quantize_position(INFINITY) == 131071 && nf_quantize_position(-INFINITY) == -131072 &&
              nf_quantize_position(NAN) == -131072,
          "infinities and NaN");
    CHECK(nf_rotation_pack(0, 0, 0, 1) == 0xe0080200u, "identity");
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "../../gameserver/protocol/testdata/golden/vectors.json";
    char err[256];
    json *doc = json_parse_file(path, err, sizeof err);
    if (!doc) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    schema_table t;
    if (schema_table_from_json(json_get(doc, "schema"), &t, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    CHECK(nf_schema_create(t.kinds, t.nkinds, NULL, &file_schema) == NF_OK, "the file's schema");
    schema_table_free(&t);
    CHECK(nf_schema_create(NULL, 0, NULL, &none_schema) == NF_OK, "the default schema");
    CHECK(nf_schema_hash(file_schema) == hex64(str(doc, "schemaHash")), "schema hash %016" PRIx64 ", want %s",
          nf_schema_hash(file_schema), str(doc, "schemaHash"));
    CHECK(nf_schema_hash(none_schema) == UINT64_C(0x233344e50a0e2ce7), "default schema hash %016" PRIx64,
          nf_schema_hash(none_schema));
    const json *vectors = json_get(doc, "vectors");
    CHECK(vectors && vectors->len >= 10, "vectors");
    for (const json *v = vectors->child; v; v = v->next)
        check_vector(v);
    check_client_handles(vectors);
    check_quantization(json_get(doc, "quantization"));
    nf_schema_destroy(file_schema);
    nf_schema_destroy(none_schema);
    json_free(doc);
    return check_report("test_golden");
}
