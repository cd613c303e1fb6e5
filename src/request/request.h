/*
 * request.h - one home for the state of a request a worker is answering.
 *
 * Everything that belongs to one request is here, in struct serow_request:
 * its connection and parsed head (with the array its fields are parsed
 * into), its body's progress, the response the app gave and how far it went
 * out (and the buffer its head is formatted in), the psgix.io handle lent
 * for it, its streamed response's responder and writer, when its app began
 * to run, and what the access log and the metrics will record of it.  Each
 * part is written by the file named beside it; the PSGI parts are reset in
 * one place, serow_request_end (psgi_request.c), which ends every request
 * the embedding serves.  (What starts a request sets its part: the loop the
 * head and the accounting, the body reader the body, the env build the
 * socket lending, each response its own progress.)
 *
 * A request is made for one worker (serow_worker_loop_request_new) and
 * started as often as it serves one; the worker serves any number at once,
 * each on its own connection (t/request/interleaved.c).  What a request
 * needs of its worker (settings, listener, access log, slot) it asks
 * through worker_loop.h: the worker's layout is not the request's business.
 *
 * What outlives a request stays with its file, as a per-process cache: the
 * env kept for reuse and its key tables (psgi_env.c), the psgi.input
 * handles refilled for each request and the buffer the body handle reads
 * (psgi_input.c), the iovecs an array body is gathered in
 * (psgi_response.c), a responder and a writer kept for the next stream
 * (psgi_request.c).
 *
 * No Perl here: the Perl values a request holds are named by their struct
 * (Perl's SV is a struct sv, its CV a struct cv) so that this header needs
 * no perl.h.
 */
#ifndef SEROW_REQUEST_H
#define SEROW_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "log/access_log.h"
#include "http/http_parser.h"
#include "log/request_id.h"
#include "http/response_writer.h"

struct connection;
struct cv;
struct sv;
struct worker_loop;

/* The largest header of a compressed body held back (gzip's, 10 bytes). */
#define SEROW_MAX_HELD_BODY 16

/* The app's response as it goes out (psgi_response.c). */
struct serow_response {
    int active;           /* a head was planned: the fields below are this response's */
    int status;
    struct response_framing framing;
    uint64_t body_given;  /* body bytes the app gave */
    uint64_t body_sent;   /* body bytes sent: never more than a Content-Length */
    int failed;           /* a write failed: the client is gone or too slow */
    int at_once;          /* each body write goes out at once, not gathered (the
                           * app was told its client hung up: a write finds it gone
                           * as early as it can) */
    size_t head_len;      /* formatted head not yet written: it goes out with the
                           * first body bytes, in the same writev */
    /* A body the app framed itself (framing.app_chunked): read with the
     * request parser's decoder as it goes out. */
    struct chunked_decoder app_chunks;
    int app_chunks_done;           /* its last chunk and trailer section have gone */
    const char *app_framing_error; /* why the rest of it was dropped; NULL: none */
    /* The first bytes of a compressed streamed body, held until more come
     * (see serow_compression_header_size in response_writer.c): hold is how many
     * may still be held (0 once a body byte has gone out), held_len how
     * many are. */
    size_t hold;
    size_t held_len;
    char held[SEROW_MAX_HELD_BODY];
    /* The head's bytes are formatted here (head_len of them still to go):
     * the buffer outlives the response, kept for the request's next one,
     * grown to the largest head. */
    char *head;
    size_t head_size;
    /* --grip: the response holds (psgi_hold.c): at its end the connection
     * goes to the holder with the hold message, not back to the loop. */
    int grip_hold;
    int grip_keep_alive;  /* a long poll, once answered, may serve another request */
};

/* psgix.io, the connection's socket as a Perl handle, made when the app
 * first reads the key (psgi_input.c). */
struct serow_socket_lending {
    int fd;               /* the connection's socket */
    struct sv *handle;    /* the handle made for the app, if it asked */
    struct sv *value;     /* the env's psgix.io value, held while the request lives:
                           * its magic points here, and is unhooked at the end */
    int lent;             /* the socket is blocking, for the app's handle */
    struct serow_tls_socket *tls; /* TLS: the handle's own part (psgi_tls_socket.c) */
};

/* A psgi.streaming response's callback at work (psgi_request.c): the
 * responder it was given and the writer that responder made. */
struct serow_stream {
    int active;           /* the callback runs: its responder may be called */
    int responded;        /* the responder was called */
    struct cv *responder; /* the responder given (ours) */
    struct sv *writer;    /* the writer the responder returned, or NULL */
    struct sv *env_ref;   /* the request's env */
};

struct serow_request {
    /* The worker that serves it, opaque here: what the request needs of it
     * (its settings, listeners, access log, slot) it asks through
     * worker_loop.h.  Set once, when the request is made
     * (serow_worker_loop_request_new). */
    struct worker_loop *worker;
    /* The next request the worker is serving (worker_loop.c's list). */
    struct serow_request *next_serving;

    /* The connection and its head (worker_loop.c); conn is NULL between
     * requests.  The head's fields are parsed into the request's own array
     * (head.headers, sized from the limits). */
    struct connection *conn;
    struct http_request_head head;
    size_t head_len;

    /* The body (worker_request_body.c). */
    uint64_t body_remaining;     /* Content-Length bytes not yet read */
    uint64_t body_received;      /* decoded body bytes handed out */
    double body_started;         /* when the worker began to serve the request */
    struct chunked_decoder chunked;
    int body_done;
    int continue_sent;

    /* Bytes of the final response have gone out (worker_output.c). */
    int response_started;
    struct serow_response response;
    struct serow_socket_lending socket;
    struct serow_stream stream;

    /* --request-timeout: when the app began to run for this request, and
     * whether the worker's SIGALRM handler was told it is overdue (and so
     * logged where it was) (request_timeout.c; the timer itself is the
     * worker's). */
    uint64_t app_started_ns;
    int app_overdue_told;

    /* What the access log and the metrics record (request_accounting.c):
     * its times (arrived, app called, head given, end), the status and body
     * bytes of its response (set through serow_request_accounting_note_response),
     * where its logged fields are, and the values copied for the log while
     * they existed (response headers, env values: spans into values). */
    struct access_log_times times;
    int status;
    uint64_t body_bytes;
    struct access_log_request log_request;
    char remote_user[ACCESS_LOG_MAX_USER];
    size_t remote_user_len;
    struct access_log_span response_headers[ACCESS_LOG_MAX_NAMED];
    struct access_log_span env_values[ACCESS_LOG_MAX_NAMED];
    char values[ACCESS_LOG_VALUES_ROOM];
    size_t values_used;

    /* --request-id-header: the request's id, taken from the request or made
     * (request_accounting.c); id_len 0: the option is off. */
    char id[REQUEST_ID_MAX];
    size_t id_len;
    int id_made;    /* made here, not the client's: the env's header is replaced */
};

#endif
