/* SNAPSHOT decoding: the header, entity records one at a time, and resolving a delta against
 * its baseline (docs/protocol.md, "SNAPSHOT", "entity records", "fields"). */
#include "internal.h"

int nf_snapshot_begin(nf_snapshot_reader *r, const nf_schema *s, const uint8_t *data, size_t len,
                      nf_snapshot_header *h)
{
    if (!r || !s || !h)
        return NF_ERR_ARGUMENT;
    memset(r, 0, sizeof *r);
    memset(h, 0, sizeof *h);
    r->done = 1;
    if (nf_message_type(data, len) != NF_MSG_SNAPSHOT || len < 12)
        return NF_ERR_MALFORMED;
    h->tick = nf_rd32(data + 1);
    h->server_time_ms = nf_rd32(data + 5);
    h->seq = (uint16_t)(data[9] | data[10] << 8);
    h->flags = data[11];
    if (h->flags & ~(NF_FLAG_LAST | NF_FLAG_RESET | NF_FLAG_INPUT_ACK))
        return NF_ERR_MALFORMED;
    size_t at = 12;
    if (h->flags & NF_FLAG_INPUT_ACK) {
        if (len < 14)
            return NF_ERR_MALFORMED;
        h->input_seq = (uint16_t)(data[12] | data[13] << 8);
        at = 14;
    }
    r->data = data;
    r->len = len;
    r->pos = at * 8;
    r->schema = s;
    r->done = 0;
    return NF_OK;
}

void nf_field_read(nf_bits *r, const nf_field *f, uint32_t *words)
{
    if (f->type != NF_FIELD_BYTES) {
        words[f->word] = nf_bits_read(r, f->width);
        return;
    }
    /* Bytes in order, first byte first: little-endian words. */
    uint32_t nw = (f->size + 3) / 4;
    for (uint32_t w = 0; w < nw; w++)
        words[f->word + w] = 0;
    for (uint32_t b = 0; b < f->size; b++)
        words[f->word + b / 4] |= nf_bits_read(r, 8) << (8 * (b % 4));
}

/* field_valid: whether a non-bytes field's wire value is one of its values. */
static int field_valid(const nf_field *f, uint32_t v)
{
    return f->limit == 0 || (f->type == NF_FIELD_ENUM ? v < f->limit : v <= f->limit);
}

static int32_t read_code(nf_bits *r, const unsigned *widths, int n)
{
    /* n forms after the prefix read so far: '0' + widths[0], '10' + widths[1], ..., the last
     * one without its terminating 0. */
    for (int i = 0; i < n - 1; i++)
        if (!nf_bits_bit(r))
            return nf_unzigzag(nf_bits_read(r, widths[i]));
    return nf_unzigzag(nf_bits_read(r, widths[n - 1]));
}

static const unsigned pos_widths[] = {4, 8, 12, 19};
static const unsigned vel_widths[] = {4, 8, 15};
static const unsigned rot_widths[] = {3, 6, 11};

int nf_snapshot_next(nf_snapshot_reader *sr, nf_record *rec)
{
    if (!sr || !rec || sr->done)
        return NF_ERR_ARGUMENT;
    nf_bits r;
    nf_bits_init(&r, sr->data, sr->len, sr->pos);
    uint32_t op = nf_bits_read(&r, 2);
    if (r.err)
        goto malformed;
    if (op == 3) {
        sr->done = 1;
        return nf_bits_finish(&r) ? 0 : NF_ERR_MALFORMED;
    }
    rec->op = (nf_op)op;
    rec->id = (uint16_t)(nf_bits_bit(&r) ? nf_bits_read(&r, 16) : nf_bits_read(&r, 12));
    rec->changed = 0;
    rec->fields_bits = 0;
    rec->fields_at = 0;
    rec->baseline_tick = 0;
    rec->kind = 0;
    if (op == NF_OP_SPAWN) {
        uint8_t kid = (uint8_t)nf_bits_read(&r, 8);
        const nf_kind *k = nf_schema_kind(sr->schema, kid);
        if (r.err || !k)
            goto malformed;
        rec->kind = kid;
        memset(&rec->state, 0, sizeof rec->state);
        if (k->parts & NF_PART_POSITION)
            for (int i = 0; i < 3; i++)
                rec->state.pos[i] = (int32_t)nf_bits_read(&r, 18) + NF_POS_MIN;
        if (k->parts & NF_PART_ROTATION)
            rec->state.rot = nf_bits_read(&r, 32);
        if ((k->parts & NF_PART_VELOCITY) && nf_bits_bit(&r))
            for (int i = 0; i < 3; i++)
                rec->state.vel[i] = (int32_t)nf_bits_read(&r, 14) + NF_VEL_MIN;
        for (uint32_t i = 0; i < k->nfields; i++) {
            const nf_field *f = &k->fields[i];
            nf_field_read(&r, f, rec->fields);
            if (f->type != NF_FIELD_BYTES && !field_valid(f, rec->fields[f->word]))
                goto malformed;
        }
    } else if (op == NF_OP_DELTA) {
        uint32_t age = (nf_bits_bit(&r) ? nf_bits_read(&r, 10) : nf_bits_read(&r, 4)) + 1;
        /* tick is at bytes 1..4 of the header. */
        rec->baseline_tick = nf_rd32(sr->data + 1) - age;
        if (nf_bits_bit(&r)) {
            rec->changed |= NF_DELTA_POS;
            for (int i = 0; i < 3; i++)
                rec->delta_pos[i] = nf_bits_bit(&r) ? read_code(&r, pos_widths, 4) : 0;
        }
        if (nf_bits_bit(&r)) {
            if (nf_bits_bit(&r)) {
                rec->changed |= NF_DELTA_ROT_DIFF;
                for (int i = 0; i < 3; i++)
                    rec->delta_rot[i] = read_code(&r, rot_widths, 3);
            } else {
                rec->changed |= NF_DELTA_ROT_FULL;
                rec->delta_rot_full = nf_bits_read(&r, 32);
            }
        }
        if (nf_bits_bit(&r)) {
            rec->changed |= NF_DELTA_VEL;
            for (int i = 0; i < 3; i++)
                rec->delta_vel[i] = nf_bits_bit(&r) ? read_code(&r, vel_widths, 3) : 0;
        }
        if (sr->schema->has_fields && nf_bits_bit(&r)) {
            uint32_t n = nf_bits_bit(&r) ? nf_bits_read(&r, 11) : nf_bits_read(&r, 6);
            if (r.err || n == 0 || n > nf_bits_left(&r))
                goto malformed;
            rec->fields_at = (uint32_t)r.pos;
            rec->fields_bits = n;
            r.pos += n;
        }
    }
    if (r.err)
        goto malformed;
    sr->pos = r.pos;
    return 1;
malformed:
    sr->done = 1;
    return NF_ERR_MALFORMED;
}

int nf_delta_apply(const nf_schema *s, const uint8_t *data, size_t len, const nf_record *rec,
                   uint8_t kind, const nf_transform *base, const uint32_t *base_fields,
                   nf_transform *out, uint32_t *out_fields, uint32_t *changed_mask)
{
    if (!s || !rec || !base || !out || rec->op != NF_OP_DELTA)
        return NF_ERR_ARGUMENT;
    const nf_kind *k = nf_schema_kind(s, kind);
    if (!k)
        return NF_ERR_MALFORMED;
    nf_transform t = *base;
    /* A part the kind lacks is ignored: the server writes '0' for it. */
    if ((rec->changed & NF_DELTA_POS) && (k->parts & NF_PART_POSITION))
        for (int i = 0; i < 3; i++) {
            int64_t v = (int64_t)t.pos[i] + rec->delta_pos[i];
            if (v < NF_POS_MIN || v > NF_POS_MAX)
                return NF_ERR_MALFORMED;
            t.pos[i] = (int32_t)v;
        }
    if ((rec->changed & NF_DELTA_VEL) && (k->parts & NF_PART_VELOCITY))
        for (int i = 0; i < 3; i++) {
            int64_t v = (int64_t)t.vel[i] + rec->delta_vel[i];
            if (v < NF_VEL_MIN || v > NF_VEL_MAX)
                return NF_ERR_MALFORMED;
            t.vel[i] = (int32_t)v;
        }
    if (k->parts & NF_PART_ROTATION) {
        if (rec->changed & NF_DELTA_ROT_FULL) {
            t.rot = rec->delta_rot_full;
        } else if (rec->changed & NF_DELTA_ROT_DIFF) {
            uint32_t rot = t.rot & 0xC0000000u;
            for (int i = 0; i < 3; i++) {
                int shift = 20 - 10 * i;
                int32_t c = (int32_t)((t.rot >> shift) & 1023) + rec->delta_rot[i];
                if (c < 0 || c > 1023)
                    return NF_ERR_MALFORMED;
                rot |= (uint32_t)c << shift;
            }
            t.rot = rot;
        }
    }
    if (changed_mask)
        *changed_mask = 0;
    if (k->words && out_fields != base_fields) {
        if (!out_fields || !base_fields)
            return NF_ERR_ARGUMENT;
        memcpy(out_fields, base_fields, k->words * sizeof(uint32_t));
    }
    if (rec->fields_bits) {
        if (k->nfields == 0 || rec->fields_bits < k->nfields || !out_fields)
            return NF_ERR_MALFORMED;
        if ((size_t)rec->fields_at + rec->fields_bits > len * 8)
            return NF_ERR_MALFORMED;
        nf_bits r;
        nf_bits_init(&r, data, len, rec->fields_at);
        r.nbits = (size_t)rec->fields_at + rec->fields_bits; /* read within the section only */
        uint32_t mask = nf_bits_read(&r, k->nfields);
        uint32_t bits = k->nfields;
        if (mask == 0)
            return NF_ERR_MALFORMED;
        for (uint32_t i = 0; i < k->nfields; i++)
            if (mask >> i & 1)
                bits += k->fields[i].width;
        if (bits != rec->fields_bits)
            return NF_ERR_MALFORMED;
        uint32_t tmp[NF_MAX_FIELD_WORDS];
        memcpy(tmp, out_fields, k->words * sizeof(uint32_t));
        for (uint32_t i = 0; i < k->nfields; i++) {
            if (!(mask >> i & 1))
                continue;
            const nf_field *f = &k->fields[i];
            nf_field_read(&r, f, tmp);
            if (f->type != NF_FIELD_BYTES && !field_valid(f, tmp[f->word]))
                return NF_ERR_MALFORMED;
        }
        if (r.err)
            return NF_ERR_MALFORMED;
        memcpy(out_fields, tmp, k->words * sizeof(uint32_t));
        if (changed_mask)
            *changed_mask = mask;
    }
    *out = t;
    return NF_OK;
}
