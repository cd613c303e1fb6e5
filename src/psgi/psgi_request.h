/*
 * psgi_request.h - the flow of one request through the app: serve it
 * (run the app, send its answer), and end it.
 */
#ifndef SEROW_PSGI_REQUEST_H
#define SEROW_PSGI_REQUEST_H

#include "EXTERN.h"
#include "perl.h"

#include "worker/worker_loop.h"

/* Where serow_serve_request left a request for the Perl worker to go on
 * with (go_on_with_request in lib/Serow/Worker.pm): Serow.xs gives these
 * numbers to Perl as Serow::STAGE_* (keep them). */
enum serve_stage {
    SERVE_DONE = 0,    /* answered, finished, nothing left to do */
    SERVE_HANDLE,      /* nothing done: the body is to be read first */
    SERVE_RESPOND,     /* the app ran (or died): its answer is the worker's to send */
    SERVE_BAD_RESPONSE,/* the triple could not be sent: why, for the log */
    SERVE_SENT,        /* sent, but the response went wrong: what, for the log; the
                        * worker logs it and ends the request */
    SERVE_FINISHED,    /* finished; cleanup handlers or psgix.harakiri.commit remain */
    SERVE_TIMED_OUT,   /* the app outlived --request-timeout: the worker answers 503 */
    SERVE_APP_FAILED,  /* a streaming app died, or never responded: why, for the log;
                        * the worker answers 500 (or cuts the response) */
};

/*
 * Serves the request of env_ref (the env the loop built) as far as it can
 * without the Perl worker: from the start (from = SERVE_DONE), it runs the
 * app when psgi.input is there and sends an answer of [status, headers,
 * [parts]]; from SERVE_SENT (the worker has sent the answer its own way),
 * it goes on from there.  Then it notes REMOTE_USER for the access log
 * (note_remote_user), and ends the request (serow_request_end) unless the
 * response went wrong.  Returns the stage it stopped at, with the app's
 * answer and the error (mortal, or NULL) for the worker; from the start,
 * SERVE_FINISHED when cleanup handlers or psgix.harakiri.commit are left
 * (from SERVE_SENT the worker looks at those itself: SERVE_DONE).
 */
enum serve_stage serow_serve_request(pTHX_ struct worker_loop *loop, SV *app, SV *env_ref,
                                     int note_remote_user, enum serve_stage from,
                                     SV **answer, SV **error);

/*
 * Ends the current request: every request a worker serves ends here, from
 * C or from Perl, and this is the one place that resets the request's
 * state (struct serow_request).  fail_status 0: the response went out as
 * it did (the connection kept alive when it allows it, or closed; handed
 * to the app when it kept its psgix.io handle: then env, the request's,
 * loses psgix.io); else fail_status (500, 400...) answers it when nothing
 * was sent, and the connection closes.  No request current: only the
 * resets.
 */
void serow_request_end(pTHX_ struct worker_loop *loop, HV *env, int fail_status);

/* The start of the next request: the last env retired (serow_psgi_env_retire),
 * the wait for a request head, the env built (a new reference), or undef
 * when the wait was interrupted or the loop is done. */
SV *serow_request_next(pTHX_ struct worker_loop *loop);

/* The Perl code a streaming app's responder hands a whole response to,
 * [status, headers, body], called with the env and that array. */
void serow_set_triple_responder(pTHX_ SV *code);

/* What a writer's write dies with when the client has gone away. */
#define SEROW_CLIENT_GONE_MESSAGE "Serow: the client has gone away\n"

/* The streaming writer, Serow::Writer (a new object for the response the
 * loop has started), and its methods: self is the object. */
SV *serow_writer_new(pTHX_ struct worker_loop *loop);
/* A part of the body, as the app gave it: 1 sent (or nothing to send, or
 * the writer closed), 0 the client is gone; croaks on wide characters. */
int serow_writer_send(pTHX_ SV *self, SV *data);
void serow_writer_close(pTHX_ SV *self);
int serow_writer_closed(pTHX_ SV *self);
int serow_writer_gone(pTHX_ SV *self);
/* Its request ended: it does nothing more. */
void serow_writer_abandon(pTHX_ SV *self);
/* Body bytes written so far, held or given to the response. */
uint64_t serow_writer_given(pTHX_ SV *self);
/* Calls cb with the writer until the writer is closed (PSGI's poll_cb). */
void serow_writer_poll_cb(pTHX_ SV *self, SV *cb);

/* A writer result as the Perl side sees it: 1 sent, 0 client gone; a
 * malformed response croaks with a message naming what is wrong.
 * bad_header (owned, freed here) names the header at fault. */
int serow_response_result(pTHX_ int r, SV *bad_header);

#endif
