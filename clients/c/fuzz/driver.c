/* A standalone driver for libFuzzer-style targets (LLVMFuzzerTestOneInput), for compilers
 * without libFuzzer: it runs the target over every file of the corpus directories, then over
 * -runs=N inputs mutated from them (bit flips, byte changes, insertions, deletions, truncations,
 * splices, with a fixed seed, -seed=S to change it). Build the target and this file under
 * AddressSanitizer and UndefinedBehaviorSanitizer: any out-of-bounds read or undefined behaviour
 * stops the run with the sanitizer's report (and its stack), and a target's own abort() writes
 * the input that caused it to <prefix>crash-input (-artifact_prefix=, as libFuzzer's). Built with clang's -fsanitize=fuzzer instead, the same target needs no driver. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 4096
#define MAX_CORPUS 4096

static uint8_t *corpus[MAX_CORPUS];
static size_t corpus_len[MAX_CORPUS];
static size_t ncorpus;
static uint8_t current[MAX_INPUT];
static size_t current_len;
static uint64_t rng = 0x9E3779B97F4A7C15u;
static const char *artifact_prefix = "";

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void on_abort(int sig)
{
    (void)sig;
    char path[4096];
    snprintf(path, sizeof path, "%scrash-input", artifact_prefix);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(current, 1, current_len, f);
        fclose(f);
        fprintf(stderr, "fuzz driver: the failing input (%zu bytes) is in %s\n", current_len, path);
    }
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
}

static void run(const uint8_t *data, size_t n)
{
    memcpy(current, data, n);
    current_len = n;
    /* A copy of exactly n bytes on the heap, so that ASan sees a read past its end. */
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, data, n);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
}

static void load_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "fuzz driver: no corpus directory %s\n", path);
        exit(2);
    }
    struct dirent *e;
    while ((e = readdir(d)) && ncorpus < MAX_CORPUS) {
        if (e->d_name[0] == '.')
            continue;
        char file[4096];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        FILE *f = fopen(file, "rb");
        if (!f)
            continue;
        uint8_t *buf = malloc(MAX_INPUT);
        size_t n = fread(buf, 1, MAX_INPUT, f);
        fclose(f);
        corpus[ncorpus] = buf;
        corpus_len[ncorpus++] = n;
    }
    closedir(d);
}

static size_t mutate(uint8_t *buf, size_t n)
{
    int rounds = 1 + (int)(next_rand() % 4);
    for (int r = 0; r < rounds; r++) {
        switch (next_rand() % 7) {
        case 0: /* flip a bit */
            if (n)
                buf[next_rand() % n] ^= (uint8_t)(1u << (next_rand() % 8));
            break;
        case 1: /* a random byte */
            if (n)
                buf[next_rand() % n] = (uint8_t)next_rand();
            break;
        case 2: /* an interesting byte */
            if (n) {
                static const uint8_t v[] = {0, 1, 0x7f, 0x80, 0xff, 0x11, 0x12, 0x17};
                buf[next_rand() % n] = v[next_rand() % sizeof v];
            }
            break;
        case 3: /* insert a byte */
            if (n < MAX_INPUT) {
                size_t at = n ? next_rand() % (n + 1) : 0;
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = (uint8_t)next_rand();
                n++;
            }
            break;
        case 4: /* delete a byte */
            if (n) {
                size_t at = next_rand() % n;
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
            }
            break;
        case 5: /* truncate */
            if (n)
                n = next_rand() % n;
            break;
        case 6: { /* splice the tail of another input */
            size_t j = next_rand() % ncorpus;
            if (corpus_len[j] && n) {
                size_t at = next_rand() % n, from = next_rand() % corpus_len[j];
                size_t m = corpus_len[j] - from;
                if (at + m > MAX_INPUT)
                    m = MAX_INPUT - at;
                memcpy(buf + at, corpus[j] + from, m);
                n = at + m;
            }
            break;
        }
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    long runs = 10000;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-runs=", 6) == 0)
            runs = atol(argv[i] + 6);
        else if (strncmp(argv[i], "-artifact_prefix=", 17) == 0)
            artifact_prefix = argv[i] + 17;
        else if (strncmp(argv[i], "-seed=", 6) == 0)
            rng = strtoull(argv[i] + 6, NULL, 0) | 1;
        else
            load_dir(argv[i]);
    }
    signal(SIGABRT, on_abort);
    if (ncorpus == 0) {
        fprintf(stderr, "fuzz driver: an empty corpus\n");
        return 2;
    }
    for (size_t i = 0; i < ncorpus; i++)
        run(corpus[i], corpus_len[i]);
    uint8_t buf[MAX_INPUT];
    for (long r = 0; r < runs; r++) {
        size_t j = next_rand() % ncorpus;
        memcpy(buf, corpus[j], corpus_len[j]);
        size_t n = mutate(buf, corpus_len[j]);
        run(buf, n);
    }
    printf("fuzz driver %s: %zu corpus inputs, %ld mutated runs, no failure\n", argv[0], ncorpus, runs);
    for (size_t i = 0; i < ncorpus; i++)
        free(corpus[i]);
    return 0;
}
