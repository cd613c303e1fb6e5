/*
 * bench/holding-client.c - the subscribers and the publisher of bench/holding.
 *
 * One process, one epoll loop, the same for every server measured: it holds
 * many server-sent-event streams open, publishes over the server's own HTTP
 * publish endpoint, and times when each subscriber receives each publish.
 * It knows nothing of the servers: the subscribe path and the publish request
 * (a file holding the whole HTTP request, in which every "@@SEQ@@@" becomes
 * the publish's 8-digit number) are given.
 *
 *   holding-client --port P --path /sub?channel=C --conns N
 *                  --publish-port Q --publish-request FILE
 *                  [--batch 200] [--timeout S] [--open-timeout S]
 *
 * --timeout (30 s) bounds each wait for deliveries, --open-timeout (300 s)
 * opening the subscribers.  It then reads commands on standard input, one a
 * line, and answers each with "key value" lines ending with "done":
 *
 *   open          opens the N subscribers (at most --batch connecting at a
 *                 time), each until the head of its 200 answer arrived:
 *                 opened, failed (and why: failed_connect, failed_closed,
 *                 failed_status with last_bad_status, failed_timeout: not
 *                 open by --open-timeout), lost (opened, then closed by the
 *                 server)
 *   ready         publishes until every open subscriber has received one
 *                 (a server may register a subscriber after its head is
 *                 written): warmups, ready
 *   fanout K      K publishes one after another, each once the last has
 *                 reached every subscriber: per publish the latency from
 *                 writing the publish request to each subscriber reading
 *                 it; the median over the K of p50, p99 and max (ms), and
 *                 missing (deliveries that never came)
 *   rate S W      publishes for S seconds, no more than W publishes not yet
 *                 at every subscriber, then waits for them: published,
 *                 deliveries, expected, seconds (first publish to last
 *                 delivery), deliveries_per_sec, missing, publish_errors
 *
 * A subscriber reads a body framed by chunks or by the connection's end;
 * each line "data: SEQ..." is a delivery.  A subscriber that loses its
 * connection is counted (lost) and misses what follows.  Only loopback
 * addresses are meant here; every wait is bounded by --timeout.
 */
#define _GNU_SOURCE
#include "client_common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define SEQ_TOKEN "@@SEQ@@@"
#define SEQ_WIDTH 8
#define LINE_KEEP 32 /* a line's first bytes: enough for "data: " and a number */

enum sub_state { S_NONE, S_CONNECTING, S_HEAD, S_BODY, S_LOST };
enum body_state { B_SIZE, B_DATA, B_DATA_END, B_RAW, B_END };

/* An HTTP response read as it arrives: the head kept until whole, then the
 * body decoded (chunks or to the connection's end) and cut into lines. */
struct reader {
    char *head;
    size_t head_len, head_cap;
    int status;
    enum body_state body;
    uint64_t chunk_left;
    char line[LINE_KEEP];
    size_t line_len;
    /* publish answers only: a Content-Length body, Connection: close */
    long long length_left;
    int conn_close;
};

struct sub {
    int fd;
    enum sub_state state;
    struct reader r;
    int64_t last_seq; /* the last publish received, -1 none */
    uint64_t got_ns;  /* fanout: when the current publish arrived, 0 not yet */
};

static int port = 0, pub_port = 0, nsubs = 0, batch = 200;
static double timeout_s = 30, open_timeout_s = 300;
static const char *host = "127.0.0.1", *path = "/";
static char *pub_template;
static size_t pub_template_len;

static struct sub *subs;
static int epfd;
static char rbuf[65536];

/* The publisher: one keep-alive connection, one request at a time. */
static struct {
    int fd;
    int busy; /* a request written (or being written), its answer not read */
    char req[65536];
    size_t req_len, req_off;
    struct reader r;
    int answered; /* the last request's answer is whole */
} pub = { .fd = -1 };
static uint64_t publish_errors;

/* What is being measured. */
static int64_t next_seq = 1;
static int64_t measure_seq = -1;  /* fanout: the publish timed */
static uint64_t measure_sent_ns;
static int measure_count;          /* fanout: subscribers that have it */
static int64_t rate_base = -1;     /* rate: first seq counted */
static int *rate_count;            /* rate: subscribers that have seq base+i */
static int64_t rate_cap;
static int64_t rate_complete;      /* rate: publishes at every subscriber */
static uint64_t rate_deliveries, rate_last_ns, disordered;
static int nsubs_ready;             /* rate: subscribers open when it began */
static int warm_ready;             /* ready: subscribers that got any publish */

static void watch(int fd, uint32_t events, uint32_t id, int op) {
    struct epoll_event ev = { .events = events, .data.u32 = id };
    if (epoll_ctl(epfd, op, fd, &ev) < 0)
        bench_die("epoll_ctl");
}

/* ---- reading a response ------------------------------------------------- */

static void reader_reset(struct reader *r) {
    free(r->head);
    memset(r, 0, sizeof *r);
}

/* A line of the body: "data: SEQ" is a delivery. */
typedef void (*line_fn)(void *ctx, const char *line, size_t len);

static void body_bytes(struct reader *r, const char *p, size_t n, line_fn fn, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            fn(ctx, r->line, r->line_len);
            r->line_len = 0;
        } else if (r->line_len < LINE_KEEP) {
            r->line[r->line_len++] = p[i];
        }
    }
}

/* Feeds bytes read from the socket.  Returns 1 when the head is whole (the
 * status is set), 0 when more is needed, -1 when the response is malformed. */
static int reader_feed(struct reader *r, const char *p, size_t n, line_fn fn, void *ctx) {
    if (!r->status) {
        if (r->head_len + n + 1 > r->head_cap) {
            r->head_cap = r->head_len + n + 1 + 1024;
            if (r->head_cap > 65536)
                return -1;
            r->head = realloc(r->head, r->head_cap);
            if (!r->head)
                bench_die("realloc");
        }
        memcpy(r->head + r->head_len, p, n);
        size_t before = r->head_len;
        r->head_len += n;
        r->head[r->head_len] = 0;
        char *end = memmem(r->head, r->head_len, "\r\n\r\n", 4);
        if (!end)
            return 0;
        size_t head_len = end + 4 - r->head;
        if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1 || r->status <= 0)
            return -1;
        r->head_len = head_len;
        size_t te_len, cl_len, conn_len;
        const char *te = bench_field(r->head, r->head_len, "Transfer-Encoding", &te_len);
        const char *cl = bench_field(r->head, r->head_len, "Content-Length", &cl_len);
        const char *conn = bench_field(r->head, r->head_len, "Connection", &conn_len);
        r->conn_close = conn && bench_value_has(conn, conn_len, "close");
        r->length_left = -1;
        if (te && bench_value_has(te, te_len, "chunked"))
            r->body = B_SIZE;
        else {
            r->body = B_RAW;
            if (cl)
                r->length_left = strtoll(cl, NULL, 10);
            if (r->length_left == 0)
                r->body = B_END;
        }
        /* what came after the head is body */
        size_t rest = before + n - head_len;
        const char *body = p + n - rest;
        free(r->head);
        r->head = NULL;
        r->head_cap = 0;
        if (rest && reader_feed(r, body, rest, fn, ctx) < 0)
            return -1;
        return 1;
    }
    size_t i = 0;
    while (i < n) {
        switch (r->body) {
        case B_SIZE: /* hex digits, maybe extensions, then LF */
            if (p[i] == '\n') {
                r->body = r->chunk_left ? B_DATA : B_END;
            } else if (p[i] != '\r' && p[i] != ';' && r->chunk_left < (1ull << 40)) {
                int d = p[i] >= '0' && p[i] <= '9' ? p[i] - '0'
                      : (p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'f' ? (p[i] | 0x20) - 'a' + 10 : -1;
                if (d < 0)
                    return -1;
                r->chunk_left = r->chunk_left * 16 + d;
            }
            i++;
            break;
        case B_DATA: {
            size_t take = n - i < r->chunk_left ? n - i : r->chunk_left;
            body_bytes(r, p + i, take, fn, ctx);
            r->chunk_left -= take;
            i += take;
            if (!r->chunk_left)
                r->body = B_DATA_END;
            break;
        }
        case B_DATA_END: /* the CRLF after a chunk's data */
            if (p[i] == '\n')
                r->body = B_SIZE;
            i++;
            break;
        case B_RAW: {
            size_t take = n - i;
            if (r->length_left >= 0 && (long long)take > r->length_left)
                take = r->length_left;
            body_bytes(r, p + i, take, fn, ctx);
            i += take;
            if (r->length_left >= 0) {
                r->length_left -= take;
                if (!r->length_left)
                    r->body = B_END;
            }
            break;
        }
        case B_END: /* the last chunk's CRLF or trailers: ignored */
            i = n;
            break;
        }
    }
    return 1;
}

/* ---- subscribers --------------------------------------------------------- */

/* A subscriber read publish seq at time t.  A publish read again, or after a
 * later one, is counted as out of order and not as a delivery. */
static void delivered(struct sub *s, int64_t seq, uint64_t t) {
    if (seq <= s->last_seq) {
        disordered++;
        return;
    }
    if (s->last_seq < 0)
        warm_ready++;
    s->last_seq = seq;
    if (seq == measure_seq) {
        s->got_ns = t;
        measure_count++;
    }
    if (rate_base >= 0 && seq >= rate_base && seq - rate_base < rate_cap) {
        rate_deliveries++;
        rate_last_ns = t;
        if (++rate_count[seq - rate_base] == nsubs_ready)
            rate_complete++;
    }
}

static uint64_t line_time;

static void sub_line(void *ctx, const char *line, size_t len) {
    if (len < 7 || memcmp(line, "data: ", 6) != 0 || line[6] < '0' || line[6] > '9')
        return;
    int64_t seq = 0;
    for (size_t i = 6; i < len && line[i] >= '0' && line[i] <= '9'; i++)
        seq = seq * 10 + (line[i] - '0');
    delivered(ctx, seq, line_time);
}

static int opened, open_failed, lost;
/* why subscribers failed to open: no connection, closed before an answer,
 * an answer other than 200 (the last such status kept) */
static int failed_connect, failed_closed, failed_status, last_bad_status;

static void sub_lost(struct sub *s) {
    if (s->fd >= 0) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, s->fd, NULL);
        close(s->fd);
    }
    if (s->state == S_BODY) {
        opened--;
        lost++;
    } else if (s->state == S_CONNECTING || s->state == S_HEAD) {
        open_failed++;
        if (s->state == S_CONNECTING)
            failed_connect++;
        else if (s->r.status && s->r.status != 200)
            failed_status++, last_bad_status = s->r.status;
        else
            failed_closed++;
    }
    s->fd = -1;
    s->state = S_LOST;
    reader_reset(&s->r);
}

static char *sub_request;
static size_t sub_request_len;

static void sub_event(struct sub *s, uint32_t events) {
    if (s->state == S_CONNECTING) {
        if (!(events & EPOLLOUT)) {
            sub_lost(s);
            return;
        }
        /* a small request fits the new socket's buffer */
        if (write(s->fd, sub_request, sub_request_len) != (ssize_t)sub_request_len) {
            sub_lost(s);
            return;
        }
        s->state = S_HEAD;
        watch(s->fd, EPOLLIN | EPOLLRDHUP, s - subs, EPOLL_CTL_MOD);
        return;
    }
    for (;;) {
        ssize_t n = read(s->fd, rbuf, sizeof rbuf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            sub_lost(s);
            return;
        }
        line_time = bench_now_ns();
        int r = reader_feed(&s->r, rbuf, n, sub_line, s);
        if (r < 0 || (r == 1 && s->r.status != 200)) {
            sub_lost(s);
            return;
        }
        if (r == 1 && s->state == S_HEAD) {
            s->state = S_BODY;
            opened++;
        }
        if ((size_t)n < sizeof rbuf)
            return;
    }
}

/* ---- the publisher ------------------------------------------------------- */

/* Counted; the first few said on standard error, with the answer's status. */
static void publish_error(const char *why) {
    if (publish_errors++ < 5)
        fprintf(stderr, "holding-client: publish %s (status %d)\n", why, pub.r.status);
}

static void pub_line(void *ctx, const char *line, size_t len) { (void)ctx; (void)line; (void)len; }

static void pub_close(void) {
    if (pub.fd >= 0) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, pub.fd, NULL);
        close(pub.fd);
    }
    pub.fd = -1;
    reader_reset(&pub.r);
}

static void pub_write(void) {
    while (pub.req_off < pub.req_len) {
        ssize_t n = write(pub.fd, pub.req + pub.req_off, pub.req_len - pub.req_off);
        if (n < 0 && errno == EAGAIN) {
            watch(pub.fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, nsubs, EPOLL_CTL_MOD);
            return;
        }
        if (n <= 0) {
            publish_error("request not written");
            pub.busy = 0;
            pub_close();
            return;
        }
        pub.req_off += n;
    }
    watch(pub.fd, EPOLLIN | EPOLLRDHUP, nsubs, EPOLL_CTL_MOD);
}

/* Writes publish number seq; returns when it was sent (CONNECTING: soon). */
static void publish(int64_t seq) {
    if (pub.fd < 0) {
        pub.fd = bench_connect(host, pub_port);
        if (pub.fd < 0)
            bench_die("publish connection");
        watch(pub.fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, nsubs, EPOLL_CTL_ADD);
    }
    char num[SEQ_WIDTH + 1];
    snprintf(num, sizeof num, "%0*lld", SEQ_WIDTH, (long long)seq);
    memcpy(pub.req, pub_template, pub_template_len);
    pub.req_len = pub_template_len;
    for (char *p = pub.req; (p = memmem(p, pub.req + pub.req_len - p, SEQ_TOKEN, SEQ_WIDTH)); p += SEQ_WIDTH)
        memcpy(p, num, SEQ_WIDTH);
    pub.req_off = 0;
    pub.busy = 1;
    pub.answered = 0;
    reader_reset(&pub.r);
    pub_write();
}

static void pub_event(uint32_t events) {
    if (pub.fd < 0)
        return;
    if ((events & EPOLLOUT) && pub.req_off < pub.req_len) {
        pub_write();
        if (pub.fd < 0)
            return;
    }
    if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        return;
    for (;;) {
        ssize_t n = read(pub.fd, rbuf, sizeof rbuf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            if (pub.busy) {
                /* closed before a whole answer: an error unless it ends a
                 * close-delimited answer */
                if (!(pub.r.status && pub.r.body == B_RAW && pub.r.length_left < 0))
                    publish_error("connection closed before the answer");
                else if (pub.r.status < 200 || pub.r.status > 299)
                    publish_error("refused");
                pub.busy = 0;
            }
            pub_close();
            return;
        }
        int r = reader_feed(&pub.r, rbuf, n, pub_line, NULL);
        if (r < 0) {
            publish_error("answer malformed");
            pub.busy = 0;
            pub_close();
            return;
        }
        if (r == 1 && pub.r.body == B_END) {
            if (pub.r.status < 200 || pub.r.status > 299)
                publish_error("refused");
            pub.busy = 0;
            if (pub.r.conn_close) {
                /* Pushpin's endpoint answers every publish so: the next
                 * publish opens a new connection */
                pub_close();
                return;
            }
            reader_reset(&pub.r);
        }
    }
}

/* ---- the loop ------------------------------------------------------------ */

static void turn(int wait_ms) {
    static struct epoll_event evs[1024];
    int n = epoll_wait(epfd, evs, 1024, wait_ms);
    if (n < 0 && errno != EINTR)
        bench_die("epoll_wait");
    for (int i = 0; i < n; i++) {
        uint32_t id = evs[i].data.u32;
        if (id == (uint32_t)nsubs)
            pub_event(evs[i].events);
        else
            sub_event(&subs[id], evs[i].events);
    }
}

static int connecting(void) {
    int c = 0;
    for (int i = 0; i < nsubs; i++)
        c += subs[i].state == S_CONNECTING || subs[i].state == S_HEAD;
    return c;
}

static void cmd_open(void) {
    uint64_t deadline = bench_now_ns() + (uint64_t)(open_timeout_s * 1e9);
    int next = 0, in_flight = 0;
    while (bench_now_ns() < deadline) {
        while (next < nsubs && in_flight < batch) {
            struct sub *s = &subs[next++];
            s->fd = bench_connect(host, port);
            if (s->fd < 0) {
                s->state = S_LOST;
                open_failed++;
                failed_connect++;
                continue;
            }
            s->state = S_CONNECTING;
            watch(s->fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, s - subs, EPOLL_CTL_ADD);
            in_flight++;
        }
        if (next >= nsubs && connecting() == 0)
            break;
        turn(10);
        in_flight = connecting();
    }
    /* those still opening at the deadline, and those never tried, give up */
    int failed_timeout = 0;
    for (int i = 0; i < nsubs; i++) {
        if (subs[i].state == S_CONNECTING || subs[i].state == S_HEAD || subs[i].state == S_NONE) {
            failed_timeout++;
            if (subs[i].fd >= 0) {
                epoll_ctl(epfd, EPOLL_CTL_DEL, subs[i].fd, NULL);
                close(subs[i].fd);
                subs[i].fd = -1;
            }
            reader_reset(&subs[i].r);
            subs[i].state = S_LOST;
        }
    }
    printf("opened %d\nfailed %d\nfailed_connect %d\nfailed_closed %d\nfailed_status %d\nlast_bad_status %d\n"
           "failed_timeout %d\nlost %d\ndone\n", opened, nsubs - opened, failed_connect, failed_closed, failed_status,
           last_bad_status, failed_timeout, lost);
    fflush(stdout);
}

static void cmd_ready(void) {
    uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    int warmups = 0;
    uint64_t last = 0;
    while (warm_ready < opened && bench_now_ns() < deadline) {
        /* one warm-up publish every 100 ms until every subscriber has had one */
        if (!pub.busy && bench_now_ns() - last > 100000000ull) {
            publish(next_seq++);
            warmups++;
            last = bench_now_ns();
        }
        turn(10);
    }
    /* let the last warm-ups arrive, so that none is taken for a later publish */
    while (pub.busy && bench_now_ns() < deadline)
        turn(10);
    uint64_t settle = bench_now_ns() + 200000000ull;
    while (bench_now_ns() < settle)
        turn(10);
    printf("warmups %d\nready %d\nlost %d\ndone\n", warmups, warm_ready, lost);
    fflush(stdout);
}

static double ms(uint64_t ns) { return ns / 1e6; }

static void cmd_fanout(int k) {
    uint64_t *lat = malloc(sizeof *lat * (nsubs + 1));
    uint64_t *p50 = calloc(k, sizeof *p50), *p99 = calloc(k, sizeof *p99), *max = calloc(k, sizeof *max);
    if (!lat || !p50 || !p99 || !max)
        bench_die("malloc");
    uint64_t missed = 0;
    for (int round = 0; round < k; round++) {
        for (int i = 0; i < nsubs; i++)
            subs[i].got_ns = 0;
        measure_count = 0;
        measure_seq = next_seq++;
        while (pub.busy)
            turn(10);
        measure_sent_ns = bench_now_ns();
        publish(measure_seq);
        uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
        while (measure_count < opened && bench_now_ns() < deadline)
            turn(10);
        int n = 0;
        for (int i = 0; i < nsubs; i++)
            if (subs[i].got_ns)
                lat[n++] = subs[i].got_ns - measure_sent_ns;
        missed += opened - measure_count > 0 ? opened - measure_count : 0;
        if (n) {
            qsort(lat, n, sizeof *lat, bench_cmp_u64);
            p50[round] = lat[(n - 1) / 2];
            p99[round] = lat[(size_t)((n - 1) * 0.99)];
            max[round] = lat[n - 1];
        }
        printf("fanout_round %d received %d p50_ms %.2f p99_ms %.2f max_ms %.2f\n", round + 1, n,
               ms(p50[round]), ms(p99[round]), ms(max[round]));
    }
    measure_seq = -1;
    qsort(p50, k, sizeof *p50, bench_cmp_u64);
    qsort(p99, k, sizeof *p99, bench_cmp_u64);
    qsort(max, k, sizeof *max, bench_cmp_u64);
    printf("subscribers %d\np50_ms %.2f\np99_ms %.2f\nmax_ms %.2f\nmissing %llu\ndisordered %llu\n"
           "publish_errors %llu\nlost %d\ndone\n", opened, ms(p50[(k - 1) / 2]), ms(p99[(k - 1) / 2]),
           ms(max[(k - 1) / 2]), (unsigned long long)missed, (unsigned long long)disordered,
           (unsigned long long)publish_errors, lost);
    fflush(stdout);
    free(lat);
    free(p50);
    free(p99);
    free(max);
}

static void cmd_rate(double seconds, int window) {
    rate_cap = 10000000;
    rate_count = calloc(rate_cap, sizeof *rate_count);
    if (!rate_count)
        bench_die("calloc");
    while (pub.busy)
        turn(10);
    rate_base = next_seq;
    rate_complete = rate_deliveries = 0;
    int subscribers = nsubs_ready = opened;
    uint64_t start = bench_now_ns(), stop = start + (uint64_t)(seconds * 1e9);
    int64_t published = 0;
    while (bench_now_ns() < stop && published < rate_cap) {
        if (!pub.busy && published - rate_complete < window) {
            publish(next_seq++);
            published++;
        }
        turn(pub.busy || published - rate_complete >= window ? 10 : 0);
    }
    /* the publishes made reach everyone, or the wait times out */
    uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    while ((pub.busy || rate_complete < published) && bench_now_ns() < deadline) {
        uint64_t before = rate_deliveries;
        turn(10);
        if (rate_deliveries != before)
            deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    }
    double secs = rate_last_ns > start ? (rate_last_ns - start) / 1e9 : 0;
    uint64_t expected = (uint64_t)published * subscribers;
    printf("subscribers %d\npublished %lld\ndeliveries %llu\nexpected %llu\nseconds %.3f\n"
           "deliveries_per_sec %.0f\nmissing %llu\ndisordered %llu\npublish_errors %llu\nlost %d\ndone\n",
           subscribers, (long long)published, (unsigned long long)rate_deliveries, (unsigned long long)expected,
           secs, secs > 0 ? rate_deliveries / secs : 0, (unsigned long long)(expected - rate_deliveries),
           (unsigned long long)disordered, (unsigned long long)publish_errors, lost);
    fflush(stdout);
    rate_base = -1;
    free(rate_count);
}

static char *slurp(const char *file, size_t *len) {
    FILE *f = fopen(file, "rb");
    if (!f)
        bench_die(file);
    char *buf = malloc(65536);
    *len = fread(buf, 1, 65535, f);
    fclose(f);
    if (*len == 0 || *len >= 65535) {
        fprintf(stderr, "%s: empty or too long\n", file);
        exit(2);
    }
    return buf;
}

int main(int argc, char **argv) {
    const char *pub_file = NULL;
    const struct bench_option options[] = {
        { "--port", BENCH_INT, &port },
        { "--host", BENCH_STRING, &host },
        { "--path", BENCH_STRING, &path },
        { "--conns", BENCH_INT, &nsubs },
        { "--publish-port", BENCH_INT, &pub_port },
        { "--publish-request", BENCH_STRING, &pub_file },
        { "--batch", BENCH_INT, &batch },
        { "--timeout", BENCH_DOUBLE, &timeout_s },
        { "--open-timeout", BENCH_DOUBLE, &open_timeout_s },
        { NULL, BENCH_FLAG, NULL },
    };
    if (bench_options("holding-client", argc, argv, 1, options) < 0)
        return 2;
    if (!port || !pub_port || nsubs <= 0 || !pub_file || batch <= 0) {
        fprintf(stderr, "usage: holding-client --port P --path PATH --conns N --publish-port Q "
                        "--publish-request FILE [--batch 200] [--timeout S] [--open-timeout S]\n");
        return 2;
    }
    pub_template = slurp(pub_file, &pub_template_len);
    if (asprintf(&sub_request, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: text/event-stream\r\n\r\n", path,
                 host, port) < 0)
        bench_die("asprintf");
    sub_request_len = strlen(sub_request);
    subs = calloc(nsubs, sizeof *subs);
    if (!subs)
        bench_die("calloc");
    for (int i = 0; i < nsubs; i++) {
        subs[i].fd = -1;
        subs[i].last_seq = -1;
    }
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        bench_die("epoll_create1");

    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        double a = 0;
        int b = 0;
        if (!strncmp(line, "open", 4))
            cmd_open();
        else if (!strncmp(line, "ready", 5))
            cmd_ready();
        else if (sscanf(line, "fanout %lf", &a) == 1 && a >= 1)
            cmd_fanout((int)a);
        else if (sscanf(line, "rate %lf %d", &a, &b) == 2 && a > 0 && b > 0)
            cmd_rate(a, b);
        else if (!strncmp(line, "quit", 4))
            break;
        else {
            printf("error unknown command\ndone\n");
            fflush(stdout);
        }
    }
    return 0;
}
