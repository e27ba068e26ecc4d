/* Loading a game's schema from its JSON form (docs/protocol.md, "the schema's JSON form",
 * written by `mygame --write-schema FILE`) into the table nf_schema_create takes. */
#ifndef NF_TOOLS_SCHEMA_JSON_H
#define NF_TOOLS_SCHEMA_JSON_H

#include "json.h"
#include "netfleet.h"

/* schema_table owns a kind table and everything it points to (names point into the JSON
 * document, which must outlive the table). */
typedef struct schema_table {
    nf_kind_def *kinds;
    uint32_t nkinds;
    nf_field_def *fields;
    const char **values;
} schema_table;

/* schema_table_from_json fills t from a schema object; returns 0 or -1 with a message in err.
 * A field's "width", when present, must equal the width the declaration gives. */
int schema_table_from_json(const json *schema, schema_table *t, char *err, size_t errcap);
void schema_table_free(schema_table *t);

/* schema_load reads a schema JSON file and compiles it. Returns 0 or -1 with a message. */
int schema_load(const char *path, nf_schema **out, char *err, size_t errcap);

#endif
