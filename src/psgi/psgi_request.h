/*
 * psgi_request.h - the flow of one request through the app: serve it from
 * head to end (run the app, send its answer, end it), calling the worker's
 * Perl only for the steps that are Perl's.
 */
#ifndef SEROW_PSGI_REQUEST_H
#define SEROW_PSGI_REQUEST_H

#include "EXTERN.h"
#include "perl.h"

struct serow_request;
struct worker_loop;

/*
 * Serves req, whose env the loop built (env_ref), from head to end: gives
 * it psgi.input when it has none (the Perl worker's input giver reads the
 * body), runs the app, sends its answer (an array triple and a streamed
 * response here, any other whole answer through the triple responder),
 * answers 500 for an app that died or answered nothing that can be sent and
 * 503 for one that outlived --request-timeout, notes REMOTE_USER and the
 * env values for the access log (note_remote_user), logs what went wrong
 * with a response that went out, ends the request (serow_request_end) and
 * runs the psgix.cleanup handlers.  Returns 0 when the worker is to stop
 * after it (psgix.harakiri.commit), else 1.
 */
int serow_serve_request(pTHX_ struct serow_request *req, SV *app, SV *env_ref,
                        int note_remote_user);

/* The Perl code that gives a request without psgi.input its input, called
 * with the env: true once $env->{'psgi.input'} is there, false when it
 * answered the request instead (an error, or the client left). */
void serow_set_input_giver(pTHX_ SV *code);

/* An error of a request's, in the error log: "METHOD URI: message", from
 * env (NULL: none). */
void serow_request_log_error(pTHX_ HV *env, SV *message);

/* Something went wrong before or while the app's response went out:
 * message (NULL: none) to the error log (serow_request_log_error), and the
 * request ended with status (500, 503) when nothing was sent, or the
 * response cut.  An app that read psgix.io and sent nothing through the
 * server may have answered on the socket itself: its request is left to
 * its end, which closes the connection. */
void serow_request_fail(pTHX_ struct serow_request *req, HV *env, SV *message, int status);

/*
 * Ends req: every request the embedding serves ends here, from
 * C or from Perl, and this is the one place that resets the request's
 * state (struct serow_request).  fail_status 0: the response went out as
 * it did (the connection kept alive when it allows it, or closed; handed
 * to the app when it kept its psgix.io handle: then env, the request's,
 * loses psgix.io); else fail_status (500, 400...) answers it when nothing
 * was sent, and the connection closes.  No request current: only the
 * resets.
 */
void serow_request_end(pTHX_ struct serow_request *req, HV *env, int fail_status);

/* The start of the loop's next request (serow_worker_loop_request): the
 * last env retired (serow_psgi_env_retire), the wait for a request head, the
 * env built (a new reference), or undef when the wait was interrupted or the
 * loop is done. */
SV *serow_request_next(pTHX_ struct worker_loop *loop);

/* The Perl code a whole response the server does not send itself goes to
 * (a handle as the body, a malformed one: [status, headers, body] as the
 * app gave it, or gave a streaming app's responder), called with the env
 * and that array. */
void serow_set_triple_responder(pTHX_ SV *code);

/* The streaming writer, Serow::Writer (a new object for the response req
 * has started), and its methods: self is the object. */
SV *serow_writer_new(pTHX_ struct serow_request *req);
/* A part of the body, as the app gave it: 1 sent (or nothing to send, or
 * the writer closed), 0 the client is gone (then and after: the part is
 * dropped); croaks on wide characters. */
int serow_writer_send(pTHX_ SV *self, SV *data);
void serow_writer_close(pTHX_ SV *self);
int serow_writer_closed(pTHX_ SV *self);
/* Whether a write found the client gone, or the app was told it had gone
 * (serow_writer_client_gone). */
int serow_writer_gone(pTHX_ SV *self);
/* The app's question (Serow::Writer's gone): whether the client is known
 * to have gone, or has closed the connection (or its sending side) by now. */
int serow_writer_client_gone(pTHX_ SV *self);
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
