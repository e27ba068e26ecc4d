/*
 * netfleet.h: the netfleet game client library, in C99.
 *
 * It implements the client side of the netfleet wire protocol, version 1 (docs/protocol.md):
 * the schema and its hash, SNAPSHOT/RESET/CLOSE decoding, the per-entity history that deltas
 * are resolved against, the ACK window and NeedFull, PING, COMMAND and the input
 * acknowledgement, and close codes. It links the system libenet (1.3.x) for the transport.
 *
 * Layers, each usable on its own:
 *
 *   nf_schema      a game's schema, compiled from a table of kinds and fields registered at run
 *                  time. Immutable once created; one schema may serve many clients.
 *   nf_snapshot_*  a SNAPSHOT decoder that reads records one at a time, for tools and tests.
 *   nf_client      one connection's protocol state and view, with no I/O and no clock (the
 *                  caller passes the time): feed it every packet the server sends, and send what
 *                  it builds. For games that run their own transport.
 *   nf_conn        one ENet connection driving an nf_client: connect data, HELLO (with a connect
 *                  token), ACK after each batch of packets, PING every 250 ms, COMMANDs, and the
 *                  close code when the session ends.
 *
 * Conventions
 *
 *   - Every function that can fail returns an int: NF_OK (0) or a positive count on success,
 *     a negative nf_error on failure. nf_error_string() names each error.
 *   - Ownership: pointers passed in are borrowed for the duration of the call unless the
 *     function says otherwise; memory the library returns (views, strings) is owned by the
 *     object it came from and valid until that object is next mutated or destroyed.
 *   - Memory: objects are allocated through an nf_allocator (NULL: malloc/free). An nf_client
 *     allocates when it is created and when its entity table grows (a new entity id beyond the
 *     table's capacity); it never allocates to decode or apply a packet once its table holds the
 *     game's entities. libenet allocates its own packets (enet_initialize_with_callbacks sets
 *     its allocator, a process-wide choice the game makes).
 *   - There is no global state. Distinct objects may be used from different threads at the same
 *     time. One object must not be used from two threads at once: an nf_client or nf_conn is
 *     not thread-safe, and its const (read-only) functions may run concurrently only with one
 *     another, never with a call that mutates it. An nf_schema is immutable and may be shared by
 *     clients on any threads, read concurrently.
 *   - A malformed packet is counted (nf_client_stats) and dropped whole: nothing of it is
 *     applied. No input makes a decoder read outside the bytes it was given.
 */
#ifndef NETFLEET_H
#define NETFLEET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(NF_BUILD_SHARED)
#define NF_API __declspec(dllexport)
#elif defined(_WIN32) && defined(NF_USE_SHARED)
#define NF_API __declspec(dllimport)
#elif defined(__GNUC__)
#define NF_API __attribute__((visibility("default")))
#else
#define NF_API
#endif

/* NF_PROTOCOL_VERSION is the wire protocol version the library speaks. */
#define NF_PROTOCOL_VERSION 1

/* ------------------------------------------------------------------ errors */

typedef enum nf_error {
    NF_OK = 0,
    NF_ERR_MALFORMED = -1,   /* a message that does not follow the protocol; dropped */
    NF_ERR_UNEXPECTED = -2,  /* a well-formed message a client never receives (ACK, PING, ...) */
    NF_ERR_ARGUMENT = -3,    /* a NULL pointer, a value out of range */
    NF_ERR_SCHEMA = -4,      /* a schema table the server would refuse (see nf_schema_create) */
    NF_ERR_NOMEM = -5,       /* the allocator returned NULL, or the entity table is full */
    NF_ERR_BUFFER = -6,      /* the output buffer is too small; nothing was written */
    NF_ERR_NOT_FOUND = -7,   /* no such entity, kind or field */
    NF_ERR_TYPE = -8,        /* the field is not of the type the accessor reads */
    NF_ERR_STATE = -9,       /* the call does not fit the object's state (not connected, ...) */
    NF_ERR_ENET = -10        /* libenet failed (host creation, connect, send) */
} nf_error;

/* nf_error_string returns a static, human-readable name of an nf_error value. */
NF_API const char *nf_error_string(int err);

/* ------------------------------------------------------------------ allocator */

/*
 * nf_allocator lets a game supply its own memory. alloc returns size bytes aligned for any
 * type, or NULL; free releases a block alloc returned (size is the size it was asked for).
 * Both are called with user. The allocator must outlive every object created with it.
 * Pass NULL wherever an allocator is taken for malloc and free.
 */
typedef struct nf_allocator {
    void *(*alloc)(void *user, size_t size);
    void (*free)(void *user, void *ptr, size_t size);
    void *user;
} nf_allocator;

/* ------------------------------------------------------------------ schema */

typedef enum nf_field_type {
    NF_FIELD_UINT = 1,  /* bits 1..32; an unsigned integer */
    NF_FIELD_INT = 2,   /* bits 1..32; two's complement */
    NF_FIELD_BOOL = 3,  /* one bit */
    NF_FIELD_ENUM = 4,  /* values 2..65536; the index of a declared value */
    NF_FIELD_FLOAT = 5, /* min, max, step: min + v * step */
    NF_FIELD_BYTES = 6  /* size 1..16 bytes */
} nf_field_type;

/* The transform parts of a kind (nf_kind_def.parts). */
#define NF_PART_POSITION 1u
#define NF_PART_ROTATION 2u
#define NF_PART_VELOCITY 4u
#define NF_PART_TRANSFORM 7u

/* nf_field_def declares one field. Only the members its type uses are read. */
typedef struct nf_field_def {
    const char *name;                /* UTF-8, non-empty, unique within its kind */
    nf_field_type type;
    uint32_t bits;                   /* UINT, INT: 1..32 */
    uint32_t enum_count;             /* ENUM: 2..65536 */
    const char *const *enum_values;  /* ENUM: enum_count UTF-8 names, in declaration order */
    double min, max, step;           /* FLOAT: finite, min < max, step > 0 */
    uint32_t size;                   /* BYTES: 1..16 */
} nf_field_def;

/* nf_kind_def declares one entity kind. */
typedef struct nf_kind_def {
    uint8_t id;                      /* 1..255, unique */
    uint8_t parts;                   /* NF_PART_* bits */
    const char *name;                /* UTF-8 */
    const nf_field_def *fields;      /* field_count fields, in declaration order */
    uint32_t field_count;            /* at most 32, at most 1024 bits of fields */
} nf_kind_def;

typedef struct nf_schema nf_schema;

/*
 * nf_schema_create compiles a schema from kind_count kinds (in declaration order) into
 * *out. kinds == NULL with kind_count == 0 is the schema of a game that declares none: kinds 1
 * to 255, each with the whole transform and no fields. The tables are copied: the caller may
 * free them once this returns.
 *
 * Errors: NF_ERR_ARGUMENT (out is NULL, kinds NULL with a count), NF_ERR_SCHEMA (a kind or
 * field the server would refuse: the same rules as docs/protocol.md; nf_schema_error, when
 * given a buffer, says which), NF_ERR_NOMEM. On error *out is NULL.
 */
NF_API int nf_schema_create(const nf_kind_def *kinds, uint32_t kind_count,
                            const nf_allocator *allocator, nf_schema **out);

/*
 * nf_schema_check validates a schema table as nf_schema_create does, writing a message naming
 * the kind and field into msg (at most cap bytes, NUL-terminated) when it is refused.
 * Returns NF_OK or NF_ERR_SCHEMA / NF_ERR_ARGUMENT.
 */
NF_API int nf_schema_check(const nf_kind_def *kinds, uint32_t kind_count, char *msg, size_t cap);

/* nf_schema_destroy frees a schema. Every client created with it must be destroyed first.
 * NULL is ignored. */
NF_API void nf_schema_destroy(nf_schema *schema);

/* nf_schema_hash is the schema's hash as its HELLO carries it (docs/protocol.md, "schemas and
 * their hash"). */
NF_API uint64_t nf_schema_hash(const nf_schema *schema);

/* nf_schema_kind_field_count returns how many fields kind has, or NF_ERR_NOT_FOUND. */
NF_API int nf_schema_kind_field_count(const nf_schema *schema, uint8_t kind);

/* nf_schema_field_index returns the index of kind's field called name, or NF_ERR_NOT_FOUND. */
NF_API int nf_schema_field_index(const nf_schema *schema, uint8_t kind, const char *name);

/* nf_schema_field_words returns how many 32-bit words a state of kind holds its fields in (one
 * per field, ceil(size/4) for a bytes field), or NF_ERR_NOT_FOUND. */
NF_API int nf_schema_field_words(const nf_schema *schema, uint8_t kind);

/* nf_schema_enum_name returns the name of value v of kind's enum field, owned by the schema,
 * or NULL if there is none. */
NF_API const char *nf_schema_enum_name(const nf_schema *schema, uint8_t kind, int field, uint32_t v);

/* ------------------------------------------------------------------ quantization */

/* nf_quantize_position / nf_quantize_velocity: meters (m/s) to units of 1/64, clamped. */
NF_API int32_t nf_quantize_position(float meters);
NF_API int32_t nf_quantize_velocity(float meters_per_second);
/* nf_dequantize: units of 1/64 back to meters (m/s). */
NF_API double nf_dequantize(int32_t units);
/* nf_rotation_pack: the quaternion (x, y, z, w) as smallest three. */
NF_API uint32_t nf_rotation_pack(double x, double y, double z, double w);
/* nf_rotation_unpack: a packed rotation to a unit quaternion, out[0..3] = x, y, z, w. */
NF_API void nf_rotation_unpack(uint32_t packed, double out[4]);

/* ------------------------------------------------------------------ states and records */

/* nf_transform is a quantized transform: position and velocity in units of 1/64 m (m/s), the
 * rotation packed. The parts a kind lacks are zero. */
typedef struct nf_transform {
    int32_t pos[3];
    uint32_t rot;
    int32_t vel[3];
} nf_transform;

/* Snapshot flags. */
#define NF_FLAG_LAST 1u
#define NF_FLAG_RESET 2u
#define NF_FLAG_INPUT_ACK 4u

typedef struct nf_snapshot_header {
    uint32_t tick;
    uint32_t server_time_ms;
    uint16_t seq;
    uint8_t flags;
    uint16_t input_seq;          /* with NF_FLAG_INPUT_ACK, else 0 */
} nf_snapshot_header;

typedef enum nf_op { NF_OP_SPAWN = 0, NF_OP_DELTA = 1, NF_OP_DESPAWN = 2 } nf_op;

/* Delta change bits (nf_record.changed). */
#define NF_DELTA_POS 1u       /* delta_pos holds three axis differences */
#define NF_DELTA_ROT_FULL 2u  /* delta_rot_full is the new packed rotation */
#define NF_DELTA_ROT_DIFF 4u  /* delta_rot holds three component differences */
#define NF_DELTA_VEL 8u       /* delta_vel holds three axis differences */

/* NF_MAX_FIELD_WORDS bounds the field words of any kind (32 fields, 1024 bits). */
#define NF_MAX_FIELD_WORDS 64

/* nf_record is one decoded entity record. */
typedef struct nf_record {
    nf_op op;
    uint16_t id;
    uint8_t kind;                        /* spawn */
    nf_transform state;                  /* spawn: the full transform */
    uint32_t fields[NF_MAX_FIELD_WORDS]; /* spawn: the kind's field words */
    uint32_t baseline_tick;              /* delta: the tick of the state it applies to */
    uint32_t changed;                    /* delta: NF_DELTA_* */
    int32_t delta_pos[3], delta_vel[3], delta_rot[3];
    uint32_t delta_rot_full;
    uint32_t fields_at;                  /* delta: bit offset of its fields section's mask */
    uint32_t fields_bits;                /* delta: the section's length; 0: no field changed */
} nf_record;

/* nf_snapshot_reader reads one SNAPSHOT's records. Its members are private. */
typedef struct nf_snapshot_reader {
    const uint8_t *data;
    size_t len;
    size_t pos;            /* bit position */
    const nf_schema *schema;
    int done;
} nf_snapshot_reader;

/*
 * nf_snapshot_begin reads a SNAPSHOT's header into *h and readies r for its records.
 * data (len bytes) and schema are borrowed until the last nf_snapshot_next.
 * Errors: NF_ERR_MALFORMED (not a SNAPSHOT, short, bad flags), NF_ERR_ARGUMENT.
 */
NF_API int nf_snapshot_begin(nf_snapshot_reader *r, const nf_schema *schema,
                             const uint8_t *data, size_t len, nf_snapshot_header *h);

/*
 * nf_snapshot_next reads the next record into *rec: returns 1 with a record, 0 at the end op
 * (after checking the padding and that no byte follows), NF_ERR_MALFORMED otherwise. A packet
 * is well-formed only if nf_snapshot_next reached 0: check that before applying any record.
 */
NF_API int nf_snapshot_next(nf_snapshot_reader *r, nf_record *rec);

/*
 * nf_delta_apply resolves delta record rec (of a packet data, len bytes, read with schema)
 * against a baseline of kind: base and base_fields (nf_schema_field_words words) in, the state
 * it gives in *out and out_fields. changed_mask, if not NULL, receives the bit of each field
 * whose mask bit was set (field 0 is bit 0).
 * Returns NF_OK, or NF_ERR_MALFORMED if it cannot be applied (a value out of its range, a
 * fields section that does not fit the kind): then the client asks for full state.
 */
NF_API int nf_delta_apply(const nf_schema *schema, const uint8_t *data, size_t len,
                          const nf_record *rec, uint8_t kind, const nf_transform *base,
                          const uint32_t *base_fields, nf_transform *out, uint32_t *out_fields,
                          uint32_t *changed_mask);

/* ------------------------------------------------------------------ other messages */

/* Message types (the low nibble of the type byte). */
typedef enum nf_msg_type {
    NF_MSG_SNAPSHOT = 1,
    NF_MSG_RESET = 2,
    NF_MSG_ACK = 3,
    NF_MSG_PING = 4,
    NF_MSG_COMMAND = 5,
    NF_MSG_HELLO = 6,
    NF_MSG_CLOSE = 7
} nf_msg_type;

/* nf_message_type returns the type of a message (1..7) or NF_ERR_MALFORMED. */
NF_API int nf_message_type(const uint8_t *data, size_t len);

/* nf_decode_reset reads a RESET's tick. Errors: NF_ERR_MALFORMED. */
NF_API int nf_decode_reset(const uint8_t *data, size_t len, uint32_t *tick);

/* nf_decode_close reads a CLOSE: its code, and its reason (not NUL-terminated, pointing into
 * data, reason_len bytes, not validated as UTF-8). Errors: NF_ERR_MALFORMED. */
NF_API int nf_decode_close(const uint8_t *data, size_t len, uint32_t *code,
                           const uint8_t **reason, size_t *reason_len);

/* The largest messages a client builds. */
#define NF_MAX_HELLO_BYTES (10 + 255)
#define NF_MAX_ACK_BYTES (17 + 2 * 32)
#define NF_PING_BYTES 9
#define NF_MAX_COMMAND_PAYLOAD 255
#define NF_MAX_COMMAND_BYTES (8 + 255)
#define NF_MAX_NEED_FULL 32
#define NF_HISTORY_DEPTH 16

/* nf_encode_hello writes a HELLO: 9 bytes, then, with a token (token_len 1..255), its length
 * byte and the token. Returns the bytes written, NF_ERR_BUFFER or NF_ERR_ARGUMENT. */
NF_API int nf_encode_hello(uint64_t schema_hash, const uint8_t *token, size_t token_len,
                           uint8_t *buf, size_t cap);

/* nf_encode_ack writes an ACK: latest, the received bitmap (bit i: sequence latest - 1 - i), the
 * last applied tick, Resync, and count (0..32) NeedFull ids. Returns the bytes written,
 * NF_ERR_BUFFER or NF_ERR_ARGUMENT. nf_client_ack builds one from the client's state. */
NF_API int nf_encode_ack(uint16_t latest, uint64_t received, uint32_t last_applied_tick, int resync,
                         const uint16_t *need_full, size_t count, uint8_t *buf, size_t cap);

/* nf_encode_ping writes a PING (9 bytes). Returns 9, NF_ERR_BUFFER or NF_ERR_ARGUMENT. */
NF_API int nf_encode_ping(uint32_t client_time_ms, uint32_t last_applied_tick, uint8_t *buf, size_t cap);

/* nf_encode_command writes a COMMAND of payload (0..255 bytes). Returns the bytes written,
 * NF_ERR_BUFFER or NF_ERR_ARGUMENT. */
NF_API int nf_encode_command(uint16_t seq, uint32_t tick, const uint8_t *payload, size_t len,
                             uint8_t *buf, size_t cap);

/* ------------------------------------------------------------------ close codes */

#define NF_CLOSE_GOING_AWAY 1001
#define NF_CLOSE_ABUSE 1008
#define NF_CLOSE_GAME_ERROR 1011
#define NF_CLOSE_TRY_AGAIN 1013
#define NF_CLOSE_NO_PING 4001
#define NF_CLOSE_HANDSHAKE 4002
#define NF_CLOSE_REFUSED 4003
#define NF_CLOSE_SCHEMA 4004
#define NF_CLOSE_TOKEN_MISSING 4005
#define NF_CLOSE_TOKEN_INVALID 4006
#define NF_CLOSE_TOKEN_EXPIRED 4007
#define NF_CLOSE_TOKEN_WRONG_SERVER 4008
#define NF_CLOSE_TOKEN_WRONG_ALLOCATION 4009
#define NF_CLOSE_TOKEN_REPLAYED 4010

/* nf_close_name returns a close code's short name ("schema", "token expired", "game code" for
 * 4100..4999, "unknown"); nf_close_meaning what it means for the player. Both are static. */
NF_API const char *nf_close_name(uint32_t code);
NF_API const char *nf_close_meaning(uint32_t code);

/* nf_close_retry says whether reconnecting may succeed: 1 for 1001 and 1013 (with back-off) and
 * codes a new connect token can fix (4007, 4010), 0 for refusals the same request gets again. */
NF_API int nf_close_retry(uint32_t code);

/* ------------------------------------------------------------------ client state */

typedef struct nf_client nf_client;

typedef struct nf_client_config {
    /* The schema the client decodes with; borrowed, it must outlive the client. Required. */
    const nf_schema *schema;
    /* NULL: malloc/free. */
    const nf_allocator *allocator;
    /* Entities the table holds before it first grows (default 64), and at most (default and
     * limit 65536). A table of max_entities never allocates after creation. */
    uint32_t initial_entities;
    uint32_t max_entities;
} nf_client_config;

/* nf_client_stats are the client's counters. */
typedef struct nf_client_stats {
    uint64_t packets;            /* SNAPSHOT packets decoded */
    uint64_t bytes;              /* their bytes */
    uint64_t resets;             /* view resets performed (RESET or FlagReset) */
    uint64_t malformed;          /* messages that did not decode, dropped */
    uint64_t records_applied;
    uint64_t records_stale;      /* older than what the view holds */
    uint64_t records_unapplied;  /* deltas that could not be resolved; full state was asked for */
    uint64_t records_dropped;    /* spawns of new ids the full entity table could not take */
    int32_t last_age_ms;         /* receive time - server time of the last packet */
} nf_client_stats;

/* nf_entity is a view of one live entity: its newest state. fields points into the client
 * (field_words words) and is valid until the client is next mutated. */
typedef struct nf_entity {
    uint16_t id;
    uint8_t kind;
    uint32_t tick;               /* the tick of the state */
    nf_transform t;
    const uint32_t *fields;
    uint32_t field_words;
} nf_entity;

/* nf_client_create makes a client with an empty view. Errors: NF_ERR_ARGUMENT, NF_ERR_NOMEM. */
NF_API int nf_client_create(const nf_client_config *config, nf_client **out);

/* nf_client_destroy frees a client. NULL is ignored. */
NF_API void nf_client_destroy(nf_client *c);

/*
 * nf_client_handle applies a message from the server, received at now_unix_ms (for the packet's
 * age). Returns its type (NF_MSG_SNAPSHOT, NF_MSG_RESET, NF_MSG_CLOSE), or NF_ERR_MALFORMED /
 * NF_ERR_UNEXPECTED: the message was counted as malformed and nothing of it applied.
 * Allocates only when a spawn or a despawn names an id the table does not hold and the table
 * is full (it doubles, never past max_entities).
 */
NF_API int nf_client_handle(nf_client *c, const uint8_t *data, size_t len, int64_t now_unix_ms);

/* nf_client_hello writes the client's HELLO (with the token, if token_len > 0) to buf.
 * Returns the bytes written, NF_ERR_BUFFER or NF_ERR_ARGUMENT. */
NF_API int nf_client_hello(const nf_client *c, const uint8_t *token, size_t token_len,
                           uint8_t *buf, size_t cap);

/* nf_client_ack_due is 1 when packets arrived or NeedFull grew since the last ACK. */
NF_API int nf_client_ack_due(const nf_client *c);

/* nf_client_ack writes an ACK of every packet received to buf and clears ack_due. Returns the
 * bytes written, 0 before the first SNAPSHOT (no ACK is sent then), or NF_ERR_BUFFER. */
NF_API int nf_client_ack(nf_client *c, uint8_t *buf, size_t cap);

/* nf_client_ping_due is 1 when a PING is due at now_unix_ms: none sent yet, or 250 ms since. */
NF_API int nf_client_ping_due(const nf_client *c, int64_t now_unix_ms);

/* nf_client_ping writes a PING stamped now_unix_ms. Returns 9 or NF_ERR_BUFFER. */
NF_API int nf_client_ping(nf_client *c, int64_t now_unix_ms, uint8_t *buf, size_t cap);

/* nf_client_command writes a COMMAND carrying payload (0..255 bytes), numbered after the
 * previous one (its sequence in *seq, if not NULL) and stamped with the last applied tick.
 * Returns the bytes written, NF_ERR_ARGUMENT (payload too long) or NF_ERR_BUFFER; the
 * sequence advances only on success. */
NF_API int nf_client_command(nf_client *c, const uint8_t *payload, size_t len, uint8_t *buf,
                             size_t cap, uint16_t *seq);

/* nf_client_input_ack: the sequence of the newest COMMAND the game has applied, as the newest
 * packet that said so reports. Returns 1 with *seq set, 0 before any packet did. */
NF_API int nf_client_input_ack(const nf_client *c, uint16_t *seq);

/* nf_client_last_applied_tick: the newest tick the client applied a SNAPSHOT packet of. */
NF_API uint32_t nf_client_last_applied_tick(const nf_client *c);

/* nf_client_closed: the CLOSE the server sent, if any: returns 1 with *code and the reason
 * (owned by the client, NUL-terminated, invalid UTF-8 bytes kept as they came), else 0. */
NF_API int nf_client_closed(const nf_client *c, uint32_t *code, const char **reason);

/* nf_client_stats_get copies the counters into *out. */
NF_API void nf_client_stats_get(const nf_client *c, nf_client_stats *out);

/* nf_client_need_full: how many ids NeedFull holds, and whether Resync is set (*resync). */
NF_API int nf_client_need_full(const nf_client *c, int *resync);

/* nf_client_entity_count: live entities in the view. */
NF_API uint32_t nf_client_entity_count(const nf_client *c);

/* nf_client_entity fills *out with live entity id. Returns NF_OK or NF_ERR_NOT_FOUND. */
NF_API int nf_client_entity(const nf_client *c, uint16_t id, nf_entity *out);

/* nf_client_entity_next iterates the live entities: start with *cursor = 0; returns 1 with
 * *out filled, 0 at the end. The order is the table's, not the ids'. */
NF_API int nf_client_entity_next(const nf_client *c, uint32_t *cursor, nf_entity *out);

/* nf_client_entity_history copies up to cap (tick, state) pairs of entity id's history, oldest
 * first, for interpolation; returns how many, or NF_ERR_NOT_FOUND. */
NF_API int nf_client_entity_history(const nf_client *c, uint16_t id, uint32_t *ticks,
                                    nf_transform *states, int cap);

/* nf_client_memory: bytes the client holds from its allocator. */
NF_API size_t nf_client_memory(const nf_client *c);

/* Typed field access on an entity view of client c (field: nf_schema_field_index).
 * Errors: NF_ERR_NOT_FOUND (no such field), NF_ERR_TYPE (the field is another type). */
NF_API int nf_entity_uint(const nf_client *c, const nf_entity *e, int field, uint32_t *v);
NF_API int nf_entity_int(const nf_client *c, const nf_entity *e, int field, int32_t *v);
NF_API int nf_entity_bool(const nf_client *c, const nf_entity *e, int field, int *v);
/* nf_entity_enum gives the value's index and, if name is not NULL, its name (the schema's). */
NF_API int nf_entity_enum(const nf_client *c, const nf_entity *e, int field, uint32_t *index,
                          const char **name);
NF_API int nf_entity_float(const nf_client *c, const nf_entity *e, int field, double *v);
/* nf_entity_bytes copies the field's bytes (at most cap) and returns its size. */
NF_API int nf_entity_bytes(const nf_client *c, const nf_entity *e, int field, uint8_t *out,
                           size_t cap);

/* ------------------------------------------------------------------ ENet connection */

typedef struct nf_conn nf_conn;

typedef enum nf_conn_state {
    NF_CONN_CONNECTING = 1, /* the ENet connection is not up yet */
    NF_CONN_CONNECTED = 2,  /* HELLO sent; snapshots flow once the server accepts it */
    NF_CONN_CLOSED = 3      /* disconnected: nf_conn_close_code says why */
} nf_conn_state;

typedef struct nf_conn_config {
    const nf_schema *schema;        /* borrowed; must outlive the connection. Required. */
    const nf_allocator *allocator;  /* NULL: malloc/free */
    const uint8_t *token;           /* the matchmaker's connect token, copied; NULL: none */
    size_t token_len;               /* 0 or 1..255 */
    uint32_t rate_class;            /* 0: declare none; 1, 2 or 4: a snapshot every Nth tick */
    uint32_t connect_data;          /* the game's bits (0..23, 28..31); 24..27 must be 0 */
    uint32_t initial_entities;      /* as nf_client_config */
    uint32_t max_entities;
} nf_conn_config;

/* nf_conn_create makes a connection object (its own ENet host, 1 peer, 2 channels) and starts
 * connecting to host (an IPv4 address, or a name, resolved here and blocking) and port; the
 * connect data carries rate_class in bits 24..27 and connect_data's own bits. Errors: NF_ERR_ARGUMENT,
 * NF_ERR_NOMEM, NF_ERR_ENET (no host, the name does not resolve). */
NF_API int nf_conn_create(const nf_conn_config *config, const char *host, uint16_t port,
                          nf_conn **out);

/* nf_conn_destroy disconnects at once (no wait) and frees the connection. NULL is ignored. */
NF_API void nf_conn_destroy(nf_conn *c);

/*
 * nf_conn_service runs the connection: it waits up to timeout_ms for the first network event,
 * handles every event then pending (connect: send HELLO; receive: apply; disconnect: note the
 * close code), then sends an ACK if packets arrived and a PING if one is due. Call it at least
 * every frame, with now_unix_ms the wall clock. Returns the number of server messages handled,
 * or NF_ERR_STATE once closed, NF_ERR_ENET if libenet failed.
 */
NF_API int nf_conn_service(nf_conn *c, uint32_t timeout_ms, int64_t now_unix_ms);

/* nf_conn_command sends a COMMAND (reliable if reliable is not 0). Returns its sequence
 * (0..65535), NF_ERR_STATE (not connected), NF_ERR_ARGUMENT or NF_ERR_ENET. */
NF_API int nf_conn_command(nf_conn *c, const uint8_t *payload, size_t len, int reliable);

/* nf_conn_disconnect asks the server to end the session (1001) and waits up to timeout_ms for
 * it to acknowledge; the connection is closed afterwards. */
NF_API void nf_conn_disconnect(nf_conn *c, uint32_t timeout_ms);

/* nf_conn_get_state: where the connection is (NF_CONN_CLOSED for NULL). */
NF_API nf_conn_state nf_conn_get_state(const nf_conn *c);

/* nf_conn_close_code: the close code the server's disconnect carried (0 while not closed, or
 * when the connection attempt timed out or we disconnected); nf_conn_close_reason the CLOSE's
 * reason if one came (owned by the connection), else "". */
NF_API uint32_t nf_conn_close_code(const nf_conn *c);
NF_API const char *nf_conn_close_reason(const nf_conn *c);

/* nf_conn_client: the connection's protocol state and view, owned by the connection. */
NF_API nf_client *nf_conn_client(nf_conn *c);

/* nf_conn_rtt_ms: ENet's round-trip estimate of the connection, milliseconds. */
NF_API uint32_t nf_conn_rtt_ms(const nf_conn *c);

#ifdef __cplusplus
}
#endif

#endif /* NETFLEET_H */
