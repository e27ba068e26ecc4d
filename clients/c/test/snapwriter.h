/* A SNAPSHOT writer for tests: the server's encoding of records (shortest codes), LSB first. */
#ifndef NF_TEST_SNAPWRITER_H
#define NF_TEST_SNAPWRITER_H

#include "netfleet.h"

#include <string.h>

typedef struct snapw {
    uint8_t buf[16384];
    size_t bits;
    uint32_t tick;
} snapw;

static void sw_put(snapw *w, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++, w->bits++) {
        if ((w->bits & 7) == 0)
            w->buf[w->bits >> 3] = 0;
        if (v >> i & 1)
            w->buf[w->bits >> 3] |= (uint8_t)(1u << (w->bits & 7));
    }
}

static void sw_begin(snapw *w, uint32_t tick, uint32_t server_ms, uint16_t seq, uint8_t flags, uint16_t input_seq)
{
    memset(w, 0, sizeof *w);
    w->tick = tick;
    sw_put(w, 0x11, 8);
    sw_put(w, tick, 32);
    sw_put(w, server_ms, 32);
    sw_put(w, seq, 16);
    sw_put(w, flags, 8);
    if (flags & NF_FLAG_INPUT_ACK)
        sw_put(w, input_seq, 16);
}

static void sw_id(snapw *w, uint16_t id)
{
    if (id < 4096) {
        sw_put(w, 0, 1);
        sw_put(w, id, 12);
    } else {
        sw_put(w, 1, 1);
        sw_put(w, id, 16);
    }
}

/* sw_spawn writes a spawn of a kind with the whole transform, then nfields field values of
 * the given widths. */
static void sw_spawn(snapw *w, uint16_t id, uint8_t kind, uint8_t parts, const nf_transform *t, const uint32_t *fields,
                     const unsigned *widths, int nfields)
{
    sw_put(w, 0, 2);
    sw_id(w, id);
    sw_put(w, kind, 8);
    if (parts & NF_PART_POSITION)
        for (int i = 0; i < 3; i++)
            sw_put(w, (uint32_t)(t->pos[i] + 131072), 18);
    if (parts & NF_PART_ROTATION)
        sw_put(w, t->rot, 32);
    if (parts & NF_PART_VELOCITY) {
        if (t->vel[0] || t->vel[1] || t->vel[2]) {
            sw_put(w, 1, 1);
            for (int i = 0; i < 3; i++)
                sw_put(w, (uint32_t)(t->vel[i] + 8192), 14);
        } else {
            sw_put(w, 0, 1);
        }
    }
    for (int i = 0; i < nfields; i++)
        sw_put(w, fields[i], widths[i]);
}

static uint32_t sw_zz(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }

/* sw_delta writes a delta of position x by dx from a baseline age ticks old; with has_fields, a
 * fields section setting field `field` (of nfields, widths) to value, or '0' when field < 0. */
static void sw_delta(snapw *w, uint16_t id, uint32_t age, int32_t dx, int has_fields, int field, uint32_t value,
                     const unsigned *widths, int nfields)
{
    sw_put(w, 1, 2);
    sw_id(w, id);
    if (age <= 16) {
        sw_put(w, 0, 1);
        sw_put(w, age - 1, 4);
    } else {
        sw_put(w, 1, 1);
        sw_put(w, age - 1, 10);
    }
    if (dx) {
        sw_put(w, 1, 1);
        sw_put(w, 0xF, 4); /* '1111' + u19 */
        sw_put(w, sw_zz(dx), 19);
        sw_put(w, 0, 1);
        sw_put(w, 0, 1);
    } else {
        sw_put(w, 0, 1);
    }
    sw_put(w, 0, 1); /* rotation */
    sw_put(w, 0, 1); /* velocity */
    if (!has_fields)
        return;
    if (field < 0) {
        sw_put(w, 0, 1);
        return;
    }
    unsigned len = (unsigned)nfields + widths[field];
    sw_put(w, 1, 1);
    if (len < 64) {
        sw_put(w, 0, 1);
        sw_put(w, len, 6);
    } else {
        sw_put(w, 1, 1);
        sw_put(w, len, 11);
    }
    sw_put(w, 1u << field, (unsigned)nfields);
    sw_put(w, value, widths[field]);
}

static void sw_despawn(snapw *w, uint16_t id)
{
    sw_put(w, 2, 2);
    sw_id(w, id);
}

static size_t sw_end(snapw *w)
{
    sw_put(w, 3, 2);
    return (w->bits + 7) / 8;
}

#endif
