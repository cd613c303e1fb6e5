/*
 * response_writer.h - turns what a PSGI app returned into bytes on the wire:
 * checks the app's status and headers, decides the framing (Content-Length,
 * chunked, or none), formats the response head, and frames chunks; the
 * reason phrases, the Date header and the server's own error pages.
 * No Perl and no I/O here: the caller writes the iovecs.
 */
#ifndef SEROW_RESPONSE_WRITER_H
#define SEROW_RESPONSE_WRITER_H

#include <stddef.h>
#include <stdint.h>

struct response_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* What the server knows about the request and the body it is to send. */
struct response_facts {
    int status;
    int is_head_request;
    int minor_version;
    int may_keep_alive;        /* the client and the server's limits allow it */
    int body_length_known;     /* the body's length is known (array, file) */
    uint64_t body_length;
    int request_upgrade;       /* the request offered an Upgrade (HTTP/1.1) */
};

/* What the writer decided. */
struct response_framing {
    int body_allowed;          /* false for HEAD, 1xx, 204 and 304 */
    int chunked;               /* body parts go out as chunks */
    int keep_alive;
    int has_content_length;    /* a Content-Length goes out (the app's or ours) */
    uint64_t content_length;   /* its value: the bytes the body must have */
    int content_length_from_app; /* else the server adds the header */
    int length_mismatch;       /* the app's Content-Length is not its body's length */
    int app_chunked;           /* the app's body carries its own chunked framing (its
                                * Transfer-Encoding ends in chunked): it is checked as it
                                * goes out, and never passed on broken */
    int decode_app_chunks;     /* HTTP/1.0: that framing is removed, the body ends with
                                * the connection (no Transfer-Encoding for 1.0, RFC 9112 6.1) */
};

/* Why a response cannot be sent as the app gave it. */
#define RESPONSE_OK               0
#define RESPONSE_BAD_STATUS      (-1)
#define RESPONSE_BAD_HEADER_NAME (-2)
#define RESPONSE_BAD_HEADER_VALUE (-3)
#define RESPONSE_BAD_CONTENT_LENGTH (-4)
#define RESPONSE_BAD_HEADER_LIST (-5)  /* no array, or an odd number of elements */
#define RESPONSE_WIDE_CHARACTER  (-6)  /* a header or body string is not bytes */
#define RESPONSE_TOO_LATE        (-7)  /* a 1xx after the final response started */
#define RESPONSE_CODING_FOR_HTTP10 (-8) /* a transfer coding other than chunked alone,
                                         * to an HTTP/1.0 client (RFC 9112 6.1) */
#define RESPONSE_BAD_UPGRADE     (-9)  /* a 101 to a request that offered no upgrade,
                                         * or without an Upgrade header (RFC 9110 7.8) */

/*
 * Checks the status (100-599) and the headers and decides the framing.
 * Returns RESPONSE_OK, or a negative reason with *bad_header set to the
 * index of the offending header.
 */
/* How many first bytes of a streamed body with these headers may be held
 * (psgi_response.c): the header size of its outermost Content-Encoding (the
 * last of the last such header's list: "gzip, identity" is not compressed
 * last), 0 for any other body. */
size_t serow_compression_header_size(const struct response_header *headers, size_t count);

int serow_plan_response(const struct response_facts *facts, const struct response_header *headers,
                  size_t num_headers, struct response_framing *framing, size_t *bad_header);

/* Bytes serow_format_response_head() needs at most. */
size_t serow_response_head_size(const struct response_header *headers, size_t num_headers);

/*
 * Writes the status line, the app's headers (Connection left out, the
 * framing headers of a status that has no body and may not have them: 1xx,
 * 204, and Transfer-Encoding for an HTTP/1.0 client), Date, the framing headers the server adds and the empty line into
 * out.  Returns the length.
 */
size_t serow_format_response_head(char *out, const struct response_facts *facts,
                            const struct response_header *headers, size_t num_headers,
                            const struct response_framing *framing);

/* The line before a chunk of len bytes ("1a2b\r\n") into out (>= 20 bytes). */
size_t serow_format_chunk_size(char *out, size_t len);

/* "\r\n" after a chunk, and the last chunk with its empty trailer section. */
#define CHUNK_END "\r\n"
#define LAST_CHUNK "0\r\n\r\n"

/* The reason phrase of a status ("" for one that has none here): the one
 * table, for the app's responses and the server's own error pages. */
const char *serow_status_reason(int status);

/*
 * A complete error response, as the worker sends when it answers a request
 * itself: the status and its reason, Date, a text/plain body of the reason
 * and Connection: close (a 503 also Retry-After; --request-id-header's
 * id_header unless NULL).  omit_body: a response to HEAD, which keeps the
 * Content-Length but sends no content (RFC 9110 9.3.2).  Writes at most
 * size - 1 bytes into out (512 is plenty) and returns their count;
 * *body_bytes gets the bytes of content sent.
 */
size_t serow_format_error_response(char *out, size_t size, int status, int omit_body,
                                   const struct response_header *id_header, size_t *body_bytes);

/* The Retry-After of the server's own 503s (seconds): soon, since what it
 * says is "overloaded now", not "down". */
#define SEROW_RETRY_AFTER_SECONDS "1"


/* An "HTTP-date" for the Date header (29 characters), recomputed at most
 * once a second. */
const char *serow_http_date_now(void);

/* The interim response a client that sent "Expect: 100-continue" waits for
 * before it sends its body (RFC 9110 10.1.1): always HTTP/1.1, since only an
 * HTTP/1.1 client sends the expectation.  *len gets its length.  (When it is
 * sent is the body reader's: src/worker/worker_request_body.c.) */
const char *serow_continue_response(size_t *len);

#endif
