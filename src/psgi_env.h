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

/*
 * A new env for loop->current: a copy of template (the keys that never change,
 * such as psgi.version and psgi.errors) plus the request's own.  psgi.input
 * and the other per-request objects are added by the Perl worker.
 */
HV *build_psgi_env(pTHX_ struct worker_loop *loop, HV *template);

#endif
