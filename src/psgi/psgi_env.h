/*
 * psgi_env.h - builds the PSGI environment hash of a request (the
 * handles it lends, psgi.input and psgix.io, are psgi_input.h's).
 */
#ifndef SEROW_PSGI_ENV_H
#define SEROW_PSGI_ENV_H

#include "EXTERN.h"
#include "perl.h"

struct serow_request;

/* Precomputes the hash keys the env uses on every request. */
void serow_psgi_env_init(pTHX);

/* The keys that never change between requests (psgi.version, psgi.errors,
 * ...) and their values: every env gets a copy of each value.  Read once:
 * later changes to the hash are not seen.  NULL: none. */
void serow_psgi_env_set_template(pTHX_ HV *template);

/*
 * The env for req, being served: the template's keys plus the request's own,
 * psgix.io included (made on first use), an empty psgix.cleanup.handlers
 * and, without a body, the empty psgi.input while that handle is open;
 * with a small body all buffered, the body handle filled with it (the body
 * is read: nothing of it is left to read from the loop); else psgi.input
 * is the Perl worker's to add.  The hash stays referenced
 * here too (the caller takes a reference of its own): it is the previous
 * request's env, made ready by serow_psgi_env_retire, when nothing else held that
 * one any more.
 */
HV *serow_build_psgi_env(pTHX_ struct serow_request *req);

/* The request of the last env is over and the worker dropped its reference:
 * if no other is left, the env is emptied of what the app added or changed
 * (freed now, as it was when every env was freed here) and kept for the next
 * request; else it is left to whoever holds it.  Call before waiting for the
 * next request; again before the build it is a no-op. */
void serow_psgi_env_retire(pTHX);

#endif
