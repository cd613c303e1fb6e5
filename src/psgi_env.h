/*
 * psgi_env.h - builds the PSGI environment hash of the current request.
 */
#ifndef SEROW_PSGI_ENV_H
#define SEROW_PSGI_ENV_H

#include "EXTERN.h"
#include "perl.h"

#include "worker_loop.h"

/* Precomputes the hash keys the env uses on every request. */
void psgi_env_init(pTHX);

/* The keys that never change between requests (psgi.version, psgi.errors,
 * ...) and their values: every env gets a copy of each value.  Read once:
 * later changes to the hash are not seen.  NULL: none. */
void psgi_env_set_template(pTHX_ HV *template);

/* psgi.input for requests without a body: an empty in-memory handle (a
 * glob reference), rewound for each request.  undef: none. */
void psgi_env_set_empty_input(pTHX_ SV *handle);

/* psgi.input for requests whose body (Content-Length, up to max bytes and
 * at most 64 KiB) came whole with the head: an in-memory handle (a glob
 * reference) opened on a scalar, filled with the body and rewound for each
 * such request while nothing else holds it.  undef: none. */
void psgi_env_set_body_input(pTHX_ SV *handle, size_t max);

/* Whether the body handle is still there: one the app closed, opened again
 * or pushed a layer on is let go, and the worker gives another. */
int psgi_env_has_body_input(void);

/*
 * The env for loop->request.conn: the template's keys plus the request's own,
 * psgix.io included (made on first use), an empty psgix.cleanup.handlers
 * and, without a body, the empty psgi.input while that handle is open;
 * with a small body all buffered, the body handle filled with it (the body
 * is read: nothing of it is left to read from the loop); else psgi.input
 * is the Perl worker's to add.  The hash stays referenced
 * here too (the caller takes a reference of its own): it is the previous
 * request's env, made ready by psgi_env_retire, when nothing else held that
 * one any more.
 */
HV *build_psgi_env(pTHX_ struct worker_loop *loop);

/* The request of the last env is over and the worker dropped its reference:
 * if no other is left, the env is emptied of what the app added or changed
 * (freed now, as it was when every env was freed here) and kept for the next
 * request; else it is left to whoever holds it.  Call before waiting for the
 * next request; again before the build it is a no-op. */
void psgi_env_retire(pTHX);

/* psgix.io is made on first use by this Perl code: it gets the socket's
 * descriptor and returns a handle on a duplicate of it (or undef). */
void psgi_env_set_socket_opener(pTHX_ SV *code);

/* The server is about to use the current connection again (a response, an
 * error, the end of the request): when the app's psgix.io made it blocking,
 * it is made non-blocking again, as the worker loop's I/O and timeouts need. */
void serow_socket_back_to_server(struct worker_loop *loop);

/* Whether the app of the current request read psgix.io. */
int psgi_env_socket_handle_made(const struct worker_loop *loop);

/* The psgix.io handle of the current request (a new reference the caller
 * owns), or NULL when the app did not read psgix.io. */
SV *psgi_env_take_socket_handle(pTHX_ struct worker_loop *loop);

/* The current request is over: its env's psgix.io can no longer be made. */
void psgi_env_request_done(pTHX_ struct worker_loop *loop);

#endif
