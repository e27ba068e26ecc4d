#include "schema_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *err, size_t cap, const char *what, const char *name)
{
    snprintf(err, cap, "schema: %s%s%s", what, name ? " " : "", name ? name : "");
    return -1;
}

static unsigned width_of(const nf_field_def *f)
{
    unsigned n = 0;
    uint64_t v;
    switch (f->type) {
    case NF_FIELD_UINT:
    case NF_FIELD_INT: return f->bits;
    case NF_FIELD_BOOL: return 1;
    case NF_FIELD_ENUM: v = f->enum_count - 1; break;
    case NF_FIELD_FLOAT: {
        double s = (f->max - f->min) / f->step;
        s = s >= 0 ? floor(s) + (s - floor(s) >= 0.5) : 0;
        v = (uint64_t)s;
        break;
    }
    case NF_FIELD_BYTES: return 8 * f->size;
    default: return 0;
    }
    while (v) {
        n++;
        v >>= 1;
    }
    return n;
}

int schema_table_from_json(const json *schema, schema_table *t, char *err, size_t cap)
{
    memset(t, 0, sizeof *t);
    const json *kinds = json_get(schema, "kinds");
    if (!kinds || kinds->type != JSON_ARRAY)
        return bad(err, cap, "no kinds array", NULL);
    size_t nfields = 0, nvalues = 0;
    for (const json *k = kinds->child; k; k = k->next) {
        const json *fs = json_get(k, "fields");
        for (const json *f = fs ? fs->child : NULL; f; f = f->next) {
            nfields++;
            const json *vs = json_get(f, "values");
            nvalues += vs ? vs->len : 0;
        }
    }
    t->kinds = calloc(kinds->len + 1, sizeof(nf_kind_def));
    t->fields = calloc(nfields + 1, sizeof(nf_field_def));
    t->values = calloc(nvalues + 1, sizeof(char *));
    if (!t->kinds || !t->fields || !t->values) {
        schema_table_free(t);
        return bad(err, cap, "out of memory", NULL);
    }
    size_t fi = 0, vi = 0;
    for (const json *k = kinds->child; k; k = k->next) {
        nf_kind_def *kd = &t->kinds[t->nkinds++];
        const json *id = json_get(k, "id"), *name = json_get(k, "name"), *parts = json_get(k, "parts");
        if (!id || id->type != JSON_NUMBER || !name || name->type != JSON_STRING)
            return schema_table_free(t), bad(err, cap, "a kind needs an id and a name", NULL);
        kd->id = (uint8_t)id->number;
        kd->name = name->string;
        for (const json *p = parts ? parts->child : NULL; p; p = p->next) {
            if (p->type != JSON_STRING)
                return schema_table_free(t), bad(err, cap, "parts of kind", kd->name);
            if (strcmp(p->string, "position") == 0)
                kd->parts |= NF_PART_POSITION;
            else if (strcmp(p->string, "rotation") == 0)
                kd->parts |= NF_PART_ROTATION;
            else if (strcmp(p->string, "velocity") == 0)
                kd->parts |= NF_PART_VELOCITY;
            else
                return schema_table_free(t), bad(err, cap, "unknown part in kind", kd->name);
        }
        kd->fields = &t->fields[fi];
        const json *fs = json_get(k, "fields");
        for (const json *f = fs ? fs->child : NULL; f; f = f->next) {
            nf_field_def *fd = &t->fields[fi++];
            kd->field_count++;
            const json *fname = json_get(f, "name"), *type = json_get(f, "type");
            if (!fname || fname->type != JSON_STRING || !type || type->type != JSON_STRING)
                return schema_table_free(t), bad(err, cap, "a field needs a name and a type in kind", kd->name);
            fd->name = fname->string;
            const char *ty = type->string;
            const json *v;
            if (strcmp(ty, "uint") == 0 || strcmp(ty, "int") == 0) {
                fd->type = ty[0] == 'u' ? NF_FIELD_UINT : NF_FIELD_INT;
                fd->bits = (v = json_get(f, "bits")) ? (uint32_t)v->number : 0;
            } else if (strcmp(ty, "bool") == 0) {
                fd->type = NF_FIELD_BOOL;
            } else if (strcmp(ty, "enum") == 0) {
                fd->type = NF_FIELD_ENUM;
                const json *vs = json_get(f, "values");
                fd->enum_values = &t->values[vi];
                for (const json *e = vs ? vs->child : NULL; e; e = e->next) {
                    if (e->type != JSON_STRING)
                        return schema_table_free(t), bad(err, cap, "an enum value is not a string in field", fd->name);
                    t->values[vi++] = e->string;
                    fd->enum_count++;
                }
            } else if (strcmp(ty, "float") == 0) {
                fd->type = NF_FIELD_FLOAT;
                fd->min = (v = json_get(f, "min")) ? v->number : 0;
                fd->max = (v = json_get(f, "max")) ? v->number : 0;
                fd->step = (v = json_get(f, "step")) ? v->number : 0;
            } else if (strcmp(ty, "bytes") == 0) {
                fd->type = NF_FIELD_BYTES;
                fd->size = (v = json_get(f, "size")) ? (uint32_t)v->number : 0;
            } else {
                return schema_table_free(t), bad(err, cap, "unknown type of field", fd->name);
            }
            const json *w = json_get(f, "width");
            if (w && (unsigned)w->number != width_of(fd))
                return schema_table_free(t), bad(err, cap, "width does not match the declaration of field", fd->name);
        }
    }
    char msg[256];
    if (nf_schema_check(t->kinds, t->nkinds, msg, sizeof msg) != NF_OK) {
        schema_table_free(t);
        return bad(err, cap, msg, NULL);
    }
    return 0;
}

void schema_table_free(schema_table *t)
{
    free(t->kinds);
    free(t->fields);
    free(t->values);
    memset(t, 0, sizeof *t);
}

int schema_load(const char *path, nf_schema **out, char *err, size_t cap)
{
    json *doc = json_parse_file(path, err, cap);
    if (!doc)
        return -1;
    schema_table t;
    if (schema_table_from_json(doc, &t, err, cap) != 0) {
        json_free(doc);
        return -1;
    }
    int rc = nf_schema_create(t.kinds, t.nkinds, NULL, out);
    schema_table_free(&t);
    json_free(doc);
    if (rc != NF_OK) {
        snprintf(err, cap, "schema: %s", nf_error_string(rc));
        return -1;
    }
    return 0;
}
