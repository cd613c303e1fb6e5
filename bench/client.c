/*
 * bench/client.c - the load generator for Serow's fairness scenarios.
 *
 * wrk measures raw throughput well, but it cannot say whether every one of
 * its connections was served, and it forgets requests still waiting when it
 * stops.  This client keeps a record per connection.  Two modes:
 *
 *   client load --port P --conns N --duration S [--path /] [--slow-every K
 *               --slow-path /slow] [--timeout S] [--close]
 *     N connections, each sending one GET at a time (closed loop) for S
 *     seconds; every K-th request (counted over all connections) goes to
 *     the slow path.  Prints "key value" lines: requests, req_per_sec,
 *     latency percentiles (completed requests, ms; then of the 2xx-3xx
 *     answers and of the others apart: ok_p99_ms, non2xx_p99_ms), the longest wait
 *     including requests still unanswered at the end, errors by kind, and
 *     per-connection answer counts (min, median, max, how many got none).
 *
 *   client idle --port P --conns N [--batch 200] [--timeout S]
 *     Opens N keep-alive connections in batches, one request each, and keeps
 *     those that answered 200.  Prints "opened X" and waits for a line on
 *     standard input; then sends one more request on every kept connection
 *     and prints how many answered (again_ok), were closed by the server
 *     (again_closed) or failed otherwise (again_failed).  Stops opening when
 *     fewer than half of a batch answer: the server stopped taking
 *     connections.
 *
 * Only loopback addresses are meant here.  Every loop is bounded in time.
 */
#define _GNU_SOURCE
#include "client_common.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum conn_state { C_CLOSED, C_CONNECTING, C_WRITING, C_READING, C_IDLE };
enum result { RES_NONE, RES_OK, RES_BAD_STATUS, RES_CLOSED, RES_ERROR, RES_TIMEOUT };

struct conn {
    int fd;
    int in_epoll;
    uint32_t events; /* what epoll watches for it, while in_epoll */
    int kept; /* idle mode: answered its first request, kept open */
    enum conn_state state;
    char *buf;
    size_t len, cap;
    const char *req;
    size_t req_len, req_off;
    uint64_t sent_ns;
    /* response parsing */
    int have_head;
    size_t body_start;
    long long content_length; /* -1: none */
    int chunked, server_closes, eof_body, status;
    size_t chunk_pos;      /* next unread position when chunked */
    /* record */
    uint64_t answers, reconnects;
    enum result last;
};

static const char *host = "127.0.0.1";
static int port;
static int nconns = 16;
static double duration = 5, timeout_s = 10;
static const char *path = "/", *slow_path = "/slow";
static long slow_every;
static int send_close;
static int batch = 200;

static char *make_request(const char *p) {
    char *r;
    if (asprintf(&r, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n", p, host, port,
                 send_close ? "Connection: close\r\n" : "") < 0)
        bench_die("asprintf");
    return r;
}

static int epfd;

static int open_conn(struct conn *c) {
    c->fd = bench_connect(host, port);
    if (c->fd < 0)
        return -1;
    c->state = C_CONNECTING;
    struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.ptr = c };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        bench_die("epoll_ctl");
    c->in_epoll = 1;
    c->events = ev.events;
    return 0;
}

static void close_conn(struct conn *c) {
    if (c->fd >= 0) {
        if (c->in_epoll)
            epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->in_epoll = 0;
    c->fd = -1;
    c->state = C_CLOSED;
}

/* events 0: out of the epoll set (an idle connection nobody waits on).  No
 * system call when epoll already watches for these events: in a keep-alive
 * loop a connection is watched for input from its first request on. */
static void want(struct conn *c, uint32_t events) {
    struct epoll_event ev = { .events = events, .data.ptr = c };
    if (!events) {
        if (c->in_epoll)
            epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        c->in_epoll = 0;
        return;
    }
    if (c->in_epoll && c->events == events)
        return;
    epoll_ctl(epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev);
    c->in_epoll = 1;
    c->events = events;
}

static int write_some(struct conn *c);

/* Writes what is left of the request; once it is all written, the
 * connection waits for the answer.  Returns write_some's result. */
static int continue_request(struct conn *c) {
    int w = write_some(c);
    if (w == 1) {
        c->state = C_READING;
        want(c, EPOLLIN | EPOLLRDHUP);
    }
    return w;
}

/* Sends a request at once: a small request fits the socket's buffer, so the
 * client waits neither for EPOLLOUT nor on epoll_ctl.  Every turn of its own
 * loop is time the answers it measures wait for it on a CPU it shares with
 * the rest of the machine (docs/keepalive.md, "The load generator's share").
 * Only a request that did not all go waits for the socket to be writable.
 * Returns write_some's answer: 1 sent (now C_READING), 0 waiting, -1 error. */
static int start_request(struct conn *c, const char *req) {
    c->req = req;
    c->req_len = strlen(req);
    c->req_off = 0;
    c->len = 0;
    c->have_head = 0;
    c->sent_ns = bench_now_ns();
    c->state = C_WRITING;
    int w = continue_request(c);
    if (w == 0)
        want(c, EPOLLOUT | EPOLLRDHUP);
    return w;
}

/* 1: a whole response is in the buffer; 0: more needed; -1: malformed. */
static int parse_response(struct conn *c) {
    if (!c->have_head) {
        char *e = memmem(c->buf, c->len, "\r\n\r\n", 4);
        if (!e)
            return c->len > 65536 ? -1 : 0;
        size_t head_len = e - c->buf + 2;
        if (c->len < 12 || strncmp(c->buf, "HTTP/1.", 7) != 0)
            return -1;
        c->status = atoi(c->buf + 9);
        c->body_start = head_len + 2;
        c->content_length = -1;
        c->chunked = 0;
        c->eof_body = 0;
        size_t vl;
        const char *v = bench_field(c->buf, head_len, "Content-Length", &vl);
        if (v)
            c->content_length = strtoll(v, NULL, 10);
        v = bench_field(c->buf, head_len, "Transfer-Encoding", &vl);
        if (v && bench_value_has(v, vl, "chunked"))
            c->chunked = 1;
        v = bench_field(c->buf, head_len, "Connection", &vl);
        int http10 = c->buf[7] == '0';
        c->server_closes = http10 ? !(v && strncasecmp(v, "keep-alive", 10) == 0)
                                  : (v && strncasecmp(v, "close", 5) == 0);
        if (c->status == 204 || c->status == 304 || (c->status >= 100 && c->status < 200))
            c->content_length = 0;
        if (!c->chunked && c->content_length < 0) {
            c->eof_body = 1; /* ends when the server closes */
            c->server_closes = 1;
        }
        c->chunk_pos = c->body_start;
        c->have_head = 1;
    }
    if (c->chunked) {
        for (;;) {
            char *p = c->buf + c->chunk_pos, *end = c->buf + c->len;
            char *eol = memmem(p, end - p, "\r\n", 2);
            if (!eol)
                return 0;
            unsigned long size = strtoul(p, NULL, 16);
            if (size == 0) {
                /* last chunk: trailers end with an empty line */
                char *t = memmem(eol, end - eol, "\r\n\r\n", 4);
                return t ? 1 : 0;
            }
            size_t need = (eol + 2 - c->buf) + size + 2;
            if (c->len < need)
                return 0;
            c->chunk_pos = need;
        }
    }
    if (c->eof_body)
        return 0;
    return c->len >= c->body_start + (size_t)c->content_length ? 1 : 0;
}

/* Reads what is there; keeps the buffer small by dropping body bytes that
 * were counted.  Returns 1 (complete), 0 (more), -1 (error), -2 (EOF). */
static int read_some(struct conn *c) {
    for (;;) {
        if (c->cap - c->len < 16384) {
            c->cap = c->cap ? c->cap * 2 : 65536;
            c->buf = realloc(c->buf, c->cap);
            if (!c->buf)
                bench_die("realloc");
        }
        ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n > 0) {
            c->len += n;
            int r = parse_response(c);
            if (r != 0)
                return r;
            /* a long plain body: forget what is counted */
            if (c->have_head && !c->chunked && !c->eof_body && c->len > 1 << 20) {
                size_t drop = c->len - c->body_start;
                c->content_length -= drop;
                c->len = c->body_start;
            } else if (c->eof_body && c->len > 1 << 20) {
                c->len = c->body_start;
            }
            continue;
        }
        if (n == 0)
            return (c->have_head && c->eof_body) ? 1 : -2;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno == EINTR)
            continue;
        return -1;
    }
}

static int write_some(struct conn *c) {
    while (c->req_off < c->req_len) {
        ssize_t n = write(c->fd, c->req + c->req_off, c->req_len - c->req_off);
        if (n > 0) {
            c->req_off += n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return -1;
    }
    return 1;
}

static double pct(uint64_t *v, size_t n, double p) {
    if (!n)
        return 0;
    size_t i = (size_t)(p / 100.0 * n);
    if (i >= n)
        i = n - 1;
    return v[i] / 1e6;
}

/* ---- load mode ------------------------------------------------------- */

/* The request to send next: every slow_every-th one (counted over all
 * connections) goes to the slow path. */
static const char *next_request(uint64_t *issued, const char *fast_req, const char *slow_req) {
    int slow = slow_every > 0 && *issued % slow_every == (uint64_t)slow_every - 1;
    (*issued)++;
    return slow ? slow_req : fast_req;
}

struct latencies {
    uint64_t *v;
    size_t n, cap;
};

static void add_latency(struct latencies *l, uint64_t ns) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4096;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v)
            bench_die("realloc");
    }
    l->v[l->n++] = ns;
}

static int run_load(void) {
    struct conn *conns = calloc(nconns, sizeof *conns);
    char *fast_req = make_request(path);
    char *slow_req = make_request(slow_path);
    size_t lat_cap = 1 << 20, lat_n = 0;
    uint64_t *lat = malloc(lat_cap * sizeof *lat);
    /* the same, by outcome: a shed request (503) answered fast must not
     * hide how long the served ones took */
    struct latencies ok = {0}, bad = {0};
    uint64_t issued = 0, completed = 0, slow_done = 0;
    uint64_t err_connect = 0, err_read = 0, err_write = 0, err_timeout = 0, non2xx = 0;
    uint64_t closed_by_server = 0;
    struct epoll_event events[256];

    epfd = epoll_create1(EPOLL_CLOEXEC);
    uint64_t start = bench_now_ns();
    uint64_t end = start + (uint64_t)(duration * 1e9);
    uint64_t tmo = (uint64_t)(timeout_s * 1e9);

    for (int i = 0; i < nconns; i++) {
        conns[i].fd = -1;
        if (open_conn(&conns[i]) < 0)
            err_connect++;
    }
    uint64_t last_sweep = start;
    for (;;) {
        uint64_t t = bench_now_ns();
        if (t >= end)
            break;
        int ms = (int)((end - t) / 1000000) + 1;
        if (ms > 100)
            ms = 100;
        int n = epoll_wait(epfd, events, 256, ms);
        t = bench_now_ns();
        for (int k = 0; k < n; k++) {
            struct conn *c = events[k].data.ptr;
            uint32_t ev = events[k].events;
            if (c->state == C_CONNECTING) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err) {
                    err_connect++;
                    close_conn(c);
                    continue;
                }
                if (start_request(c, next_request(&issued, fast_req, slow_req)) < 0) {
                    err_write++;
                    close_conn(c);
                }
                continue; /* the answer comes with a later event */
            }
            if (c->state == C_WRITING && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                if (continue_request(c) < 0) {
                    err_write++;
                    close_conn(c);
                }
                continue;
            }
            if (c->state == C_READING) {
                int r = read_some(c);
                if (r == 0)
                    continue;
                if (r < 0) {
                    if (r == -2 && c->len == 0)
                        closed_by_server++; /* closed before answering */
                    else
                        err_read++;
                    close_conn(c);
                    continue;
                }
                uint64_t done = bench_now_ns();
                if (lat_n == lat_cap) {
                    lat_cap *= 2;
                    lat = realloc(lat, lat_cap * sizeof *lat);
                    if (!lat)
                        bench_die("realloc");
                }
                lat[lat_n++] = done - c->sent_ns;
                completed++;
                c->answers++;
                if (c->req == slow_req)
                    slow_done++;
                int good = c->status >= 200 && c->status <= 399;
                if (!good)
                    non2xx++;
                add_latency(good ? &ok : &bad, done - c->sent_ns);
                if (c->server_closes || send_close) {
                    close_conn(c);
                    c->reconnects++;
                    if (done < end && open_conn(c) < 0)
                        err_connect++;
                    continue;
                }
                if (done >= end) {
                    c->state = C_IDLE;
                    continue;
                }
                if (start_request(c, next_request(&issued, fast_req, slow_req)) < 0) {
                    err_write++;
                    close_conn(c);
                }
            }
        }
        /* timeouts and reconnects, ten times a second */
        if (t - last_sweep > 100000000ull) {
            last_sweep = t;
            for (int i = 0; i < nconns; i++) {
                struct conn *c = &conns[i];
                if ((c->state == C_WRITING || c->state == C_READING) && t > c->sent_ns && t - c->sent_ns > tmo) {
                    err_timeout++;
                    close_conn(c);
                }
                if (c->state == C_CLOSED && t < end) {
                    c->reconnects++;
                    if (open_conn(c) < 0)
                        err_connect++;
                }
            }
        }
    }
    uint64_t stop = bench_now_ns();
    double secs = (stop - start) / 1e9;
    /* requests still waiting: their wait counts for the longest wait */
    uint64_t unanswered = 0, longest = 0;
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        if (c->state == C_WRITING || c->state == C_READING) {
            unanswered++;
            if (stop - c->sent_ns > longest)
                longest = stop - c->sent_ns;
        }
    }
    qsort(lat, lat_n, sizeof *lat, bench_cmp_u64);
    if (lat_n && lat[lat_n - 1] > longest)
        longest = lat[lat_n - 1];
    uint64_t *answers = malloc(nconns * sizeof *answers);
    int unserved = 0;
    uint64_t reconnects = 0;
    for (int i = 0; i < nconns; i++) {
        answers[i] = conns[i].answers;
        if (!answers[i])
            unserved++;
        reconnects += conns[i].reconnects;
    }
    qsort(answers, nconns, sizeof *answers, bench_cmp_u64);
    printf("connections %d\n", nconns);
    printf("seconds %.3f\n", secs);
    printf("requests %llu\n", (unsigned long long)completed);
    printf("slow_requests %llu\n", (unsigned long long)slow_done);
    printf("req_per_sec %.1f\n", completed / secs);
    printf("p50_ms %.3f\np90_ms %.3f\np99_ms %.3f\nmax_ms %.3f\n", pct(lat, lat_n, 50),
           pct(lat, lat_n, 90), pct(lat, lat_n, 99), lat_n ? lat[lat_n - 1] / 1e6 : 0);
    if (ok.n) /* (none yet: v is NULL, which qsort may not be given) */
        qsort(ok.v, ok.n, sizeof *ok.v, bench_cmp_u64);
    if (bad.n)
        qsort(bad.v, bad.n, sizeof *bad.v, bench_cmp_u64);
    printf("ok_p99_ms %.3f\nnon2xx_p99_ms %.3f\n", pct(ok.v, ok.n, 99), pct(bad.v, bad.n, 99));
    printf("longest_wait_ms %.3f\n", longest / 1e6);
    printf("unanswered_at_end %llu\n", (unsigned long long)unanswered);
    printf("errors_connect %llu\nerrors_read %llu\nerrors_write %llu\nerrors_timeout %llu\n",
           (unsigned long long)err_connect, (unsigned long long)err_read,
           (unsigned long long)err_write, (unsigned long long)err_timeout);
    printf("closed_before_answer %llu\n", (unsigned long long)closed_by_server);
    printf("non2xx %llu\n", (unsigned long long)non2xx);
    printf("reconnects %llu\n", (unsigned long long)reconnects);
    printf("answers_min %llu\nanswers_median %llu\nanswers_max %llu\n",
           (unsigned long long)answers[0], (unsigned long long)answers[nconns / 2],
           (unsigned long long)answers[nconns - 1]);
    printf("connections_unserved %d\n", unserved);
    return 0;
}

/* ---- idle mode ------------------------------------------------------- */

/* What a failed write of a request says about its connection. */
static enum result write_failure(void) {
    return errno == EPIPE || errno == ECONNRESET ? RES_CLOSED : RES_ERROR;
}

/* Drives the given connections until each one has an answer or failed, or
 * the deadline passes.  Connections in C_CLOSED are left alone. */
static void drive(struct conn *cs, int n, const char *req, uint64_t deadline) {
    int pending = 0;
    for (int i = 0; i < n; i++)
        if (cs[i].state != C_CLOSED) {
            cs[i].last = RES_NONE;
            pending++;
            if (cs[i].state == C_IDLE && start_request(&cs[i], req) < 0) {
                cs[i].last = write_failure();
                pending--;
            }
        }
    struct epoll_event events[256];
    while (pending > 0) {
        uint64_t t = bench_now_ns();
        if (t >= deadline)
            break;
        int ms = (int)((deadline - t) / 1000000) + 1;
        int k = epoll_wait(epfd, events, 256, ms > 200 ? 200 : ms);
        for (int j = 0; j < k; j++) {
            struct conn *c = events[j].data.ptr;
            if (c->last != RES_NONE)
                continue;
            if (c->state == C_CONNECTING) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err) {
                    c->last = RES_ERROR;
                    pending--;
                    continue;
                }
                if (start_request(c, req) < 0) {
                    c->last = write_failure();
                    pending--;
                }
                continue; /* the answer comes with a later event */
            }
            if (c->state == C_WRITING) {
                if (continue_request(c) < 0) {
                    c->last = write_failure();
                    pending--;
                }
                continue;
            }
            if (c->state == C_READING) {
                int r = read_some(c);
                if (r == 0)
                    continue;
                if (r == 1) {
                    c->last = c->status == 200 ? RES_OK : RES_BAD_STATUS;
                    c->state = C_IDLE;
                    want(c, 0);
                } else {
                    c->last = (r == -2 && c->len == 0) || errno == ECONNRESET ? RES_CLOSED : RES_ERROR;
                }
                pending--;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (cs[i].state != C_CLOSED && cs[i].last == RES_NONE)
            cs[i].last = RES_TIMEOUT;
}

static int run_idle(void) {
    struct conn *conns = calloc(nconns, sizeof *conns);
    char *req = make_request("/idle");
    epfd = epoll_create1(EPOLL_CLOEXEC);
    int opened = 0, tried = 0;
    uint64_t tmo = (uint64_t)(timeout_s * 1e9);
    for (int i = 0; i < nconns; i += batch) {
        int m = nconns - i < batch ? nconns - i : batch;
        for (int j = 0; j < m; j++) {
            conns[i + j].fd = -1;
            if (open_conn(&conns[i + j]) < 0)
                conns[i + j].state = C_CLOSED;
        }
        tried += m;
        drive(conns + i, m, req, bench_now_ns() + tmo);
        int ok = 0;
        for (int j = 0; j < m; j++) {
            if (conns[i + j].last == RES_OK) {
                conns[i + j].kept = 1;
                ok++;
            }
            else
                close_conn(&conns[i + j]);
        }
        opened += ok;
        if (ok < m / 2)
            break;
    }
    printf("opened %d\n", opened);
    printf("tried %d\n", tried);
    fflush(stdout);
    /* wait for the word to go on; note connections the server closes */
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return 0;
    int closed_while_idle = 0;
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        if (c->state != C_IDLE)
            continue;
        struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
        if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            closed_while_idle++;
    }
    uint64_t t0 = bench_now_ns();
    drive(conns, nconns, req, t0 + tmo);
    double secs = (bench_now_ns() - t0) / 1e9;
    int ok = 0, closed = 0, failed = 0;
    for (int i = 0; i < nconns; i++) {
        if (!conns[i].kept)
            continue;
        switch (conns[i].last) {
        case RES_OK: ok++; break;
        case RES_CLOSED: closed++; break;
        case RES_NONE: break;
        default: failed++; break;
        }
    }
    printf("closed_while_idle %d\n", closed_while_idle);
    printf("again_ok %d\nagain_closed %d\nagain_failed %d\n", ok, closed, failed);
    printf("again_seconds %.3f\n", secs);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
    usage:
        fprintf(stderr, "usage: client load|idle --port P [--conns N] [--duration S] [--path P]\n"
                        "       [--slow-every K] [--slow-path P] [--timeout S] [--close] [--batch N]\n");
        return 2;
    }
    const char *mode = argv[1];
    const struct bench_option options[] = {
        { "--port", BENCH_INT, &port },
        { "--host", BENCH_STRING, &host },
        { "--conns", BENCH_INT, &nconns },
        { "--duration", BENCH_DOUBLE, &duration },
        { "--timeout", BENCH_DOUBLE, &timeout_s },
        { "--path", BENCH_STRING, &path },
        { "--slow-path", BENCH_STRING, &slow_path },
        { "--slow-every", BENCH_LONG, &slow_every },
        { "--batch", BENCH_INT, &batch },
        { "--close", BENCH_FLAG, &send_close },
        { NULL, BENCH_FLAG, NULL },
    };
    if (bench_options("client", argc, argv, 2, options) < 0 || port <= 0 || nconns <= 0 || batch <= 0)
        goto usage;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(mode, "load"))
        return run_load();
    if (!strcmp(mode, "idle"))
        return run_idle();
    goto usage;
}
