/*
 * worker_internal.h - the inside of a worker's event loop, shared by the
 * files that make it up, and by them alone.
 *
 * worker_loop.h is the loop's public face (what Serow.xs and the code that
 * serves a request call); this header lays out struct worker_loop and
 * declares the functions the worker's files call across each other.
 * Nothing outside the worker includes it (Serow.xs cannot: see below), so
 * that a field can move without the rest knowing.  A request's own state is
 * struct serow_request (request.h), which the worker starts, reads and ends
 * but does not own: any number of them may be served at once.
 *
 * The worker is layered, each file calling only the ones listed before it
 * (nginx's src/event and src/http are the model: one file per stage, each
 * owning its state):
 *
 *   connection.c            a connection and its buffer (no loop)
 *   worker_internal.h       the layout; the clock, timer lists, ready queue
 *   worker_slots.c          the shared-memory slots: how the holder sees our
 *                           connections (assign, park, claim)
 *   request_timeout.c       --request-timeout: the app's timer, and what the
 *                           slot says of the request the app runs
 *   worker_output.c         writing to a request's connection: writev,
 *                           sendfile, waiting to write, a stream's writes
 *                           gathered (and its flusher thread), error pages
 *                           sent without waiting
 *   worker_connections.c    the table of connections: track, forget, close,
 *                           lingering close
 *   worker_parking.c        where an idle connection waits: parked here,
 *                           handed back to the holder, or stolen from us
 *   worker_request_body.c   request bodies: read ahead in the loop, read while
 *                           serving, 100 Continue, the minimum body rate
 *   worker_intake.c         accepting and adopting connections, reading them,
 *                           finding complete heads, rejecting bad ones
 *   worker_gather.c         gathering connections where the CPU is
 *   worker_timers.c         what each deadline means when it passes; the next one
 *   worker_loop.c           set-up, the event loop, a request's start and
 *                           end, what the worker announces (busy, free),
 *                           stopping; the public API
 *
 * No Perl here.
 */
#ifndef SEROW_WORKER_INTERNAL_H
#define SEROW_WORKER_INTERNAL_H

#ifdef SEROW_XS_GLUE
#error "Serow.xs reaches the worker loop through worker_loop.h only"
#endif

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include "log/access_log.h"
#include "connection/connection.h"
#include "shared/connection_transfer.h"
#include "http/http_parser.h"
#include "request/request.h"
#include "shared/shared_state.h"
#include "worker/worker_loop.h"

#define WORKER_MAX_LISTENERS 64
/* The shortest field line, "a:" CRLF: a header section of max_header_size
 * bytes holds at most max_header_size / 4 fields, whatever max_headers says,
 * which bounds the header array. */
#define WORKER_MIN_FIELD_LINE 4

/* When the whole server stops (TERM, or Server::Starter retiring the old
 * server after a reload), a client on a kept-alive connection may be sending
 * its next request at this very moment: a close would make that request fail.
 * So idle connections wait this long for one, which is answered with
 * Connection: close; only connections silent for the whole time are closed.
 * Long against a busy client's gap between requests, short for a stop. */
#define STOP_GRACE_SECONDS 1.0

/* Listen sockets are tagged in epoll by index | LISTENER_TAG, the ready
 * channel by READY_CHANNEL_TAG, the holder's doorbell by WAKE_TAG,
 * connections by their fd. */
#define LISTENER_TAG (1ULL << 40)
#define READY_CHANNEL_TAG (1ULL << 41)
#define WAKE_TAG (1ULL << 42)

struct listener {
    int fd;
    int is_unix;
    char server_name[256];
    int server_port;
    uint32_t transport; /* its connections' (enum serow_transport_kind) */
};

enum timer_list_kind {
    TIMER_READING_HEAD, /* deadline: header timeout */
    TIMER_READING_BODY, /* deadline: read timeout, renewed on progress */
    TIMER_IDLE,         /* deadline: keep-alive timeout */
    TIMER_LINGERING,    /* deadline: end of a lingering close */
    TIMER_LIST_COUNT
};

struct worker_loop {
    int epoll_fd;
    struct worker_settings settings;
    struct listener listeners[WORKER_MAX_LISTENERS];
    int num_listeners;
    int accepting;
    int stopping;
    /* When the whole server stops (not a reload), whole_server_stopping is
     * set, and until stop_grace_until idle kept-alive connections and the
     * holder's ready ones are still served, each answered with
     * Connection: close (see STOP_GRACE_SECONDS). */
    double stop_grace_until;
    int whole_server_stopping;

    struct connection **connections; /* indexed by fd */
    int connections_size;
    int num_connections;

    struct connection_list timers[TIMER_LIST_COUNT];
    struct connection_list ready;

    /* events from the last epoll_wait not handled yet: they are handled one
     * at a time, so that connections this worker has not touched stay
     * available to the holder while it answers a request */
    struct epoll_event *pending_events;
    int pending_count, pending_next;
    /* a pipelining connection whose turn is over: its next request is
     * looked at once the others have had theirs (look_around) */
    struct connection *turn_over;

    /* sharing connections with the holder (NULL/-1 when running alone) */
    struct shared_state *shared;
    struct worker_slot *slot;
    int ready_channel;      /* receiving end: connections the holder passes */
    int handback_channel;   /* sending end: idle connections given back on stop */
    int wake_fd;            /* rung by the holder when it took connections, and by
                               the master when it asks something (it made it) */
    int master_asked;       /* the slot has a request of the master's not taken yet */
    struct connection **slot_owner; /* slot index -> connection */
    uint32_t worker_index;
    /* gathering the connections of workers waiting for the same CPUs (see
     * worker_gather.c) */
    int usable_cpus;              /* CPUs this worker may run on; 0: never gather */
    uint64_t cpus_counted_ms;
    uint64_t gather_looked_ms;    /* the last look at the other workers */
    struct worker_handle *gather_handles; /* per worker slot; made on first use */
    uint32_t *free_slots;
    uint32_t free_slot_count;

    /* The request the embedding serves (serow_worker_loop_request), and
     * the requests being served, linked through next_serving (a connection
     * closed under one is taken from it).  headers_capacity: the size of
     * the header array each request parses its head into, from the limits;
     * probe_headers, one for heads parsed before they are served
     * (worker_intake.c). */
    struct serow_request *request;
    struct serow_request *serving;
    size_t headers_capacity;
    struct http_header *probe_headers;

    /* --request-timeout (request_timeout.c); limit_ns 0: off.  running:
     * the request the app runs for (NULL: none); when it began is the
     * request's. */
    struct {
        timer_t id;
        uint64_t limit_ns;
        struct serow_request *running;
    } app_timer;

    struct access_log *access_log;        /* NULL: no access log */

    /* Request ids this worker makes (request_id.c, through
     * request_accounting.c). */
    struct serow_id_maker ids;
    int pid;                              /* the worker's, for the log (%P) */

    /* Non-zero while a signal has arrived that the embedding (Perl) has not
     * handled yet: the loop then returns instead of waiting, since a signal
     * caught just before epoll_wait would not interrupt it.  NULL: none. */
    volatile int *signal_pending;
};

/* ---- request_timeout.c: the time the app may run ---------------------- */

/* Makes the timer when seconds > 0 (0: the option is off); -1 (errno) when
 * it cannot be made. */
int serow_app_timer_init(struct worker_loop *loop, double seconds);
void serow_app_timer_free(struct worker_loop *loop);
/* Bytes of r's response may have reached the client (or the app has the
 * socket): when the app runs for r, the slot says so before they go (see
 * serow_worker_loop_response_starts). */
void serow_app_timer_note_answer(struct serow_request *r);
/* An interim response (1xx) of r's went out whole: the slot says again
 * what it said before it (see serow_worker_loop_write_interim). */
void serow_app_timer_note_interim_sent(struct serow_request *r);

/* ---- the clock, timer lists and the ready queue -------------------------
 *
 * Here rather than in a file of their own: every request passes through
 * them several times (read, ready, served, parked), and as inline functions
 * they cost what they did when the worker was one file.  What a deadline
 * means when it passes is worker_timers.c's. */

static inline double serow_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One connection list's link in conn: offset is offsetof(struct connection,
 * timer_link) or (..., ready_link), a constant once inlined. */
static inline struct connection_list_link *serow_list_link(struct connection *conn, size_t offset)
{
    return (struct connection_list_link *)((char *)conn + offset);
}

static inline void serow_list_append(struct connection_list *list, struct connection *conn,
                                     size_t offset)
{
    struct connection_list_link *link = serow_list_link(conn, offset);
    link->next = NULL;
    link->prev = list->last;
    if (list->last)
        serow_list_link(list->last, offset)->next = conn;
    else
        list->first = conn;
    list->last = conn;
}

static inline void serow_list_remove(struct connection_list *list, struct connection *conn,
                                     size_t offset)
{
    struct connection_list_link *link = serow_list_link(conn, offset);
    if (link->prev)
        serow_list_link(link->prev, offset)->next = link->next;
    else
        list->first = link->next;
    if (link->next)
        serow_list_link(link->next, offset)->prev = link->prev;
    else
        list->last = link->prev;
    link->prev = link->next = NULL;
}

#define SEROW_TIMER_LINK offsetof(struct connection, timer_link)
#define SEROW_READY_LINK offsetof(struct connection, ready_link)

static inline void serow_timer_remove(struct worker_loop *loop, struct connection *conn)
{
    if (conn->timer_list < 0)
        return;
    serow_list_remove(&loop->timers[conn->timer_list], conn, SEROW_TIMER_LINK);
    conn->timer_list = -1;
}

/* Every list has one timeout for all its members, so appending keeps it sorted. */
static inline void serow_timer_append(struct worker_loop *loop, struct connection *conn,
                                      enum timer_list_kind kind, double deadline)
{
    serow_timer_remove(loop, conn);
    conn->deadline = deadline;
    conn->timer_list = (int)kind;
    serow_list_append(&loop->timers[kind], conn, SEROW_TIMER_LINK);
}

/* The ready queue: connections holding a complete request head. */
static inline void serow_ready_push(struct worker_loop *loop, struct connection *conn)
{
    if (conn->in_ready_queue)
        return;
    conn->in_ready_queue = 1;
    serow_list_append(&loop->ready, conn, SEROW_READY_LINK);
}

static inline void serow_ready_remove(struct worker_loop *loop, struct connection *conn)
{
    if (!conn->in_ready_queue)
        return;
    serow_list_remove(&loop->ready, conn, SEROW_READY_LINK);
    conn->in_ready_queue = 0;
}

/* The requests being served (loop->serving).  r is no longer: it goes off
 * the list, and has no connection. */
static inline void serow_serving_remove(struct worker_loop *loop, struct serow_request *r)
{
    struct serow_request **link = &loop->serving;
    while (*link != NULL && *link != r)
        link = &(*link)->next_serving;
    if (*link != NULL)
        *link = r->next_serving;
    r->next_serving = NULL;
    r->conn = NULL;
}

/* A connection closes under the request serving it, if any: the request
 * is no longer served (its end then finds no connection). */
static inline void serow_serving_forget_connection(struct worker_loop *loop,
                                                   const struct connection *conn)
{
    for (struct serow_request *r = loop->serving; r != NULL; r = r->next_serving)
        if (r->conn == conn) {
            serow_serving_remove(loop, r);
            return;
        }
}

/* ---- worker_output.c ---------------------------------------------------- */

/* Waits until fd is ready for events, up to timeout seconds. 1 ready, 0 not. */
int serow_wait_for(int fd, short events, double timeout);

/* Sends a complete error response (status, and Connection: close) without
 * waiting: for connections that are not being served, or whose client may
 * not read.  head is the request as far as it was parsed (NULL: not at
 * all); id_header: --request-id-header's (NULL: none).  Returns the body
 * bytes sent (0 for HEAD). */
size_t serow_send_error_response(struct connection *conn, int status,
                                 const struct http_request_head *head,
                                 const struct response_header *id_header);

/* ---- worker_slots.c ----------------------------------------------------- */

int serow_slots_join(struct worker_loop *loop, struct shared_state *shared,
                     uint32_t worker_index, int wake_fd, int ready_channel,
                     int handback_channel);
void serow_slot_assign(struct worker_loop *loop, struct connection *conn);
void serow_slot_release(struct worker_loop *loop, struct connection *conn);
void serow_slot_park(struct worker_loop *loop, struct connection *conn, uint64_t idle_since_ms);
int serow_slot_claim(struct worker_loop *loop, struct connection *conn);
void serow_park_again_if_nothing_came(struct worker_loop *loop, struct connection *conn);

/* ---- worker_connections.c ----------------------------------------------- */

/* What epoll waits for on a client connection: input, and the client's end
 * (a TLS handshake held up by a write waits for EPOLLOUT instead:
 * worker_intake.c). */
#define SEROW_CONNECTION_EVENTS (EPOLLIN | EPOLLRDHUP)

int serow_track_connection(struct worker_loop *loop, struct connection *conn);
void serow_forget_connection(struct worker_loop *loop, struct connection *conn);
void serow_close_connection(struct worker_loop *loop, struct connection *conn);
void serow_close_lingering(struct worker_loop *loop, struct connection *conn);
void serow_drain_lingering(struct worker_loop *loop, struct connection *conn);

/* ---- worker_parking.c --------------------------------------------------- */

void serow_park_idle_connection(struct worker_loop *loop, struct connection *conn);
void serow_hand_back_idle_connections(struct worker_loop *loop);
/* Closes our copies of the connections the holder or another worker took,
 * once the ring of them has entries (worker_loop.c looks, inline, on every
 * turn: the ring is almost always empty). */
void serow_drop_stolen_connections_in_ring(struct worker_loop *loop);

/* ---- worker_request_body.c ---------------------------------------------- */

void serow_examine_buffered_body(struct worker_loop *loop, struct connection *conn);
int serow_wait_for_small_body(struct worker_loop *loop, struct connection *conn,
                              const struct http_request_head *head, size_t head_len);
/* r's body state, as its serving begins. */
void serow_body_start(struct serow_request *r);

/* ---- worker_intake.c ---------------------------------------------------- */

void serow_examine_buffered_head(struct worker_loop *loop, struct connection *conn,
                                 size_t new_bytes_from);
int serow_read_connection(struct worker_loop *loop, struct connection *conn);
/* As serow_read_connection, up to EAGAIN: what the client has sent by now,
 * for a caller about to judge it without waiting (a timeout's expiry). */
int serow_read_all_sent(struct worker_loop *loop, struct connection *conn);
void serow_reject_connection(struct worker_loop *loop, struct connection *conn, int status,
                             const struct http_request_head *head);
void serow_reject_timed_out(struct worker_loop *loop, struct connection *conn);
int serow_accept_connection(struct worker_loop *loop, int listener_index);
struct connection *serow_adopt_passed_connection(struct worker_loop *loop, int fd,
                                                 const struct passed_connection *info);
void serow_receive_ready_connection(struct worker_loop *loop);

/* ---- worker_gather.c ---------------------------------------------------- */

void serow_gather_start(struct worker_loop *loop);
void serow_gather_connections(struct worker_loop *loop);
void serow_gather_free(struct worker_loop *loop);

/* ---- worker_timers.c ---------------------------------------------------- */

void serow_expire_timers(struct worker_loop *loop, double now);
int serow_next_timeout_ms(struct worker_loop *loop, double now);
void serow_cap_deadlines(struct worker_loop *loop, enum timer_list_kind kind, double deadline);

/* ---- worker_websocket.c ------------------------------------------------ */

/* A parsed request offering an upgrade: 1 when it was a WebSocket handshake
 * and is done with here (handed to the holder, or refused 400 / 426), 0
 * when the app serves it. */
int serow_websocket_upgrade(struct worker_loop *loop, struct connection *conn,
                            const struct http_request_head *head, size_t head_len);

#endif
