/* The golden vectors' schema (gameserver/protocol/testdata/golden/vectors.json), as a table, so
 * that the fuzz targets decode the vectors' records and their mutations; fuzz_init checks its
 * hash against the file's. */
#ifndef NF_FUZZ_GOLDEN_SCHEMA_H
#define NF_FUZZ_GOLDEN_SCHEMA_H

#include "netfleet.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const g_teams[] = {"red", "blue", "green"};
static const char *const g_items[] = {"ammo", "health"};
static const nf_field_def g_player[] = {
    {.name = "health", .type = NF_FIELD_FLOAT, .min = 0, .max = 100, .step = 0.5},
    {.name = "ammo", .type = NF_FIELD_UINT, .bits = 8},
    {.name = "team", .type = NF_FIELD_ENUM, .enum_count = 3, .enum_values = g_teams},
    {.name = "crouched", .type = NF_FIELD_BOOL},
    {.name = "score", .type = NF_FIELD_INT, .bits = 16},
    {.name = "name", .type = NF_FIELD_BYTES, .size = 6},
};
static const nf_field_def g_pickup[] = {
    {.name = "item", .type = NF_FIELD_ENUM, .enum_count = 2, .enum_values = g_items},
    {.name = "taken", .type = NF_FIELD_BOOL},
};
static const nf_field_def g_scoreboard[] = {
    {.name = "red", .type = NF_FIELD_UINT, .bits = 12},
    {.name = "blue", .type = NF_FIELD_UINT, .bits = 12},
    {.name = "clock", .type = NF_FIELD_UINT, .bits = 20},
};
static const nf_kind_def g_kinds[] = {
    {.id = 1, .parts = NF_PART_TRANSFORM, .name = "player", .fields = g_player, .field_count = 6},
    {.id = 2, .parts = NF_PART_POSITION, .name = "pickup", .fields = g_pickup, .field_count = 2},
    {.id = 7, .parts = 0, .name = "scoreboard", .fields = g_scoreboard, .field_count = 3},
    {.id = 9, .parts = NF_PART_TRANSFORM, .name = "rock"},
};

static nf_schema *g_file_schema, *g_none_schema;

static void fuzz_schemas(void)
{
    if (g_file_schema)
        return;
    if (nf_schema_create(g_kinds, 4, NULL, &g_file_schema) != NF_OK ||
        nf_schema_create(NULL, 0, NULL, &g_none_schema) != NF_OK ||
        nf_schema_hash(g_file_schema) != UINT64_C(0xecbc3be3681aa323)) {
        fprintf(stderr, "fuzz: the golden schema does not compile to its hash\n");
        abort();
    }
}

#endif
