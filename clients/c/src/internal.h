/* Internal definitions shared by the library's sources; not installed. */
#ifndef NF_INTERNAL_H
#define NF_INTERNAL_H

#include "netfleet.h"

#include <string.h>

#define NF_TYPE_BYTE(t) ((uint8_t)((NF_PROTOCOL_VERSION << 4) | (t)))
#define NF_POS_MIN (-131072)
#define NF_POS_MAX 131071
#define NF_VEL_MIN (-8192)
#define NF_VEL_MAX 8191
#define NF_MAX_BASELINE_AGE 1024

/* ---- memory */

void *nf_mem_alloc(const nf_allocator *a, size_t size);
void nf_mem_free(const nf_allocator *a, void *p, size_t size);

/* ---- bits: LSB-first reading with a sticky error; never reads past len. */

typedef struct nf_bits {
    const uint8_t *data;
    size_t nbits;
    size_t pos;
    int err;
} nf_bits;

static inline void nf_bits_init(nf_bits *r, const uint8_t *data, size_t len, size_t pos)
{
    r->data = data;
    r->nbits = len * 8;
    r->pos = pos;
    r->err = 0;
}

static inline size_t nf_bits_left(const nf_bits *r) { return r->err ? 0 : r->nbits - r->pos; }

/* nf_bits_read reads n (0..32) bits; past the end it sets err and returns 0. */
static inline uint32_t nf_bits_read(nf_bits *r, unsigned n)
{
    if (r->err || n > r->nbits - r->pos) {
        r->err = 1;
        return 0;
    }
    uint64_t v = 0;
    size_t byte = r->pos >> 3;
    unsigned shift = (unsigned)(r->pos & 7);
    size_t need = (shift + n + 7) >> 3; /* bytes covering the field, at most 5 */
    for (size_t i = 0; i < need; i++)
        v |= (uint64_t)r->data[byte + i] << (8 * i);
    r->pos += n;
    v >>= shift;
    return n == 32 ? (uint32_t)v : (uint32_t)(v & ((UINT64_C(1) << n) - 1));
}

static inline int nf_bits_bit(nf_bits *r) { return (int)nf_bits_read(r, 1); }

/* nf_bits_finish checks that the message ends here: zero padding to the byte, nothing after. */
static inline int nf_bits_finish(nf_bits *r)
{
    if (r->err)
        return 0;
    size_t end = (r->pos + 7) & ~(size_t)7;
    if (end != r->nbits)
        return 0;
    if (r->pos & 7) {
        uint8_t last = r->data[(r->pos >> 3)];
        if (last >> (r->pos & 7))
            return 0;
    }
    return 1;
}

static inline uint32_t nf_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void nf_wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void nf_wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void nf_wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline int32_t nf_unzigzag(uint32_t u) { return (int32_t)(u >> 1) ^ -(int32_t)(u & 1); }

/* ---- schema */

typedef struct nf_field {
    char *name;
    uint8_t type;
    uint8_t width;        /* bits on the wire, 1..128 */
    uint16_t word;        /* first word of the field in a state's field words */
    uint32_t bits;        /* uint, int */
    uint32_t limit;       /* enum: value count; float: S; else 0 (any value fits) */
    uint32_t size;        /* bytes */
    double min, max, step;
    char **values;        /* enum */
} nf_field;

typedef struct nf_kind {
    uint8_t id;
    uint8_t parts;
    char *name;
    uint32_t nfields;
    uint32_t words;       /* field words of a state */
    nf_field *fields;
} nf_kind;

struct nf_schema {
    nf_allocator alloc;
    int has_alloc;
    uint32_t nkinds;
    nf_kind *kinds;       /* declaration order */
    int16_t by_id[256];   /* index into kinds, or -1 */
    uint32_t stride;      /* the most field words of any kind */
    int has_fields;
    uint64_t hash;
    size_t bytes;         /* allocated */
};

static inline const nf_kind *nf_schema_kind(const nf_schema *s, uint8_t id)
{
    int16_t i = s->by_id[id];
    return i < 0 ? NULL : &s->kinds[i];
}

/* nf_field_read reads field f at its width into words (its slots from f->word). */
void nf_field_read(nf_bits *r, const nf_field *f, uint32_t *words);

/* ---- sha256 */

void nf_sha256(const uint8_t *data, size_t len, uint8_t out[32]);

#endif
