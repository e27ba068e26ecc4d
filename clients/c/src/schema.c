/* The schema: validation, compilation, the canonical encoding and its hash. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void *nf_mem_alloc(const nf_allocator *a, size_t size)
{
    if (size == 0)
        size = 1;
    return a && a->alloc ? a->alloc(a->user, size) : malloc(size);
}

void nf_mem_free(const nf_allocator *a, void *p, size_t size)
{
    if (!p)
        return;
    if (a && a->free)
        a->free(a->user, p, size);
    else
        free(p);
}

const char *nf_error_string(int err)
{
    switch (err) {
    case NF_OK: return "ok";
    case NF_ERR_MALFORMED: return "malformed message";
    case NF_ERR_UNEXPECTED: return "message a client does not receive";
    case NF_ERR_ARGUMENT: return "invalid argument";
    case NF_ERR_SCHEMA: return "invalid schema";
    case NF_ERR_NOMEM: return "out of memory";
    case NF_ERR_BUFFER: return "buffer too small";
    case NF_ERR_NOT_FOUND: return "not found";
    case NF_ERR_TYPE: return "wrong field type";
    case NF_ERR_STATE: return "wrong state";
    case NF_ERR_ENET: return "libenet error";
    default: return err > 0 ? "ok" : "unknown error";
    }
}

/* round_half_away rounds half away from zero, in binary64. */
static double round_half_away(double x)
{
    if (x >= 0) {
        double f = floor(x);
        return x - f >= 0.5 ? f + 1 : f;
    }
    double f = floor(-x);
    return -(-x - f >= 0.5 ? f + 1 : f);
}

static unsigned bitlen(uint64_t v)
{
    unsigned n = 0;
    while (v) {
        n++;
        v >>= 1;
    }
    return n;
}

/* field_width is the field's width in bits and, for enum and float, its value limit. */
static unsigned field_width(const nf_field_def *f, uint32_t *limit)
{
    *limit = 0;
    switch (f->type) {
    case NF_FIELD_UINT:
    case NF_FIELD_INT:
        return f->bits;
    case NF_FIELD_BOOL:
        return 1;
    case NF_FIELD_ENUM:
        *limit = f->enum_count;
        return bitlen((uint64_t)f->enum_count - 1);
    case NF_FIELD_FLOAT: {
        double s = round_half_away((f->max - f->min) / f->step);
        if (!(s >= 1 && s < 4294967296.0))
            return 0;
        *limit = (uint32_t)s;
        return bitlen((uint64_t)s);
    }
    case NF_FIELD_BYTES:
        return 8 * f->size;
    }
    return 0;
}

static int fail(char *msg, size_t cap, const char *fmt, const char *kind, const char *field)
{
    if (msg && cap)
        snprintf(msg, cap, fmt, kind ? kind : "", field ? field : "");
    return NF_ERR_SCHEMA;
}

int nf_schema_check(const nf_kind_def *kinds, uint32_t n, char *msg, size_t cap)
{
    if (!kinds && n)
        return NF_ERR_ARGUMENT;
    if (msg && cap)
        msg[0] = 0;
    if (n > 255)
        return fail(msg, cap, "more than 255 kinds%s%s", NULL, NULL);
    for (uint32_t i = 0; i < n; i++) {
        const nf_kind_def *k = &kinds[i];
        const char *kn = k->name ? k->name : "(unnamed)";
        if (k->id == 0)
            return fail(msg, cap, "kind %s: id 0 (ids are 1 to 255)%s", kn, NULL);
        if (!k->name)
            return fail(msg, cap, "kind without a name%s%s", NULL, NULL);
        for (uint32_t j = 0; j < i; j++)
            if (kinds[j].id == k->id)
                return fail(msg, cap, "kind %s: id declared twice%s", kn, NULL);
        if (k->parts & ~NF_PART_TRANSFORM)
            return fail(msg, cap, "kind %s: unknown parts%s", kn, NULL);
        if (k->field_count > 32)
            return fail(msg, cap, "kind %s: more than 32 fields%s", kn, NULL);
        if (k->field_count && !k->fields)
            return fail(msg, cap, "kind %s: fields missing%s", kn, NULL);
        unsigned total = 0;
        for (uint32_t j = 0; j < k->field_count; j++) {
            const nf_field_def *f = &k->fields[j];
            if (!f->name || !f->name[0])
                return fail(msg, cap, "kind %s: a field without a name%s", kn, NULL);
            for (uint32_t m = 0; m < j; m++)
                if (strcmp(k->fields[m].name, f->name) == 0)
                    return fail(msg, cap, "kind %s, field %s: declared twice", kn, f->name);
            switch (f->type) {
            case NF_FIELD_UINT:
            case NF_FIELD_INT:
                if (f->bits < 1 || f->bits > 32)
                    return fail(msg, cap, "kind %s, field %s: bits not in 1..32", kn, f->name);
                break;
            case NF_FIELD_BOOL:
                break;
            case NF_FIELD_ENUM:
                if (f->enum_count < 2 || f->enum_count > 65536)
                    return fail(msg, cap, "kind %s, field %s: values not 2..65536", kn, f->name);
                if (!f->enum_values)
                    return fail(msg, cap, "kind %s, field %s: values missing", kn, f->name);
                for (uint32_t v = 0; v < f->enum_count; v++)
                    if (!f->enum_values[v])
                        return fail(msg, cap, "kind %s, field %s: a NULL value", kn, f->name);
                break;
            case NF_FIELD_FLOAT:
                if (!isfinite(f->min) || !isfinite(f->max) || !isfinite(f->step) ||
                    !(f->min < f->max) || !(f->step > 0))
                    return fail(msg, cap, "kind %s, field %s: float range needs finite min < max and step > 0",
                                kn, f->name);
                break;
            case NF_FIELD_BYTES:
                if (f->size < 1 || f->size > 16)
                    return fail(msg, cap, "kind %s, field %s: size not in 1..16", kn, f->name);
                break;
            default:
                return fail(msg, cap, "kind %s, field %s: unknown type", kn, f->name);
            }
            uint32_t limit;
            unsigned w = field_width(f, &limit);
            if (w == 0)
                return fail(msg, cap, "kind %s, field %s: float steps (max-min)/step not in 1..2^32-1",
                            kn, f->name);
            total += w;
        }
        if (total > 1024)
            return fail(msg, cap, "kind %s: more than 1024 bits of fields%s", kn, NULL);
    }
    return NF_OK;
}

/* ---- canonical encoding, written into a growing buffer */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
    const nf_allocator *a;
    int err;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->err)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = nf_mem_alloc(b->a, cap);
        if (!p) {
            b->err = 1;
            return;
        }
        if (b->len)
            memcpy(p, b->p, b->len);
        nf_mem_free(b->a, b->p, b->cap);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }

static void put_u32(buf *b, uint32_t v)
{
    uint8_t x[4];
    nf_wr32(x, v);
    put(b, x, 4);
}

static void put_f64(buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    uint8_t x[8];
    nf_wr64(x, u);
    put(b, x, 8);
}

static void put_str(buf *b, const char *s)
{
    size_t n = strlen(s);
    put_u32(b, (uint32_t)n);
    put(b, s, n);
}

static int compute_hash(nf_schema *s)
{
    buf b = {0};
    b.a = s->has_alloc ? &s->alloc : NULL;
    put(&b, "netfleet schema 1", 18); /* with its zero byte */
    put_u32(&b, s->nkinds);
    for (int id = 1; id < 256; id++) {
        const nf_kind *k = nf_schema_kind(s, (uint8_t)id);
        if (!k)
            continue;
        put_u8(&b, k->id);
        put_u8(&b, k->parts);
        put_str(&b, k->name);
        put_u32(&b, k->nfields);
        for (uint32_t j = 0; j < k->nfields; j++) {
            const nf_field *f = &k->fields[j];
            put_u8(&b, f->type);
            put_str(&b, f->name);
            switch (f->type) {
            case NF_FIELD_UINT:
            case NF_FIELD_INT:
                put_u32(&b, f->bits);
                break;
            case NF_FIELD_ENUM:
                put_u32(&b, f->limit);
                for (uint32_t v = 0; v < f->limit; v++)
                    put_str(&b, f->values[v]);
                break;
            case NF_FIELD_FLOAT:
                put_f64(&b, f->min);
                put_f64(&b, f->max);
                put_f64(&b, f->step);
                break;
            case NF_FIELD_BYTES:
                put_u32(&b, f->size);
                break;
            }
        }
    }
    if (b.err) {
        nf_mem_free(b.a, b.p, b.cap);
        return NF_ERR_NOMEM;
    }
    uint8_t sum[32];
    nf_sha256(b.p, b.len, sum);
    nf_mem_free(b.a, b.p, b.cap);
    s->hash = 0;
    for (int i = 7; i >= 0; i--)
        s->hash = s->hash << 8 | sum[i];
    return NF_OK;
}

/* ---- compilation: one arena holds the kinds, fields, names and values */

typedef struct arena {
    uint8_t *p;
    size_t used, cap;
} arena;

static void *take(arena *a, size_t n)
{
    size_t at = (a->used + 7) & ~(size_t)7;
    a->used = at + n;
    return a->p ? a->p + at : NULL;
}

static char *take_str(arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = take(a, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* layout lays the schema out in a; with a->p NULL it only measures. */
static void layout(arena *a, nf_schema *s, const nf_kind_def *kinds, uint32_t n, int dflt)
{
    uint32_t nk = dflt ? 255 : n;
    nf_kind *ks = take(a, sizeof(nf_kind) * (nk ? nk : 1));
    for (uint32_t i = 0; i < nk; i++) {
        nf_kind k;
        memset(&k, 0, sizeof k);
        char name[16];
        if (dflt) {
            k.id = (uint8_t)(i + 1);
            k.parts = NF_PART_TRANSFORM;
            snprintf(name, sizeof name, "kind%u", (unsigned)(i + 1));
            k.name = take_str(a, name);
        } else {
            const nf_kind_def *d = &kinds[i];
            k.id = d->id;
            k.parts = d->parts;
            k.name = take_str(a, d->name);
            k.nfields = d->field_count;
            k.fields = take(a, sizeof(nf_field) * (d->field_count ? d->field_count : 1));
            for (uint32_t j = 0; j < d->field_count; j++) {
                const nf_field_def *fd = &d->fields[j];
                nf_field f;
                memset(&f, 0, sizeof f);
                f.name = take_str(a, fd->name);
                f.type = (uint8_t)fd->type;
                f.width = (uint8_t)field_width(fd, &f.limit);
                f.word = (uint16_t)k.words;
                f.bits = fd->bits;
                f.size = fd->size;
                f.min = fd->min;
                f.max = fd->max;
                f.step = fd->step;
                k.words += f.type == NF_FIELD_BYTES ? (fd->size + 3) / 4 : 1;
                if (f.type == NF_FIELD_ENUM) {
                    f.values = take(a, sizeof(char *) * fd->enum_count);
                    for (uint32_t v = 0; v < fd->enum_count; v++) {
                        char *str = take_str(a, fd->enum_values[v]);
                        if (f.values)
                            f.values[v] = str;
                    }
                }
                if (k.fields)
                    k.fields[j] = f;
            }
        }
        if (ks)
            ks[i] = k;
        if (s) {
            s->by_id[k.id] = (int16_t)i;
            if (k.words > s->stride)
                s->stride = k.words;
            if (k.nfields)
                s->has_fields = 1;
        }
    }
    if (s) {
        s->kinds = ks;
        s->nkinds = nk;
    }
}

int nf_schema_create(const nf_kind_def *kinds, uint32_t n, const nf_allocator *alloc, nf_schema **out)
{
    if (!out)
        return NF_ERR_ARGUMENT;
    *out = NULL;
    if (!kinds && n)
        return NF_ERR_ARGUMENT;
    int dflt = kinds == NULL;
    if (!dflt) {
        int err = nf_schema_check(kinds, n, NULL, 0);
        if (err)
            return err;
    }
    arena a = {0};
    take(&a, sizeof(nf_schema));
    layout(&a, NULL, kinds, n, dflt);
    a.cap = a.used;
    a.used = 0;
    a.p = nf_mem_alloc(alloc, a.cap);
    if (!a.p)
        return NF_ERR_NOMEM;
    memset(a.p, 0, a.cap);
    nf_schema *s = take(&a, sizeof(nf_schema));
    if (alloc) {
        s->alloc = *alloc;
        s->has_alloc = 1;
    }
    for (int i = 0; i < 256; i++)
        s->by_id[i] = -1;
    layout(&a, s, kinds, n, dflt);
    s->bytes = a.cap;
    int err = compute_hash(s);
    if (err) {
        nf_mem_free(alloc, s, a.cap);
        return err;
    }
    *out = s;
    return NF_OK;
}

void nf_schema_destroy(nf_schema *s)
{
    if (!s)
        return;
    nf_allocator a = s->alloc;
    nf_mem_free(s->has_alloc ? &a : NULL, s, s->bytes);
}

uint64_t nf_schema_hash(const nf_schema *s) { return s ? s->hash : 0; }

int nf_schema_kind_field_count(const nf_schema *s, uint8_t kind)
{
    const nf_kind *k = s ? nf_schema_kind(s, kind) : NULL;
    return k ? (int)k->nfields : NF_ERR_NOT_FOUND;
}

int nf_schema_field_index(const nf_schema *s, uint8_t kind, const char *name)
{
    const nf_kind *k = s ? nf_schema_kind(s, kind) : NULL;
    if (!k || !name)
        return NF_ERR_NOT_FOUND;
    for (uint32_t i = 0; i < k->nfields; i++)
        if (strcmp(k->fields[i].name, name) == 0)
            return (int)i;
    return NF_ERR_NOT_FOUND;
}

int nf_schema_field_words(const nf_schema *s, uint8_t kind)
{
    const nf_kind *k = s ? nf_schema_kind(s, kind) : NULL;
    return k ? (int)k->words : NF_ERR_NOT_FOUND;
}

const char *nf_schema_enum_name(const nf_schema *s, uint8_t kind, int field, uint32_t v)
{
    const nf_kind *k = s ? nf_schema_kind(s, kind) : NULL;
    if (!k || field < 0 || (uint32_t)field >= k->nfields)
        return NULL;
    const nf_field *f = &k->fields[field];
    if (f->type != NF_FIELD_ENUM || v >= f->limit)
        return NULL;
    return f->values[v];
}
