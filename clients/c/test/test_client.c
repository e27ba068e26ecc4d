/* The client's rules (docs/protocol.md, "baselines and history", "acknowledgements", "RESET"):
 * spawns, deltas against the history, stale records and tombstones, resets, NeedFull and Resync,
 * the ACK window, PING cadence, COMMAND numbering, input acknowledgements, malformed packets
 * refused whole, typed field access, allocator hooks and no allocation per packet once warm. */
#include "check.h"
#include "netfleet.h"
#include "snapwriter.h"

#include <stdlib.h>
#include <string.h>

static const char *const teams[] = {"red", "blue", "green"};
static const nf_field_def player_fields[] = {
    {.name = "hp", .type = NF_FIELD_UINT, .bits = 7},
    {.name = "team", .type = NF_FIELD_ENUM, .enum_count = 3, .enum_values = teams},
    {.name = "score", .type = NF_FIELD_INT, .bits = 8},
    {.name = "speed", .type = NF_FIELD_FLOAT, .min = 0, .max = 10, .step = 0.5},
    {.name = "tag", .type = NF_FIELD_BYTES, .size = 3},
    {.name = "crouched", .type = NF_FIELD_BOOL},
};
static const unsigned player_widths[] = {7, 2, 8, 5, 24, 1};
static const nf_kind_def kinds[] = {
    {.id = 1, .parts = NF_PART_TRANSFORM, .name = "player", .fields = player_fields, .field_count = 6},
    {.id = 2, .parts = NF_PART_TRANSFORM, .name = "rock"},
};

/* A counting allocator. */
typedef struct counter {
    long allocs, frees;
    size_t live;
} counter;

static void *count_alloc(void *user, size_t n)
{
    counter *c = user;
    c->allocs++;
    c->live += n;
    return malloc(n);
}

static void count_free(void *user, void *p, size_t n)
{
    counter *c = user;
    c->frees++;
    c->live -= n;
    free(p);
}

static nf_schema *schema;

static nf_client *new_client(const nf_allocator *a, uint32_t initial, uint32_t max)
{
    nf_client_config cfg = {schema, a, initial, max};
    nf_client *c = NULL;
    int err = nf_client_create(&cfg, &c);
    CHECK(err == NF_OK, "create: %s", nf_error_string(err));
    return c;
}

static const nf_transform T0 = {{100, 200, 300}, 0xe0080200u, {1, 2, 3}};
static const uint32_t F0[] = {99, 1, 0xF6 /* -10 */, 7 /* 3.5 */, 0x636261 /* "abc" */, 1};

static int handle(nf_client *c, snapw *w)
{
    size_t n = sw_end(w);
    return nf_client_handle(c, w->buf, n, 0);
}

static void spawn_player(snapw *w, uint16_t id, const nf_transform *t)
{
    sw_spawn(w, id, 1, NF_PART_TRANSFORM, t, F0, player_widths, 6);
}

static void test_schema(void)
{
    char msg[128];
    nf_field_def bad = {.name = "x", .type = NF_FIELD_FLOAT, .min = 1, .max = 0, .step = 1};
    nf_kind_def k = {.id = 3, .parts = 0, .name = "broken", .fields = &bad, .field_count = 1};
    CHECK(nf_schema_check(&k, 1, msg, sizeof msg) == NF_ERR_SCHEMA && strstr(msg, "broken") && strstr(msg, "x"),
          "a bad float names its kind and field: %s", msg);
    nf_schema *s = NULL;
    CHECK(nf_schema_create(&k, 1, NULL, &s) == NF_ERR_SCHEMA && s == NULL, "refused");
    nf_kind_def twice[] = {kinds[1], kinds[1]};
    CHECK(nf_schema_check(twice, 2, msg, sizeof msg) == NF_ERR_SCHEMA, "a kind id twice");
    CHECK(nf_schema_field_index(schema, 1, "speed") == 3 && nf_schema_field_index(schema, 1, "nope") == NF_ERR_NOT_FOUND,
          "field index");
    CHECK(nf_schema_field_words(schema, 1) == 6 && nf_schema_field_words(schema, 2) == 0, "field words");
    CHECK(strcmp(nf_schema_enum_name(schema, 1, 1, 2), "green") == 0, "enum name");
}

static void test_spawn_and_fields(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    snapw w;
    sw_begin(&w, 10, 0, 0, NF_FLAG_LAST, 0);
    spawn_player(&w, 5, &T0);
    sw_spawn(&w, 4097, 2, NF_PART_TRANSFORM, &T0, NULL, NULL, 0);
    CHECK(handle(c, &w) == NF_MSG_SNAPSHOT, "snapshot");
    CHECK(nf_client_entity_count(c) == 2, "two entities");
    nf_entity e;
    CHECK(nf_client_entity(c, 5, &e) == NF_OK && e.kind == 1 && e.tick == 10, "entity 5");
    CHECK(memcmp(&e.t, &T0, sizeof T0) == 0, "transform");
    uint32_t u;
    int32_t i;
    double f;
    int b;
    uint32_t idx;
    const char *name;
    uint8_t tag[3];
    CHECK(nf_entity_uint(c, &e, 0, &u) == NF_OK && u == 99, "hp %u", u);
    CHECK(nf_entity_enum(c, &e, 1, &idx, &name) == NF_OK && idx == 1 && strcmp(name, "blue") == 0, "team");
    CHECK(nf_entity_int(c, &e, 2, &i) == NF_OK && i == -10, "score %d", i);
    CHECK(nf_entity_float(c, &e, 3, &f) == NF_OK && f == 3.5, "speed %g", f);
    CHECK(nf_entity_bytes(c, &e, 4, tag, 3) == 3 && memcmp(tag, "abc", 3) == 0, "tag");
    CHECK(nf_entity_bool(c, &e, 5, &b) == NF_OK && b == 1, "crouched");
    CHECK(nf_entity_uint(c, &e, 1, &u) == NF_ERR_TYPE, "wrong type");
    CHECK(nf_entity_uint(c, &e, 9, &u) == NF_ERR_NOT_FOUND, "no field");
    CHECK(nf_client_entity(c, 4097, &e) == NF_OK && e.kind == 2 && e.field_words == 0, "rock");
    uint32_t cursor = 0, seen = 0;
    while (nf_client_entity_next(c, &cursor, &e))
        seen++;
    CHECK(seen == 2, "iteration saw %u", seen);
    CHECK(nf_client_last_applied_tick(c) == 10, "applied");
    nf_client_destroy(c);
}

static void test_delta_history_needfull(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    snapw w;
    sw_begin(&w, 10, 0, 0, 0, 0);
    spawn_player(&w, 5, &T0);
    handle(c, &w);
    /* A delta against tick 10 from tick 12: x + 7, hp = 50. */
    sw_begin(&w, 12, 0, 1, 0, 0);
    sw_delta(&w, 5, 2, 7, 1, 0, 50, player_widths, 6);
    CHECK(handle(c, &w) == NF_MSG_SNAPSHOT, "delta packet");
    nf_entity e;
    uint32_t u;
    nf_client_entity(c, 5, &e);
    CHECK(e.t.pos[0] == 107 && e.tick == 12, "x %d", e.t.pos[0]);
    CHECK(nf_entity_uint(c, &e, 0, &u) == NF_OK && u == 50, "hp %u", u);
    int32_t score;
    CHECK(nf_entity_int(c, &e, 2, &score) == NF_OK && score == -10, "a field not in the mask keeps its value");
    /* A delta against a tick the history lacks: NeedFull, and the view does not change. */
    sw_begin(&w, 13, 0, 2, 0, 0);
    sw_delta(&w, 5, 2, 1, 1, -1, 0, player_widths, 6);
    sw_delta(&w, 77, 1, 1, 1, -1, 0, player_widths, 6); /* an entity it does not hold */
    handle(c, &w);
    nf_client_entity(c, 5, &e);
    CHECK(e.t.pos[0] == 107 && e.tick == 12, "unchanged");
    int resync;
    CHECK(nf_client_need_full(c, &resync) == 2 && !resync, "two in NeedFull");
    uint8_t ack[NF_MAX_ACK_BYTES];
    int n = nf_client_ack(c, ack, sizeof ack);
    CHECK(n == 21 && ack[16] == 2 && (ack[17] | ack[18] << 8) == 5 && (ack[19] | ack[20] << 8) == 77, "ACK names them");
    /* An out-of-range enum in a delta: not applied, asked for. */
    sw_begin(&w, 14, 0, 3, 0, 0);
    sw_delta(&w, 5, 2, 0, 1, 1, 3, player_widths, 6);
    handle(c, &w);
    nf_client_entity(c, 5, &e);
    CHECK(e.tick == 12, "an enum value out of range is not applied");
    /* A spawn settles it. */
    sw_begin(&w, 15, 0, 4, 0, 0);
    spawn_player(&w, 5, &T0);
    handle(c, &w);
    CHECK(nf_client_need_full(c, &resync) == 1, "a spawn clears its id");
    /* History: 16 states at most, the oldest goes. */
    for (uint32_t t = 16; t < 40; t++) {
        sw_begin(&w, t, 0, (uint16_t)(t - 11), 0, 0);
        sw_delta(&w, 5, 1, 1, 1, -1, 0, player_widths, 6);
        handle(c, &w);
    }
    uint32_t ticks[32];
    CHECK(nf_client_entity_history(c, 5, ticks, NULL, 32) == 16 && ticks[0] == 24 && ticks[15] == 39, "16 states");
    nf_client_entity(c, 5, &e);
    CHECK(e.t.pos[0] == 100 + 24, "x %d", e.t.pos[0]);
    /* A delta naming an evicted baseline cannot be applied. */
    sw_begin(&w, 40, 0, 29, 0, 0);
    sw_delta(&w, 5, 20, 1, 1, -1, 0, player_widths, 6);
    handle(c, &w);
    nf_client_stats st;
    nf_client_stats_get(c, &st);
    CHECK(st.records_unapplied == 4, "unapplied %llu", (unsigned long long)st.records_unapplied);
    nf_client_destroy(c);
}

static void test_stale_and_tombstones(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    snapw w;
    sw_begin(&w, 20, 0, 0, 0, 0);
    spawn_player(&w, 5, &T0);
    sw_despawn(&w, 6);
    handle(c, &w);
    /* Older packets: a spawn of the despawned id does not bring it back, and a stale state joins
     * the history without changing the view. */
    nf_transform t1 = T0;
    t1.pos[0] = 1;
    sw_begin(&w, 18, 0, 1, 0, 0);
    sw_spawn(&w, 6, 2, NF_PART_TRANSFORM, &T0, NULL, NULL, 0);
    spawn_player(&w, 5, &t1);
    handle(c, &w);
    nf_entity e;
    CHECK(nf_client_entity(c, 6, &e) == NF_ERR_NOT_FOUND, "the tombstone holds");
    nf_client_entity(c, 5, &e);
    CHECK(e.t.pos[0] == 100 && e.tick == 20, "the view shows the newest");
    uint32_t ticks[16];
    CHECK(nf_client_entity_history(c, 5, ticks, NULL, 16) == 2 && ticks[0] == 18, "the stale state is a baseline");
    /* A delta against the stale state resolves. */
    sw_begin(&w, 21, 0, 2, 0, 0);
    sw_delta(&w, 5, 3, 5, 1, -1, 0, player_widths, 6);
    handle(c, &w);
    nf_client_entity(c, 5, &e);
    CHECK(e.t.pos[0] == 6 && e.tick == 21, "x %d", e.t.pos[0]);
    nf_client_stats st;
    nf_client_stats_get(c, &st);
    CHECK(st.records_stale == 2, "stale %llu", (unsigned long long)st.records_stale);
    nf_client_destroy(c);
}

static void test_reset(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    snapw w;
    sw_begin(&w, 10, 0, 0, 0, 0);
    spawn_player(&w, 1, &T0);
    spawn_player(&w, 2, &T0);
    handle(c, &w);
    /* Entity 2 got a record of tick 31 before the RESET of 30 arrived. */
    sw_begin(&w, 31, 0, 1, 0, 0);
    spawn_player(&w, 2, &T0);
    handle(c, &w);
    sw_begin(&w, 11, 0, 2, 0, 0);
    sw_delta(&w, 9, 1, 1, 1, -1, 0, player_widths, 6);
    handle(c, &w); /* NeedFull 9 */
    uint8_t reset[5] = {0x12, 30, 0, 0, 0};
    CHECK(nf_client_handle(c, reset, 5, 0) == NF_MSG_RESET, "reset");
    nf_entity e;
    int resync;
    CHECK(nf_client_entity(c, 1, &e) == NF_ERR_NOT_FOUND && nf_client_entity(c, 2, &e) == NF_OK, "dropped the older");
    CHECK(nf_client_need_full(c, &resync) == 0, "NeedFull cleared");
    CHECK(nf_client_last_applied_tick(c) == 31, "a reset changes no applied tick");
    /* Packets older than the reset are ignored, but acknowledged. */
    sw_begin(&w, 29, 0, 3, 0, 0);
    spawn_player(&w, 1, &T0);
    handle(c, &w);
    CHECK(nf_client_entity(c, 1, &e) == NF_ERR_NOT_FOUND, "older than the reset");
    uint8_t ack[NF_MAX_ACK_BYTES];
    CHECK(nf_client_ack(c, ack, sizeof ack) == 17 && ack[1] == 3, "acknowledged");
    /* The same RESET again changes nothing; FlagReset of a newer tick resets. */
    sw_begin(&w, 32, 0, 4, 0, 0);
    spawn_player(&w, 3, &T0);
    handle(c, &w);
    CHECK(nf_client_handle(c, reset, 5, 0) == NF_MSG_RESET && nf_client_entity(c, 3, &e) == NF_OK, "no second reset");
    sw_begin(&w, 40, 0, 5, NF_FLAG_RESET, 0);
    spawn_player(&w, 4, &T0);
    handle(c, &w);
    CHECK(nf_client_entity_count(c) == 1 && nf_client_entity(c, 4, &e) == NF_OK, "FlagReset");
    nf_client_stats st;
    nf_client_stats_get(c, &st);
    CHECK(st.resets == 2, "resets %llu", (unsigned long long)st.resets);
    nf_client_destroy(c);
}

static void test_resync(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    snapw w;
    sw_begin(&w, 10, 0, 0, 0, 0);
    for (uint16_t id = 100; id < 140; id++)
        sw_delta(&w, id, 1, 0, 1, -1, 0, player_widths, 6);
    handle(c, &w);
    int resync;
    CHECK(nf_client_need_full(c, &resync) == 32 && resync, "32 ids, then Resync");
    uint8_t ack[NF_MAX_ACK_BYTES];
    CHECK(nf_client_ack(c, ack, sizeof ack) == 17 + 64 && ack[15] == 1, "ACK carries both");
    nf_client_destroy(c);
}

static void test_ack_window(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    uint8_t ack[NF_MAX_ACK_BYTES];
    CHECK(nf_client_ack(c, ack, sizeof ack) == 0, "no ACK before a SNAPSHOT");
    snapw w;
    uint16_t seqs[] = {65534, 65535, 1, 0, 3};
    for (int i = 0; i < 5; i++) {
        sw_begin(&w, 10 + (uint32_t)i, 0, seqs[i], 0, 0);
        handle(c, &w);
    }
    CHECK(nf_client_ack_due(c), "due");
    CHECK(nf_client_ack(c, ack, sizeof ack) == 17, "ACK");
    uint16_t latest = (uint16_t)(ack[1] | ack[2] << 8);
    uint64_t rec = 0;
    for (int i = 0; i < 8; i++)
        rec |= (uint64_t)ack[3 + i] << (8 * i);
    /* latest 3; received 1 (i=1), 0 (i=2), 65535 (i=3), 65534 (i=4). */
    CHECK(latest == 3 && rec == 0x1E, "latest %u received %llx", latest, (unsigned long long)rec);
    CHECK(!nf_client_ack_due(c), "not due after the ACK");
    CHECK(nf_client_ack(c, ack, 10) == NF_ERR_BUFFER, "small buffer");
    /* A jump of 64 keeps only the old latest, at bit 63. */
    sw_begin(&w, 20, 0, 67, 0, 0);
    handle(c, &w);
    nf_client_ack(c, ack, sizeof ack);
    rec = 0;
    for (int i = 0; i < 8; i++)
        rec |= (uint64_t)ack[3 + i] << (8 * i);
    CHECK(rec == UINT64_C(1) << 63, "received %llx", (unsigned long long)rec);
    nf_client_destroy(c);
}

static void test_ping_command_input(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    uint8_t buf[300];
    CHECK(nf_client_ping_due(c, 1000), "due at first");
    CHECK(nf_client_ping(c, 1000, buf, sizeof buf) == 9, "ping");
    CHECK(!nf_client_ping_due(c, 1249) && nf_client_ping_due(c, 1250), "every 250 ms");
    snapw w;
    sw_begin(&w, 50, 0, 0, NF_FLAG_INPUT_ACK, 7);
    handle(c, &w);
    uint16_t seq = 0;
    CHECK(nf_client_input_ack(c, &seq) == 1 && seq == 7, "input ack");
    sw_begin(&w, 49, 0, 1, NF_FLAG_INPUT_ACK, 6);
    handle(c, &w);
    CHECK(nf_client_input_ack(c, &seq) == 1 && seq == 7, "an older packet's input ack is not the newest");
    uint8_t payload[3] = {1, 2, 3};
    CHECK(nf_client_command(c, payload, 3, buf, sizeof buf, &seq) == 11 && seq == 0, "first command");
    CHECK(buf[3] == 50 && buf[7] == 3, "stamped with the applied tick");
    CHECK(nf_client_command(c, payload, 3, buf, sizeof buf, &seq) == 11 && seq == 1 && buf[1] == 1, "second");
    uint8_t big[256] = {0};
    CHECK(nf_client_command(c, big, 256, buf, sizeof buf, &seq) == NF_ERR_ARGUMENT, "payload over 255");
    CHECK(nf_client_command(c, payload, 3, buf, 5, &seq) == NF_ERR_BUFFER, "small buffer");
    CHECK(nf_client_command(c, payload, 3, buf, sizeof buf, &seq) == 11 && seq == 2, "failures do not advance");
    uint8_t token[4] = {9, 8, 7, 6};
    int n = nf_client_hello(c, token, 4, buf, sizeof buf);
    CHECK(n == 14 && buf[0] == 0x16 && buf[9] == 4 && memcmp(buf + 10, token, 4) == 0, "HELLO with a token");
    CHECK(nf_client_hello(c, NULL, 0, buf, sizeof buf) == 9, "HELLO without");
    nf_client_destroy(c);
}

static void test_malformed(void)
{
    nf_client *c = new_client(NULL, 0, 0);
    snapw w;
    sw_begin(&w, 10, 0, 0, 0, 0);
    spawn_player(&w, 5, &T0);
    size_t n = sw_end(&w);
    w.buf[n] = 0; /* a byte after the end */
    CHECK(nf_client_handle(c, w.buf, n + 1, 0) == NF_ERR_MALFORMED, "trailing byte");
    CHECK(nf_client_entity_count(c) == 0 && !nf_client_ack_due(c), "nothing applied, nothing acknowledged");
    /* A spawn of an unknown kind refuses the packet, the records before it too. */
    sw_begin(&w, 10, 0, 0, 0, 0);
    spawn_player(&w, 5, &T0);
    sw_spawn(&w, 6, 9, 0, &T0, NULL, NULL, 0);
    CHECK(handle(c, &w) == NF_ERR_MALFORMED && nf_client_entity_count(c) == 0, "unknown kind");
    /* An enum value out of range in a spawn. */
    sw_begin(&w, 10, 0, 0, 0, 0);
    uint32_t f[6];
    memcpy(f, F0, sizeof f);
    f[1] = 3;
    sw_spawn(&w, 5, 1, NF_PART_TRANSFORM, &T0, f, player_widths, 6);
    CHECK(handle(c, &w) == NF_ERR_MALFORMED, "enum out of range");
    uint8_t ack[17] = {0x13};
    CHECK(nf_client_handle(c, ack, sizeof ack, 0) == NF_ERR_UNEXPECTED, "an ACK from the server");
    uint8_t empty[1];
    CHECK(nf_client_handle(c, empty, 0, 0) == NF_ERR_MALFORMED, "empty");
    uint8_t v2[5] = {0x22, 0, 0, 0, 0};
    CHECK(nf_client_handle(c, v2, 5, 0) == NF_ERR_MALFORMED, "version 2");
    nf_client_stats st;
    nf_client_stats_get(c, &st);
    CHECK(st.malformed == 6 && st.packets == 0, "counted %llu", (unsigned long long)st.malformed);
    nf_client_destroy(c);
}

static void test_allocator_and_warm_packets(void)
{
    counter cnt = {0, 0, 0};
    nf_allocator a = {count_alloc, count_free, &cnt};
    nf_client *c = new_client(&a, 4, 300);
    CHECK(cnt.allocs == 2, "client and table: %ld", cnt.allocs);
    snapw w;
    sw_begin(&w, 1, 0, 0, 0, 0);
    for (uint16_t id = 0; id < 200; id++)
        spawn_player(&w, id, &T0);
    handle(c, &w);
    CHECK(nf_client_entity_count(c) == 200, "grew to 200");
    long warm = cnt.allocs;
    for (uint32_t t = 2; t < 2000; t++) {
        sw_begin(&w, t, 0, (uint16_t)(t - 1), NF_FLAG_LAST, 0);
        for (uint16_t id = 0; id < 40; id++)
            sw_delta(&w, (uint16_t)((t * 40 + id) % 200), 1, 1, 1, 0, t % 100, player_widths, 6);
        if (t % 50 == 0) {
            sw_despawn(&w, (uint16_t)(t % 200));
            spawn_player(&w, (uint16_t)(t % 200), &T0);
        }
        handle(c, &w);
        uint8_t ack[NF_MAX_ACK_BYTES];
        nf_client_ack(c, ack, sizeof ack);
    }
    CHECK(cnt.allocs == warm, "allocations while warm: %ld", cnt.allocs - warm);
    CHECK(cnt.live == nf_client_memory(c), "memory %zu, allocator %zu", nf_client_memory(c), cnt.live);
    /* The table stops at max_entities: spawns beyond are dropped and counted. */
    sw_begin(&w, 3000, 0, 3000, 0, 0);
    for (uint16_t id = 1000; id < 1200; id++)
        spawn_player(&w, id, &T0);
    handle(c, &w);
    nf_client_stats st;
    nf_client_stats_get(c, &st);
    CHECK(nf_client_entity_count(c) == 300 && st.records_dropped == 100, "count %u dropped %llu",
          nf_client_entity_count(c), (unsigned long long)st.records_dropped);
    nf_client_destroy(c);
    CHECK(cnt.allocs == cnt.frees && cnt.live == 0, "everything freed");
}

static void test_close_codes(void)
{
    CHECK(strcmp(nf_close_name(4004), "schema") == 0, "4004");
    CHECK(strcmp(nf_close_name(4007), "token expired") == 0 && nf_close_retry(4007), "4007");
    CHECK(strcmp(nf_close_name(4010), "token replayed") == 0, "4010");
    CHECK(strcmp(nf_close_name(4321), "game code") == 0 && !nf_close_retry(4321), "a game's code");
    CHECK(nf_close_retry(1013) && !nf_close_retry(4003), "retry");
    for (uint32_t code = 4001; code <= 4010; code++)
        CHECK(strcmp(nf_close_name(code), "netfleet (reserved)") != 0, "%u has a name", code);
    nf_client *c = new_client(NULL, 0, 0);
    uint8_t close[] = {0x17, 0xa4, 0x0f, 0, 0, 3, 'b', 'a', 'd'};
    uint32_t code;
    const char *reason;
    CHECK(nf_client_handle(c, close, sizeof close, 0) == NF_MSG_CLOSE, "CLOSE");
    CHECK(nf_client_closed(c, &code, &reason) && code == 4004 && strcmp(reason, "bad") == 0, "remembered");
    nf_client_destroy(c);
}

int main(void)
{
    CHECK(nf_schema_create(kinds, 2, NULL, &schema) == NF_OK, "schema");
    test_schema();
    test_spawn_and_fields();
    test_delta_history_needfull();
    test_stale_and_tombstones();
    test_reset();
    test_resync();
    test_ack_window();
    test_ping_command_input();
    test_malformed();
    test_allocator_and_warm_packets();
    test_close_codes();
    nf_schema_destroy(schema);
    return check_report("test_client");
}
