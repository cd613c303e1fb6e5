/*
 * bench/client_common.c - see client_common.h.
 */
#define _GNU_SOURCE
#include "client_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int bench_options(const char *program, int argc, char **argv, int first, const struct bench_option *options) {
    for (int i = first; i < argc; i++) {
        const struct bench_option *o = options;
        while (o->name && strcmp(o->name, argv[i]) != 0)
            o++;
        if (!o->name) {
            fprintf(stderr, "%s: unknown option %s\n", program, argv[i]);
            return -1;
        }
        if (o->type == BENCH_FLAG) {
            *(int *)o->to = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", program, o->name);
            return -1;
        }
        switch (o->type) {
        case BENCH_INT: *(int *)o->to = atoi(v); break;
        case BENCH_LONG: *(long *)o->to = atol(v); break;
        case BENCH_DOUBLE: *(double *)o->to = atof(v); break;
        case BENCH_STRING: *(const char **)o->to = v; break;
        case BENCH_FLAG: break;
        }
    }
    return 0;
}

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void bench_die(const char *what) {
    perror(what);
    exit(2);
}

int bench_connect(const char *host, int port) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

const char *bench_field(const char *head, size_t head_len, const char *name, size_t *vlen) {
    size_t n = strlen(name);
    const char *p = head, *end = head + head_len;
    while (p < end) {
        const char *eol = memmem(p, end - p, "\r\n", 2);
        if (!eol)
            break;
        if ((size_t)(eol - p) > n && p[n] == ':' && strncasecmp(p, name, n) == 0) {
            const char *v = p + n + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            *vlen = eol - v;
            return v;
        }
        p = eol + 2;
    }
    return NULL;
}

int bench_value_has(const char *value, size_t vlen, const char *word) {
    size_t n = strlen(word);
    for (size_t i = 0; i + n <= vlen; i++)
        if (strncasecmp(value + i, word, n) == 0)
            return 1;
    return 0;
}

int bench_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
