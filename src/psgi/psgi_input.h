/*
 * psgi_input.h - the handles a request lends the app: psgi.input and
 * psgix.io (see psgi_input.c).
 */
#ifndef SEROW_PSGI_INPUT_H
#define SEROW_PSGI_INPUT_H

#include "EXTERN.h"
#include "perl.h"

struct serow_request;

/* psgi.input for requests without a body: an empty in-memory handle (a
 * glob reference), rewound for each request.  undef: none. */
void serow_psgi_env_set_empty_input(pTHX_ SV *handle);

/* psgi.input for requests whose body (Content-Length, up to max bytes and
 * at most 64 KiB) came whole with the head: an in-memory handle (a glob
 * reference) opened on a scalar, filled with the body and rewound for each
 * such request while nothing else holds it.  undef: none. */
void serow_psgi_env_set_body_input(pTHX_ SV *handle, size_t max);

/* Whether the body handle is still there: one the app closed, opened again
 * or pushed a layer on is let go, and the worker gives another. */
int serow_psgi_env_has_body_input(void);

/* For the env build (psgi_env.c): the empty handle's glob, rewound, or NULL
 * when the worker must make another; that glob as it is (NULL: none);
 * the body handle's glob filled with req's body when that
 * is all buffered and small enough and the handle is free (the body is
 * read: none of it is left for the loop), else NULL. */
SV *serow_input_empty(pTHX);
SV *serow_input_empty_glob(void);
SV *serow_input_filled(pTHX_ struct serow_request *req);

/* Appends up to max bytes of req's body to buffer.  The
 * count, 0 at the end of the body, READ_BODY_CLIENT_GONE when the client is
 * gone, or -STATUS (400, 408, 413). */
#define READ_BODY_CLIENT_GONE (-1)
int serow_input_read_body(pTHX_ struct serow_request *req, SV *buffer, size_t max);

/* psgix.io is made on first use by this Perl code: it gets the socket's
 * descriptor and returns a handle on a duplicate of it (or undef). */
void serow_psgi_env_set_socket_opener(pTHX_ SV *code);

/* Calls opener (Perl code) with fd, and extra when not NULL: the handle
 * it returns (a new reference), or NULL when it returned no reference.
 * (The TLS psgix.io's opener too: psgi_tls_socket.c.) */
SV *serow_call_socket_opener(pTHX_ SV *opener, int fd, SV *extra);

/* The server is about to use req's connection again (a response, an error,
 * the end of the request): when the app's psgix.io made it blocking, it is
 * made non-blocking again, as the worker loop's I/O and timeouts need. */
void serow_socket_back_to_server(struct serow_request *req);

/* Whether the app of req read psgix.io. */
int serow_psgi_env_socket_handle_made(const struct serow_request *req);

/* The psgix.io handle of req (a new reference the caller owns), or NULL
 * when the app did not read psgix.io; the env's psgix.io no longer reaches
 * req. */
SV *serow_psgi_env_take_socket_handle(pTHX_ struct serow_request *req);

/* req is over: its env's psgix.io can no longer be made. */
void serow_psgi_env_request_done(pTHX_ struct serow_request *req);

/* psgix.io's value has this magic; its first read makes the handle.
 * serow_socket_lend hooks a value (with the magic) to req, being served,
 * until serow_psgi_env_request_done. */
extern const MGVTBL serow_socket_handle_vtbl;
void serow_socket_lend(pTHX_ struct serow_request *req, SV *value);

#endif
