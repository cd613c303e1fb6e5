/*
 * psgi_response.h - sends what a PSGI app returned: the [status, headers,
 * body] triple with an array body in one writev, or a head followed by body
 * parts (streaming writers, file handles).  Uses response_writer for the
 * framing and worker_loop for the I/O.
 */
#ifndef SEROW_PSGI_RESPONSE_H
#define SEROW_PSGI_RESPONSE_H

#include "EXTERN.h"
#include "perl.h"

struct serow_request;

/* Results besides RESPONSE_OK (0) and the RESPONSE_BAD_* reasons (< 0). */
#define RESPONSE_CLIENT_GONE 1
#define RESPONSE_NOT_HELD 2     /* psgi_hold.c: no Grip-* header, an ordinary response */
#define RESPONSE_BAD_GRIP (-20) /* a Grip-* instruction serow_grip_parse refused */

/* The status the access log and the metrics give a response the client did
 * not take whole (it closed the connection, or stopped reading for
 * --write-timeout): nginx's 499, "client closed request", so that the two
 * logs read alike.  Never sent: there is no one to send it to. */
#define SEROW_STATUS_CLIENT_GONE 499

/* The bytes of a defined Perl string (get magic already called), or NULL
 * when it holds characters above 0xFF: PSGI bodies and headers are bytes. */
const char *serow_psgi_bytes(pTHX_ SV *sv, STRLEN *len);

/* Status, headers and an array body, all in one writev.  The result is
 * RESPONSE_OK, RESPONSE_CLIENT_GONE or a RESPONSE_BAD_* reason, with
 * *bad_header set (a new SV) to the name of the header at fault if any. */
int serow_send_psgi_response(pTHX_ struct serow_request *req, SV *status, SV *headers, AV *body,
                       SV **bad_header);

/* A head whose body follows in parts.  length < 0: unknown. */
int serow_start_psgi_response(pTHX_ struct serow_request *req, SV *status, SV *headers,
                        int64_t length, SV **bad_header);
int serow_write_psgi_body(pTHX_ struct serow_request *req, const char *data, size_t len);
int serow_sendfile_psgi_body(pTHX_ struct serow_request *req, int fd, uint64_t offset, uint64_t len);
int serow_finish_psgi_body(pTHX_ struct serow_request *req);
/* The first bytes of a compressed body held back, if any, go out now. */
int serow_flush_held_psgi_body(pTHX_ struct serow_request *req);
/* What is held of the body, then the head if it is still waiting: out now,
 * the body left open (a held stream). */
int serow_flush_psgi_head(pTHX_ struct serow_request *req);

/* The body bytes the app has given the response so far (sent, or held in a
 * buffer of the response's): how poll_cb tells a call that wrote from one
 * that did not, without a count kept on every write. */
uint64_t serow_psgi_body_given(const struct serow_request *req);

/* The client of req's response has gone (the writer saw it hang up): what
 * is left of the body is dropped, and the response is logged as
 * SEROW_STATUS_CLIENT_GONE.  The write paths here say so themselves. */
void serow_psgi_response_client_gone(struct serow_request *req);

/* From now on each body write of req's response goes out at once, not
 * gathered (what is held goes now): its app was told the client hung up,
 * and a write finds a client gone only once it goes.  RESPONSE_OK, or
 * RESPONSE_CLIENT_GONE. */
int serow_psgi_response_at_once(struct serow_request *req);

/* psgix.informational: a 1xx response before the final one. */
int serow_send_informational_response(pTHX_ struct serow_request *req, SV *status, SV *headers,
                                SV **bad_header);

/* Forgets the response in progress: the end of the request does
 * (serow_request_end), and the start of the next response. */
void serow_reset_psgi_response(struct serow_request *req);

#endif
