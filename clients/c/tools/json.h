/* A small JSON reader for netfleet's C tools and tests (schema files, golden vectors). It parses
 * a whole document into a tree of nodes held in one malloc'd block per document. */
#ifndef NF_TOOLS_JSON_H
#define NF_TOOLS_JSON_H

#include <stddef.h>

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json {
    json_type type;
    double number;        /* NUMBER; BOOL: 0 or 1 */
    char *string;         /* STRING (NUL-terminated, unescaped); an OBJECT member's key in key */
    char *key;
    struct json *child;   /* ARRAY, OBJECT: the first element */
    struct json *next;    /* the next sibling */
    size_t len;           /* ARRAY, OBJECT: elements; STRING: bytes */
} json;

/* json_parse parses text; returns the root or NULL (with a message in err). Free with
 * json_free. */
json *json_parse(const char *text, char *err, size_t errcap);
json *json_parse_file(const char *path, char *err, size_t errcap);
void json_free(json *root);

/* json_get returns an object's member called key, or NULL. */
const json *json_get(const json *obj, const char *key);
/* json_at returns an array's element i, or NULL. */
const json *json_at(const json *arr, size_t i);

#endif
