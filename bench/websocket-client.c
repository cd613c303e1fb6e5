/*
 * bench/websocket-client.c - the WebSocket clients and the publisher of
 * bench/websocket.
 *
 * One process, one epoll loop, the same for every server measured: it holds
 * many WebSocket connections open, sends each message in a frame masked as
 * RFC 6455 section 5.3 requires of a client, times echoes, publishes over the
 * server's HTTP publish endpoint and times when each connection receives the
 * publish.  It knows nothing of the servers: the upgrade path and the publish
 * request (a file holding the whole HTTP request, in which every "@@SEQ@@@"
 * becomes the publish's 8-digit number) are given.
 *
 *   websocket-client --port P --path /ws --conns N [--message-size 64]
 *                    [--publish-port Q --publish-request FILE]
 *                    [--batch 50] [--open-rate R] [--timeout S] [--open-timeout S]
 *
 * --timeout (30 s) bounds each wait, --open-timeout (300 s) opening the
 * connections.  It then reads commands on standard input, one a line, and
 * answers each with "key value" lines ending with "done":
 *
 *   open          opens the N connections (at most --batch upgrading at a
 *                 time and, with --open-rate, at most R started a second),
 *                 each until its 101 arrived: opened, failed (and why:
 *                 failed_connect, failed_closed, failed_status with
 *                 last_bad_status, failed_timeout), lost
 *   ready         publishes until every open connection has received one (a
 *                 server may subscribe a connection after its 101): warmups,
 *                 ready
 *   fanout K      K publishes one after another, each once the last reached
 *                 every connection: per publish the time from writing the
 *                 publish request to each connection reading it; the median
 *                 over the K of p50, p99 and max (ms), and missing
 *   echo S C      for S seconds the first C open connections each send a
 *                 message and wait for its echo before the next (a closed
 *                 loop): echoes, echoes_per_sec, p50_ms, p99_ms, unanswered
 *   check         every open connection sends one message, at most --batch
 *                 waiting for their echo at a time: answered, unanswered
 *                 (no echo, and none of the others' for --timeout), lost
 *
 * Messages are text: an echo's "e" and a publish's "p NNNNNNNN" (its number)
 * padded to --message-size; a connection has at most one echo outstanding,
 * so an echo needs no number.  A ping is answered with a pong; a close frame
 * or the connection's end counts the connection as lost.  The 101's
 * Sec-WebSocket-Accept is not checked (the servers are known; the suite
 * checks each server's handshake).  Only loopback addresses are meant here.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client_common.h"

#define SEQ_TOKEN "@@SEQ@@@"
#define SEQ_WIDTH 8
#define KEEP 128 /* a frame's first payload bytes kept: a ping's whole */

enum conn_state { C_NONE, C_CONNECTING, C_HEAD, C_OPEN, C_LOST };

/* A server's frames, read as they arrive: the head gathered, then the
 * payload counted down, its first KEEP bytes kept. */
struct frame_reader {
    unsigned char head[14];
    unsigned head_len, head_need;
    uint64_t left;
    unsigned char keep[KEEP];
    unsigned keep_len;
    int opcode;
};

struct conn {
    int fd;
    enum conn_state state;
    char *head; /* the 101 answer's head, until whole */
    size_t head_len;
    struct frame_reader f;
    int64_t last_seq;  /* the last publish received, -1 none */
    uint64_t got_ns;   /* fanout: when the publish timed arrived, 0 not yet */
    uint64_t sent_ns;  /* the echo outstanding: when sent, 0 none */
};

static int port = 0, pub_port = 0, nconns = 0, batch = 50, msg_size = 64;
static double timeout_s = 30, open_timeout_s = 300, open_rate = 0;
static const char *host = "127.0.0.1", *path = "/";
static char *pub_template;
static size_t pub_template_len;

static struct conn *conns;
static int epfd;
static char rbuf[65536];
static char *upgrade_request;
static size_t upgrade_request_len;

/* The publisher: one connection, one request at a time, its answer's end
 * found by Content-Length, chunks or the connection's close. */
static struct {
    int fd;
    int busy;
    char req[65536];
    size_t req_len, req_off;
    char head[8192];
    size_t head_len;
    int status, chunked, conn_close;
    long long length_left;
} pub = { .fd = -1 };
static uint64_t publish_errors;

/* What is being measured. */
static int64_t next_seq = 1, measure_seq = -1;
static uint64_t measure_sent_ns;
static int measure_count, warm_ready;
static uint64_t last_delivery_ns; /* when any connection last read a publish */
static uint64_t disordered, unexpected;
static int echo_active;       /* echo: connections 0..echo_active-1 loop */
static uint64_t echo_stop_ns; /* echo: no new message after this */
static uint64_t *lat;         /* echo latencies, ns */
static size_t lat_len, lat_cap;
static int answered;          /* check: connections whose echo came */
static int opened, lost, failed_connect, failed_closed, failed_status, last_bad_status;

static void watch(int fd, uint32_t events, uint32_t id, int op) {
    struct epoll_event ev = { .events = events, .data.u32 = id };
    if (epoll_ctl(epfd, op, fd, &ev) < 0)
        bench_die("epoll_ctl");
}

/* ---- frames ------------------------------------------------------------- */

/* xorshift: mask keys need not be strong here, only present and varied */
static uint32_t mask_state = 2463534242u;
static uint32_t next_mask(void) {
    mask_state ^= mask_state << 13;
    mask_state ^= mask_state >> 17;
    mask_state ^= mask_state << 5;
    return mask_state;
}

/* Writes one final, masked frame; returns 0, or -1 when the socket did not
 * take it whole (a connection that cannot take a small frame is lost). */
static int send_frame(int fd, int opcode, const char *payload, size_t len) {
    unsigned char buf[16 + 65536];
    size_t n = 0;
    if (len > 65535)
        return -1;
    buf[n++] = 0x80 | opcode;
    if (len < 126) {
        buf[n++] = 0x80 | len;
    } else {
        buf[n++] = 0x80 | 126;
        buf[n++] = len >> 8;
        buf[n++] = len & 0xff;
    }
    uint32_t key = next_mask();
    unsigned char k[4] = { key >> 24, key >> 16, key >> 8, key };
    memcpy(buf + n, k, 4);
    n += 4;
    for (size_t i = 0; i < len; i++)
        buf[n + i] = payload[i] ^ k[i & 3];
    n += len;
    return write(fd, buf, n) == (ssize_t)n ? 0 : -1;
}

static char *echo_msg;

static void conn_lost(struct conn *c);

static void send_echo(struct conn *c) {
    c->sent_ns = bench_now_ns();
    if (send_frame(c->fd, 1, echo_msg, msg_size) < 0)
        conn_lost(c);
}

/* ---- connections --------------------------------------------------------- */

static void conn_lost(struct conn *c) {
    if (c->fd >= 0) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    if (c->state == C_OPEN) {
        opened--;
        lost++;
    } else if (c->state == C_CONNECTING) {
        failed_connect++;
    } else if (c->state == C_HEAD) {
        int status = 0;
        if (c->head && sscanf(c->head, "HTTP/1.%*d %d", &status) == 1 && status > 0)
            failed_status++, last_bad_status = status;
        else
            failed_closed++;
    }
    free(c->head);
    c->head = NULL;
    c->fd = -1;
    c->state = C_LOST;
    c->sent_ns = 0;
}

/* A publish numbered seq read at time t.  One read again, or after a later
 * one, is counted as out of order and not as a delivery. */
static void delivered(struct conn *c, int64_t seq, uint64_t t) {
    if (seq <= c->last_seq) {
        disordered++;
        return;
    }
    if (c->last_seq < 0)
        warm_ready++;
    c->last_seq = seq;
    last_delivery_ns = t;
    if (seq == measure_seq) {
        c->got_ns = t;
        measure_count++;
    }
}

/* A whole data message from the server (its first frame's first bytes). */
static void message(struct conn *c, const unsigned char *p, size_t n, uint64_t t) {
    if (n >= 2 && p[0] == 'p' && p[1] == ' ') {
        int64_t seq = 0;
        for (size_t i = 2; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            seq = seq * 10 + (p[i] - '0');
        delivered(c, seq, t);
    } else if (n >= 1 && p[0] == 'e' && c->sent_ns) {
        uint64_t sent = c->sent_ns;
        c->sent_ns = 0;
        if (echo_active) {
            if (lat_len == lat_cap) {
                lat_cap = lat_cap ? lat_cap * 2 : 65536;
                lat = realloc(lat, lat_cap * sizeof *lat);
                if (!lat)
                    bench_die("realloc");
            }
            lat[lat_len++] = t - sent;
            if (c - conns < echo_active && t < echo_stop_ns)
                send_echo(c);
        } else {
            answered++;
        }
    } else {
        unexpected++;
    }
}

/* Feeds frame bytes; returns -1 when the connection is to be dropped (a close
 * frame, a frame a server may not send). */
static int frames(struct conn *c, const unsigned char *p, size_t n, uint64_t t) {
    struct frame_reader *f = &c->f;
    size_t i = 0;
    while (i < n) {
        if (f->head_need == 0 || f->head_len < f->head_need) {
            if (f->head_need == 0)
                f->head_need = 2;
            f->head[f->head_len++] = p[i++];
            if (f->head_len == 2) {
                if (f->head[1] & 0x80)
                    return -1; /* a server's frames are not masked */
                unsigned len7 = f->head[1] & 0x7f;
                f->head_need = len7 == 126 ? 4 : len7 == 127 ? 10 : 2;
            }
            if (f->head_len < f->head_need)
                continue;
            unsigned len7 = f->head[1] & 0x7f;
            f->left = len7;
            if (len7 >= 126) {
                f->left = 0;
                for (unsigned k = 2; k < f->head_need; k++)
                    f->left = f->left << 8 | f->head[k];
            }
            f->opcode = f->head[0] & 0x0f;
            f->keep_len = 0;
        } else {
            size_t take = n - i < f->left ? n - i : f->left;
            for (size_t k = 0; k < take && f->keep_len < KEEP; k++)
                f->keep[f->keep_len++] = p[i + k];
            f->left -= take;
            i += take;
        }
        if (f->head_len == f->head_need && f->left == 0) {
            /* a frame whole: a data message is told by its first frame */
            if (f->opcode == 8)
                return -1;
            if (f->opcode == 9 && send_frame(c->fd, 10, (char *)f->keep, f->keep_len) < 0)
                return -1;
            if (f->opcode == 1 || f->opcode == 2)
                message(c, f->keep, f->keep_len, t);
            f->head_len = f->head_need = 0;
            if (c->state != C_OPEN)
                return -1; /* lost while answering */
        }
    }
    return 0;
}

/* The 101 answer's head, gathered until whole; what follows it is frames. */
static int upgrade_head(struct conn *c, const char *p, size_t n, uint64_t t) {
    c->head = realloc(c->head, c->head_len + n + 1);
    if (!c->head)
        bench_die("realloc");
    memcpy(c->head + c->head_len, p, n);
    c->head_len += n;
    c->head[c->head_len] = 0;
    char *end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
    if (!end)
        return c->head_len > 16384 ? -1 : 0;
    int status = 0;
    if (sscanf(c->head, "HTTP/1.1 %d", &status) != 1 || status != 101)
        return -1;
    size_t rest = c->head + c->head_len - (end + 4);
    unsigned char *after = malloc(rest + 1);
    if (!after)
        bench_die("malloc");
    memcpy(after, end + 4, rest);
    free(c->head);
    c->head = NULL;
    c->head_len = 0;
    c->state = C_OPEN;
    opened++;
    int r = rest ? frames(c, after, rest, t) : 0;
    free(after);
    return r;
}

static void conn_event(struct conn *c, uint32_t events) {
    if (c->state == C_CONNECTING) {
        if (!(events & EPOLLOUT)) {
            conn_lost(c);
            return;
        }
        /* a small request fits the new socket's buffer */
        if (write(c->fd, upgrade_request, upgrade_request_len) != (ssize_t)upgrade_request_len) {
            conn_lost(c);
            return;
        }
        c->state = C_HEAD;
        watch(c->fd, EPOLLIN | EPOLLRDHUP, c - conns, EPOLL_CTL_MOD);
        return;
    }
    for (;;) {
        ssize_t n = read(c->fd, rbuf, sizeof rbuf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            conn_lost(c);
            return;
        }
        uint64_t t = bench_now_ns();
        int r = c->state == C_HEAD ? upgrade_head(c, rbuf, n, t) : frames(c, (unsigned char *)rbuf, n, t);
        if (r < 0) {
            conn_lost(c);
            return;
        }
        if ((size_t)n < sizeof rbuf)
            return;
    }
}

/* ---- the publisher ------------------------------------------------------- */

static void publish_error(const char *why) {
    if (publish_errors++ < 5)
        fprintf(stderr, "websocket-client: publish %s (status %d)\n", why, pub.status);
}

static void pub_close(void) {
    if (pub.fd >= 0) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, pub.fd, NULL);
        close(pub.fd);
    }
    pub.fd = -1;
}

static void pub_write(void) {
    while (pub.req_off < pub.req_len) {
        ssize_t n = write(pub.fd, pub.req + pub.req_off, pub.req_len - pub.req_off);
        if (n < 0 && (errno == EAGAIN || errno == ENOTCONN)) {
            watch(pub.fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, nconns, EPOLL_CTL_MOD);
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
    watch(pub.fd, EPOLLIN | EPOLLRDHUP, nconns, EPOLL_CTL_MOD);
}

/* Writes publish number seq (once its connection is up, when new). */
static void publish(int64_t seq) {
    if (pub.fd < 0) {
        pub.fd = bench_connect(host, pub_port);
        if (pub.fd < 0)
            bench_die("publish connection");
        watch(pub.fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, nconns, EPOLL_CTL_ADD);
    }
    char num[SEQ_WIDTH + 1];
    snprintf(num, sizeof num, "%0*lld", SEQ_WIDTH, (long long)seq);
    memcpy(pub.req, pub_template, pub_template_len);
    pub.req_len = pub_template_len;
    for (char *p = pub.req; (p = memmem(p, pub.req + pub.req_len - p, SEQ_TOKEN, SEQ_WIDTH)); p += SEQ_WIDTH)
        memcpy(p, num, SEQ_WIDTH);
    pub.req_off = 0;
    pub.busy = 1;
    pub.head_len = 0;
    pub.status = 0;
    pub_write();
}

static const char *pub_field(const char *name) {
    size_t n = strlen(name);
    for (const char *p = pub.head; (p = strstr(p, "\r\n")); ) {
        p += 2;
        if (strncasecmp(p, name, n) == 0 && p[n] == ':')
            return p + n + 1;
    }
    return NULL;
}

/* An answer is over when its Content-Length is read, its last chunk ("0\r\n\r\n"
 * ends the bytes read: the answers here are small) or its connection closed. */
static void pub_answered(void) {
    if (pub.status < 200 || pub.status > 299)
        publish_error("refused");
    pub.busy = 0;
    if (pub.conn_close) /* Pushpin's endpoint answers so: a new connection next */
        pub_close();
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
                if (pub.status && pub.length_left < 0 && !pub.chunked)
                    pub_answered();
                else
                    publish_error("connection closed before the answer"), pub.busy = 0;
            }
            pub_close();
            return;
        }
        if (!pub.busy)
            continue;
        const char *body = rbuf;
        size_t body_len = n;
        if (!pub.status) {
            size_t take = (size_t)n < sizeof pub.head - 1 - pub.head_len ? (size_t)n : sizeof pub.head - 1 - pub.head_len;
            memcpy(pub.head + pub.head_len, rbuf, take);
            size_t before = pub.head_len;
            pub.head_len += take;
            pub.head[pub.head_len] = 0;
            char *end = strstr(pub.head, "\r\n\r\n");
            if (!end) {
                if (pub.head_len == sizeof pub.head - 1)
                    publish_error("answer head too long"), pub.busy = 0, pub_close();
                continue;
            }
            if (sscanf(pub.head, "HTTP/1.%*d %d", &pub.status) != 1)
                pub.status = -1;
            const char *te = pub_field("Transfer-Encoding"), *cl = pub_field("Content-Length");
            const char *conn = pub_field("Connection");
            pub.chunked = te && strncasecmp(te + strspn(te, " "), "chunked", 7) == 0;
            pub.conn_close = conn && strncasecmp(conn + strspn(conn, " "), "close", 5) == 0;
            pub.length_left = cl ? strtoll(cl, NULL, 10) : -1;
            size_t head_len = end + 4 - pub.head;
            body = rbuf + (head_len - before);
            body_len = n - (head_len - before);
        }
        if (pub.chunked) {
            if (body_len >= 5 && memcmp(body + body_len - 5, "0\r\n\r\n", 5) == 0)
                pub_answered();
        } else if (pub.length_left >= 0) {
            pub.length_left -= body_len;
            if (pub.length_left <= 0)
                pub_answered();
        }
        if (pub.fd < 0)
            return;
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
        if (id == (uint32_t)nconns)
            pub_event(evs[i].events);
        else
            conn_event(&conns[id], evs[i].events);
    }
}

static int upgrading(void) {
    int n = 0;
    for (int i = 0; i < nconns; i++)
        n += conns[i].state == C_CONNECTING || conns[i].state == C_HEAD;
    return n;
}

static void cmd_open(void) {
    uint64_t start = bench_now_ns(), deadline = start + (uint64_t)(open_timeout_s * 1e9);
    int next = 0, in_flight = 0;
    while (bench_now_ns() < deadline) {
        /* a server may take upgrades faster than the rest of it can follow
         * (Pushpin answers the 101 before its handler has the connection's
         * subscription): --open-rate paces them as clients arriving over time */
        int allowed = open_rate > 0 ? (int)((bench_now_ns() - start) / 1e9 * open_rate) + 1 : nconns;
        while (next < nconns && in_flight < batch && next < allowed) {
            struct conn *c = &conns[next++];
            c->fd = bench_connect(host, port);
            if (c->fd < 0) {
                c->state = C_LOST;
                failed_connect++;
                continue;
            }
            c->state = C_CONNECTING;
            watch(c->fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, c - conns, EPOLL_CTL_ADD);
            in_flight++;
        }
        if (next >= nconns && upgrading() == 0)
            break;
        turn(10);
        in_flight = upgrading();
    }
    /* those still upgrading at the deadline, and those never tried, give up */
    int failed_timeout = 0;
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        if (c->state == C_CONNECTING || c->state == C_HEAD || c->state == C_NONE) {
            failed_timeout++;
            c->state = C_NONE; /* not counted as any other failure */
            conn_lost(c);
        }
    }
    printf("opened %d\nfailed %d\nfailed_connect %d\nfailed_closed %d\nfailed_status %d\nlast_bad_status %d\n"
           "failed_timeout %d\nlost %d\ndone\n", opened, nconns - opened, failed_connect, failed_closed,
           failed_status, last_bad_status, failed_timeout, lost);
    fflush(stdout);
}

static void cmd_ready(void) {
    uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    int warmups = 0, before = warm_ready;
    uint64_t last = 0;
    while (warm_ready < opened && bench_now_ns() < deadline) {
        /* a warm-up publish once the last has stopped arriving (none sent or
         * read for a second), until every connection has had one: a publish
         * sent while the last is still being delivered would measure how a
         * server copes with a backlog of publishes (Pushpin lost most of
         * 10,000 connections to one every 100 ms), not make them ready */
        uint64_t now = bench_now_ns(), quiet = last > last_delivery_ns ? last : last_delivery_ns;
        if (!pub.busy && now - quiet > 1000000000ull) {
            publish(next_seq++);
            warmups++;
            last = now;
        }
        turn(10);
        if (warm_ready != before) {
            before = warm_ready;
            deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
        }
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
    uint64_t *l = malloc(sizeof *l * (nconns + 1));
    uint64_t *p50 = calloc(k, sizeof *p50), *p99 = calloc(k, sizeof *p99), *max = calloc(k, sizeof *max);
    int *got = calloc(k, sizeof *got);
    if (!l || !p50 || !p99 || !max || !got)
        bench_die("malloc");
    uint64_t missed = 0;
    for (int round = 0; round < k; round++) {
        for (int i = 0; i < nconns; i++)
            conns[i].got_ns = 0;
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
        for (int i = 0; i < nconns; i++)
            if (conns[i].got_ns)
                l[n++] = conns[i].got_ns - measure_sent_ns;
        got[round] = n;
        missed += opened > measure_count ? opened - measure_count : 0;
        if (n) {
            qsort(l, n, sizeof *l, bench_cmp_u64);
            p50[round] = l[(n - 1) / 2];
            p99[round] = l[(size_t)((n - 1) * 0.99)];
            max[round] = l[n - 1];
        }
        printf("fanout_round %d received %d p50_ms %.2f p99_ms %.2f max_ms %.2f\n", round + 1, n,
               ms(p50[round]), ms(p99[round]), ms(max[round]));
    }
    measure_seq = -1;
    qsort(p50, k, sizeof *p50, bench_cmp_u64);
    qsort(p99, k, sizeof *p99, bench_cmp_u64);
    qsort(max, k, sizeof *max, bench_cmp_u64);
    int least = got[0];
    for (int i = 1; i < k; i++)
        least = got[i] < least ? got[i] : least;
    printf("connections %d\nleast_received %d\np50_ms %.2f\np99_ms %.2f\nmax_ms %.2f\nmissing %llu\n"
           "disordered %llu\npublish_errors %llu\nlost %d\ndone\n", opened, least, ms(p50[(k - 1) / 2]),
           ms(p99[(k - 1) / 2]), ms(max[(k - 1) / 2]), (unsigned long long)missed,
           (unsigned long long)disordered, (unsigned long long)publish_errors, lost);
    fflush(stdout);
    free(l);
    free(p50);
    free(p99);
    free(max);
    free(got);
}

/* Waits until no connection has an echo outstanding, or --timeout passed
 * with no echo arriving (a slow server answering thousands at once is still
 * answering); returns how many are still outstanding (dropped: their echo
 * is late). */
static int drain(void) {
    uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    int outstanding, before = -1;
    for (;;) {
        outstanding = 0;
        for (int i = 0; i < nconns; i++)
            outstanding += conns[i].state == C_OPEN && conns[i].sent_ns;
        if (!outstanding || bench_now_ns() >= deadline)
            break;
        if (outstanding != before)
            deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
        before = outstanding;
        turn(10);
    }
    for (int i = 0; i < nconns; i++)
        conns[i].sent_ns = 0;
    return outstanding;
}

static void cmd_echo(double seconds, int clients) {
    int active = 0;
    for (int i = 0; i < nconns && active < clients; i++)
        active += conns[i].state == C_OPEN;
    lat_len = 0;
    echo_active = nconns; /* in the loop: a connection's echo sends the next */
    uint64_t start = bench_now_ns();
    echo_stop_ns = start + (uint64_t)(seconds * 1e9);
    int started = 0;
    for (int i = 0; i < nconns && started < clients; i++) {
        if (conns[i].state != C_OPEN)
            continue;
        started++;
        echo_active = i + 1;
        send_echo(&conns[i]);
    }
    while (bench_now_ns() < echo_stop_ns)
        turn(10);
    size_t in_time = lat_len;
    int unanswered = drain();
    echo_active = 0;
    double secs = (echo_stop_ns - start) / 1e9;
    qsort(lat, lat_len, sizeof *lat, bench_cmp_u64);
    printf("clients %d\nechoes %zu\nseconds %.3f\nechoes_per_sec %.0f\np50_ms %.3f\np99_ms %.3f\n"
           "unanswered %d\nlost %d\ndone\n", started, in_time, secs, in_time / secs,
           lat_len ? ms(lat[(lat_len - 1) / 2]) : 0, lat_len ? ms(lat[(size_t)((lat_len - 1) * 0.99)]) : 0,
           unanswered, lost);
    fflush(stdout);
}

static void cmd_check(void) {
    answered = 0;
    int sent = 0, next = 0, unanswered;
    uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    /* at most --batch messages outstanding: this asks whether each
     * connection still answers, not how a server takes thousands at once
     * (Pushpin closed half of 1,000 connections sent a message each at once) */
    for (;;) {
        int outstanding = 0;
        for (int i = 0; i < next; i++)
            outstanding += conns[i].state == C_OPEN && conns[i].sent_ns;
        while (next < nconns && outstanding < batch) {
            struct conn *c = &conns[next++];
            if (c->state != C_OPEN)
                continue;
            send_echo(c);
            sent++;
            outstanding++;
        }
        if (next >= nconns)
            break;
        int before = answered;
        turn(10);
        if (answered != before)
            deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
        else if (bench_now_ns() >= deadline)
            break; /* no answer for --timeout: the rest are not tried */
    }
    unanswered = drain() + (nconns - next);
    printf("checked %d\nanswered %d\nunanswered %d\nlost %d\nunexpected %llu\ndone\n", sent, answered,
           unanswered, lost, (unsigned long long)unexpected);
    fflush(stdout);
}

static char *slurp(const char *file, size_t *len) {
    FILE *f = fopen(file, "rb");
    if (!f)
        bench_die(file);
    char *buf = malloc(65536);
    if (!buf)
        bench_die("malloc");
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "websocket-client: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--path")) path = v;
        else if (!strcmp(a, "--conns")) nconns = atoi(v);
        else if (!strcmp(a, "--message-size")) msg_size = atoi(v);
        else if (!strcmp(a, "--publish-port")) pub_port = atoi(v);
        else if (!strcmp(a, "--publish-request")) pub_file = v;
        else if (!strcmp(a, "--batch")) batch = atoi(v);
        else if (!strcmp(a, "--timeout")) timeout_s = atof(v);
        else if (!strcmp(a, "--open-timeout")) open_timeout_s = atof(v);
        else if (!strcmp(a, "--open-rate")) open_rate = atof(v);
        else {
            fprintf(stderr, "websocket-client: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (!port || nconns <= 0 || batch <= 0 || msg_size < 1 || msg_size > 65535 || (pub_file && !pub_port)) {
        fprintf(stderr, "usage: websocket-client --port P --path PATH --conns N [--message-size 64] "
                        "[--publish-port Q --publish-request FILE] [--batch 50] [--open-rate R] [--timeout S] [--open-timeout S]\n");
        return 2;
    }
    if (pub_file)
        pub_template = slurp(pub_file, &pub_template_len);
    if (asprintf(&upgrade_request, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n", path, host, port) < 0)
        bench_die("asprintf");
    upgrade_request_len = strlen(upgrade_request);
    echo_msg = malloc(msg_size);
    if (!echo_msg)
        bench_die("malloc");
    memset(echo_msg, 'x', msg_size);
    echo_msg[0] = 'e';
    conns = calloc(nconns, sizeof *conns);
    if (!conns)
        bench_die("calloc");
    for (int i = 0; i < nconns; i++) {
        conns[i].fd = -1;
        conns[i].last_seq = -1;
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
        else if (!strncmp(line, "ready", 5) && pub_template)
            cmd_ready();
        else if (sscanf(line, "fanout %lf", &a) == 1 && a >= 1 && pub_template)
            cmd_fanout((int)a);
        else if (sscanf(line, "echo %lf %d", &a, &b) == 2 && a > 0 && b > 0)
            cmd_echo(a, b);
        else if (!strncmp(line, "check", 5))
            cmd_check();
        else if (!strncmp(line, "quit", 4))
            break;
        else {
            printf("error unknown command (or no publish request given)\ndone\n");
            fflush(stdout);
        }
    }
    return 0;
}
