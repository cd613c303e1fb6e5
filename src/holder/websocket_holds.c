/*
 * websocket_holds.c - the holder's WebSocket connections
 * (websocket_holds.h, docs/websocket.md).
 *
 * Owns: each WebSocket's state: its frame reader, the message being
 * gathered, the events waiting for the next request to the app, the one
 * request in flight and its response, the output for the client.  The
 * frame rules are websocket_frame.c's, the event format websocket_events.c's,
 * a response's head http_response_head.c's.  Every byte of a client goes
 * through its transport (transport.h): with TLS the record state came with
 * the descriptor, and the holder opens and seals records from it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "holder/websocket_holds.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection/connection.h"
#include "connection/transport.h"
#include "holder/channel_store.h"
#include "holder/deadline_list.h"
#include "holder/websocket_meta.h"
#include "http/http_parser.h"
#include "http/http_response_head.h"
#include "http/websocket_deflate.h"
#include "http/websocket_events.h"
#include "http/websocket_frame.h"
#include "log/log.h"
#include "shared/holder_message.h"

/* Bytes read from a client at a time; at least a whole control frame. */
#define READ_CHUNK (64u << 10)
_Static_assert(READ_CHUNK >= SEROW_WS_MAX_HEAD + SEROW_WS_MAX_CONTROL_PAYLOAD, "a control frame fits");
/* The client's time to answer the app's close frame (section 7.1.1: then
 * the server closes the TCP connection), after which it is closed anyway. */
#define CLOSE_WAIT_MS 5000
/* What a failed client may still send while its close frame reaches it. */
#define DRAIN_MAX (4u << 20)
/* Headers of the upgrade request passed on with each event request. */
#define MAX_REQUEST_HEADERS 10000 /* (an upgrade with more is closed) */
/* keep-alive without a "timeout" (or 0): Pushpin's default. */
#define KEEP_ALIVE_DEFAULT_S 55

struct buf {
    uint8_t *p;
    size_t off, len, cap; /* the bytes are p[off, len) */
};

static int buf_add(struct buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        if (b->off) { /* the bytes taken make room first */
            memmove(b->p, b->p + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        if (b->len + n > b->cap) {
            size_t cap = b->cap ? b->cap : 256;
            while (cap < b->len + n)
                cap *= 2;
            uint8_t *grown = realloc(b->p, cap);
            if (grown == NULL)
                return -1;
            b->p = grown;
            b->cap = cap;
        }
    }
    if (data && n) /* (NULL: room reserved, written by the caller) */
        memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

static inline size_t buf_size(const struct buf *b) { return b->len - b->off; }
static inline uint8_t *buf_data(const struct buf *b) { return b->p + b->off; }

static void buf_take(struct buf *b, size_t n)
{
    b->off += n;
    if (b->off == b->len)
        b->off = b->len = 0;
}

static void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

struct ws_conn {
    int fd;
    int app_fd;               /* the request in flight: the holder's end; -1: none */
    uint8_t opened;           /* the 101 went out */
    uint8_t grip;             /* the app enabled GRIP (Sec-WebSocket-Extensions: grip) */
    uint8_t client_done;      /* nothing more is read from the client */
    uint8_t client_gone;      /* nothing more is written to it either */
    uint8_t close_sent;       /* our close frame is queued */
    uint8_t closing;          /* ends once events are delivered and output is out */
    uint8_t draining;         /* we failed it: what it sends is read and thrown away until it
                               * closes or close_by, so that a reset does not destroy our
                               * close frame before the client reads it */
    uint8_t shut;             /* our side is shut (close_notify and FIN sent): draining */
    uint8_t subscribed;       /* it subscribed to a channel in the store */
    uint8_t deflate_bits;     /* permessage-deflate: our window bits; 0: not negotiated */
    uint8_t deflate_bits_asked; /* the client's offer named them: the 101 does too */
    uint8_t message_deflated; /* the message being gathered came with RSV1 */
    uint8_t detached;         /* the app said detach: no more events go to it */
    uint8_t pinged;           /* alive is in the pinged list: our ping awaits its answer */
    uint8_t keep_opcode;      /* the app's keep-alive: its frame's opcode */
    uint8_t keep_interval;    /* ... sent every keep_ms, not only after keep_ms of quiet */
    uint64_t keep_ms;
    uint8_t *keep_content;    /* NULL: no keep-alive */
    size_t keep_len;
    struct serow_deadline alive; /* quiet: the next ping is due; pinged: its answer */
    struct serow_deadline keep;  /* the app's keep-alive is due */
    struct serow_deadline close_by; /* the app closed (or we failed it): the client's
                                     * close is due by then */
    uint64_t drained;         /* bytes thrown away while draining */
    uint32_t watching;        /* the client's epoll events now */
    uint32_t app_watching;
    char prefix[SEROW_WSE_MAX_PREFIX];
    size_t prefix_len;
    struct serow_ws_reader reader;
    struct buf in;            /* the client's bytes not read yet */
    struct buf message;       /* the data message being gathered */
    struct buf events;        /* events for the next request */
    struct buf request;       /* the request in flight, what is not written yet */
    struct buf response;      /* its response so far */
    struct buf out;           /* for the client */
    char *head;               /* "POST target HTTP/1.0\r\n" and the fields passed on */
    size_t head_len;
    struct serow_ws_meta meta; /* the Meta-* fields the app set */
    char accept[32];          /* Sec-WebSocket-Accept */
    char id[32];              /* Connection-Id */
    /* Last: a plain connection's is allocated without the TLS state at the
     * end of info.carried (WS_CONN_PLAIN_SIZE), as connection_holder.c's
     * held connections are; set with serow_connection_state_copy only. */
    struct passed_connection info;
};
#define WS_CONN_PLAIN_SIZE                                                          \
    (offsetof(struct ws_conn, info) + offsetof(struct passed_connection, carried) + \
     offsetof(struct serow_connection_state, tls))

struct serow_ws_holds {
    struct shared_state *shared;
    int epoll_fd;
    struct serow_ws_settings settings;
    serow_ws_dispatch dispatch;
    void *arg;
    struct ws_conn **by_fd;   /* by client descriptor */
    struct ws_conn **by_app;  /* by the descriptor of the request in flight */
    int size;
    uint32_t count;
    uint64_t next_id;
    struct serow_wsd *wsd;    /* permessage-deflate's (NULL: off), for every connection */
    /* the last publish compressed, kept for its next subscribers (with a
     * reference on the item, so that no other takes its address) */
    const struct serow_channel_item *deflated_item;
    uint8_t deflated_bits;
    struct buf deflated;
    /* Deadlines, each list in order (deadline_list.h): */
    struct serow_deadline_list quiet;       /* now + ping_interval_ms when last heard */
    struct serow_deadline_list pinged;      /* now + ping_timeout_ms when pinged */
    struct serow_deadline_list keep_alives; /* the apps' keep-alives */
    struct serow_deadline_list close_waits; /* now + CLOSE_WAIT_MS when our close went */
};

#define CONN_OF(d, member) ((struct ws_conn *)(void *)((char *)(d) - offsetof(struct ws_conn, member)))

struct serow_ws_holds *serow_ws_holds_new(struct shared_state *shared, int epoll_fd,
                                          const struct serow_ws_settings *settings,
                                          serow_ws_dispatch dispatch, void *arg)
{
    struct serow_ws_holds *ws = calloc(1, sizeof(*ws));
    if (ws == NULL)
        return NULL;
    ws->shared = shared;
    ws->epoll_fd = epoll_fd;
    ws->settings = *settings;
    if (!ws->settings.max_message)
        ws->settings.max_message = SEROW_WS_MAX_MESSAGE;
    if (!ws->settings.max_gathered)
        ws->settings.max_gathered = SEROW_WS_MAX_GATHERED;
    if (!ws->settings.ping_interval_ms)
        ws->settings.ping_interval_ms = SEROW_WS_PING_INTERVAL_MS;
    if (!ws->settings.ping_timeout_ms)
        ws->settings.ping_timeout_ms = SEROW_WS_PING_TIMEOUT_MS;
    if (ws->settings.deflate && (ws->wsd = serow_wsd_new()) == NULL) {
        free(ws);
        return NULL;
    }
    ws->dispatch = dispatch;
    ws->arg = arg;
    return ws;
}

uint32_t serow_ws_holds_count(const struct serow_ws_holds *ws)
{
    return ws ? ws->count : 0;
}

static int room_for(struct serow_ws_holds *ws, int fd)
{
    if (fd < ws->size)
        return 0;
    int size = ws->size ? ws->size : 1024;
    while (size <= fd)
        size *= 2;
    struct ws_conn **a = realloc(ws->by_fd, sizeof(*a) * (size_t)size);
    if (a == NULL)
        return -1;
    ws->by_fd = a;
    struct ws_conn **b = realloc(ws->by_app, sizeof(*b) * (size_t)size);
    if (b == NULL)
        return -1;
    ws->by_app = b;
    memset(a + ws->size, 0, sizeof(*a) * (size_t)(size - ws->size));
    memset(b + ws->size, 0, sizeof(*b) * (size_t)(size - ws->size));
    ws->size = size;
    return 0;
}

/* ---- the end of a connection -------------------------------------------- */

static void close_app(struct serow_ws_holds *ws, struct ws_conn *c)
{
    if (c->app_fd < 0)
        return;
    epoll_ctl(ws->epoll_fd, EPOLL_CTL_DEL, c->app_fd, NULL);
    ws->by_app[c->app_fd] = NULL;
    close(c->app_fd);
    c->app_fd = -1;
    buf_free(&c->request);
    buf_free(&c->response);
}

/* The client's descriptor closed for good.  TLS: close_notify after what
 * was sent (the close frame), and what this process and the shared memory
 * kept of the connection goes. */
static void close_client(int fd, struct serow_connection_state *cs, int shut)
{
    if (!SEROW_TRANSPORT_IS_PLAIN(cs)) {
        if (!shut)
            serow_transport_shutdown(cs, fd);
        serow_transport_forget(cs, fd);
        serow_transport_closed(cs);
    }
    close(fd);
}

static void end(struct serow_ws_holds *ws, struct ws_conn *c)
{
    if (c->subscribed)
        serow_channels_unsubscribe_all(ws->settings.store, (uint32_t)c->fd);
    serow_deadline_unset(&ws->close_waits, &c->close_by);
    serow_deadline_unset(c->pinged ? &ws->pinged : &ws->quiet, &c->alive);
    serow_deadline_unset(&ws->keep_alives, &c->keep);
    close_app(ws, c);
    epoll_ctl(ws->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    ws->by_fd[c->fd] = NULL;
    close_client(c->fd, &c->info.carried, c->shut);
    atomic_fetch_sub(&ws->shared->open_connections, 1);
    ws->count--;
    atomic_store(&ws->shared->grip.websockets, ws->count);
    buf_free(&c->in);
    buf_free(&c->message);
    buf_free(&c->events);
    buf_free(&c->out);
    serow_ws_meta_free(&c->meta);
    free(c->keep_content);
    free(c->head);
    free(c);
}

/* ---- the client's side -------------------------------------------------- */

/* Events enough wait for the next request: the client is not read on.  The
 * message being gathered does not count: it is bounded by max_message, and
 * it becomes an event only once its last byte is read, so a message over
 * max_gathered that stopped the reading would never be read whole. */
static inline int gathered_enough(const struct serow_ws_holds *ws, const struct ws_conn *c)
{
    return buf_size(&c->events) >= ws->settings.max_gathered;
}

/* The client said something: the next ping is due ping_interval_ms from
 * now (a pong, or any frame, answers ours). */
static void heard_from(struct serow_ws_holds *ws, struct ws_conn *c)
{
    if (c->pinged) {
        serow_deadline_unset(&ws->pinged, &c->alive);
        c->pinged = 0;
    }
    serow_deadline_set(&ws->quiet, &c->alive, serow_shared_clock_ms() + ws->settings.ping_interval_ms);
}

static void watch(struct serow_ws_holds *ws, struct ws_conn *c)
{
    uint32_t want = 0;
    if ((c->opened && !c->client_done && !gathered_enough(ws, c)) || (c->draining && !c->client_gone))
        want |= EPOLLIN;
    if (!c->client_gone && buf_size(&c->out))
        want |= EPOLLOUT;
    if (want != c->watching) {
        struct epoll_event ev = {.events = want, .data.u64 = SEROW_WS_TAG | (uint64_t)c->fd};
        epoll_ctl(ws->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
        c->watching = want;
    }
}

/* Writes what the client takes of the output; -1 when it is gone. */
static int flush_out(struct ws_conn *c)
{
    while (buf_size(&c->out)) {
        ssize_t n = serow_transport_send(&c->info.carried, c->fd, buf_data(&c->out), buf_size(&c->out),
                                         MSG_DONTWAIT);
        if (n > 0) {
            buf_take(&c->out, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN ? 0 : -1;
    }
    return 0;
}

static int queue_frame(struct serow_ws_holds *ws, struct ws_conn *c, unsigned opcode,
                       const uint8_t *p, size_t len)
{
    if (c->client_gone || c->close_sent)
        return 0;
    uint8_t head[SEROW_WS_MAX_SERVER_HEAD];
    size_t n = serow_ws_frame_head(head, 1, opcode, len);
    if (buf_add(&c->out, head, n) != 0 || buf_add(&c->out, p, len) != 0)
        return -1;
    if (buf_size(&c->out) > ws->settings.max_pending) {
        serow_log_debug("connection holder: a WebSocket client does not read (over "
                        "--hold-max-pending): closed");
        return -1;
    }
    /* an idle keep-alive waits for quiet: a message sent puts it off */
    if (c->keep_content && !c->keep_interval && (opcode == SEROW_WS_OP_TEXT || opcode == SEROW_WS_OP_BINARY))
        serow_deadline_set(&ws->keep_alives, &c->keep, serow_shared_clock_ms() + c->keep_ms);
    return 0;
}

/* A data message of the app's: compressed when the client negotiated
 * permessage-deflate and it is long enough to pay (RSV1 says so, message
 * by message). */
static int queue_message(struct serow_ws_holds *ws, struct ws_conn *c, unsigned opcode,
                         const uint8_t *p, size_t len)
{
    if (c->deflate_bits && len >= SEROW_WSD_MIN_SIZE && !c->client_gone && !c->close_sent) {
        const uint8_t *z;
        long n = serow_wsd_deflate(ws->wsd, c->deflate_bits, p, len, &z);
        if (n >= 0)
            return queue_frame(ws, c, opcode | SEROW_WS_RSV1, z, (size_t)n);
    }
    return queue_frame(ws, c, opcode, p, len); /* (out of memory: as it is) */
}

/* Our close frame: nothing is sent after it (section 5.5.1). */
static void queue_close(struct ws_conn *c, unsigned code, const uint8_t *reason, size_t len)
{
    if (c->client_gone || c->close_sent)
        return;
    uint8_t frame[SEROW_WS_MAX_CONTROL_FRAME];
    size_t n = serow_ws_close_frame(frame, serow_ws_close_code_valid(code) ? code : 0, reason, len);
    buf_add(&c->out, frame, n);
    c->close_sent = 1;
}

static int add_event(struct ws_conn *c, unsigned type, const uint8_t *p, size_t len, int with_content)
{
    if (c->detached)
        return 0; /* (the app hears nothing more) */
    size_t n = serow_wse_encode(NULL, type, p, len, with_content);
    if (buf_add(&c->events, NULL, n) != 0)
        return -1;
    serow_wse_encode(c->events.p + c->events.len - n, type, p, len, with_content);
    return 0;
}

/* The client went away, or will get nothing more: the app hears it once. */
static void client_gone(struct ws_conn *c, int gone)
{
    if (!c->client_done)
        add_event(c, SEROW_WSE_DISCONNECT, NULL, 0, 0);
    c->client_done = 1;
    c->closing = 1;
    if (gone)
        c->client_gone = 1;
}

/* Our close went: the client has CLOSE_WAIT_MS to answer it (or, failed,
 * to stop sending), then the connection is closed all the same.  Set once. */
static void await_close(struct serow_ws_holds *ws, struct ws_conn *c)
{
    if (c->close_by.at_ms == 0)
        serow_deadline_set(&ws->close_waits, &c->close_by, serow_shared_clock_ms() + CLOSE_WAIT_MS);
}

/* The client broke a rule: closed with its code, counted. */
static void client_failed(struct serow_ws_holds *ws, struct ws_conn *c, unsigned code, const char *why)
{
    atomic_fetch_add(&ws->shared->grip.websocket_protocol_errors, 1);
    serow_log_debug("connection holder: a WebSocket client broke a rule (%s): closed with %u", why, code);
    queue_close(c, code, NULL, 0);
    client_gone(c, 0);
    /* Closed with what it may still be sending unread, its socket would send
     * a reset, which can destroy our close frame on its way: the client
     * would see 1006, not the code.  So what it sends is read and thrown
     * away until it closes, within the close wait. */
    c->draining = 1;
    buf_take(&c->in, buf_size(&c->in));
    await_close(ws, c);
}

/* A failed client's bytes, thrown away (client_failed); its end, or too
 * much of them, ends the connection. */
static void drain(struct ws_conn *c)
{
    uint8_t discard[16384];
    for (;;) {
        ssize_t n = serow_transport_recv(&c->info.carried, c->fd, discard, sizeof(discard), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0 || (c->drained += (uint64_t)n) > DRAIN_MAX) {
            client_gone(c, 1);
            return;
        }
    }
}

/* A whole message gathered: its event, inflated first when it came
 * compressed.  The limit is on what it inflates to (1009), and text is
 * checked as UTF-8 once inflated (1007): the reader could check neither. */
static int client_message(struct serow_ws_holds *ws, struct ws_conn *c, unsigned opcode)
{
    const uint8_t *p = buf_data(&c->message);
    long len = (long)buf_size(&c->message);
    if (c->message_deflated) {
        len = serow_wsd_inflate(ws->wsd, p, (size_t)len, ws->settings.max_message, &p);
        if (len == SEROW_WSD_NO_MEMORY)
            return -1;
        struct serow_utf8_state utf8 = {0};
        if (len == SEROW_WSD_TOO_BIG || len == SEROW_WSD_BAD ||
            (opcode == SEROW_WS_OP_TEXT &&
             !(serow_utf8_check(&utf8, p, (size_t)len) && serow_utf8_complete(&utf8)))) {
            buf_free(&c->message);
            client_failed(ws, c, len == SEROW_WSD_TOO_BIG ? SEROW_WS_MESSAGE_TOO_BIG : SEROW_WS_INVALID_PAYLOAD,
                          len == SEROW_WSD_TOO_BIG ? "a compressed message inflates past the limit"
                          : len == SEROW_WSD_BAD   ? "a compressed message is not DEFLATE data"
                                                   : "a compressed text message is not UTF-8");
            return 0;
        }
    }
    int r = add_event(c, opcode == SEROW_WS_OP_TEXT ? SEROW_WSE_TEXT : SEROW_WSE_BINARY, p, (size_t)len, 1);
    buf_free(&c->message);
    return r;
}

/* One piece the reader returned. */
static int client_piece(struct serow_ws_holds *ws, struct ws_conn *c, const struct serow_ws_piece *piece)
{
    switch (piece->opcode) {
    case SEROW_WS_OP_TEXT:
    case SEROW_WS_OP_BINARY:
        if (c->close_sent || c->detached)
            return 0; /* (after our close, or detach, data is not the app's any more) */
        if (piece->first)
            c->message_deflated = (piece->rsv & SEROW_WS_RSV1) != 0;
        if (buf_add(&c->message, piece->data, piece->len) != 0)
            return -1;
        return piece->last ? client_message(ws, c, piece->opcode) : 0;
    case SEROW_WS_OP_PING:
        /* Answered here: a round trip to the app would only delay the pong. */
        return queue_frame(ws, c, SEROW_WS_OP_PONG, piece->data, piece->len);
    case SEROW_WS_OP_PONG:
        return 0;
    case SEROW_WS_OP_CLOSE: {
        unsigned code = piece->close_code == SEROW_WS_NO_STATUS ? 0 : piece->close_code;
        if (!c->close_sent) {
            /* the app hears the close; the client has its echo (section 5.5.1) */
            size_t n = serow_wse_encode_close(NULL, code, piece->data, piece->len);
            if (!c->detached && buf_add(&c->events, NULL, n) != 0)
                return -1;
            if (!c->detached)
                serow_wse_encode_close(c->events.p + c->events.len - n, code, piece->data, piece->len);
            queue_close(c, code, piece->data, piece->len);
        }
        c->client_done = 1;
        c->closing = 1;
        return 0;
    }
    }
    return 0;
}

/* Reads the frames buffered, as far as the events gathered may grow. */
static void read_buffered(struct serow_ws_holds *ws, struct ws_conn *c)
{
    while (buf_size(&c->in) && !c->client_done && !gathered_enough(ws, c)) {
        size_t used = 0;
        struct serow_ws_piece piece;
        int r = serow_ws_read(&c->reader, buf_data(&c->in), buf_size(&c->in), &used, &piece);
        buf_take(&c->in, used);
        if (r == SEROW_WS_MORE)
            return;
        if (r == SEROW_WS_FAIL) {
            client_failed(ws, c, c->reader.fail_code, c->reader.fail_why);
            return;
        }
        if (client_piece(ws, c, &piece) != 0) {
            client_gone(c, 1);
            return;
        }
    }
}

/* The client's bytes: read while the events gathered leave room (past
 * that the socket is not watched for input: the client waits, and the
 * bytes buffered here are read once a request took the events). */
static void client_readable(struct serow_ws_holds *ws, struct ws_conn *c, int can_recv)
{
    for (;;) {
        read_buffered(ws, c);
        if (!can_recv || c->client_done || gathered_enough(ws, c))
            return;
        if (buf_add(&c->in, NULL, READ_CHUNK) != 0) {
            client_gone(c, 1);
            return;
        }
        c->in.len -= READ_CHUNK;
        ssize_t n = serow_transport_recv(&c->info.carried, c->fd, c->in.p + c->in.len, READ_CHUNK,
                                         MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            client_gone(c, 1);
            return;
        }
        c->in.len += (size_t)n;
        heard_from(ws, c);
    }
}

/* ---- the app's side ------------------------------------------------------- */

static void watch_app(struct serow_ws_holds *ws, struct ws_conn *c)
{
    uint32_t want = EPOLLIN | (buf_size(&c->request) ? EPOLLOUT : 0);
    if (want != c->app_watching) {
        struct epoll_event ev = {.events = want, .data.u64 = SEROW_WS_APP_TAG | (uint64_t)c->app_fd};
        epoll_ctl(ws->epoll_fd, EPOLL_CTL_MOD, c->app_fd, &ev);
        c->app_watching = want;
    }
}

static void write_request(struct ws_conn *c)
{
    while (buf_size(&c->request)) {
        /* (write and read: the socket pair is no client's, and non-blocking) */
        ssize_t n = write(c->app_fd, buf_data(&c->request), buf_size(&c->request));
        if (n > 0)
            buf_take(&c->request, (size_t)n);
        else if (!(n < 0 && errno == EINTR))
            break; /* EAGAIN: on EPOLLOUT; an error: the read finds it */
    }
}

/* The events gathered go to the app, as a POST any free worker serves. */
static void start_request(struct serow_ws_holds *ws, struct ws_conn *c)
{
    if (c->app_fd >= 0 || buf_size(&c->events) == 0)
        return;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0 ||
        room_for(ws, pair[0]) != 0) {
        serow_log_error("connection holder: no socket pair for a WebSocket's request to the app: %s",
                        strerror(errno));
        return; /* (tried again with the next event) */
    }
    char fields[256];
    int n = snprintf(fields, sizeof(fields),
                     "Content-Type: " SEROW_WSE_CONTENT_TYPE "\r\nContent-Length: %zu\r\n"
                     "Connection-Id: %s\r\nSec-WebSocket-Extensions: grip\r\n\r\n",
                     buf_size(&c->events), c->id);
    if (buf_add(&c->request, c->head, c->head_len) != 0 ||
        buf_add(&c->request, c->meta.fields, c->meta.len) != 0 ||
        buf_add(&c->request, fields, (size_t)n) != 0 ||
        buf_add(&c->request, buf_data(&c->events), buf_size(&c->events)) != 0) {
        close(pair[0]);
        close(pair[1]);
        buf_free(&c->request);
        return;
    }
    buf_free(&c->events);
    c->app_fd = pair[0];
    ws->by_app[pair[0]] = c;
    write_request(c);
    c->app_watching = EPOLLIN | (buf_size(&c->request) ? EPOLLOUT : 0);
    struct epoll_event ev = {.events = c->app_watching, .data.u64 = SEROW_WS_APP_TAG | (uint64_t)pair[0]};
    epoll_ctl(ws->epoll_fd, EPOLL_CTL_ADD, pair[0], &ev);
    /* (the socket pair's: plain, or the tests' transport; never the
     * client's TLS; the client's address, for the worker's REMOTE_ADDR) */
    struct passed_connection info = {.listener_index = c->info.listener_index,
                                     .idle_since_ms = serow_shared_clock_ms(),
                                     .peer = c->info.peer};
    info.carried.transport = serow_transport_of_listeners();
    atomic_fetch_add(&ws->shared->open_connections, 1); /* (a worker counts its close) */
    ws->dispatch(ws->arg, pair[1], &info);
}

static const char SWITCHING[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                "Connection: Upgrade\r\nSec-WebSocket-Accept: ";

/* keep-alive: the app's message sent to an idle client (or every timeout),
 * so that the proxies on its way keep the connection; no content: none. */
static void set_keep_alive(struct serow_ws_holds *ws, struct ws_conn *c, const struct serow_wse_control *ctl)
{
    free(c->keep_content);
    c->keep_content = NULL;
    serow_deadline_unset(&ws->keep_alives, &c->keep);
    if (ctl->content.p == NULL)
        return;
    size_t len = serow_wse_control_string(&ctl->content, NULL, 0);
    if ((c->keep_content = malloc(len ? len : 1)) == NULL)
        return;
    serow_wse_control_string(&ctl->content, (char *)c->keep_content, len);
    c->keep_len = len;
    static const uint8_t opcodes[] = {[SEROW_WSE_TEXT] = SEROW_WS_OP_TEXT, [SEROW_WSE_BINARY] = SEROW_WS_OP_BINARY,
                                      [SEROW_WSE_PING] = SEROW_WS_OP_PING, [SEROW_WSE_PONG] = SEROW_WS_OP_PONG};
    c->keep_opcode = opcodes[ctl->message_type];
    if ((c->keep_opcode == SEROW_WS_OP_PING || c->keep_opcode == SEROW_WS_OP_PONG) &&
        len > SEROW_WS_MAX_CONTROL_PAYLOAD) {
        serow_log_warn("connection holder: a WebSocket's keep-alive refused: a %s of %zu bytes",
                       c->keep_opcode == SEROW_WS_OP_PING ? "ping" : "pong", len);
        free(c->keep_content);
        c->keep_content = NULL;
        return;
    }
    c->keep_interval = ctl->mode == SEROW_WSE_KEEP_ALIVE_INTERVAL;
    c->keep_ms = (uint64_t)(ctl->timeout_s ? ctl->timeout_s : KEEP_ALIVE_DEFAULT_S) * 1000u;
    serow_deadline_set(&ws->keep_alives, &c->keep, serow_shared_clock_ms() + c->keep_ms);
}

/* A control message of the app's (GRIP on): subscriptions, set-meta,
 * keep-alive, detach; session, send-delayed and flush-delayed are not
 * served yet, and ignored. */
static void control(struct serow_ws_holds *ws, struct ws_conn *c, const uint8_t *json, size_t len)
{
    struct serow_wse_control ctl;
    if (!serow_wse_parse_control(json, len, &ctl)) {
        serow_log_warn("connection holder: a WebSocket's control message refused (%s)", ctl.fail_why);
        return;
    }
    if (c->client_done)
        return;
    if (ctl.type == SEROW_WSC_SET_META) {
        serow_ws_meta_control(&c->meta, &ctl);
        return;
    }
    if (ctl.type == SEROW_WSC_KEEP_ALIVE) {
        set_keep_alive(ws, c, &ctl);
        return;
    }
    if (ctl.type == SEROW_WSC_DETACH) {
        /* (what was gathered for the next request is dropped with the rest) */
        c->detached = 1;
        buf_free(&c->events);
        buf_free(&c->message);
        return;
    }
    if (ws->settings.store == NULL)
        return;
    if (ctl.type == SEROW_WSC_SUBSCRIBE) {
        const struct serow_delivery *d; /* (none: no prev-id, no replay) */
        size_t count;
        int r = serow_channels_subscribe(ws->settings.store, (uint32_t)c->fd, ctl.channel,
                                         ctl.channel_len, NULL, 0, &d, &count);
        if (r < 0) {
            serow_log_warn("connection holder: a WebSocket's subscription to %.*s refused (%d)",
                           (int)ctl.channel_len, ctl.channel, r);
            atomic_fetch_add(&ws->shared->grip.refused, 1);
        } else {
            c->subscribed = 1;
        }
    } else if (ctl.type == SEROW_WSC_UNSUBSCRIBE) {
        serow_channels_unsubscribe(ws->settings.store, (uint32_t)c->fd, ctl.channel, ctl.channel_len);
    }
}

/* The app's events, sent as frames.  -1 when the connection is to end. */
static int app_events(struct serow_ws_holds *ws, struct ws_conn *c, const uint8_t *p, size_t len)
{
    while (len) {
        struct serow_wse_event ev;
        long n = serow_wse_parse(p, len, &ev);
        if (n <= 0) {
            serow_log_warn("connection holder: the app's WebSocket events cannot be read (%s): "
                           "closed with 1011", n < 0 ? ev.fail_why : "cut short");
            queue_close(c, 1011, NULL, 0);
            return -1;
        }
        p += n;
        len -= (size_t)n;
        const uint8_t *body;
        size_t body_len;
        switch (ev.type) {
        case SEROW_WSE_TEXT:
        case SEROW_WSE_BINARY: {
            int meaning = serow_wse_app_message(&ev, c->grip, (const uint8_t *)c->prefix, c->prefix_len,
                                                &body, &body_len);
            if (meaning == SEROW_WSE_MESSAGE &&
                queue_message(ws, c, ev.type == SEROW_WSE_TEXT ? SEROW_WS_OP_TEXT : SEROW_WS_OP_BINARY,
                            body, body_len) != 0)
                return -1;
            if (meaning == SEROW_WSE_CONTROL)
                control(ws, c, body, body_len);
            break;
        }
        case SEROW_WSE_PING:
        case SEROW_WSE_PONG:
            if (queue_frame(ws, c, ev.type == SEROW_WSE_PING ? SEROW_WS_OP_PING : SEROW_WS_OP_PONG,
                            ev.content, ev.content_len) != 0)
                return -1;
            break;
        case SEROW_WSE_CLOSE:
            queue_close(c, ev.close_code, ev.reason, ev.reason_len);
            if (!c->client_done)
                await_close(ws, c);
            break;
        case SEROW_WSE_DISCONNECT:
            c->client_done = 1;
            c->closing = 1;
            c->client_gone = 1;
            return 0;
        default:
            break; /* OPEN again, or a type this side does not know */
        }
    }
    return 0;
}

static const char BAD_GATEWAY[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n"
                                  "Content-Length: 12\r\nConnection: close\r\n\r\nBad Gateway\n";

/* The answer to the OPEN event: 101 and its events when the app accepts,
 * else the app's response goes to the client as it is. */
static void answer_open(struct serow_ws_holds *ws, struct ws_conn *c, const struct serow_response_head *h,
                        long head_len)
{
    const uint8_t *body = buf_data(&c->response) + head_len;
    size_t body_len = buf_size(&c->response) - (size_t)head_len;
    const struct http_header *type = serow_response_header(h, "Content-Type");
    int accepted = h->status == 200 && type && type->value_len >= strlen(SEROW_WSE_CONTENT_TYPE) &&
                   strncasecmp(type->value, SEROW_WSE_CONTENT_TYPE, strlen(SEROW_WSE_CONTENT_TYPE)) == 0 &&
                   body_len >= 6 && memcmp(body, "OPEN\r\n", 6) == 0;
    if (!accepted) {
        buf_add(&c->out, buf_data(&c->response), buf_size(&c->response));
        c->client_done = c->closing = 1;
        return;
    }
    const struct http_header *ext = serow_response_header(h, "Sec-WebSocket-Extensions");
    if (ext && serow_wse_grip_extension(ext->value, ext->value_len, c->prefix, &c->prefix_len) == 1)
        c->grip = 1;
    buf_add(&c->out, SWITCHING, sizeof(SWITCHING) - 1);
    buf_add(&c->out, c->accept, strlen(c->accept));
    buf_add(&c->out, "\r\n", 2);
    const struct http_header *protocol = serow_response_header(h, "Sec-WebSocket-Protocol");
    if (protocol) {
        buf_add(&c->out, "Sec-WebSocket-Protocol: ", 24);
        buf_add(&c->out, protocol->value, protocol->value_len);
        buf_add(&c->out, "\r\n", 2);
    }
    if (c->deflate_bits) {
        struct serow_wsd_params agreed = {c->deflate_bits, c->deflate_bits_asked};
        char ext[SEROW_WSD_MAX_RESPONSE];
        buf_add(&c->out, "Sec-WebSocket-Extensions: ", 26);
        buf_add(&c->out, ext, serow_wsd_response(&agreed, ext));
        buf_add(&c->out, "\r\n", 2);
    }
    buf_add(&c->out, "\r\n", 2);
    c->opened = 1;
    heard_from(ws, c); /* (the first ping is due ping_interval_ms from now) */
    if (app_events(ws, c, body + 6, body_len - 6) != 0)
        client_gone(c, 0);
}

/* The whole response to a request: its events go to the client. */
static void app_answered(struct serow_ws_holds *ws, struct ws_conn *c)
{
    struct serow_response_head h;
    long head_len = serow_parse_response_head((const char *)buf_data(&c->response),
                                              buf_size(&c->response), &h);
    if (head_len > 0) {
        const struct http_header *length = serow_response_header(&h, "Content-Length");
        size_t body = buf_size(&c->response) - (size_t)head_len;
        if (length) {
            unsigned long long want = strtoull(length->value, NULL, 10);
            if (want > body)
                head_len = -1; /* cut: the worker's request failed */
            else
                c->response.len -= body - (size_t)want;
        }
    }
    if (head_len <= 0) {
        serow_log_warn("connection holder: no response from the app to a WebSocket's events");
        if (!c->opened)
            buf_add(&c->out, BAD_GATEWAY, sizeof(BAD_GATEWAY) - 1);
        else
            queue_close(c, 1011, NULL, 0);
        client_gone(c, 0);
    } else if (!c->opened) {
        answer_open(ws, c, &h, head_len);
        if (c->opened)
            serow_ws_meta_answer(&c->meta, &h);
    } else if (h.status != 200) {
        serow_log_warn("connection holder: the app answered a WebSocket's events %d: closed with 1011",
                       h.status);
        queue_close(c, 1011, NULL, 0);
        client_gone(c, 0);
    } else {
        serow_ws_meta_answer(&c->meta, &h);
        if (app_events(ws, c, buf_data(&c->response) + head_len, buf_size(&c->response) - (size_t)head_len) != 0)
            client_gone(c, 0);
    }
    close_app(ws, c);
}

/* Reads the response; at its end (the worker closed), answers it. */
static void app_readable(struct serow_ws_holds *ws, struct ws_conn *c)
{
    size_t bound = ws->settings.max_message * 4 + (64u << 10);
    for (;;) {
        if (buf_add(&c->response, NULL, READ_CHUNK) != 0)
            break;
        c->response.len -= READ_CHUNK;
        ssize_t n = read(c->app_fd, c->response.p + c->response.len, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n > 0) {
            c->response.len += (size_t)n;
            if (buf_size(&c->response) <= bound)
                continue;
            serow_log_warn("connection holder: the app's answer to a WebSocket's events is over "
                           "%zu bytes", bound);
            buf_free(&c->response);
        }
        break;
    }
    app_answered(ws, c);
}

/* ---- a connection's turn ---------------------------------------------------- */

/* After anything happened to c: the next request, the output, the end. */
static void settle(struct serow_ws_holds *ws, struct ws_conn *c)
{
    start_request(ws, c);
    /* What waited for the last request to go: frames read already, and with
     * TLS plaintext the transport opened past the room of the last read,
     * which epoll does not report (transport.h) */
    int buffered = serow_transport_buffered(&c->info.carried, c->fd);
    if (c->opened && (buf_size(&c->in) || buffered) && !c->client_done && !gathered_enough(ws, c)) {
        client_readable(ws, c, buffered);
        start_request(ws, c);
    }
    if (!c->client_gone && flush_out(c) != 0)
        client_gone(c, 1);
    if (c->closing && c->app_fd < 0) {
        start_request(ws, c); /* (the DISCONNECT a failed write just added) */
        if (c->app_fd < 0 && (c->client_gone || (buf_size(&c->out) == 0 && !c->draining))) {
            end(ws, c);
            return;
        }
        if (c->draining && !c->client_gone && !c->shut && buf_size(&c->out) == 0) {
            /* our close frame is out: then our end (close_notify, FIN), and
             * the client's is awaited */
            serow_transport_shutdown(&c->info.carried, c->fd);
            c->shut = 1;
        }
    }
    watch(ws, c);
}

void serow_ws_holds_event(struct serow_ws_holds *ws, uint64_t tag, uint32_t events)
{
    int fd = (int)(tag & 0xFFFFFFFFu);
    if (fd < 0 || fd >= ws->size)
        return;
    struct ws_conn *c;
    if (tag & SEROW_WS_APP_TAG) {
        if ((c = ws->by_app[fd]) == NULL)
            return;
        if (events & EPOLLOUT) {
            write_request(c);
            watch_app(ws, c);
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
            app_readable(ws, c);
    } else {
        if ((c = ws->by_fd[fd]) == NULL)
            return;
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            if (c->draining && !c->client_gone)
                drain(c);
            else if (c->opened && !c->client_done)
                client_readable(ws, c, 1);
            else if (events & (EPOLLHUP | EPOLLERR))
                client_gone(c, 1);
        }
    }
    settle(ws, c);
}

/* ---- a new connection --------------------------------------------------------- */

/* Sec-WebSocket-Accept (section 4.2.2): base64 of the SHA-1 of the key and
 * the RFC's GUID. */
static int make_accept(const struct http_header *key, char out[32])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char joined[24 + sizeof(guid)];
    if (key == NULL || key->value_len != 24)
        return -1;
    memcpy(joined, key->value, 24);
    memcpy(joined + 24, guid, sizeof(guid) - 1);
    uint8_t sha1[20];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA1, joined, 24 + sizeof(guid) - 1, sha1) != 0)
        return -1;
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = out;
    for (int i = 0; i < 20; i += 3) {
        uint32_t v = (uint32_t)sha1[i] << 16 | (i + 1 < 20 ? (uint32_t)sha1[i + 1] << 8 : 0) |
                     (i + 2 < 20 ? sha1[i + 2] : 0);
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < 20 ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < 20 ? b64[v & 63] : '=';
    }
    *o = '\0';
    return 0;
}

/* Whether a field of the upgrade request stays out of the event requests:
 * the handshake's own, what the POST's framing says itself, and Meta-*,
 * which only the app sets (set-meta), as in Pushpin. */
static int left_out(const struct http_header *h)
{
    if (h->name_len >= 5 && strncasecmp(h->name, "Meta-", 5) == 0)
        return 1;
    static const char *const names[] = {"Upgrade", "Connection", "Sec-WebSocket-Key",
                                        "Sec-WebSocket-Version", "Sec-WebSocket-Extensions",
                                        "Content-Length", "Content-Type", "Transfer-Encoding",
                                        "Connection-Id", "Keep-Alive", "TE", NULL};
    for (const char *const *n = names; *n; n++)
        if (h->name_len == strlen(*n) && strncasecmp(h->name, *n, h->name_len) == 0)
            return 1;
    return 0;
}

/* permessage-deflate's window bits when the upgrade offers it in a way this
 * side accepts; 0: no extension (an offer declined, or a field that breaks
 * the grammar: the handshake goes on without one). */
static struct serow_wsd_params negotiate_deflate(const struct http_request_head *r)
{
    struct serow_wsd_params agreed = {0, 0}, offer;
    for (size_t i = 0; i < r->num_headers; i++) {
        const struct http_header *h = &r->headers[i];
        if (h->name_len != 24 || strncasecmp(h->name, "Sec-WebSocket-Extensions", 24) != 0)
            continue;
        int got = serow_wsd_negotiate(h->value, h->value_len, &offer);
        if (got < 0)
            return (struct serow_wsd_params){0, 0};
        if (got && !agreed.server_max_window_bits)
            agreed = offer; /* (the first field's offers are preferred, and
                             * every field still checked) */
    }
    return agreed;
}

/* The request line and fields every event request starts with; the
 * client's address appended to X-Forwarded-For, as a proxy does (nginx's
 * $proxy_add_x_forwarded_for), for an app that reads it; REMOTE_ADDR is the
 * client's already (c->info.peer). */
static int make_head(struct ws_conn *c, const struct http_request_head *r, const char *client)
{
    size_t size = 64 + SEROW_REMOTE_ADDR_SIZE + r->target_len;
    for (size_t i = 0; i < r->num_headers; i++)
        size += r->headers[i].name_len + r->headers[i].value_len + 4;
    char *p = c->head = malloc(size);
    if (p == NULL)
        return -1;
    p += sprintf(p, "POST %.*s HTTP/1.0\r\n", (int)r->target_len, r->target);
    const struct http_header *forwarded = serow_find_header(r, "X-Forwarded-For", 15);
    if (forwarded)
        p += sprintf(p, "X-Forwarded-For: %.*s, %s\r\n", (int)forwarded->value_len, forwarded->value, client);
    else
        p += sprintf(p, "X-Forwarded-For: %s\r\n", client);
    for (size_t i = 0; i < r->num_headers; i++) {
        const struct http_header *h = &r->headers[i];
        if (left_out(h) || h == forwarded)
            continue;
        memcpy(p, h->name, h->name_len);
        p += h->name_len;
        *p++ = ':';
        *p++ = ' ';
        memcpy(p, h->value, h->value_len);
        p += h->value_len;
        *p++ = '\r';
        *p++ = '\n';
    }
    c->head_len = (size_t)(p - c->head);
    return 0;
}

void serow_ws_holds_add(struct serow_ws_holds *ws, const struct serow_holding_head *head, int fd,
                        const char *request_head, size_t len)
{
    static struct http_header headers[MAX_REQUEST_HEADERS];
    struct http_request_head r = {.headers = headers, .headers_capacity = MAX_REQUEST_HEADERS};
    struct http_limits limits = {len, len, MAX_REQUEST_HEADERS};
    struct ws_conn *c = NULL;
    struct serow_connection_state carried = head->conn.carried;
    if (room_for(ws, fd) != 0 || serow_parse_request_head(request_head, len, &r, &limits) <= 0 ||
        (c = calloc(1, carried.transport == SEROW_TRANSPORT_TLS ? sizeof(*c) : WS_CONN_PLAIN_SIZE)) == NULL)
        goto refused;
    c->fd = fd;
    c->app_fd = -1;
    c->info.requests_served = head->conn.requests_served;
    c->info.listener_index = head->conn.listener_index;
    c->info.idle_since_ms = head->conn.idle_since_ms;
    serow_connection_state_copy(&c->info.carried, &carried);
    socklen_t peer_len = sizeof(c->info.peer.addr);
    if (getpeername(fd, &c->info.peer.addr.sa, &peer_len) != 0)
        peer_len = 0;
    c->info.peer.len = peer_len;
    char client[SEROW_REMOTE_ADDR_SIZE];
    serow_format_remote_address(client, peer_len ? &c->info.peer.addr.sa : NULL, peer_len);
    if (make_accept(serow_find_header(&r, "Sec-WebSocket-Key", 17), c->accept) != 0 ||
        make_head(c, &r, client) != 0)
        goto refused;
    snprintf(c->id, sizeof(c->id), "%x-%llx", (unsigned)getpid(), (unsigned long long)++ws->next_id);
    serow_ws_reader_init(&c->reader, 1, ws->settings.max_message);
    if (ws->wsd) {
        struct serow_wsd_params agreed = negotiate_deflate(&r);
        c->deflate_bits = agreed.server_max_window_bits;
        c->deflate_bits_asked = agreed.server_max_window_bits_asked;
        if (c->deflate_bits)
            c->reader.rsv_allowed = SEROW_WS_RSV1;
    }
    /* (nothing is read from the client before the 101: it may send nothing) */
    struct epoll_event ev = {.events = 0, .data.u64 = SEROW_WS_TAG | (uint64_t)fd};
    if (epoll_ctl(ws->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0 &&
        (errno != EEXIST || epoll_ctl(ws->epoll_fd, EPOLL_CTL_MOD, fd, &ev) != 0))
        goto refused;
    ws->by_fd[fd] = c;
    ws->count++;
    atomic_store(&ws->shared->grip.websockets, ws->count);
    add_event(c, SEROW_WSE_OPEN, NULL, 0, 0);
    settle(ws, c);
    return;
refused:
    serow_log_error("connection holder: a WebSocket could not be held: closed");
    if (c)
        free(c->head);
    free(c);
    close_client(fd, &carried, 0);
    atomic_fetch_sub(&ws->shared->open_connections, 1);
}

static const unsigned ws_opcodes[] = {[SEROW_WS_TEXT] = SEROW_WS_OP_TEXT, [SEROW_WS_BINARY] = SEROW_WS_OP_BINARY,
                                      [SEROW_WS_PING] = SEROW_WS_OP_PING, [SEROW_WS_PONG] = SEROW_WS_OP_PONG};

/* A publish's message for one subscriber: compressed once for all those
 * that negotiated permessage-deflate with the same window (no context is
 * kept, so the same bytes are right for each). */
static int queue_publish(struct serow_ws_holds *ws, struct ws_conn *c, const struct serow_channel_item *item,
                         unsigned opcode, const uint8_t *p, size_t len)
{
    if (!c->deflate_bits || len < SEROW_WSD_MIN_SIZE ||
        (opcode != SEROW_WS_OP_TEXT && opcode != SEROW_WS_OP_BINARY))
        return queue_frame(ws, c, opcode, p, len);
    if (ws->deflated_item != item || ws->deflated_bits != c->deflate_bits) {
        if (ws->deflated_item)
            serow_channels_unref(ws->settings.store, ws->deflated_item);
        ws->deflated_item = NULL;
        buf_free(&ws->deflated);
        const uint8_t *z;
        long n = serow_wsd_deflate(ws->wsd, c->deflate_bits, p, len, &z);
        if (n < 0 || buf_add(&ws->deflated, z, (size_t)n) != 0)
            return queue_frame(ws, c, opcode, p, len); /* (out of memory: as it is) */
        serow_channel_item_ref(item);
        ws->deflated_item = item;
        ws->deflated_bits = c->deflate_bits;
    }
    return queue_frame(ws, c, opcode | SEROW_WS_RSV1, buf_data(&ws->deflated), buf_size(&ws->deflated));
}

void serow_ws_holds_deliver(void *arg, const struct serow_delivery *d)
{
    struct serow_ws_holds *ws = arg;
    int fd = (int)d->subscriber;
    struct ws_conn *c = fd < ws->size ? ws->by_fd[fd] : NULL;
    if (c == NULL || !c->opened || c->client_gone || c->close_sent ||
        !(d->item->formats & SEROW_FORMAT_WS_MESSAGE))
        return;
    /* (the store reads only a stream's fields for every delivery; a
     * message's are read from the kept bytes) */
    static struct serow_publish_item item;
    enum serow_holder_message_type type;
    const char *body, *error;
    size_t body_len;
    if (serow_holder_frame(d->item->bytes, d->item->len, &type, &body, &body_len) <= 0 ||
        serow_publish_decode(body, body_len, &item, &error) != 0)
        return;
    atomic_fetch_add(&ws->shared->grip.deliveries, 1);
    serow_channels_delivered(ws->settings.store, d);
    if (item.ws.action == SEROW_ACTION_CLOSE) {
        queue_close(c, item.ws.close_code, NULL, 0);
        c->client_done = c->closing = 1; /* (the app hears nothing more: as Pushpin) */
    } else if (item.ws.type < sizeof(ws_opcodes) / sizeof(ws_opcodes[0]) &&
               queue_publish(ws, c, d->item, ws_opcodes[item.ws.type], (const uint8_t *)item.ws.content.p,
                             item.ws.content.len) != 0) {
        atomic_fetch_add(&ws->shared->grip.drops, 1);
        serow_channels_dropped(ws->settings.store, d->subscriber);
        client_gone(c, 1);
    }
    settle(ws, c);
}

/* A quiet client's ping is due: it is sent, and the answer awaited.  One
 * whose input waits for the app (gathered_enough) is not read, so its
 * silence says nothing: its turn comes again later. */
static void ping_due(struct serow_ws_holds *ws, struct ws_conn *c, uint64_t now_ms)
{
    if (c->client_done || c->close_sent)
        return;
    if (gathered_enough(ws, c) || buf_size(&c->in)) {
        serow_deadline_set(&ws->quiet, &c->alive, now_ms + ws->settings.ping_interval_ms);
        return;
    }
    if (queue_frame(ws, c, SEROW_WS_OP_PING, NULL, 0) != 0) {
        client_gone(c, 1);
    } else {
        c->pinged = 1;
        serow_deadline_set(&ws->pinged, &c->alive, now_ms + ws->settings.ping_timeout_ms);
    }
    settle(ws, c);
}

/* No answer to the ping: the client (or the NAT on its way) is gone.  The
 * connection is closed without a close frame, which the client would not
 * read: what a client still there sees is 1006 (RFC 6455 7.1.5), the code
 * a frame may not carry; the app hears DISCONNECT. */
static void answer_overdue(struct serow_ws_holds *ws, struct ws_conn *c, uint64_t now_ms)
{
    c->pinged = 0;
    if (gathered_enough(ws, c) || buf_size(&c->in)) {
        serow_deadline_set(&ws->quiet, &c->alive, now_ms + ws->settings.ping_interval_ms);
        return;
    }
    serow_log_debug("connection holder: a WebSocket client did not answer a ping in %llu ms: closed",
                    (unsigned long long)ws->settings.ping_timeout_ms);
    client_gone(c, 1);
    settle(ws, c);
}

static void keep_alive_due(struct serow_ws_holds *ws, struct ws_conn *c, uint64_t now_ms)
{
    if (c->keep_content == NULL || c->client_gone || c->close_sent)
        return;
    if (queue_frame(ws, c, c->keep_opcode, c->keep_content, c->keep_len) != 0)
        client_gone(c, 1);
    else
        serow_deadline_set(&ws->keep_alives, &c->keep, now_ms + c->keep_ms);
    settle(ws, c);
}

int serow_ws_holds_timers(struct serow_ws_holds *ws, uint64_t now_ms)
{
    if (ws == NULL)
        return -1;
    struct serow_deadline *d;
    while ((d = serow_deadline_due(&ws->quiet, now_ms)) != NULL)
        ping_due(ws, CONN_OF(d, alive), now_ms);
    while ((d = serow_deadline_due(&ws->pinged, now_ms)) != NULL)
        answer_overdue(ws, CONN_OF(d, alive), now_ms);
    while ((d = serow_deadline_due(&ws->keep_alives, now_ms)) != NULL)
        keep_alive_due(ws, CONN_OF(d, keep), now_ms);
    while ((d = serow_deadline_due(&ws->close_waits, now_ms)) != NULL) {
        struct ws_conn *c = CONN_OF(d, close_by);
        c->client_done = c->client_gone = c->closing = 1;
        settle(ws, c);
    }
    int next = serow_deadline_next(&ws->quiet, now_ms, -1);
    next = serow_deadline_next(&ws->pinged, now_ms, next);
    next = serow_deadline_next(&ws->keep_alives, now_ms, next);
    return serow_deadline_next(&ws->close_waits, now_ms, next);
}

void serow_ws_holds_free(struct serow_ws_holds *ws)
{
    if (ws == NULL)
        return;
    for (int fd = 0; fd < ws->size; fd++) {
        struct ws_conn *c = ws->by_fd[fd];
        if (c == NULL)
            continue;
        if (c->opened && !c->client_gone) {
            queue_close(c, 1001, (const uint8_t *)"server stopping", 15);
            flush_out(c);
        }
        end(ws, c);
    }
    if (ws->deflated_item)
        serow_channels_unref(ws->settings.store, ws->deflated_item);
    buf_free(&ws->deflated);
    serow_wsd_free(ws->wsd);
    free(ws->by_fd);
    free(ws->by_app);
    free(ws);
}
