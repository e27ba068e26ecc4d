/* nfbot: several netfleet clients in one process, on the C library, for tests and load.
 *
 *   nfbot --host 127.0.0.1 --port 7777 --schema schema.json [--clients 3] [--token HEX]
 *         [--rate-class N]
 *
 * It loads the game's schema from its JSON form (`mygame --write-schema FILE`), connects
 * --clients connections, and services them every millisecond. It reads commands on standard
 * input, one a line:
 *
 *   dump          write every client's view: each live entity's quantized state and field words,
 *                 the client's counters, memory and input acknowledgement
 *   walk X Y      send the arena example game's walk input, to (X + 8 i, Y) for client i
 *   fire YAW      send the arena's fire input, toward YAW + 0.5 i radians
 *   quit          disconnect every client and exit (so does the end of standard input)
 *
 * and writes one JSON object per line to standard output: the schema's hash, each client's
 * connection, commands and close (code, name, meaning, reason), and the views. */
#include "netfleet.h"
#include "schema_json.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 64

typedef struct bot {
    nf_conn *conn;
    int up, closed;
    int last_seq;
} bot;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_f32(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void dump(bot *bots, int n)
{
    for (int i = 0; i < n; i++) {
        nf_client *c = nf_conn_client(bots[i].conn);
        nf_client_stats st;
        nf_client_stats_get(c, &st);
        uint16_t ack = 0;
        int has_ack = nf_client_input_ack(c, &ack);
        printf("{\"event\":\"view\",\"client\":%d,\"state\":%d,\"lastCommand\":%d,\"inputAck\":%d,"
               "\"packets\":%" PRIu64 ",\"malformed\":%" PRIu64 ",\"unapplied\":%" PRIu64 ",\"memory\":%zu,"
               "\"entities\":[",
               i, (int)nf_conn_get_state(bots[i].conn), bots[i].last_seq, has_ack ? (int)ack : -1, st.packets,
               st.malformed, st.records_unapplied, nf_client_memory(c));
        uint32_t cursor = 0;
        nf_entity e;
        int first = 1;
        while (nf_client_entity_next(c, &cursor, &e)) {
            printf("%s{\"id\":%u,\"kind\":%u,\"pos\":[%d,%d,%d],\"rot\":%u,\"vel\":[%d,%d,%d],\"fields\":[",
                   first ? "" : ",", e.id, e.kind, e.t.pos[0], e.t.pos[1], e.t.pos[2], e.t.rot, e.t.vel[0],
                   e.t.vel[1], e.t.vel[2]);
            for (uint32_t w = 0; w < e.field_words; w++)
                printf("%s%u", w ? "," : "", e.fields[w]);
            printf("]}");
            first = 0;
        }
        printf("]}\n");
    }
    fflush(stdout);
}

/* command_all sends every connected client an arena input: a walk to (x + 8 i, y) for client
 * i, or a fire toward yaw x + 0.5 i; it reports each on standard output. */
static void command_all(bot *bots, int n, int kind, float x, float y)
{
    for (int i = 0; i < n; i++) {
        uint8_t cmd[9];
        size_t len;
        cmd[0] = (uint8_t)kind;
        if (kind == 1) {
            put_f32(cmd + 1, x + 8.0f * (float)i);
            put_f32(cmd + 5, y);
            len = 9;
        } else {
            put_f32(cmd + 1, x + 0.5f * (float)i);
            len = 5;
        }
        int rc = nf_conn_command(bots[i].conn, cmd, len, 1);
        if (rc >= 0)
            bots[i].last_seq = rc;
        printf("{\"event\":\"command\",\"client\":%d,\"seq\":%d}\n", i, rc);
    }
    fflush(stdout);
}

static int unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s);
    if (n % 2 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return (int)(n / 2);
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *schema_path = NULL, *token_hex = NULL;
    int port = 7777, nclients = 1;
    unsigned rate_class = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "nfbot: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--host") == 0)
            host = v;
        else if (strcmp(a, "--port") == 0)
            port = atoi(v);
        else if (strcmp(a, "--schema") == 0)
            schema_path = v;
        else if (strcmp(a, "--clients") == 0)
            nclients = atoi(v);
        else if (strcmp(a, "--token") == 0)
            token_hex = v;
        else if (strcmp(a, "--rate-class") == 0)
            rate_class = (unsigned)atoi(v);
        else {
            fprintf(stderr, "nfbot: unknown flag %s\n", a);
            return 2;
        }
    }
    if (!schema_path || nclients < 1 || nclients > MAX_CLIENTS || port <= 0 || port > 65535) {
        fprintf(stderr, "usage: nfbot --host H --port P --schema FILE [--clients 1..%d] [--token HEX] "
                        "[--rate-class 1|2|4]\n", MAX_CLIENTS);
        return 2;
    }
    char err[256];
    nf_schema *schema;
    if (schema_load(schema_path, &schema, err, sizeof err) != 0) {
        fprintf(stderr, "nfbot: %s\n", err);
        return 1;
    }
    printf("{\"event\":\"schema\",\"hash\":\"%016" PRIx64 "\"}\n", nf_schema_hash(schema));
    uint8_t token[255];
    int token_len = 0;
    if (token_hex && (token_len = unhex(token_hex, token, sizeof token)) <= 0) {
        fprintf(stderr, "nfbot: --token: 1 to 255 bytes in hex\n");
        return 2;
    }
    bot bots[MAX_CLIENTS];
    memset(bots, 0, sizeof bots);
    for (int i = 0; i < nclients; i++) {
        nf_conn_config cfg = {.schema = schema, .token = token_len ? token : NULL, .token_len = (size_t)token_len,
                              .rate_class = rate_class};
        int rc = nf_conn_create(&cfg, host, (uint16_t)port, &bots[i].conn);
        if (rc != NF_OK) {
            fprintf(stderr, "nfbot: connect: %s\n", nf_error_string(rc));
            return 1;
        }
        bots[i].last_seq = -1;
    }
    fflush(stdout);
    char line[256];
    size_t linelen = 0;
    int running = 1;
    while (running) {
        int64_t now = now_ms();
        for (int i = 0; i < nclients; i++) {
            bot *b = &bots[i];
            if (b->closed)
                continue;
            int rc = nf_conn_service(b->conn, 0, now);
            nf_conn_state st = nf_conn_get_state(b->conn);
            if (st == NF_CONN_CONNECTED && !b->up) {
                b->up = 1;
                printf("{\"event\":\"connected\",\"client\":%d}\n", i);
                fflush(stdout);
            }
            if (st == NF_CONN_CLOSED) {
                uint32_t code = nf_conn_close_code(b->conn);
                b->closed = 1;
                printf("{\"event\":\"closed\",\"client\":%d,\"code\":%u,\"name\":", i, code);
                json_string(nf_close_name(code));
                printf(",\"meaning\":");
                json_string(nf_close_meaning(code));
                printf(",\"reason\":");
                json_string(nf_conn_close_reason(b->conn));
                printf("}\n");
                fflush(stdout);
                continue;
            }
            if (rc < 0 && rc != NF_ERR_STATE) {
                fprintf(stderr, "nfbot: client %d: %s\n", i, nf_error_string(rc));
                return 1;
            }
        }
        struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
        int pr = poll(&pfd, 1, 1);
        if (pr > 0) {
            char ch;
            ssize_t r = read(STDIN_FILENO, &ch, 1);
            if (r <= 0) {
                running = 0;
            } else if (ch == '\n') {
                line[linelen] = 0;
                linelen = 0;
                float x, y;
                if (strcmp(line, "dump") == 0)
                    dump(bots, nclients);
                else if (sscanf(line, "walk %f %f", &x, &y) == 2)
                    command_all(bots, nclients, 1, x, y);
                else if (sscanf(line, "fire %f", &x) == 1)
                    command_all(bots, nclients, 2, x, 0);
                else if (strcmp(line, "quit") == 0)
                    running = 0;
            } else if (linelen + 1 < sizeof line) {
                line[linelen++] = ch;
            }
        } else if (pr < 0 && errno != EINTR) {
            running = 0;
        }
    }
    for (int i = 0; i < nclients; i++) {
        nf_conn_disconnect(bots[i].conn, 200);
        nf_conn_destroy(bots[i].conn);
    }
    nf_schema_destroy(schema);
    return 0;
}
