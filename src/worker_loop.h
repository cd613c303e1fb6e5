/*
 * worker_loop.h - the event loop of one worker process.
 *
 * A worker waits in epoll on the listen sockets and on the connections it
 * owns.  next_request() returns as soon as one of them holds a complete
 * request head; the worker then answers it (the app runs in Perl) and calls
 * finish_request(), which keeps the connection for its next request or
 * closes it.  A connection that is idle or still sending its head costs the
 * worker nothing: it waits in the same epoll as every other one.
 *
 * Malformed requests, timeouts and limits are answered here, in C, with the
 * right status and a closed connection; Perl never sees them.  No Perl here.
 */
#ifndef SEROW_WORKER_LOOP_H
#define SEROW_WORKER_LOOP_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/uio.h>

#include "access_log.h"
#include "connection.h"
#include "connection_transfer.h"
#include "http_parser.h"
#include "shared_state.h"

#define WORKER_MAX_LISTENERS 64
/* The shortest field line, "a:" CRLF: a header section of max_header_size
 * bytes holds at most max_header_size / 4 fields, whatever max_headers says,
 * which bounds the header array. */
#define WORKER_MIN_FIELD_LINE 4

struct listener {
    int fd;
    int is_unix;
    char server_name[256];
    int server_port;
};

struct worker_settings {
    struct http_limits limits;
    uint64_t max_body_size;        /* 0: unlimited */
    double header_timeout;         /* seconds for a whole request head */
    double read_timeout;           /* seconds without progress reading a body */
    double min_body_rate;          /* bytes/s a body read while serving must average,
                                      after read_timeout of grace; 0: no minimum */
    double write_timeout;          /* seconds without progress writing a response */
    double keepalive_timeout;      /* seconds an idle keep-alive connection is kept */
    unsigned long max_keepalive_requests; /* per connection; 0: unlimited */
    unsigned long max_keepalive_connections; /* server-wide; 0: unlimited */
};

enum timer_list_kind {
    TIMER_READING_HEAD, /* deadline: header timeout */
    TIMER_READING_BODY, /* deadline: read timeout, renewed on progress */
    TIMER_IDLE,         /* deadline: keep-alive timeout */
    TIMER_LINGERING,    /* deadline: end of a lingering close */
    TIMER_LIST_COUNT
};

struct timer_list {
    struct connection *first, *last;
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

    struct timer_list timers[TIMER_LIST_COUNT];
    struct connection *ready_first, *ready_last;

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
    int wake_fd;            /* rung by the holder when it took connections */
    struct connection **slot_owner; /* slot index -> connection */
    uint32_t worker_index;
    /* gathering the connections of workers waiting for the same CPUs (see
     * gather_connections in worker_loop.c) */
    int usable_cpus;              /* CPUs this worker may run on; 0: never gather */
    uint64_t cpus_counted_ms;
    uint64_t gather_looked_ms;    /* the last look at the other workers */
    struct worker_handle *gather_handles; /* per worker slot; made on first use */
    uint32_t *free_slots;
    uint32_t free_slot_count;

    /* the request being answered */
    struct connection *current;
    struct http_request_head head;
    struct http_header *headers; /* sized once from the limits */
    size_t headers_capacity;
    size_t head_len;
    uint64_t body_remaining;     /* Content-Length bytes not yet read */
    uint64_t body_received;      /* decoded body bytes handed out */
    double body_started;         /* when the worker began to serve the request */
    struct chunked_decoder chunked;
    int body_done;
    int continue_sent;
    int response_started;

    unsigned long requests_total;

    /* What the access log and the metrics record of the current request:
     * when its head was complete, and the status and body bytes of its
     * response (set through request_accounting_note_response). */
    uint64_t request_started_ns;
    int response_status;
    uint64_t response_body_bytes;
    struct access_log *access_log;        /* NULL: no access log */
    struct access_log_request log_request;
    char remote_user[ACCESS_LOG_MAX_USER];
    size_t remote_user_len;

    /* Non-zero while a signal has arrived that the embedding (Perl) has not
     * handled yet: the loop then returns instead of waiting, since a signal
     * caught just before epoll_wait would not interrupt it.  NULL: none. */
    volatile int *signal_pending;
    /* The signal mask while waiting for events, when it differs from the
     * mask the rest of the time (see worker_loop_set_wait_signal_mask). */
    sigset_t wait_signal_mask;
    int has_wait_signal_mask;
};

struct worker_loop *worker_loop_new(const struct worker_settings *settings);
void worker_loop_free(struct worker_loop *loop);
int worker_loop_add_listener(struct worker_loop *loop, int fd, int is_unix,
                             const char *server_name, int server_port);

/* Joins the holder: this worker publishes its connections in slot
 * worker_index of shared, takes ready connections from ready_channel and
 * gives idle ones back on handback_channel when it stops. */
int worker_loop_join_holder(struct worker_loop *loop, struct shared_state *shared,
                            uint32_t worker_index, int ready_channel, int handback_channel);

/* Waits for a request.  1: loop->current holds one (loop->head parsed).
 * 0: interrupted by a signal, or (when loop->stopping) nothing left to do;
 * check worker_loop_is_drained(). */
int worker_loop_next_request(struct worker_loop *loop);

/* Reads up to cap bytes of the current request's body (chunked coding
 * removed) into out.  Returns 0 with *got > 0 for data, 0 with *got == 0 at
 * the end of the body, or an HTTP status (400, 408, 413) when the body is
 * broken, too large or too slow, or -1 when the client went away.  Sends
 * "100 Continue" first when the client asked for it. */
int worker_loop_read_body(struct worker_loop *loop, char *out, size_t cap, size_t *got);

/* Whether the current request's body has a Content-Length of at most max
 * bytes and is all in the connection's buffer: worker_loop_read_body then
 * takes it whole in one call, without waiting. */
int worker_loop_body_buffered(const struct worker_loop *loop, size_t max);

/* Writes all of iov to the current connection, waiting up to write_timeout
 * for progress.  0 on success, -1 when the client is gone or too slow. */
int worker_loop_write(struct worker_loop *loop, struct iovec *iov, int iovcnt);

/* Whether the client of the current request has closed the connection (or
 * its sending side: it will send nothing more), waiting up to timeout
 * seconds (> 0) for it; 1 too when no request is current. */
int serow_client_hung_up(struct worker_loop *loop, double timeout);

/* Sends len bytes of file_fd from offset with sendfile(2). */
int worker_loop_sendfile(struct worker_loop *loop, int file_fd, uint64_t offset, uint64_t len);

/* Whether the current connection may stay open after this response, given
 * what the client asked for and the limits. */
int worker_loop_may_keep_alive(struct worker_loop *loop);

/* Ends the current request.  keep_alive = 0 closes the connection (after
 * discarding what the client still sends, so that it reads the response). */
void worker_loop_finish_request(struct worker_loop *loop, int keep_alive);

/* Sends a complete error response on the current connection and closes it. */
void worker_loop_fail_request(struct worker_loop *loop, int status);

/* The current connection is taken over by the app (psgix.io): forget it
 * without closing the socket the app now holds a duplicate of. */
void worker_loop_release_current(struct worker_loop *loop);

/* Signals blocked the rest of the time may arrive while the loop waits for
 * events: epoll_pwait puts mask in place for the wait (a worker keeps its
 * stop signals blocked while the app runs, so that they do not cut short a
 * sleep or a wait of the app's, and handles them between requests). */
void worker_loop_set_wait_signal_mask(struct worker_loop *loop, const sigset_t *mask);

/* Graceful stop: no more accepting, idle connections closed, requests whose
 * heads are arriving may still complete. */
void worker_loop_stop(struct worker_loop *loop);
int worker_loop_is_drained(const struct worker_loop *loop);

/* Formats an "HTTP-date" for the Date header into out (30 bytes + NUL),
 * recomputed at most once a second. */
const char *http_date_now(void);

#endif
