/*
 * bench/client_common.h - what bench/client.c and bench/holding-client.c
 * share: their options, the clock, connecting, a response head's fields,
 * sorting what they measured.  Built with each of them (bench/run,
 * bench/max-queue-wait, bench/holding); not part of Serow.
 */
#ifndef BENCH_CLIENT_COMMON_H
#define BENCH_CLIENT_COMMON_H

#include <stddef.h>
#include <stdint.h>

enum bench_option_type { BENCH_INT, BENCH_LONG, BENCH_DOUBLE, BENCH_STRING, BENCH_FLAG };

/* One --NAME: where its value goes (a flag takes none and is set to 1). */
struct bench_option {
    const char *name;
    enum bench_option_type type;
    void *to;
};

/* Reads argv[first..argc) as options of the table, which ends with a NULL
 * name.  0, or -1 after saying on stderr what was wrong (as program). */
int bench_options(const char *program, int argc, char **argv, int first, const struct bench_option *options);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* perror(what), and the exit status 2. */
void bench_die(const char *what);

/* A non-blocking TCP connection to host:port begun, TCP_NODELAY (a request
 * goes at once); its descriptor, or -1. */
int bench_connect(const char *host, int port);

/* A field's value in a response head (case-insensitive name, the white space
 * before the value skipped), its length in *vlen; NULL when there is none. */
const char *bench_field(const char *head, size_t head_len, const char *name, size_t *vlen);

/* Whether a field's value holds word, in any case. */
int bench_value_has(const char *value, size_t vlen, const char *word);

/* For qsort: uint64_t ascending. */
int bench_cmp_u64(const void *a, const void *b);

#endif
