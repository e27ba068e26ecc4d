/* The client's protocol state: the entity table and its histories, resets, NeedFull, the ACK
 * window, PING cadence, COMMAND numbering and the input acknowledgement
 * (docs/protocol.md, "baselines and history", "acknowledgements"). */
#include "internal.h"

#include <math.h>

typedef struct entry {
    uint32_t latest;                 /* tick of the newest record applied, despawns included */
    uint32_t ticks[NF_HISTORY_DEPTH];
    nf_transform states[NF_HISTORY_DEPTH]; /* ascending by tick */
    uint16_t id;
    uint8_t kind;
    uint8_t alive;
    uint8_t n;                       /* history length */
} entry;

struct nf_client {
    nf_allocator alloc;
    int has_alloc;
    const nf_schema *schema;
    uint32_t stride;                 /* field words per state */

    entry *entries;
    uint32_t *words;                 /* cap * NF_HISTORY_DEPTH * stride */
    uint32_t *index;                 /* open addressing: entry index + 1, 0 empty */
    uint32_t count, cap, max, index_mask;
    uint32_t alive;
    size_t table_bytes;

    uint16_t need[NF_MAX_NEED_FULL];
    uint32_t nneed;
    int resync;

    int any, ack_due;
    uint16_t latest;
    uint64_t received;

    uint32_t applied;
    int has_reset;
    uint32_t reset_tick;

    int has_input;
    uint16_t input_seq;
    uint32_t input_at;

    int pinged;
    int64_t last_ping_ms;
    uint16_t cmd_seq;

    int has_close;
    uint32_t close_code;
    char close_reason[256];

    nf_client_stats stats;
    uint32_t scratch[NF_MAX_FIELD_WORDS];
};

static const nf_allocator *alloc_of(const nf_client *c) { return c->has_alloc ? &c->alloc : NULL; }

static uint32_t hash_id(uint16_t id) { return (uint32_t)id * 2654435761u; }

static uint32_t *words_of(const nf_client *c, uint32_t e, uint32_t i)
{
    return c->words + ((size_t)e * NF_HISTORY_DEPTH + i) * c->stride;
}

static void index_put(nf_client *c, uint16_t id, uint32_t e)
{
    uint32_t h = hash_id(id) & c->index_mask;
    while (c->index[h])
        h = (h + 1) & c->index_mask;
    c->index[h] = e + 1;
}

static int32_t lookup(const nf_client *c, uint16_t id)
{
    uint32_t h = hash_id(id) & c->index_mask;
    for (;;) {
        uint32_t v = c->index[h];
        if (!v)
            return -1;
        if (c->entries[v - 1].id == id)
            return (int32_t)(v - 1);
        h = (h + 1) & c->index_mask;
    }
}

static void index_rebuild(nf_client *c)
{
    memset(c->index, 0, sizeof(uint32_t) * (c->index_mask + 1));
    for (uint32_t i = 0; i < c->count; i++)
        index_put(c, c->entries[i].id, i);
}

static size_t table_size(uint32_t cap, uint32_t stride, uint32_t *index_slots)
{
    uint32_t slots = 4;
    while (slots < 2 * cap)
        slots *= 2;
    *index_slots = slots;
    return sizeof(entry) * cap + sizeof(uint32_t) * (size_t)cap * NF_HISTORY_DEPTH * stride +
           sizeof(uint32_t) * slots;
}

/* resize moves the table to one of cap entries (cap >= count). */
static int resize(nf_client *c, uint32_t cap)
{
    uint32_t slots;
    size_t bytes = table_size(cap, c->stride, &slots);
    uint8_t *p = nf_mem_alloc(alloc_of(c), bytes);
    if (!p)
        return NF_ERR_NOMEM;
    memset(p, 0, bytes);
    entry *entries = (entry *)p;
    uint32_t *words = (uint32_t *)(p + sizeof(entry) * cap);
    uint32_t *index = words + (size_t)cap * NF_HISTORY_DEPTH * c->stride;
    if (c->count) {
        memcpy(entries, c->entries, sizeof(entry) * c->count);
        memcpy(words, c->words, sizeof(uint32_t) * (size_t)c->count * NF_HISTORY_DEPTH * c->stride);
    }
    nf_mem_free(alloc_of(c), c->entries, c->table_bytes);
    c->entries = entries;
    c->words = words;
    c->index = index;
    c->index_mask = slots - 1;
    c->cap = cap;
    c->table_bytes = bytes;
    index_rebuild(c);
    return NF_OK;
}

int nf_client_create(const nf_client_config *cfg, nf_client **out)
{
    if (!out)
        return NF_ERR_ARGUMENT;
    *out = NULL;
    if (!cfg || !cfg->schema)
        return NF_ERR_ARGUMENT;
    uint32_t max = cfg->max_entities ? cfg->max_entities : 65536;
    uint32_t init = cfg->initial_entities ? cfg->initial_entities : 64;
    if (max > 65536 || init > max)
        return NF_ERR_ARGUMENT;
    nf_client *c = nf_mem_alloc(cfg->allocator, sizeof *c);
    if (!c)
        return NF_ERR_NOMEM;
    memset(c, 0, sizeof *c);
    if (cfg->allocator) {
        c->alloc = *cfg->allocator;
        c->has_alloc = 1;
    }
    c->schema = cfg->schema;
    c->stride = cfg->schema->stride;
    c->max = max;
    if (resize(c, init) != NF_OK) {
        nf_mem_free(cfg->allocator, c, sizeof *c);
        return NF_ERR_NOMEM;
    }
    *out = c;
    return NF_OK;
}

void nf_client_destroy(nf_client *c)
{
    if (!c)
        return;
    nf_allocator a = c->alloc;
    const nf_allocator *ap = c->has_alloc ? &a : NULL;
    nf_mem_free(ap, c->entries, c->table_bytes);
    nf_mem_free(ap, c, sizeof *c);
}

size_t nf_client_memory(const nf_client *c) { return c ? sizeof *c + c->table_bytes : 0; }

/* create adds an entry for id, growing the table if it is full; -1 if it cannot. */
static int32_t create(nf_client *c, uint16_t id)
{
    if (c->count == c->cap) {
        if (c->cap >= c->max)
            return -1;
        uint32_t cap = c->cap * 2 > c->max ? c->max : c->cap * 2;
        if (resize(c, cap) != NF_OK)
            return -1;
    }
    uint32_t i = c->count++;
    entry *e = &c->entries[i];
    memset(e, 0, sizeof *e);
    e->id = id;
    index_put(c, id, i);
    return (int32_t)i;
}

static int find(const entry *e, uint32_t tick)
{
    for (int i = e->n - 1; i >= 0; i--)
        if (e->ticks[i] == tick)
            return i;
    return -1;
}

/* remember inserts a state in tick order, evicting the oldest when the history is full; a state
 * of a tick it holds replaces it. */
static void remember(nf_client *c, uint32_t ei, uint32_t tick, const nf_transform *s, const uint32_t *fields)
{
    entry *e = &c->entries[ei];
    uint32_t w = c->stride;
    int i = e->n;
    while (i > 0 && e->ticks[i - 1] >= tick) {
        if (e->ticks[i - 1] == tick) {
            e->states[i - 1] = *s;
            if (w)
                memcpy(words_of(c, ei, (uint32_t)i - 1), fields, w * sizeof(uint32_t));
            return;
        }
        i--;
    }
    if (e->n == NF_HISTORY_DEPTH) {
        if (i == 0)
            return; /* older than the whole history */
        memmove(&e->ticks[0], &e->ticks[1], sizeof(uint32_t) * (size_t)(i - 1));
        memmove(&e->states[0], &e->states[1], sizeof(nf_transform) * (size_t)(i - 1));
        if (w)
            memmove(words_of(c, ei, 0), words_of(c, ei, 1), sizeof(uint32_t) * w * (size_t)(i - 1));
        i--;
    } else {
        memmove(&e->ticks[i + 1], &e->ticks[i], sizeof(uint32_t) * (size_t)(e->n - i));
        memmove(&e->states[i + 1], &e->states[i], sizeof(nf_transform) * (size_t)(e->n - i));
        if (w)
            memmove(words_of(c, ei, (uint32_t)i + 1), words_of(c, ei, (uint32_t)i),
                    sizeof(uint32_t) * w * (size_t)(e->n - i));
        e->n++;
    }
    e->ticks[i] = tick;
    e->states[i] = *s;
    if (w)
        memcpy(words_of(c, ei, (uint32_t)i), fields, w * sizeof(uint32_t));
}

static void forget(nf_client *c, uint32_t ei, uint32_t tick)
{
    entry *e = &c->entries[ei];
    int k = 0;
    while (k < e->n && e->ticks[k] < tick)
        k++;
    if (!k)
        return;
    memmove(&e->ticks[0], &e->ticks[k], sizeof(uint32_t) * (size_t)(e->n - k));
    memmove(&e->states[0], &e->states[k], sizeof(nf_transform) * (size_t)(e->n - k));
    if (c->stride)
        memmove(words_of(c, ei, 0), words_of(c, ei, (uint32_t)k), sizeof(uint32_t) * c->stride * (size_t)(e->n - k));
    e->n = (uint8_t)(e->n - k);
}

static void reset(nf_client *c, uint32_t tick)
{
    if (c->has_reset && tick <= c->reset_tick)
        return;
    c->has_reset = 1;
    c->reset_tick = tick;
    c->stats.resets++;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < c->count; i++) {
        entry *e = &c->entries[i];
        if (e->latest < tick) {
            if (e->alive)
                c->alive--;
            continue;
        }
        if (kept != i) {
            c->entries[kept] = *e;
            if (c->stride)
                memmove(words_of(c, kept, 0), words_of(c, i, 0),
                        sizeof(uint32_t) * c->stride * NF_HISTORY_DEPTH);
        }
        forget(c, kept, tick);
        kept++;
    }
    c->count = kept;
    index_rebuild(c);
    c->nneed = 0;
    c->resync = 0;
}

static void unapplied(nf_client *c, uint16_t id)
{
    c->stats.records_unapplied++;
    for (uint32_t i = 0; i < c->nneed; i++)
        if (c->need[i] == id)
            return;
    if (c->nneed == NF_MAX_NEED_FULL) {
        if (!c->resync)
            c->ack_due = 1;
        c->resync = 1;
        return;
    }
    c->need[c->nneed++] = id;
    c->ack_due = 1;
}

static void resolved(nf_client *c, uint16_t id)
{
    for (uint32_t i = 0; i < c->nneed; i++)
        if (c->need[i] == id) {
            c->need[i] = c->need[--c->nneed];
            return;
        }
}

/* resolve applies delta rec to history state b of entry ei, into *out and c->scratch. */
static int resolve(nf_client *c, const uint8_t *pkt, size_t len, uint32_t ei, int b, const nf_record *rec,
                   nf_transform *out)
{
    entry *e = &c->entries[ei];
    const uint32_t *base = c->stride ? words_of(c, ei, (uint32_t)b) : c->scratch;
    if (c->stride)
        memcpy(c->scratch, base, c->stride * sizeof(uint32_t));
    return nf_delta_apply(c->schema, pkt, len, rec, e->kind, &e->states[b], c->scratch, out, c->scratch, NULL);
}

static void stale(nf_client *c, const uint8_t *pkt, size_t len, uint32_t tick, uint32_t ei, const nf_record *rec)
{
    entry *e = &c->entries[ei];
    c->stats.records_stale++;
    if (!e->alive)
        return;
    if (rec->op == NF_OP_SPAWN) {
        if (rec->kind == e->kind)
            remember(c, ei, tick, &rec->state, rec->fields);
    } else if (rec->op == NF_OP_DELTA) {
        int b = find(e, rec->baseline_tick);
        nf_transform st;
        if (b >= 0 && resolve(c, pkt, len, ei, b, rec, &st) == NF_OK)
            remember(c, ei, tick, &st, c->scratch);
    }
}

static void apply(nf_client *c, const uint8_t *pkt, size_t len, uint32_t tick, const nf_record *rec)
{
    int32_t ei = lookup(c, rec->id);
    if (ei >= 0 && tick < c->entries[ei].latest) {
        stale(c, pkt, len, tick, (uint32_t)ei, rec);
        return;
    }
    switch (rec->op) {
    case NF_OP_SPAWN: {
        if (ei < 0 && (ei = create(c, rec->id)) < 0) {
            c->stats.records_dropped++;
            return;
        }
        entry *e = &c->entries[ei];
        if (!e->alive) {
            e->alive = 1;
            c->alive++;
        }
        e->n = 0; /* a spawn replaces the history */
        e->kind = rec->kind;
        remember(c, (uint32_t)ei, tick, &rec->state, rec->fields);
        e->latest = tick;
        resolved(c, rec->id);
        break;
    }
    case NF_OP_DELTA: {
        int b = -1;
        if (ei >= 0 && c->entries[ei].alive)
            b = find(&c->entries[ei], rec->baseline_tick);
        nf_transform st;
        if (b < 0 || resolve(c, pkt, len, (uint32_t)ei, b, rec, &st) != NF_OK) {
            unapplied(c, rec->id);
            return;
        }
        remember(c, (uint32_t)ei, tick, &st, c->scratch);
        c->entries[ei].latest = tick;
        break;
    }
    case NF_OP_DESPAWN: {
        if (ei < 0 && (ei = create(c, rec->id)) < 0) { /* a tombstone: a late spawn cannot revive it */
            c->stats.records_dropped++;
            return;
        }
        entry *e = &c->entries[ei];
        if (e->alive) {
            e->alive = 0;
            c->alive--;
        }
        e->n = 0;
        e->latest = tick;
        resolved(c, rec->id);
        break;
    }
    }
    c->stats.records_applied++;
}

static void receive_seq(nf_client *c, uint16_t seq)
{
    if (!c->any) {
        c->any = 1;
        c->latest = seq;
        c->received = 0;
        return;
    }
    uint16_t d = (uint16_t)(seq - c->latest);
    if (d != 0 && d < 0x8000) { /* newer */
        if (d < 64)
            c->received = c->received << d | UINT64_C(1) << (d - 1);
        else
            c->received = d == 64 ? UINT64_C(1) << 63 : 0;
        c->latest = seq;
    } else if (d != 0) {
        uint16_t i = (uint16_t)((uint16_t)(c->latest - seq) - 1);
        if (i < 64)
            c->received |= UINT64_C(1) << i;
    }
}

static int handle_snapshot(nf_client *c, const uint8_t *data, size_t len, int64_t now)
{
    nf_snapshot_reader r;
    nf_snapshot_header h;
    nf_record rec;
    /* Validate the whole packet first: a malformed one is refused whole. */
    int err = nf_snapshot_begin(&r, c->schema, data, len, &h);
    if (err)
        return err;
    while ((err = nf_snapshot_next(&r, &rec)) == 1)
        ;
    if (err < 0)
        return err;
    if ((h.flags & NF_FLAG_INPUT_ACK) && (!c->has_input || h.tick >= c->input_at)) {
        c->has_input = 1;
        c->input_seq = h.input_seq;
        c->input_at = h.tick;
    }
    c->stats.packets++;
    c->stats.bytes += len;
    c->stats.last_age_ms = (int32_t)((uint32_t)now - h.server_time_ms);
    receive_seq(c, h.seq);
    c->ack_due = 1;
    if (h.flags & NF_FLAG_RESET)
        reset(c, h.tick);
    nf_snapshot_begin(&r, c->schema, data, len, &h);
    if (c->has_reset && h.tick < c->reset_tick) {
        while (nf_snapshot_next(&r, &rec) == 1)
            c->stats.records_stale++; /* from before a reset */
        return NF_MSG_SNAPSHOT;
    }
    while (nf_snapshot_next(&r, &rec) == 1)
        apply(c, data, len, h.tick, &rec);
    if (h.tick > c->applied)
        c->applied = h.tick;
    return NF_MSG_SNAPSHOT;
}

int nf_client_handle(nf_client *c, const uint8_t *data, size_t len, int64_t now)
{
    if (!c || (!data && len))
        return NF_ERR_ARGUMENT;
    int t = nf_message_type(data, len);
    int res = t;
    switch (t) {
    case NF_MSG_SNAPSHOT:
        res = handle_snapshot(c, data, len, now);
        break;
    case NF_MSG_RESET: {
        uint32_t tick;
        if ((res = nf_decode_reset(data, len, &tick)) == NF_OK) {
            reset(c, tick);
            res = t;
        }
        break;
    }
    case NF_MSG_CLOSE: {
        const uint8_t *reason;
        size_t n;
        if ((res = nf_decode_close(data, len, &c->close_code, &reason, &n)) == NF_OK) {
            memcpy(c->close_reason, reason, n);
            c->close_reason[n] = 0;
            c->has_close = 1;
            res = t;
        }
        break;
    }
    default:
        if (t > 0)
            res = NF_ERR_UNEXPECTED;
    }
    if (res < 0)
        c->stats.malformed++;
    return res;
}

int nf_client_hello(const nf_client *c, const uint8_t *token, size_t token_len, uint8_t *buf, size_t cap)
{
    if (!c)
        return NF_ERR_ARGUMENT;
    return nf_encode_hello(c->schema->hash, token, token_len, buf, cap);
}

int nf_client_ack_due(const nf_client *c) { return c && c->ack_due; }

int nf_client_ack(nf_client *c, uint8_t *buf, size_t cap)
{
    if (!c || !buf)
        return NF_ERR_ARGUMENT;
    if (!c->any)
        return 0;
    int n = nf_encode_ack(c->latest, c->received, c->applied, c->resync, c->need, c->nneed, buf, cap);
    if (n > 0)
        c->ack_due = 0;
    return n;
}

int nf_client_ping_due(const nf_client *c, int64_t now)
{
    return c && (!c->pinged || now - c->last_ping_ms >= 250);
}

int nf_client_ping(nf_client *c, int64_t now, uint8_t *buf, size_t cap)
{
    if (!c)
        return NF_ERR_ARGUMENT;
    int n = nf_encode_ping((uint32_t)now, c->applied, buf, cap);
    if (n > 0) {
        c->pinged = 1;
        c->last_ping_ms = now;
    }
    return n;
}

int nf_client_command(nf_client *c, const uint8_t *payload, size_t len, uint8_t *buf, size_t cap, uint16_t *seq)
{
    if (!c)
        return NF_ERR_ARGUMENT;
    int n = nf_encode_command(c->cmd_seq, c->applied, payload, len, buf, cap);
    if (n < 0)
        return n;
    if (seq)
        *seq = c->cmd_seq;
    c->cmd_seq++;
    return n;
}

int nf_client_input_ack(const nf_client *c, uint16_t *seq)
{
    if (!c || !c->has_input)
        return 0;
    if (seq)
        *seq = c->input_seq;
    return 1;
}

uint32_t nf_client_last_applied_tick(const nf_client *c) { return c ? c->applied : 0; }

int nf_client_closed(const nf_client *c, uint32_t *code, const char **reason)
{
    if (!c || !c->has_close)
        return 0;
    if (code)
        *code = c->close_code;
    if (reason)
        *reason = c->close_reason;
    return 1;
}

void nf_client_stats_get(const nf_client *c, nf_client_stats *out)
{
    if (c && out)
        *out = c->stats;
}

int nf_client_need_full(const nf_client *c, int *resync)
{
    if (!c)
        return NF_ERR_ARGUMENT;
    if (resync)
        *resync = c->resync;
    return (int)c->nneed;
}

uint32_t nf_client_entity_count(const nf_client *c) { return c ? c->alive : 0; }

static void view(const nf_client *c, uint32_t ei, nf_entity *out)
{
    const entry *e = &c->entries[ei];
    const nf_kind *k = nf_schema_kind(c->schema, e->kind);
    out->id = e->id;
    out->kind = e->kind;
    out->tick = e->ticks[e->n - 1];
    out->t = e->states[e->n - 1];
    out->field_words = k ? k->words : 0;
    out->fields = out->field_words ? words_of(c, ei, (uint32_t)e->n - 1) : NULL;
}

int nf_client_entity(const nf_client *c, uint16_t id, nf_entity *out)
{
    if (!c || !out)
        return NF_ERR_ARGUMENT;
    int32_t ei = lookup(c, id);
    if (ei < 0 || !c->entries[ei].alive || c->entries[ei].n == 0)
        return NF_ERR_NOT_FOUND;
    view(c, (uint32_t)ei, out);
    return NF_OK;
}

int nf_client_entity_next(const nf_client *c, uint32_t *cursor, nf_entity *out)
{
    if (!c || !cursor || !out)
        return 0;
    while (*cursor < c->count) {
        uint32_t i = (*cursor)++;
        if (c->entries[i].alive && c->entries[i].n) {
            view(c, i, out);
            return 1;
        }
    }
    return 0;
}

int nf_client_entity_history(const nf_client *c, uint16_t id, uint32_t *ticks, nf_transform *states, int cap)
{
    if (!c || cap < 0)
        return NF_ERR_ARGUMENT;
    int32_t ei = lookup(c, id);
    if (ei < 0 || !c->entries[ei].alive)
        return NF_ERR_NOT_FOUND;
    const entry *e = &c->entries[ei];
    int n = e->n < cap ? e->n : cap;
    int from = e->n - n; /* the newest n */
    for (int i = 0; i < n; i++) {
        if (ticks)
            ticks[i] = e->ticks[from + i];
        if (states)
            states[i] = e->states[from + i];
    }
    return n;
}

/* ---- typed field access */

static int get(const nf_client *c, const nf_entity *e, int field, int type, const nf_field **out)
{
    if (!c || !e)
        return NF_ERR_ARGUMENT;
    const nf_kind *k = nf_schema_kind(c->schema, e->kind);
    if (!k || field < 0 || (uint32_t)field >= k->nfields || !e->fields)
        return NF_ERR_NOT_FOUND;
    *out = &k->fields[field];
    return (*out)->type == type ? NF_OK : NF_ERR_TYPE;
}

int nf_entity_uint(const nf_client *c, const nf_entity *e, int field, uint32_t *v)
{
    const nf_field *f;
    int err = get(c, e, field, NF_FIELD_UINT, &f);
    if (!err && v)
        *v = e->fields[f->word];
    return err;
}

int nf_entity_int(const nf_client *c, const nf_entity *e, int field, int32_t *v)
{
    const nf_field *f;
    int err = get(c, e, field, NF_FIELD_INT, &f);
    if (!err && v) {
        uint32_t w = e->fields[f->word];
        if (f->bits < 32 && (w >> (f->bits - 1) & 1))
            w |= ~((UINT32_C(1) << f->bits) - 1);
        memcpy(v, &w, sizeof w);
    }
    return err;
}

int nf_entity_bool(const nf_client *c, const nf_entity *e, int field, int *v)
{
    const nf_field *f;
    int err = get(c, e, field, NF_FIELD_BOOL, &f);
    if (!err && v)
        *v = e->fields[f->word] != 0;
    return err;
}

int nf_entity_enum(const nf_client *c, const nf_entity *e, int field, uint32_t *index, const char **name)
{
    const nf_field *f;
    int err = get(c, e, field, NF_FIELD_ENUM, &f);
    if (!err) {
        uint32_t v = e->fields[f->word];
        if (index)
            *index = v;
        if (name)
            *name = v < f->limit ? f->values[v] : NULL;
    }
    return err;
}

int nf_entity_float(const nf_client *c, const nf_entity *e, int field, double *v)
{
    const nf_field *f;
    int err = get(c, e, field, NF_FIELD_FLOAT, &f);
    if (!err && v)
        *v = f->min + (double)e->fields[f->word] * f->step;
    return err;
}

int nf_entity_bytes(const nf_client *c, const nf_entity *e, int field, uint8_t *out, size_t cap)
{
    const nf_field *f;
    int err = get(c, e, field, NF_FIELD_BYTES, &f);
    if (err)
        return err;
    for (uint32_t b = 0; b < f->size && b < cap; b++)
        out[b] = (uint8_t)(e->fields[f->word + b / 4] >> (8 * (b % 4)));
    return (int)f->size;
}
