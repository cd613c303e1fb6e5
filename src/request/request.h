/*
 * request.h - one home for the state of the request a worker is answering.
 *
 * A worker answers one request at a time, and everything that belongs to
 * that one request is here, in struct serow_request (the loop's `request`):
 * its connection and parsed head, its body's progress, the response the app
 * gave and how far it went out, the psgix.io handle lent for it, and what
 * the access log and the metrics will record of it.  Each part is written
 * by the file named beside it; all of it is reset in one place,
 * serow_request_end (psgi_request.c), which ends every request the worker
 * serves, from C or from Perl.  (What starts a request sets its part: the
 * loop the head and the accounting, the body reader the body, the env
 * build the socket lending, each response its own progress.)
 *
 * What outlives a request stays with its file, as a per-process cache: the
 * env kept for reuse and its key tables (psgi_env.c), the psgi.input
 * handles refilled for each request (psgi_input.c), the buffers a response head and
 * an array body are gathered in (psgi_response.c).
 *
 * No Perl here: the psgix.io handle is a Perl value, named by its struct
 * (Perl's SV is a struct sv) so that this header needs no perl.h.
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
struct sv;

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
};

/* psgix.io, the connection's socket as a Perl handle, made when the app
 * first reads the key (psgi_input.c). */
struct serow_socket_lending {
    long serial;          /* the env's serial; 0 between requests */
    int fd;               /* the connection's socket */
    struct sv *handle;    /* the handle made for the app, if it asked */
    int lent;             /* the socket is blocking, for the app's handle */
};

struct serow_request {
    /* The connection and its head (worker_loop.c); conn is NULL between
     * requests. */
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
