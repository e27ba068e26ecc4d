#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *p;
    char *err;
    size_t errcap;
    json *nodes;
    size_t nnodes, capnodes;
    char *strs;
    size_t nstrs, capstrs;
    int failed;
} parser;

/* Nodes and strings live in two blocks sized from the text; node i and string offsets are kept
 * as indexes until the end, when they become pointers. */

static void fail(parser *ps, const char *msg)
{
    if (!ps->failed && ps->err && ps->errcap)
        snprintf(ps->err, ps->errcap, "json: %s near \"%.20s\"", msg, ps->p);
    ps->failed = 1;
}

static void ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static size_t new_node(parser *ps)
{
    if (ps->nnodes == ps->capnodes) {
        fail(ps, "too many values");
        return 0;
    }
    memset(&ps->nodes[ps->nnodes], 0, sizeof(json));
    return ps->nnodes++;
}

static void put_char(parser *ps, char c)
{
    if (ps->nstrs < ps->capstrs)
        ps->strs[ps->nstrs++] = c;
    else
        fail(ps, "string space");
}

static void put_utf8(parser *ps, unsigned long cp)
{
    if (cp < 0x80) {
        put_char(ps, (char)cp);
    } else if (cp < 0x800) {
        put_char(ps, (char)(0xC0 | cp >> 6));
        put_char(ps, (char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        put_char(ps, (char)(0xE0 | cp >> 12));
        put_char(ps, (char)(0x80 | (cp >> 6 & 0x3F)));
        put_char(ps, (char)(0x80 | (cp & 0x3F)));
    } else {
        put_char(ps, (char)(0xF0 | cp >> 18));
        put_char(ps, (char)(0x80 | (cp >> 12 & 0x3F)));
        put_char(ps, (char)(0x80 | (cp >> 6 & 0x3F)));
        put_char(ps, (char)(0x80 | (cp & 0x3F)));
    }
}

/* parse_string returns the offset of the unescaped string in strs. */
static size_t parse_string(parser *ps, size_t *len)
{
    size_t at = ps->nstrs;
    if (*ps->p != '"') {
        fail(ps, "expected a string");
        return 0;
    }
    ps->p++;
    while (*ps->p && *ps->p != '"' && !ps->failed) {
        char c = *ps->p++;
        if (c != '\\') {
            put_char(ps, c);
            continue;
        }
        c = *ps->p++;
        switch (c) {
        case '"': put_char(ps, '"'); break;
        case '\\': put_char(ps, '\\'); break;
        case '/': put_char(ps, '/'); break;
        case 'b': put_char(ps, '\b'); break;
        case 'f': put_char(ps, '\f'); break;
        case 'n': put_char(ps, '\n'); break;
        case 'r': put_char(ps, '\r'); break;
        case 't': put_char(ps, '\t'); break;
        case 'u': {
            char hex[5] = {0};
            for (int i = 0; i < 4; i++) {
                if (!ps->p[i]) {
                    fail(ps, "short \\u escape");
                    return 0;
                }
                hex[i] = ps->p[i];
            }
            ps->p += 4;
            put_utf8(ps, strtoul(hex, NULL, 16));
            break;
        }
        default:
            fail(ps, "bad escape");
            return 0;
        }
    }
    if (*ps->p != '"') {
        fail(ps, "unterminated string");
        return 0;
    }
    ps->p++;
    *len = ps->nstrs - at;
    put_char(ps, 0);
    return at;
}

static size_t parse_value(parser *ps, int depth);

static size_t parse_value(parser *ps, int depth)
{
    ws(ps);
    if (depth > 64) {
        fail(ps, "nested too deep");
        return 0;
    }
    size_t n = new_node(ps);
    if (ps->failed)
        return 0;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        int obj = c == '{';
        ps->nodes[n].type = obj ? JSON_OBJECT : JSON_ARRAY;
        ps->p++;
        ws(ps);
        size_t prev = 0;
        int first = 1;
        if (*ps->p == (obj ? '}' : ']')) {
            ps->p++;
            return n;
        }
        for (;;) {
            size_t key = 0, klen;
            if (obj) {
                ws(ps);
                key = parse_string(ps, &klen) + 1; /* +1: 0 is "no key" */
                ws(ps);
                if (*ps->p != ':')
                    fail(ps, "expected ':'");
                ps->p++;
            }
            size_t v = parse_value(ps, depth + 1);
            if (ps->failed)
                return 0;
            ps->nodes[v].key = (char *)key;
            if (first)
                ps->nodes[n].child = (json *)(v + 1);
            else
                ps->nodes[prev].next = (json *)(v + 1);
            first = 0;
            prev = v;
            ps->nodes[n].len++;
            ws(ps);
            if (*ps->p == ',') {
                ps->p++;
                continue;
            }
            if (*ps->p == (obj ? '}' : ']')) {
                ps->p++;
                return n;
            }
            fail(ps, "expected ',' or a closing bracket");
            return 0;
        }
    }
    if (c == '"') {
        size_t len;
        ps->nodes[n].type = JSON_STRING;
        ps->nodes[n].string = (char *)(parse_string(ps, &len) + 1);
        ps->nodes[n].len = len;
        return n;
    }
    if (strncmp(ps->p, "true", 4) == 0 || strncmp(ps->p, "false", 5) == 0) {
        ps->nodes[n].type = JSON_BOOL;
        ps->nodes[n].number = c == 't';
        ps->p += c == 't' ? 4 : 5;
        return n;
    }
    if (strncmp(ps->p, "null", 4) == 0) {
        ps->p += 4;
        return n;
    }
    char *end;
    ps->nodes[n].type = JSON_NUMBER;
    ps->nodes[n].number = strtod(ps->p, &end);
    if (end == ps->p)
        fail(ps, "unexpected character");
    ps->p = end;
    return n;
}

json *json_parse(const char *text, char *err, size_t errcap)
{
    parser ps;
    memset(&ps, 0, sizeof ps);
    size_t tlen = strlen(text);
    ps.p = text;
    ps.err = err;
    ps.errcap = errcap;
    ps.capnodes = tlen + 2;
    ps.capstrs = tlen + 2;
    /* One block: the nodes, then the strings. Node 0 is the root. */
    char *block = malloc(sizeof(json) * ps.capnodes + ps.capstrs);
    if (!block) {
        fail(&ps, "out of memory");
        return NULL;
    }
    ps.nodes = (json *)block;
    ps.strs = block + sizeof(json) * ps.capnodes;
    parse_value(&ps, 0);
    ws(&ps);
    if (!ps.failed && *ps.p)
        fail(&ps, "text after the document");
    if (ps.failed) {
        free(block);
        return NULL;
    }
    for (size_t i = 0; i < ps.nnodes; i++) {
        json *j = &ps.nodes[i];
        j->child = j->child ? &ps.nodes[(size_t)j->child - 1] : NULL;
        j->next = j->next ? &ps.nodes[(size_t)j->next - 1] : NULL;
        j->key = j->key ? ps.strs + ((size_t)j->key - 1) : NULL;
        j->string = j->string ? ps.strs + ((size_t)j->string - 1) : NULL;
    }
    return ps.nodes;
}

json *json_parse_file(const char *path, char *err, size_t errcap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "open %s failed", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(text);
        snprintf(err, errcap, "read %s failed", path);
        return NULL;
    }
    fclose(f);
    text[n] = 0;
    json *j = json_parse(text, err, errcap);
    free(text);
    return j;
}

void json_free(json *root) { free(root); }

const json *json_get(const json *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    for (const json *c = obj->child; c; c = c->next)
        if (strcmp(c->key, key) == 0)
            return c;
    return NULL;
}

const json *json_at(const json *arr, size_t i)
{
    if (!arr || (arr->type != JSON_ARRAY && arr->type != JSON_OBJECT))
        return NULL;
    const json *c = arr->child;
    while (c && i--)
        c = c->next;
    return c;
}
