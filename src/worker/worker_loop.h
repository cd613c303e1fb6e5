/*
 * worker_loop.h - the event loop of one worker process.
 *
 * A worker waits in epoll on the listen sockets and on the connections it
 * owns.  next_request() returns as soon as one of them holds a complete
 * request head, started in a struct serow_request; the worker then answers
 * it (the app runs in Perl) and calls finish_request(), which keeps the
 * connection for its next request or closes it.  A connection that is idle
 * or still sending its head costs the worker nothing: it waits in the same
 * epoll as every other one.
 *
 * Malformed requests, timeouts and limits are answered here, in C, with the
 * right status and a closed connection; Perl never sees them.  No Perl here.
 *
 * This is the loop's public face, what the glue (Serow.xs) and the code
 * that serves a request (psgi_*.c, request_accounting.c) may call, all of it
 * named serow_worker_loop_*; the loop's files and their layers are listed
 * in worker_internal.h.
 */
#ifndef SEROW_WORKER_LOOP_H
#define SEROW_WORKER_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "http/http_parser.h" /* struct http_limits */
#include "request/request_worker.h"

struct shared_state;

struct worker_settings {
    struct http_limits limits;
    uint64_t max_body_size;        /* 0: unlimited */
    uint64_t max_chunk_extensions; /* bytes of chunk extensions in a body; 0: unlimited */
    double header_timeout;         /* seconds for a whole request head */
    double read_timeout;           /* seconds without progress reading a body */
    double min_body_rate;          /* bytes/s a body read while serving must average,
                                      after read_timeout of grace; 0: no minimum */
    double write_timeout;          /* seconds without progress writing a response */
    double keepalive_timeout;      /* seconds an idle keep-alive connection is kept */
    unsigned long max_keepalive_requests; /* per connection; 0: unlimited */
    unsigned long max_keepalive_connections; /* server-wide; 0: unlimited */
    double request_timeout;        /* seconds the app may run for a request; 0: no limit */
    uint64_t max_queue_wait_ms;    /* --max-queue-wait: a request that waited longer in
                                      the listen backlog is answered 503; 0: no limit */
    /* --request-id-header: the header's name ("" and 0: off) */
    char request_id_header[64];
    size_t request_id_header_len;
    uint64_t slow_request_us;      /* --slow-request-log, in microseconds; 0: off */
};

/* Opaque outside the worker: its layout is in worker_internal.h, which only
 * the worker's own C includes.  The embedding, and the code that serves a
 * request (struct serow_request, request.h), ask through the functions
 * below. */
struct worker_loop;
struct access_log;
struct serow_request;
struct serow_id_maker;
struct worker_slot;

struct worker_loop *serow_worker_loop_new(const struct worker_settings *settings);
void serow_worker_loop_free(struct worker_loop *loop);
/* tls: its connections are TLS (serow_tls_configure was called first). */
int serow_worker_loop_add_listener(struct worker_loop *loop, int fd, int is_unix,
                                   const char *server_name, int server_port, int tls);

/* Joins the holder: this worker publishes its connections in slot
 * worker_index of shared, takes ready connections from ready_channel and
 * gives idle ones back on handback_channel when it stops.  wake_fd is the
 * worker's eventfd, which the master made before forking it and rings when
 * it asks something (serow_shared_ask_worker); the loop owns it from now on
 * (-1: the loop makes its own, and only the holder rings it). */
int serow_worker_loop_join_holder(struct worker_loop *loop, struct shared_state *shared,
                                  uint32_t worker_index, int wake_fd, int ready_channel,
                                  int handback_channel);

/* ---- requests ------------------------------------------------------------
 *
 * A request is made for a worker and served by it, as many times as it is
 * started: struct serow_request (request.h) holds all of its state.  The
 * worker serves any number of them at once, each on its own connection;
 * the embedding (Serow.xs) serves one at a time, the worker's own
 * (serow_worker_loop_request). */

/* A request of the worker's, between requests (NULL: out of memory); freed
 * once it is not being served. */
struct serow_request *serow_worker_loop_request_new(struct worker_loop *loop);
void serow_worker_loop_request_free(struct serow_request *r);
/* The request the embedding serves, made with the loop. */
struct serow_request *serow_worker_loop_request(struct worker_loop *loop);

/* Waits for a request and starts r (not being served) with it.  1: r is
 * being served, its head parsed.  0: interrupted by a signal, or the master
 * asks something (serow_worker_loop_take_master_requests), or (when
 * stopping) nothing left to do; check serow_worker_loop_is_drained(). */
int serow_worker_loop_next_request(struct worker_loop *loop, struct serow_request *r);

/* About r (not being served: -1, HTTP_BODY_NONE, -1, 0): its
 * connection's socket, its body's framing (enum http_body_framing), its
 * Content-Length (-1: none), and whether bytes of its final response went
 * out. */
int serow_worker_loop_request_fd(const struct serow_request *r);
/* The index of the listen socket r's connection came on (the order of
 * serow_worker_loop_add_listener), -1 with no connection: a worker answers
 * --publish-listen's requests with the publish endpoint, not the app. */
int serow_worker_loop_request_listener(const struct serow_request *r);
int serow_worker_loop_request_body_framing(const struct serow_request *r);
int64_t serow_worker_loop_request_content_length(const struct serow_request *r);
int serow_worker_loop_request_response_started(const struct serow_request *r);

/* Reads up to cap bytes of r's body (chunked coding removed) into out.
 * Returns 0 with *got > 0 for data, 0 with *got == 0 at the end of the body,
 * or an HTTP status (400, 408, 413) when the body is broken, too large or
 * too slow, or -1 when the client went away.  Sends "100 Continue" first
 * when the client asked for it. */
int serow_worker_loop_read_body(struct serow_request *r, char *out, size_t cap, size_t *got);

/* Whether r's body has a Content-Length of at most max bytes and is all in
 * the connection's buffer: serow_worker_loop_read_body then takes it whole
 * in one call, without waiting. */
int serow_worker_loop_body_buffered(const struct serow_request *r, size_t max);

/* When serow_worker_loop_body_buffered says so: the body, lent where it lies
 * instead of read.  Returns it (its length the Content-Length, a NUL after
 * it) in the connection's buffer, which the caller now owns (*buffer, of
 * *size bytes; serow_connection_give_back_buffer once nothing reads the body,
 * and not before the request is over: its parsed head is in there too); the
 * connection has another, and the request no body left to read.  NULL when
 * it cannot be lent (no byte free after the body, no other buffer): nothing
 * changed, serow_worker_loop_read_body reads it. */
char *serow_worker_loop_lend_body(struct serow_request *r, char **buffer, size_t *size);

/* The most one read of at most max body bytes can give: max, or what is
 * left of the Content-Length, so that a buffer grows once, not per read. */
size_t serow_worker_loop_body_read_size(const struct serow_request *r, size_t max);

/* Writes all of iov to r's connection, waiting up to write_timeout for
 * progress.  0 on success, -1 when the client is gone or too slow.  The
 * final response has started once it is called. */
int serow_worker_loop_write(struct serow_request *r, struct iovec *iov, int iovcnt);

/* As serow_worker_loop_write, for a piece of a streamed body: held while
 * the app goes on writing, and sent with what follows it, or by the
 * worker's flusher thread once the app has written nothing more for a
 * moment (a millisecond or two: worker_output.c says how, and why it is
 * safe).  A piece is held whole or sent whole.  0, or -1 when the client
 * is gone (found by this write, or by the flusher's since the last). */
int serow_worker_loop_write_soon(struct serow_request *r, struct iovec *iov, int iovcnt);

/* Sends what serow_worker_loop_write_soon holds, waiting as a write does:
 * at the end of a body, and before any other use of the connection.  0, or
 * -1 when r's client is gone. */
int serow_worker_loop_send_held(struct serow_request *r);

/* Writes an interim response (a 1xx: 100 Continue, psgix.informational's)
 * to r's connection, as serow_worker_loop_write (0, or -1).  No part of the
 * final response: that has still not started once it is out.  While it
 * goes, the slot says bytes went out (a master's 503 after half a 1xx would
 * be garbage to the client); once it is out whole, the slot says again what
 * it said before, so that the master's 503 for an app stuck after it still
 * reaches the client.  A failed write leaves the slot so. */
int serow_worker_loop_write_interim(struct serow_request *r, struct iovec *iov, int iovcnt);

/* Sends len bytes of file_fd from offset with sendfile(2).  0 on success,
 * -1 when the client is gone or too slow, -2 when the file is shorter than
 * len. */
int serow_worker_loop_sendfile(struct serow_request *r, int file_fd, uint64_t offset,
                               uint64_t len);

/* Bytes of r's final response are about to reach the client, written by
 * the caller itself: from now on it is too late for another response (or
 * for the master's 503: the slot says so, when the app runs under
 * --request-timeout).  The writes above say it themselves. */
void serow_worker_loop_response_starts(struct serow_request *r);

/* The app has r's socket (psgix.io): it may answer on it itself, and the
 * master's 503 could land among its bytes (the slot says so).  What a
 * streamed body's writes held goes first; called before the socket is made
 * blocking for the app. */
void serow_worker_loop_socket_lent(struct serow_request *r);

/* Whether the client of r has closed the connection (or its sending side:
 * it will send nothing more), waiting up to timeout seconds for it (0: only
 * a look); 1 too when r is not being served. */
int serow_worker_loop_client_hung_up(struct serow_request *r, double timeout);

/* Whether r's connection may stay open after this response, given what
 * the client asked for and the limits. */
int serow_worker_loop_may_keep_alive(const struct serow_request *r);

/* The worker's part of the end of a request: the three below are called by
 * serow_request_end (psgi_request.c) alone, which ends every request the
 * embedding serves.
 *
 * Ends r.  keep_alive = 0 closes the connection (after discarding what the
 * client still sends, so that it reads the response). */
void serow_worker_loop_finish_request(struct serow_request *r, int keep_alive);

/* Sends a complete error response on r's connection and closes it. */
void serow_worker_loop_fail_request(struct serow_request *r, int status);

/* r's connection is taken over by the app (psgix.io): forget it without
 * closing the socket the app now holds a duplicate of. */
void serow_worker_loop_release_request(struct serow_request *r);
/* Ends r by handing its connection to the holder to hold (GRIP), with the
 * hold message (holder_message.h); keep_alive: a long poll, once answered,
 * may serve the next request.  0, or -1 when the holder could not take it
 * (the connection is closed). */
int serow_worker_loop_hold_request(struct serow_request *r, const char *message, size_t len,
                                   int keep_alive);
/* The channel to the holder (-1: none): holds and publishes go on it. */
int serow_worker_loop_holding_channel(struct worker_loop *loop);

/* --request-timeout (request_timeout.c): whether it is on; the app starts
 * to run for r (the timer armed, the slot says since when), and stops: 1
 * when it ran longer than the timeout (counted in the metrics: the request
 * is to be answered 503).  Start and stop only with the option on. */
int serow_worker_loop_request_timeout_on(const struct worker_loop *loop);
void serow_worker_loop_app_timer_start(struct serow_request *r);
int serow_worker_loop_app_timer_stop(struct serow_request *r);
/* Seconds the app has run, when it runs and has outlived the timeout (the
 * SIGALRM is the timer's; the request then knows its handler was told,
 * app_overdue_told); else -1. */
double serow_worker_loop_app_overdue(struct worker_loop *loop);
/* The method (its length returned; 0: none) and target of the request
 * whose app runs, for the log. */
size_t serow_worker_loop_app_request_line(const struct worker_loop *loop, const char **method,
                                          const char **target, size_t *target_len);

/* ---- what a request asks of its worker --------------------------------
 *
 * Those the request's own layer needs are declared in
 * request/request_worker.h (included above); the code that serves a request
 * from above the worker (psgi/) may also read the settings. */

const struct worker_settings *serow_worker_loop_settings(const struct worker_loop *loop);

/* Sets the access log the loop writes to (NULL: none), closing the one
 * before. */
void serow_worker_loop_set_access_log(struct worker_loop *loop, struct access_log *log);

/* ---- the loop ------------------------------------------------------------ */

/* Graceful stop: no more accepting, idle connections closed, requests whose
 * heads are arriving may still complete. */
void serow_worker_loop_stop(struct worker_loop *loop);
int serow_worker_loop_is_stopping(const struct worker_loop *loop);
int serow_worker_loop_is_drained(const struct worker_loop *loop);

/* Where the embedding's "a signal waits for its handler" flag is: the loop
 * then returns from a wait instead of sleeping through a signal. */
void serow_worker_loop_watch_signals(struct worker_loop *loop, volatile int *signal_pending);

/* What the master asked of this worker (in its shared slot) since the last
 * call, taken: WORKER_ASKED_* bits, 0 for nothing.  The master asks without
 * a signal, so that a stop or a log reopening does not cut short what the
 * app is doing: serow_worker_loop_next_request returns 0 when there is
 * something to take, once the worker is between requests. */
enum {
    WORKER_ASKED_STOP = 1,         /* stop accepting, finish, leave */
    WORKER_ASKED_REOPEN_LOGS = 2,  /* logrotate moved the logs away */
};
int serow_worker_loop_take_master_requests(struct worker_loop *loop);

/* Holding is on: a WebSocket upgrade goes to the connection holder, not
 * the app (worker_websocket.c; set with --grip's set-up, psgi_hold.c). */
extern int serow_websocket_to_holder;
/* --websocket-psgix-io: upgrades to paths starting with one of these stay
 * the app's (psgix.io).  0, or -1 past SEROW_WEBSOCKET_MAX_PSGIX_IO. */
#define SEROW_WEBSOCKET_MAX_PSGIX_IO 32
int serow_websocket_psgix_io_add(const char *prefix, size_t len);

#endif
