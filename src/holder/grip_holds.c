/*
 * grip_holds.c - the holder's held connections (grip_holds.h,
 * docs/holding.md).
 *
 * Owns: each held connection's state (its hold, its pending output, its
 * timers), the channel store they subscribe in, and what is written to them.
 * A subscriber's number in the store is its descriptor.  Every byte goes
 * through the transport (transport.h).  It may not touch the holder's idle
 * connections: an answered long poll goes back to the loop through the
 * back_to_idle callback.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "holder/grip_holds.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection/connection.h"
#include "connection/transport.h"
#include "holder/channel_store.h"
#include "http/response_writer.h"
#include "log/log.h"
#include "shared/holder_message.h"

struct grip_conn {
    int fd;
    struct passed_connection info;
    uint8_t mode;          /* SEROW_GRIP_HOLD_STREAM or _RESPONSE */
    uint8_t chunked;       /* a stream's body is chunked: frame each item */
    uint8_t keep_alive;    /* a response hold, answered, may serve the next request */
    uint8_t head_request, minor_version;
    uint8_t answered;      /* a response hold has its answer queued */
    uint8_t closing;       /* close once the pending output is out */
    uint8_t want_write;    /* EPOLLOUT is asked for */
    uint8_t dirty;         /* on the batch's list: written when the batch ends */
    uint8_t timeout_keeps_alive; /* the answer at the timeout was made for a connection kept open */
    uint64_t timeout_at_ms;   /* a response hold's Grip-Timeout; 0: none */
    uint64_t keep_alive_at_ms; /* next keep-alive; 0: none */
    uint32_t keep_alive_ms;
    uint8_t keep_alive_mode;
    char *keep_alive_data;
    size_t keep_alive_len;
    char *timeout_response; /* a response hold's answer at its timeout */
    size_t timeout_len;
    char *out;             /* pending output: out[out_off, out_len) */
    size_t out_off, out_len, out_cap;
    /* for the access log line written when the hold ends */
    uint64_t started_ns;
    uint64_t bytes_written;
    uint16_t status;
    uint16_t request_line_len;
    char *request_line;
};

/* Bytes of pending output freed (a burst's buffers: a batch gives one to
 * each subscriber, a slow reader's grows) past which the loop gives the heap's
 * free pages back to the system; otherwise the holder would keep its largest
 * burst's worth of memory for good, scattered among the live allocations. */
#define TRIM_AFTER_FREED (1u << 20)

/* Bytes a batch lets wait for one connection before it writes them. */
#define BATCH_WRITE_AT (64u << 10)

struct serow_grip_holds {
    struct shared_state *shared;
    int epoll_fd;
    struct serow_grip_settings settings;
    serow_grip_back_to_idle back;
    void *back_arg;
    struct serow_channels *store;
    struct grip_conn **by_fd;
    int by_fd_size;
    uint32_t held;
    uint64_t next_due_ms; /* no timer is due before this; 0: none */
    uint8_t figures_changed;  /* the busiest channels may have: write them when due */
    size_t freed_output;      /* bytes of pending output freed since the last trim */
    /* In a batch (serow_grip_holds_batch_begin), what is queued is written
     * once per connection when the batch ends. */
    uint8_t batching;
    int *dirty;               /* descriptors of connections with deferred output */
    size_t dirty_count, dirty_cap;
    uint64_t figures_due_ms;  /* not written again before this */
    serow_grip_elsewhere elsewhere; /* deliveries to subscribers not held here */
    void *elsewhere_arg;
};

_Static_assert(SHARED_GRIP_CHANNEL_NAME >= SEROW_GRIP_MAX_NAME, "a channel's name fits the shared table");

struct serow_grip_holds *serow_grip_holds_new(struct shared_state *shared, int epoll_fd,
                                              const struct serow_grip_settings *settings,
                                              serow_grip_back_to_idle back, void *arg)
{
    struct serow_grip_holds *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    struct serow_channels_limits limits = {0};
    limits.items_per_channel = settings->items_per_channel;
    limits.max_subscriptions = settings->max_channels;
    limits.max_item_bytes = settings->max_item;
    g->store = serow_channels_new(&limits);
    if (g->store == NULL) {
        free(g);
        return NULL;
    }
    g->shared = shared;
    g->epoll_fd = epoll_fd;
    g->settings = *settings;
    g->back = back;
    g->back_arg = arg;
    serow_shared_set_busiest_channels(shared, NULL, 0); /* (a holder before us may have left some) */
    return g;
}

static void count_subscriptions(struct serow_grip_holds *g)
{
    struct serow_channels_stats stats;
    serow_channels_stats(g->store, &stats);
    atomic_store(&g->shared->grip.subscriptions, (uint32_t)stats.subscriptions);
}

/* The access log's line of a hold that ends: its request line, status
 * (the stream's, or the long poll's answer), the bytes the holder wrote,
 * and the time it was held (%D, %T: from the hand-over to its end). */
static void log_hold(struct serow_grip_holds *g, struct grip_conn *c)
{
    if (g->settings.access_log == NULL)
        return;
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof(addr);
    if (getpeername(c->fd, (struct sockaddr *)&addr, &addr_len) != 0)
        addr_len = 0;
    char remote[SEROW_REMOTE_ADDR_SIZE];
    serow_format_remote_address(remote, addr_len ? (struct sockaddr *)&addr : NULL, addr_len);
    uint64_t now = serow_request_clock_ns();
    struct access_log_entry e = {.remote_addr = remote, .status = c->status,
                                 .body_bytes = c->bytes_written, .pid = (int)getpid()};
    e.times = (struct access_log_times){c->started_ns, 0, 0, now};
    e.request_line = c->request_line_len ? c->request_line : NULL;
    e.request_line_len = c->request_line_len;
    serow_access_log_write(g->settings.access_log, &e);
}

static void forget(struct serow_grip_holds *g, struct grip_conn *c)
{
    g->figures_changed = 1;
    log_hold(g, c);
    free(c->request_line);
    serow_channels_unsubscribe_all(g->store, (uint32_t)c->fd);
    count_subscriptions(g);
    epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    g->by_fd[c->fd] = NULL;
    g->held--;
    atomic_store(&g->shared->grip.held, g->held);
    free(c->keep_alive_data);
    free(c->timeout_response);
    g->freed_output += c->out_cap;
    free(c->out);
    free(c);
}

static void close_conn(struct serow_grip_holds *g, struct grip_conn *c)
{
    int fd = c->fd;
    serow_transport_closed(&c->info.carried);
    forget(g, c);
    close(fd);
    atomic_fetch_sub(&g->shared->open_connections, 1);
}

/* An answered long poll whose answer is out: an idle keep-alive connection
 * again, or closed. */
static void end_answered(struct serow_grip_holds *g, struct grip_conn *c)
{
    if (!c->keep_alive) {
        serow_transport_shutdown(&c->info.carried, c->fd);
        close_conn(g, c);
        return;
    }
    int fd = c->fd;
    struct passed_connection info = c->info; /* (its request counted by the worker) */
    info.idle_since_ms = serow_shared_clock_ms();
    forget(g, c);
    g->back(g->back_arg, fd, &info);
}

static void watch(struct serow_grip_holds *g, struct grip_conn *c, int want_write)
{
    if (c->want_write == want_write)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (want_write ? EPOLLOUT : 0),
                             .data.u64 = SEROW_GRIP_TAG | (uint64_t)c->fd};
    epoll_ctl(g->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_write = (uint8_t)want_write;
}

/* Writes what the socket takes of the pending output.  0, or -1 when the
 * connection ended (it is gone then). */
static int flush(struct serow_grip_holds *g, struct grip_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = serow_transport_send(&c->info.carried, c->fd, c->out + c->out_off,
                                         c->out_len - c->out_off, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            watch(g, c, 1);
            return 0;
        }
        if (n <= 0) {
            close_conn(g, c); /* the client is gone */
            return -1;
        }
        c->out_off += (size_t)n;
        c->bytes_written += (uint64_t)n;
    }
    /* All out: the buffer goes (a reader that keeps up holds none). */
    g->freed_output += c->out_cap;
    free(c->out);
    c->out = NULL;
    c->out_off = c->out_len = c->out_cap = 0;
    watch(g, c, 0);
    if (c->closing) {
        serow_transport_shutdown(&c->info.carried, c->fd);
        close_conn(g, c);
        return -1;
    }
    if (c->answered) {
        end_answered(g, c);
        return -1;
    }
    return 0;
}

/* Whether a connection has something for flush to do now: bytes pending, or
 * an end (a close, a long poll's answer) with or without them; not while
 * it waits for the socket to take more (EPOLLOUT does it then). */
static inline int write_due(const struct grip_conn *c)
{
    return (c->out_len > c->out_off || c->closing || c->answered) && !c->want_write;
}

/* A connection's output is written when the batch ends (one send for every
 * item the batch gave it).  Without room on the list, it is written now. */
static void defer(struct serow_grip_holds *g, struct grip_conn *c)
{
    if (c->dirty)
        return;
    if (g->dirty_count == g->dirty_cap) {
        size_t cap = g->dirty_cap ? g->dirty_cap * 2 : 256;
        int *grown = realloc(g->dirty, cap * sizeof(*grown));
        if (grown == NULL) {
            if (!c->want_write)
                flush(g, c);
            return;
        }
        g->dirty = grown;
        g->dirty_cap = cap;
    }
    g->dirty[g->dirty_count++] = c->fd;
    c->dirty = 1;
}

/* Queues bytes (pieces of them, n) for the client; past --hold-max-pending
 * the connection is dropped: a client that does not read never holds up the
 * others, nor grows the holder.  0, or -1 when dropped. */
static int queue(struct serow_grip_holds *g, struct grip_conn *c, const struct iovec *pieces, int n)
{
    size_t add = 0;
    for (int i = 0; i < n; i++)
        add += pieces[i].iov_len;
    /* Nothing pending: written at once, and only what the socket does not
     * take is copied (a client that keeps up costs no buffer). */
    struct iovec rest[4];
    if (c->out_len == c->out_off && n <= 4 && add > 0 && !g->batching) {
        ssize_t w;
        do
            w = serow_transport_writev(&c->info.carried, c->fd, pieces, n);
        while (w < 0 && errno == EINTR);
        if (w < 0 && errno != EAGAIN) {
            close_conn(g, c); /* the client is gone */
            return -1;
        }
        size_t done = w > 0 ? (size_t)w : 0;
        c->bytes_written += done;
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (done >= pieces[i].iov_len) {
                done -= pieces[i].iov_len;
                continue;
            }
            rest[k].iov_base = (char *)pieces[i].iov_base + done;
            rest[k++].iov_len = pieces[i].iov_len - done;
            done = 0;
        }
        pieces = rest;
        n = k;
        add = 0;
        for (int i = 0; i < n; i++)
            add += pieces[i].iov_len;
        if (add == 0)
            return 0;
    }
    /* In a batch, bytes wait for its end without a try at the socket: past
     * BATCH_WRITE_AT (or the bound) what is queued goes now, so that the
     * bound counts only what a client did not take, and a batch of large
     * items holds little. */
    if (g->batching && c->out_len > c->out_off && !c->want_write && !c->answered && !c->closing &&
        (c->out_len - c->out_off + add > BATCH_WRITE_AT ||
         c->out_len - c->out_off + add > g->settings.max_pending) && flush(g, c) != 0)
        return -1; /* (ended: gone) */
    if (c->out_len - c->out_off + add > g->settings.max_pending) {
        atomic_fetch_add(&g->shared->grip.drops, 1);
        serow_channels_dropped(g->store, (uint32_t)c->fd);
        serow_log_info("connection holder: a held connection's client read too slowly: %zu bytes "
                       "pending, past --hold-max-pending %zu: closed",
                       c->out_len - c->out_off + add, g->settings.max_pending);
        close_conn(g, c);
        return -1;
    }
    if (c->out_len + add > c->out_cap) {
        if (c->out_off > 0) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->out_len + add > c->out_cap) {
            /* (small first when a batch defers: every subscriber of a
             * fan-out has a buffer until the batch ends) */
            size_t cap = c->out_cap ? c->out_cap : g->batching ? 256 : 1024;
            while (cap < c->out_len + add)
                cap *= 2;
            char *grown = realloc(c->out, cap);
            if (grown == NULL) {
                close_conn(g, c);
                return -1;
            }
            c->out = grown;
            c->out_cap = cap;
        }
    }
    for (int i = 0; i < n; i++) {
        memcpy(c->out + c->out_len, pieces[i].iov_base, pieces[i].iov_len);
        c->out_len += pieces[i].iov_len;
    }
    if (g->batching)
        defer(g, c);
    return 0;
}

/* Bytes of a stream's body, framed as a chunk when the body is chunked. */
static int queue_stream_bytes(struct serow_grip_holds *g, struct grip_conn *c, const char *p,
                              size_t len)
{
    if (len == 0)
        return 0;
    char size_line[24];
    struct iovec v[3] = {{size_line, 0}, {(char *)p, len}, {"\r\n", 2}};
    if (!c->chunked)
        return queue(g, c, v + 1, 1);
    v[0].iov_len = serow_format_chunk_size(size_line, len);
    return queue(g, c, v, 3);
}

/* The next keep-alive: up to a second early at random, as in Pushpin, so
 * that the keep-alives of connections held at the same moment spread out
 * (never earlier than half the timeout). */
static void keep_alive_from_now(struct grip_conn *c, uint64_t now)
{
    if (c->keep_alive_ms == 0)
        return;
    uint32_t spread = c->keep_alive_ms / 2 < 1000 ? c->keep_alive_ms / 2 : 1000;
    c->keep_alive_at_ms = now + c->keep_alive_ms - (spread ? (uint64_t)random() % spread : 0);
}

static void due_by(struct serow_grip_holds *g, uint64_t at)
{
    if (at && (g->next_due_ms == 0 || at < g->next_due_ms))
        g->next_due_ms = at;
}

/* A published http-response, as the answer to a long poll: the item's code,
 * reason, headers and body, with our framing.  0, or -1 when the connection
 * ended. */
static int queue_published_response(struct serow_grip_holds *g, struct grip_conn *c,
                                    const struct serow_channel_item *item)
{
    struct serow_publish_item p;
    enum serow_holder_message_type type;
    const char *body, *error;
    size_t body_len;
    if (serow_holder_frame(item->bytes, item->len, &type, &body, &body_len) <= 0 ||
        serow_publish_decode(body, body_len, &p, &error) != 0)
        return 0; /* (the store kept it: it was decoded once already) */
    size_t size = 128 + p.response.reason.len + p.response.body.len;
    for (unsigned i = 0; i < p.response.num_headers; i++)
        size += p.response.header_names[i].len + p.response.header_values[i].len + 4;
    char *answer = malloc(size);
    if (answer == NULL) {
        close_conn(g, c);
        return -1;
    }
    const char *reason = p.response.reason.len ? p.response.reason.p : serow_status_reason(p.response.code);
    int reason_len = p.response.reason.len ? (int)p.response.reason.len : (int)strlen(reason);
    size_t at = (size_t)snprintf(answer, size, "HTTP/1.%d %u %.*s\r\n", c->minor_version ? 1 : 0,
                                 p.response.code, reason_len, reason);
    for (unsigned i = 0; i < p.response.num_headers; i++) {
        /* (the decoder held each to HTTP's rules; the framing is ours) */
        const struct serow_bytes *n = &p.response.header_names[i];
        if ((n->len == 14 && strncasecmp(n->p, "Content-Length", 14) == 0) ||
            (n->len == 17 && strncasecmp(n->p, "Transfer-Encoding", 17) == 0) ||
            (n->len == 10 && strncasecmp(n->p, "Connection", 10) == 0))
            continue;
        memcpy(answer + at, n->p, n->len);
        at += n->len;
        memcpy(answer + at, ": ", 2);
        at += 2;
        memcpy(answer + at, p.response.header_values[i].p, p.response.header_values[i].len);
        at += p.response.header_values[i].len;
        memcpy(answer + at, "\r\n", 2);
        at += 2;
    }
    at += (size_t)snprintf(answer + at, size - at, "Content-Length: %u\r\n%s\r\n", p.response.body.len,
                           c->keep_alive ? "" : "Connection: close\r\n");
    struct iovec v[2] = {{answer, at}, {(char *)p.response.body.p, c->head_request ? 0 : p.response.body.len}};
    c->answered = 1;
    c->status = p.response.code;
    serow_channels_unsubscribe_all(g->store, (uint32_t)c->fd);
    count_subscriptions(g);
    int r = queue(g, c, v, 2);
    free(answer);
    return r;
}

/* The end of a stream's body (a published close, the server's stop): the
 * last chunk when chunked; the connection closes once its output is out
 * (a close-delimited body ends there). */
static int end_stream(struct serow_grip_holds *g, struct grip_conn *c)
{
    c->closing = 1;
    serow_channels_unsubscribe_all(g->store, (uint32_t)c->fd);
    count_subscriptions(g);
    if (c->chunked) {
        struct iovec last = {"0\r\n\r\n", 5};
        return queue(g, c, &last, 1);
    }
    return 0;
}

/* A long poll answered with the app's own response (Grip-Timeout, the
 * server's stop), written now; with Connection: close when it will be
 * closed after it though it was made for a connection kept open (HTTP/1.1:
 * a 1.0 answer kept open says keep-alive, and a 1.0 client reads the end
 * of the connection as the end of that). */
static void answer_at_timeout(struct serow_grip_holds *g, struct grip_conn *c)
{
    c->answered = 1;
    serow_channels_unsubscribe_all(g->store, (uint32_t)c->fd);
    count_subscriptions(g);
    struct iovec v[3] = {{c->timeout_response, c->timeout_len}};
    int n = 1;
    const char *eol = c->timeout_len ? memchr(c->timeout_response, '\n', c->timeout_len) : NULL;
    if (!c->keep_alive && c->timeout_keeps_alive && c->minor_version == 1 && eol != NULL) {
        size_t line = (size_t)(eol + 1 - c->timeout_response);
        v[0].iov_len = line;
        v[1] = (struct iovec){"Connection: close\r\n", 19};
        v[2] = (struct iovec){c->timeout_response + line, c->timeout_len - line};
        n = 3;
    }
    if (queue(g, c, v, n) == 0)
        flush(g, c);
}

/* One delivery to one connection: queued, not yet written.  replay: the
 * item is a kept one, given to a hold that names a prev-id. */
static int deliver(struct serow_grip_holds *g, struct grip_conn *c, const struct serow_delivery *d, int replay)
{
    const struct serow_channel_item *item = d->item;
    if (c->answered || c->closing)
        return 0;
    if (c->mode == SEROW_GRIP_HOLD_RESPONSE) {
        if (!(item->formats & SEROW_FORMAT_HTTP_RESPONSE))
            return 0; /* not the format this hold needs: not sent to it */
        atomic_fetch_add(&g->shared->grip.deliveries, 1);
        serow_channels_delivered(g->store, d);
        return queue_published_response(g, c, item);
    }
    if (!(item->formats & SEROW_FORMAT_HTTP_STREAM))
        return 0;
    /* A close ends the streams open when it is published.  Replayed, it
     * would end a client's reconnection before the items published after
     * it, and again each time the client came back for them. */
    if (replay && item->stream_action == SEROW_ACTION_CLOSE)
        return 0;
    atomic_fetch_add(&g->shared->grip.deliveries, 1);
    serow_channels_delivered(g->store, d);
    if (item->stream_action == SEROW_ACTION_CLOSE)
        return end_stream(g, c);
    if (queue_stream_bytes(g, c, serow_channel_item_stream(item), item->stream_len) != 0)
        return -1;
    if (c->keep_alive_mode == SEROW_GRIP_KEEP_ALIVE_IDLE)
        keep_alive_from_now(c, serow_shared_clock_ms());
    return 0;
}

/* Deliveries (from a publish or a replay): queued to each subscriber, then
 * one write each.  A connection may be gone by its turn (dropped). */
static void deliver_all(struct serow_grip_holds *g, const struct serow_delivery *d, size_t count, int replay)
{
    for (size_t i = 0; i < count; i++) {
        int fd = (int)d[i].subscriber;
        struct grip_conn *c = fd < g->by_fd_size ? g->by_fd[fd] : NULL;
        if (c != NULL)
            deliver(g, c, &d[i], replay);
        else if (g->elsewhere)
            g->elsewhere(g->elsewhere_arg, &d[i]);
    }
    /* One write per subscriber, after all its items are queued (each
     * subscriber appears in order; a repeat finds nothing pending). */
    for (size_t i = 0; i < count; i++) {
        int fd = (int)d[i].subscriber;
        struct grip_conn *c = fd < g->by_fd_size ? g->by_fd[fd] : NULL;
        if (c != NULL && write_due(c)) {
            if (g->batching)
                defer(g, c); /* (written when the batch ends) */
            else
                flush(g, c); /* (a close with nothing to write still ends it) */
        }
    }
}

static char *copy_bytes(const char *p, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (copy != NULL && len)
        memcpy(copy, p, len);
    return copy;
}

void serow_grip_holds_add(struct serow_grip_holds *g, const struct serow_holding_head *head, int fd,
                          const char *message, size_t len, const char *request_line)
{
    static struct serow_grip_instruct instruct; /* (22 KiB: not on the stack) */
    struct serow_hold_extra extra;
    enum serow_holder_message_type type;
    const char *body, *error = "not a hold message";
    size_t body_len;
    if (serow_holder_frame(message, len, &type, &body, &body_len) != (long)len ||
        type != SEROW_HOLDER_HOLD || serow_hold_decode(body, body_len, &instruct, &extra, &error) != 0 ||
        (g->settings.max_held && g->held >= g->settings.max_held) || fd >= (int)(1u << 20)) {
        if (g->settings.max_held && g->held >= g->settings.max_held)
            error = "--max-held-connections reached";
        serow_log_warn("connection holder: a hold refused (%s): the connection is closed", error);
        atomic_fetch_add(&g->shared->grip.refused, 1);
        close(fd);
        atomic_fetch_sub(&g->shared->open_connections, 1);
        return;
    }
    if (fd >= g->by_fd_size) {
        int size = g->by_fd_size ? g->by_fd_size : 1024;
        while (size <= fd)
            size *= 2;
        struct grip_conn **grown = realloc(g->by_fd, sizeof(*grown) * (size_t)size);
        if (grown == NULL) {
            close(fd);
            atomic_fetch_sub(&g->shared->open_connections, 1);
            return;
        }
        memset(grown + g->by_fd_size, 0, sizeof(*grown) * (size_t)(size - g->by_fd_size));
        g->by_fd = grown;
        g->by_fd_size = size;
    }
    struct grip_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        atomic_fetch_sub(&g->shared->open_connections, 1);
        return;
    }
    uint64_t now = serow_shared_clock_ms();
    c->fd = fd;
    c->info = head->conn;
    c->mode = (uint8_t)instruct.hold;
    c->chunked = extra.chunked;
    c->keep_alive = head->keep_alive;
    c->timeout_keeps_alive = head->keep_alive;
    c->head_request = head->head_request;
    c->minor_version = head->minor_version;
    c->status = head->status;
    c->started_ns = serow_request_clock_ns();
    if (head->request_line_len && (c->request_line = copy_bytes(request_line, head->request_line_len)))
        c->request_line_len = head->request_line_len;
    if (c->mode == SEROW_GRIP_HOLD_RESPONSE) {
        c->timeout_at_ms = now + (uint64_t)instruct.timeout * 1000;
        c->timeout_response = copy_bytes(extra.timeout_response.p, extra.timeout_response.len);
        c->timeout_len = extra.timeout_response.len;
        due_by(g, c->timeout_at_ms);
    } else if (instruct.keep_alive_mode != SEROW_GRIP_KEEP_ALIVE_NONE) {
        c->keep_alive_mode = (uint8_t)instruct.keep_alive_mode;
        c->keep_alive_ms = instruct.keep_alive_timeout * 1000;
        c->keep_alive_data = copy_bytes(serow_grip_str_ptr(&instruct, instruct.keep_alive_data),
                                        instruct.keep_alive_data.len);
        c->keep_alive_len = instruct.keep_alive_data.len;
        keep_alive_from_now(c, now);
        due_by(g, c->keep_alive_at_ms);
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = SEROW_GRIP_TAG | (uint64_t)fd};
    if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0 &&
        (errno != EEXIST || epoll_ctl(g->epoll_fd, EPOLL_CTL_MOD, fd, &ev) != 0)) {
        free(c->request_line);
        free(c->timeout_response);
        free(c->keep_alive_data);
        free(c);
        close(fd);
        atomic_fetch_sub(&g->shared->open_connections, 1);
        return;
    }
    g->by_fd[fd] = c;
    g->held++;
    atomic_store(&g->shared->grip.held, g->held);
    for (unsigned i = 0; i < instruct.num_channels && g->by_fd[fd] == c; i++) {
        const struct serow_grip_channel *ch = &instruct.channels[i];
        const struct serow_delivery *d;
        size_t count;
        int r = serow_channels_subscribe(g->store, (uint32_t)fd, serow_grip_str_ptr(&instruct, ch->name),
                                         ch->name.len,
                                         ch->has_prev_id ? serow_grip_str_ptr(&instruct, ch->prev_id) : NULL,
                                         ch->prev_id.len, &d, &count);
        if (r < 0) {
            serow_log_warn("connection holder: a hold's subscription to %.*s refused (%d): the "
                           "connection is closed", (int)ch->name.len,
                           serow_grip_str_ptr(&instruct, ch->name), r);
            atomic_fetch_add(&g->shared->grip.refused, 1);
            close_conn(g, c);
            return;
        }
        if (r == SEROW_CHANNELS_REPLAY_GAP)
            atomic_fetch_add(&g->shared->grip.replay_gaps, 1);
        deliver_all(g, d, count, 1);
    }
    count_subscriptions(g);
    g->figures_changed = 1;
}

void serow_grip_holds_publish(struct serow_grip_holds *g, const char *message, size_t len)
{
    const struct serow_delivery *d;
    size_t count;
    int r = serow_channels_publish(g->store, message, len, &d, &count);
    if (r < 0) {
        serow_log_warn("connection holder: a publish refused by the channel store (%d)", r);
        return;
    }
    atomic_fetch_add(&g->shared->grip.publishes, 1);
    g->figures_changed = 1;
    if (r == SEROW_CHANNELS_OK)
        deliver_all(g, d, count, 0);
}

struct serow_channels *serow_grip_holds_store(struct serow_grip_holds *g)
{
    return g->store;
}

void serow_grip_holds_deliver_elsewhere(struct serow_grip_holds *g, serow_grip_elsewhere to, void *arg)
{
    g->elsewhere = to;
    g->elsewhere_arg = arg;
}

void serow_grip_holds_batch_begin(struct serow_grip_holds *g)
{
    if (g == NULL)
        return;
    g->batching = 1;
}

void serow_grip_holds_batch_end(struct serow_grip_holds *g)
{
    if (g == NULL || !g->batching)
        return;
    g->batching = 0;
    /* A descriptor listed may since have been closed, or even reused by a
     * connection held later in the batch (not listed: its flag is clear). */
    for (size_t i = 0; i < g->dirty_count; i++) {
        int fd = g->dirty[i];
        struct grip_conn *c = fd < g->by_fd_size ? g->by_fd[fd] : NULL;
        if (c == NULL || !c->dirty)
            continue;
        c->dirty = 0;
        if (write_due(c))
            flush(g, c);
    }
    g->dirty_count = 0;
}

void serow_grip_holds_event(struct serow_grip_holds *g, int fd, uint32_t events)
{
    struct grip_conn *c = fd < g->by_fd_size ? g->by_fd[fd] : NULL;
    if (c == NULL)
        return;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        /* What a held client sends is not read as a request (Pushpin does
         * the same): read and dropped, until it closes. */
        char drain[4096];
        for (;;) {
            ssize_t n = serow_transport_recv(&c->info.carried, fd, drain, sizeof(drain), MSG_DONTWAIT);
            if (n > 0) {
                c->keep_alive = 0; /* a request dropped: the next one cannot be read here */
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                break;
            close_conn(g, c); /* the client left */
            return;
        }
    }
    if ((events & EPOLLOUT) && c->out_len > c->out_off)
        flush(g, c);
}

/* The busiest channels to the shared memory, when they may have changed
 * and at most once every SHARED_GRIP_CHANNELS_MS: a walk over every
 * channel, kept off the path of each publish.  The ms until due (-1: none). */
static int write_figures(struct serow_grip_holds *g, uint64_t now)
{
    if (!g->figures_changed)
        return -1;
    if (now < g->figures_due_ms)
        return (int)(g->figures_due_ms - now);
    struct serow_channel_figures top[SHARED_GRIP_CHANNELS];
    struct shared_grip_channel rows[SHARED_GRIP_CHANNELS];
    size_t n = serow_channels_busiest(g->store, top, SHARED_GRIP_CHANNELS);
    for (size_t i = 0; i < n; i++) {
        rows[i] = (struct shared_grip_channel){ .publishes = top[i].publishes, .deliveries = top[i].deliveries,
                                                .drops = top[i].drops, .subscribers = top[i].subscribers,
                                                .name_len = (uint16_t)top[i].name_len };
        memcpy(rows[i].name, top[i].name, top[i].name_len);
    }
    serow_shared_set_busiest_channels(g->shared, rows, (uint32_t)n);
    g->figures_changed = 0;
    g->figures_due_ms = now + SHARED_GRIP_CHANNELS_MS;
    return -1;
}

static int hold_timers(struct serow_grip_holds *g, uint64_t now);

int serow_grip_holds_timers(struct serow_grip_holds *g, uint64_t now)
{
    if (g->freed_output >= TRIM_AFTER_FREED) {
        malloc_trim(0);
        g->freed_output = 0;
    }
    int due = hold_timers(g, now); /* (first: a hold it ends changes the figures) */
    int figures = write_figures(g, now);
    return figures >= 0 && (due < 0 || figures < due) ? figures : due;
}

/* Timeouts and keep-alives. */
static int hold_timers(struct serow_grip_holds *g, uint64_t now)
{
    if (g->next_due_ms == 0)
        return -1;
    if (now < g->next_due_ms)
        return (int)(g->next_due_ms - now);
    g->next_due_ms = 0;
    for (int fd = 0; fd < g->by_fd_size; fd++) {
        struct grip_conn *c = g->by_fd[fd];
        if (c == NULL || c->answered || c->closing)
            continue;
        if (c->timeout_at_ms && now >= c->timeout_at_ms) {
            answer_at_timeout(g, c); /* Grip-Timeout: the app's own response */
            continue;
        }
        if (c->keep_alive_at_ms && now >= c->keep_alive_at_ms) {
            keep_alive_from_now(c, now);
            if (queue_stream_bytes(g, c, c->keep_alive_data, c->keep_alive_len) != 0)
                continue;
            if (!c->want_write && flush(g, c) != 0)
                continue;
        }
        due_by(g, c->timeout_at_ms);
        due_by(g, c->keep_alive_at_ms);
    }
    if (g->next_due_ms == 0)
        return -1;
    return g->next_due_ms > now ? (int)(g->next_due_ms - now) : 0;
}

void serow_grip_holds_end(struct serow_grip_holds *g)
{
    for (int fd = 0; fd < g->by_fd_size; fd++) {
        struct grip_conn *c = g->by_fd[fd];
        if (c == NULL)
            continue;
        c->keep_alive = 0; /* (an answered long poll closes rather than waits for a request) */
        if (c->answered || c->closing)
            ; /* its end is queued already */
        else if (c->mode == SEROW_GRIP_HOLD_RESPONSE) {
            answer_at_timeout(g, c);
            continue;
        } else if (end_stream(g, c) != 0) {
            continue; /* (dropped: its client did not read) */
        }
        if (!c->want_write)
            flush(g, c); /* (nothing pending: it closes now) */
    }
}

uint32_t serow_grip_holds_count(const struct serow_grip_holds *g)
{
    return g ? g->held : 0;
}

void serow_grip_holds_free(struct serow_grip_holds *g)
{
    if (g == NULL)
        return;
    for (int fd = 0; fd < g->by_fd_size; fd++)
        if (g->by_fd[fd])
            close_conn(g, g->by_fd[fd]);
    serow_channels_free(g->store);
    free(g->by_fd);
    free(g->dirty);
    free(g);
}
