/*
 * worker_loop.c - the top of a worker's event loop: setting it up and
 * freeing it, the loop itself (wait for events, handle them one at a time,
 * expire timers, start the next ready request), a request's start and end,
 * and stopping.  The public API of worker_loop.h is here, but for the
 * writes (worker_output.c), the body reads (worker_request_body.c) and the
 * app's timer (request_timeout.c).
 *
 * Owns: the epoll set and its pending events, the listeners, the pipelining
 * turn, the list of requests being served, a request's start (parse,
 * accounting, announcements) and end (keep alive, close or hand over), and
 * the stop and its grace.  It calls down into every other worker file
 * (worker_internal.h lists them in order) and nothing calls into it but the
 * embedding and the C that serves a request (psgi_*.c, whose
 * serow_request_end alone ends one, and request_accounting.c), through
 * worker_loop.h.  How a connection is read, parked, timed out or closed is
 * the lower files' business: the loop only says when.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "request/request_accounting.h"
#include "shared/holding_channel.h"

/* Events taken from one epoll_wait: enough to amortise the call. */
#define EPOLL_BATCH 64
/* Connections accepted per readiness event of a listen socket, so that one
 * worker does not take a whole burst while others idle (EPOLLEXCLUSIVE wakes
 * one worker per connection anyway). */
#define ACCEPT_BATCH 16
/* While the holder still has connections during the stop grace
 * (STOP_GRACE_SECONDS), a stopping worker looks this often whether they
 * became ready (it may hold none of its own). */
#define STOP_GRACE_POLL_MS 20
/* A client that pipelines gets this many requests answered in a row; then
 * the worker looks at its other connections and listen sockets before the
 * next one (look_around).  One read takes up to the head limits, 72 KiB by
 * default: a thousand small requests, which would otherwise all go before
 * any other connection of the worker.  The look costs an epoll_wait that
 * does not block, once per this many pipelined requests. */
#define PIPELINED_REQUESTS_PER_TURN 8

/* ---- set-up ------------------------------------------------------------ */

struct worker_loop *serow_worker_loop_new(const struct worker_settings *settings)
{
    struct worker_loop *loop = calloc(1, sizeof(*loop));
    if (loop == NULL)
        return NULL;
    loop->settings = *settings;
    loop->pid = (int)getpid();
    /* Room for max_headers fields, as configured (no silent lower cap), but
     * no more than can fit in the header section. */
    size_t capacity = settings->limits.max_headers;
    if (capacity > settings->limits.max_header_size / WORKER_MIN_FIELD_LINE + 1)
        capacity = settings->limits.max_header_size / WORKER_MIN_FIELD_LINE + 1;
    loop->headers_capacity = capacity;
    loop->ready_channel = -1;
    loop->handback_channel = -1;
    loop->wake_fd = -1;
    loop->accepting = 1;
    loop->probe_headers = calloc(capacity + 1, sizeof(*loop->probe_headers)); /* +1: never calloc(0) */
    loop->pending_events = calloc(EPOLL_BATCH, sizeof(struct epoll_event));
    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->probe_headers == NULL || loop->pending_events == NULL || loop->epoll_fd < 0 ||
        (loop->request = serow_worker_loop_request_new(loop)) == NULL ||
        serow_app_timer_init(loop, settings->request_timeout) != 0) {
        int saved_errno = errno;
        serow_worker_loop_request_free(loop->request);
        if (loop->epoll_fd >= 0)
            close(loop->epoll_fd);
        free(loop->pending_events);
        free(loop->probe_headers);
        free(loop);
        errno = saved_errno;
        return NULL;
    }
    return loop;
}

void serow_worker_loop_free(struct worker_loop *loop)
{
    for (int fd = 0; fd < loop->connections_size; fd++)
        if (loop->connections[fd])
            serow_close_connection(loop, loop->connections[fd]);
    serow_worker_loop_request_free(loop->request);
    free(loop->connections);
    free(loop->probe_headers);
    free(loop->pending_events);
    free(loop->slot_owner);
    free(loop->free_slots);
    serow_gather_free(loop);
    serow_access_log_close(loop->access_log);
    serow_app_timer_free(loop);
    if (loop->wake_fd >= 0)
        close(loop->wake_fd);
    close(loop->epoll_fd);
    free(loop);
}

int serow_worker_loop_add_listener(struct worker_loop *loop, int fd, int is_unix,
                             const char *server_name, int server_port, int tls)
{
    if (loop->num_listeners >= WORKER_MAX_LISTENERS)
        return -1;
    struct listener *l = &loop->listeners[loop->num_listeners];
    l->fd = fd;
    l->is_unix = is_unix;
    snprintf(l->server_name, sizeof(l->server_name), "%s", server_name);
    l->server_port = server_port;
    l->transport = tls ? SEROW_TRANSPORT_TLS : serow_transport_of_listeners();
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    /* Accepted connections inherit it: the kernel stamps what they receive,
     * and a request's time starts when its head arrived (worker_intake.c). */
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
    /* EPOLLEXCLUSIVE: a new connection wakes one waiting worker, not all. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE,
                             .data.u64 = LISTENER_TAG | (uint64_t)loop->num_listeners};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
        return -1;
    loop->num_listeners++;
    return 0;
}

int serow_worker_loop_join_holder(struct worker_loop *loop, struct shared_state *shared,
                            uint32_t worker_index, int wake_fd, int ready_channel,
                            int handback_channel)
{
    if (serow_slots_join(loop, shared, worker_index, wake_fd, ready_channel,
                         handback_channel) != 0)
        return -1;
    serow_gather_start(loop);
    return 0;
}

/* ---- announcements: what the holder reads to place connections ----------
 *
 * The worker's own flags in its slot: whether it is in a request (and
 * which), or free.  Here, beside the loop that alone knows them; every
 * request passes through them, and as static functions they are inlined. */

/* Rings the holder if flag says it waits for news (clearing the flag, so
 * that one worker rings once). */
static void wake_holder_if(struct worker_loop *loop, _Atomic uint32_t *flag)
{
    uint32_t set = 1;
    if (atomic_load(flag) && atomic_compare_exchange_strong(flag, &set, 0) &&
        loop->shared->holder_wake_fd >= 0) {
        uint64_t one = 1;
        ssize_t ignored = write(loop->shared->holder_wake_fd, &one, sizeof(one));
        (void)ignored;
    }
}

/* The holder waits long when no busy worker has idle connections it could
 * take: tell it when we are one. */
static void announce_busy(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    atomic_store(&loop->slot->busy_since_ms, serow_shared_clock_ms());
    atomic_store(&loop->slot->busy, 1);
    if (atomic_load(&loop->slot->idle_connections) > 0)
        wake_holder_if(loop, &loop->shared->holder_sleeping);
}

/* About to wait with nothing to do: a connection taken from a stuck worker
 * could come here.  The holder may be waiting for just that. */
static void announce_free(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    atomic_store(&loop->slot->free, 1);
    wake_holder_if(loop, &loop->shared->holder_awaits_free);
}

static void announce_not_free(struct worker_loop *loop)
{
    if (loop->slot != NULL)
        atomic_store(&loop->slot->free, 0);
}

static void announce_done(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    atomic_store(&loop->slot->busy, 0);
    atomic_fetch_add(&loop->slot->requests_served, 1);
    atomic_fetch_add(&loop->shared->requests_total, 1);
}

/* The method and target of the request started last, for the status page,
 * and its id (--request-id-header) for the master's 503 should it kill us. */
static void publish_current_request(struct worker_loop *loop, const struct serow_request *r)
{
    if (loop->slot == NULL)
        return;
    char *text = loop->slot->current_request;
    size_t m = r->head.method_len, t = r->head.target_len;
    if (m > SHARED_REQUEST_TEXT / 4)
        m = SHARED_REQUEST_TEXT / 4;
    if (m + 1 + t >= SHARED_REQUEST_TEXT)
        t = SHARED_REQUEST_TEXT - m - 2;
    memcpy(text, r->head.method, m);
    text[m] = ' ';
    memcpy(text + m + 1, r->head.target, t);
    text[m + 1 + t] = '\0';
    memcpy(loop->slot->request_id, r->id, r->id_len);
    atomic_store(&loop->slot->request_id_len, (uint32_t)r->id_len);
}

/* ---- the stop grace ------------------------------------------------------
 *
 * When the whole server stops, a stopping worker still serves, for
 * STOP_GRACE_SECONDS, what arrives on its idle connections and what the
 * holder passes on (serow_worker_loop_stop sets the grace; the loop ends it). */

static int in_stop_grace(const struct worker_loop *loop, double now)
{
    return loop->stop_grace_until > 0 && now < loop->stop_grace_until;
}

/* Idle connections in the holder, or passed on and not yet taken by a worker. */
static int holder_has_connections(const struct worker_loop *loop)
{
    return loop->shared && loop->ready_channel >= 0 &&
           (atomic_load(&loop->shared->held_connections) > 0 ||
            atomic_load(&loop->shared->queued_connections) > 0);
}

/* The grace is over: what the holder still passes is no longer taken. */
static void end_stop_grace_if_over(struct worker_loop *loop)
{
    if (in_stop_grace(loop, serow_now_seconds()))
        return;
    loop->stop_grace_until = 0;
    if (loop->ready_channel >= 0)
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, loop->ready_channel, NULL);
}

/* ---- the loop ---------------------------------------------------------- */

/* ---- requests ------------------------------------------------------------ */

struct serow_request *serow_worker_loop_request_new(struct worker_loop *loop)
{
    struct serow_request *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    /* (+1: never calloc(0)) */
    r->head.headers = calloc(loop->headers_capacity + 1, sizeof(*r->head.headers));
    if (r->head.headers == NULL) {
        free(r);
        return NULL;
    }
    r->head.headers_capacity = loop->headers_capacity;
    r->worker = loop;
    return r;
}

void serow_worker_loop_request_free(struct serow_request *r)
{
    if (r == NULL)
        return;
    free(r->head.headers);
    free(r->response.head);
    free(r);
}

struct serow_request *serow_worker_loop_request(struct worker_loop *loop)
{
    return loop->request;
}

int serow_worker_loop_request_fd(const struct serow_request *r)
{
    return r->conn ? r->conn->fd : -1;
}

int serow_worker_loop_request_listener(const struct serow_request *r)
{
    return r->conn ? r->conn->listener_index : -1;
}

int serow_worker_loop_request_body_framing(const struct serow_request *r)
{
    return r->conn ? (int)r->head.framing : HTTP_BODY_NONE;
}

int64_t serow_worker_loop_request_content_length(const struct serow_request *r)
{
    return r->conn && r->head.framing == HTTP_BODY_LENGTH ? (int64_t)r->head.content_length : -1;
}

int serow_worker_loop_request_response_started(const struct serow_request *r)
{
    return r->response_started;
}

/* ---- the loop ---------------------------------------------------------- */

/* Takes a connection off the ready queue and parses its head into r for
 * serving. */
static int start_request(struct worker_loop *loop, struct serow_request *r,
                         struct connection *conn)
{
    serow_ready_remove(loop, conn);
    int parsed = serow_parse_request_head(conn->buffer, conn->buffer_len, &r->head,
                                          &loop->settings.limits);
    if (parsed == HTTP_PARSE_INCOMPLETE) {
        /* "\r\n\r\n" matched only empty lines before the request line */
        return 0;
    }
    if (parsed == HTTP_PARSE_ERROR) {
        serow_reject_connection(loop, conn, r->head.error_status, &r->head);
        return 0;
    }
    if (loop->settings.max_body_size && r->head.framing == HTTP_BODY_LENGTH &&
        r->head.content_length > loop->settings.max_body_size) {
        serow_reject_connection(loop, conn, 413, &r->head);
        return 0;
    }
    if (__builtin_expect(r->head.upgrade, 0) && serow_websocket_to_holder &&
        serow_websocket_upgrade(loop, conn, &r->head, (size_t)parsed))
        return 0;
    if (serow_wait_for_small_body(loop, conn, &r->head, (size_t)parsed))
        return 0;
    serow_timer_remove(loop, conn);
    conn->state = CONNECTION_SERVING;
    conn->empty_lines_dropped = 0;
    r->conn = conn;
    r->head_len = (size_t)parsed;
    r->next_serving = loop->serving;
    loop->serving = r;
    serow_body_start(r);
    serow_request_accounting_start(r);
    announce_busy(loop);
    publish_current_request(loop, r);
    return 1;
}

/*
 * epoll_wait that a signal always interrupts.  A signal caught after the
 * embedding last looked at its pending signals, but before epoll_wait began,
 * would leave the loop asleep with the signal unhandled (the parent-death
 * signal of a worker whose master died, a signal the app set a handler for).
 * So signals are blocked while *signal_pending is checked, and epoll_pwait
 * unblocks them atomically.  (The master's requests come without a signal:
 * see handle_event, WAKE_TAG.)
 */
static int epoll_wait_unless_signalled(struct worker_loop *loop, struct epoll_event *events,
                                       int timeout_ms)
{
    if (loop->signal_pending == NULL)
        return epoll_wait(loop->epoll_fd, events, EPOLL_BATCH, timeout_ms);
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    int n;
    if (*loop->signal_pending) {
        n = -1;
        errno = EINTR;
    } else {
        n = epoll_pwait(loop->epoll_fd, events, EPOLL_BATCH, timeout_ms, &old);
    }
    int saved_errno = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
    return n;
}

/* Waits up to timeout_ms for events, which become the loop's pending ones
 * (none on an error).  Returns their count, or -1 (EINTR: a signal to
 * handle). */
static int wait_for_events(struct worker_loop *loop, int timeout_ms)
{
    int n = epoll_wait_unless_signalled(loop, loop->pending_events, timeout_ms);
    loop->pending_next = 0;
    loop->pending_count = n > 0 ? n : 0;
    return n;
}

/* Handles one event from epoll.  Returns as soon as a request is ready
 * rather than reading every connection that has something: the ones left
 * unread stay idle, and so free for the holder to take elsewhere, while this
 * worker answers. */
static void handle_event(struct worker_loop *loop, const struct epoll_event *event)
{
    uint64_t tag = event->data.u64;
    if (tag & LISTENER_TAG) {
        /* With --max-queue-wait the holder passes a request on only to a
         * worker free to take it: one that accepted a new connection
         * instead would leave it waiting in the channel, beyond the holder's
         * reach, for a whole request's time.  So the channel goes first. */
        if (loop->settings.max_queue_wait_ms && loop->shared && loop->accepting &&
            atomic_load(&loop->shared->queued_connections) > 0) {
            serow_receive_ready_connection(loop);
            if (loop->ready.first)
                return;
        }
        for (int i = 0; i < ACCEPT_BATCH && loop->accepting && !loop->ready.first; i++)
            if (!serow_accept_connection(loop, (int)(tag & 0xffff)))
                break;
        return;
    }
    if (tag == WAKE_TAG) {
        uint64_t count;
        ssize_t ignored = read(loop->wake_fd, &count, sizeof(count));
        (void)ignored; /* the loop's next turn drops what was taken */
        /* Or the master asks something (it sets the flag, then rings): the
         * loop returns before it waits again. */
        if (loop->slot && (atomic_load(&loop->slot->stop_requested) ||
                           atomic_load(&loop->slot->reopen_logs_requested)))
            loop->master_asked = 1;
        return;
    }
    if (tag == READY_CHANNEL_TAG) {
        if (!loop->stopping || in_stop_grace(loop, serow_now_seconds()))
            serow_receive_ready_connection(loop);
        return;
    }
    int fd = (int)tag;
    struct connection *conn = fd < loop->connections_size ? loop->connections[fd] : NULL;
    if (conn == NULL || conn->in_ready_queue)
        return;
    switch (conn->state) {
    case CONNECTION_LINGERING:
        serow_drain_lingering(loop, conn);
        break;
    case CONNECTION_IDLE:
        if (serow_slot_claim(loop, conn) && serow_read_connection(loop, conn) == 0)
            serow_park_again_if_nothing_came(loop, conn);
        break;
    case CONNECTION_READING_HEAD:
        serow_read_connection(loop, conn);
        break;
    default:
        break;
    }
}

/*
 * A pipelining connection's turn is over: the events from the last wait not
 * handled yet, or if there are none the events of a wait that does not
 * block, are handled now (the connections that have a request join the ready
 * queue, new connections are accepted), and only then is the pipelining
 * connection's next request looked at: it goes behind them.
 */
static void look_around(struct worker_loop *loop)
{
    if (loop->pending_next >= loop->pending_count)
        (void)wait_for_events(loop, 0); /* (EINTR: the loop's next wait says) */
    while (loop->pending_next < loop->pending_count)
        handle_event(loop, &loop->pending_events[loop->pending_next++]);
    struct connection *conn = loop->turn_over;
    loop->turn_over = NULL;
    if (conn != NULL && conn->state == CONNECTION_READING_HEAD && !conn->in_ready_queue)
        serow_examine_buffered_head(loop, conn, 0);
}

/* Closes our copies of the connections the holder or another worker took.
 * The loop asks on every turn, and the ring is almost always empty: that
 * look is inline, the work is not. */
static inline void drop_stolen_connections(struct worker_loop *loop)
{
    if (loop->slot != NULL &&
        atomic_load(&loop->slot->stolen_tail) != atomic_load(&loop->slot->stolen_head))
        serow_drop_stolen_connections_in_ring(loop);
}

int serow_worker_loop_next_request(struct worker_loop *loop, struct serow_request *r)
{
    for (;;) {
        drop_stolen_connections(loop);
        serow_gather_connections(loop);
        if (loop->turn_over)
            look_around(loop);
        while (loop->ready.first) {
            if (start_request(loop, r, loop->ready.first))
                return 1;
        }
        if (loop->pending_next < loop->pending_count) {
            handle_event(loop, &loop->pending_events[loop->pending_next++]);
            continue;
        }
        serow_expire_timers(loop, serow_now_seconds());
        if (loop->ready.first)
            continue;
        if (loop->stop_grace_until > 0)
            end_stop_grace_if_over(loop);
        if (loop->stopping && serow_worker_loop_is_drained(loop))
            return 0;
        if (loop->master_asked)
            return 0; /* the embedding takes what the master asks */

        int timeout_ms = serow_next_timeout_ms(loop, serow_now_seconds());
        if (loop->stop_grace_until > 0 && holder_has_connections(loop) &&
            (timeout_ms < 0 || timeout_ms > STOP_GRACE_POLL_MS))
            timeout_ms = STOP_GRACE_POLL_MS;
        /* (a stopping worker takes no connections the holder takes from stuck workers) */
        if (timeout_ms != 0 && !loop->stopping)
            announce_free(loop);
        int n = wait_for_events(loop, timeout_ms);
        if (timeout_ms != 0)
            announce_not_free(loop);
        if (n < 0)
            return 0; /* EINTR: let Perl run its signal handlers */
    }
}

/* ---- the end of a request ---------------------------------------------- */

int serow_worker_loop_may_keep_alive(const struct serow_request *r)
{
    struct worker_loop *loop = r->worker;
    struct connection *conn = r->conn;
    if (conn == NULL || !r->head.keep_alive)
        return 0;
    /* A stopping worker keeps connections open only if it can hand them over,
     * and only if the server goes on without it.  (When the whole server
     * stops, this worker may not have taken the master's stop request yet:
     * it does once the request in the app is answered.) */
    if (loop->stopping && loop->handback_channel < 0)
        return 0;
    if (loop->shared && atomic_load(&loop->shared->server_stopping))
        return 0;
    if (loop->settings.max_keepalive_requests &&
        conn->requests_served + 1 >= loop->settings.max_keepalive_requests)
        return 0;
    /* Over the cap of kept connections, new ones are answered and closed. */
    if (loop->shared && loop->settings.max_keepalive_connections &&
        atomic_load(&loop->shared->open_connections) > loop->settings.max_keepalive_connections)
        return 0;
    return 1;
}

/* What every end of a request does first: its accounting, while the
 * connection's buffer still holds its head; then it is no longer served. */
static struct connection *end_serving(struct worker_loop *loop, struct serow_request *r)
{
    struct connection *conn = r->conn;
    /* (what an app that died or returned mid-stream wrote, before the
     * connection goes anywhere) */
    serow_worker_loop_send_held(r);
    serow_request_accounting_end(r);
    serow_serving_remove(loop, r);
    announce_done(loop);
    return conn;
}

void serow_worker_loop_finish_request(struct serow_request *r, int keep_alive)
{
    struct worker_loop *loop = r->worker;
    if (r->conn == NULL)
        return;
    struct connection *conn = end_serving(loop, r);
    conn->requests_served++;

    if (!r->body_done)
        keep_alive = 0; /* the app did not read the body: where would the next request start? */
    if (!keep_alive) {
        /* (a TLS client may still be sending too: its close_notify, unread,
         * would make the close a reset) */
        if (conn->buffer_len > r->head_len || !r->body_done ||
            !SEROW_TRANSPORT_IS_PLAIN(&conn->carried))
            serow_close_lingering(loop, conn); /* the client may still be sending */
        else
            serow_close_connection(loop, conn);
        return;
    }
    serow_connection_consume(conn, r->head_len);
    if (conn->buffer_len > 0) {
        /* pipelined: the next request is (partly) here already; it waited
         * for this one, and its queue time starts now */
        conn->arrived_ns = serow_request_clock_ns();
        conn->state = CONNECTION_READING_HEAD;
        serow_timer_append(loop, conn, TIMER_READING_HEAD,
                           serow_now_seconds() + loop->settings.header_timeout);
        if (++conn->pipelined_in_a_row < PIPELINED_REQUESTS_PER_TURN) {
            serow_examine_buffered_head(loop, conn, 0);
        } else {
            conn->pipelined_in_a_row = 0;
            loop->turn_over = conn;
        }
    } else {
        conn->pipelined_in_a_row = 0;
        serow_park_idle_connection(loop, conn);
    }
}

void serow_worker_loop_fail_request(struct serow_request *r, int status)
{
    struct worker_loop *loop = r->worker;
    if (r->conn == NULL)
        return;
    if (!r->response_started) {
        struct response_header h;
        size_t body = serow_send_error_response(
            r->conn, status, &r->head,
            serow_request_accounting_id_header(loop, r->id, r->id_len, &h));
        serow_request_accounting_note_error_page(r, status, body);
    }
    /* else the response was cut: the log shows the status it began with */
    struct connection *conn = end_serving(loop, r);
    conn->requests_served++;
    serow_close_lingering(loop, conn);
}

void serow_worker_loop_release_request(struct serow_request *r)
{
    struct worker_loop *loop = r->worker;
    if (r->conn == NULL)
        return;
    struct connection *conn = end_serving(loop, r);
    serow_close_connection(loop, conn); /* our descriptor only: the app holds a duplicate */
}

int serow_worker_loop_hold_request(struct serow_request *r, const char *message, size_t len,
                                   int keep_alive)
{
    struct worker_loop *loop = r->worker;
    if (r->conn == NULL)
        return -1;
    struct connection *conn = end_serving(loop, r);
    conn->requests_served++;
    struct serow_holding_head head;
    memset(&head, 0, sizeof(head));
    head.tag = SEROW_HOLDING_TAG;
    head.has_connection = 1;
    /* (a body the app did not read, or a pipelined request, would be read
     * as nothing: the connection ends with its answer) */
    head.keep_alive = keep_alive && r->body_done && conn->buffer_len == r->head_len;
    head.head_request = serow_is_head_request(&r->head);
    head.minor_version = (uint8_t)r->head.minor_version;
    head.conn.requests_served = (uint32_t)conn->requests_served;
    head.conn.listener_index = (uint32_t)conn->listener_index;
    head.conn.carried = conn->carried; /* (the holder writes to it from here on) */
    head.conn.idle_since_ms = serow_shared_clock_ms();
    head.status = (uint16_t)r->response.status;
    size_t line_len = 0;
    const char *line = serow_access_log_raw_request_line(conn->buffer, r->head_len, &line_len);
    head.request_line_len = line ? (uint16_t)(line_len < ACCESS_LOG_MAX_REQUEST_LINE ? line_len
                                                                        : ACCESS_LOG_MAX_REQUEST_LINE) : 0;
    if (loop->handback_channel < 0 ||
        serow_holding_send(loop->handback_channel, &head, conn->fd, message, len, line, 1000) != 0) {
        serow_close_connection(loop, conn);
        return -1;
    }
    serow_forget_connection(loop, conn); /* the holder's now: still open */
    return 0;
}

int serow_worker_loop_holding_channel(struct worker_loop *loop)
{
    return loop->handback_channel;
}

/* ---- stopping ---------------------------------------------------------- */

void serow_worker_loop_stop(struct worker_loop *loop)
{
    if (loop->stopping)
        return;
    loop->stopping = 1;
    loop->accepting = 0;
    if (loop->slot)
        atomic_store(&loop->slot->stopping, 1);
    for (int i = 0; i < loop->num_listeners; i++)
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, loop->listeners[i].fd, NULL);
    if (loop->shared && atomic_load(&loop->shared->server_stopping)) {
        /* Nobody takes over: serve what comes in the grace time, then close
         * (the timers read each connection once more before closing it). */
        loop->whole_server_stopping = 1;
        loop->stop_grace_until = serow_now_seconds() + STOP_GRACE_SECONDS;
        serow_cap_deadlines(loop, TIMER_IDLE, loop->stop_grace_until);
        serow_cap_deadlines(loop, TIMER_READING_HEAD, loop->stop_grace_until);
        return;
    }
    if (loop->ready_channel >= 0)
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, loop->ready_channel, NULL);
    serow_hand_back_idle_connections(loop);
    /* Kept-alive connections that have sent nothing of their next request are
     * idle too.  New connections are not: their first request is on its way. */
    struct connection *conn;
    for (conn = loop->timers[TIMER_READING_HEAD].first; conn;) {
        struct connection *next = conn->timer_link.next;
        if (conn->buffer_len == 0 && conn->requests_served > 0)
            serow_close_connection(loop, conn);
        conn = next;
    }
}

int serow_worker_loop_is_drained(const struct worker_loop *loop)
{
    /* In the grace of a whole-server stop, idle connections may still bring
     * a request, and so may those the holder passes on. */
    if (loop->whole_server_stopping && loop->timers[TIMER_IDLE].first != NULL)
        return 0;
    if (loop->stop_grace_until > 0 && holder_has_connections(loop))
        return 0;
    return loop->num_connections == 0 || (loop->serving == NULL && loop->ready.first == NULL &&
                                          loop->timers[TIMER_READING_HEAD].first == NULL &&
                                          loop->timers[TIMER_READING_BODY].first == NULL &&
                                          loop->timers[TIMER_LINGERING].first == NULL);
}

/* ---- what the embedding, and a request, may know of the loop -------------
 *
 * Outside the worker struct worker_loop is opaque: these answer, each at
 * most a few times a request, so that a field can move without the glue or
 * the code that serves a request knowing. */

void serow_worker_loop_watch_signals(struct worker_loop *loop, volatile int *signal_pending)
{
    loop->signal_pending = signal_pending;
}

int serow_worker_loop_take_master_requests(struct worker_loop *loop)
{
    loop->master_asked = 0;
    if (loop->slot == NULL)
        return 0;
    int asked = 0;
    if (atomic_exchange(&loop->slot->stop_requested, 0))
        asked |= WORKER_ASKED_STOP;
    if (atomic_exchange(&loop->slot->reopen_logs_requested, 0))
        asked |= WORKER_ASKED_REOPEN_LOGS;
    return asked;
}

int serow_worker_loop_is_stopping(const struct worker_loop *loop)
{
    return loop->stopping;
}

const struct worker_settings *serow_worker_loop_settings(const struct worker_loop *loop)
{
    return &loop->settings;
}

const char *serow_worker_loop_listener(const struct worker_loop *loop, int index, int *port)
{
    if (index < 0 || index >= loop->num_listeners)
        return NULL;
    *port = loop->listeners[index].server_port;
    return loop->listeners[index].server_name;
}

struct worker_slot *serow_worker_loop_slot(const struct worker_loop *loop)
{
    return loop->slot;
}

const char *serow_worker_loop_id_header(const struct worker_loop *loop, size_t *len)
{
    *len = loop->settings.request_id_header_len;
    return loop->settings.request_id_header;
}

uint64_t serow_worker_loop_slow_request_us(const struct worker_loop *loop)
{
    return loop->settings.slow_request_us;
}

struct serow_id_maker *serow_worker_loop_ids(struct worker_loop *loop)
{
    return &loop->ids;
}

int serow_worker_loop_pid(const struct worker_loop *loop)
{
    return loop->pid;
}

void serow_worker_loop_set_access_log(struct worker_loop *loop, struct access_log *log)
{
    serow_access_log_close(loop->access_log);
    loop->access_log = log;
}

struct access_log *serow_worker_loop_access_log(const struct worker_loop *loop)
{
    return loop->access_log;
}
