/*
 * psgi_request.c - the flow of one request through the app: serve it, send
 * the usual answer or stream it (the responder of psgi.streaming; its
 * writer is psgi_writer.c's), end it.
 *
 * Every request is served here, from head to end, in one call from the Perl
 * worker (serow_serve_request), with no Perl op of the worker's around the
 * app; this file calls the worker's Perl (lib/Serow/Worker.pm) only for the
 * steps that are Perl's, and never after the response is out: the input
 * giver reads a body into psgi.input (in memory or a temp file), and the
 * triple responder sends a whole answer with a handle as its body (or says
 * what is wrong with a malformed one).  So each step is written once: the
 * app runs, a triple is sent, a stream is driven, a failure and a timeout
 * are answered, the request ends and its cleanup handlers run here only.
 *
 * Owns: the order of a request's steps, the end of every request
 * (serow_request_end: the accounting note, the keep-alive decision, the
 * hand-over of psgix.io, the resets of struct serow_request), and the words
 * of what is wrong with a response or with the app's part.  How the env is built (psgi_env.c), how
 * a response goes out (psgi_response.c) and how a connection is kept or
 * closed (worker_loop.c) are theirs: this file only says when.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_request.h"

#include "XSUB.h"

#include "psgi/psgi_env.h"
#include "psgi/psgi_hold.h"
#include "psgi/psgi_input.h"
#include "psgi/psgi_response.h"
#include "psgi/psgi_tls_socket.h"
#include "request/request_accounting.h"
#include "http/response_writer.h"
#include <unistd.h>

#include "log/log.h"
#include "request/request.h"
#include "worker/worker_loop.h"

/* ---- what is wrong with a response ------------------------------------- */

/* Why a writer result is an error, as a new mortal string; NULL when it is
 * none (RESPONSE_OK, RESPONSE_CLIENT_GONE).  bad_header (owned, freed here)
 * names the header at fault. */
static SV *response_error(pTHX_ int r, SV *bad_header)
{
    const char *why;
    if (bad_header)
        sv_2mortal(bad_header);
    switch (r) {
    case RESPONSE_OK:
    case RESPONSE_CLIENT_GONE:
        return NULL;
    case RESPONSE_BAD_STATUS:
        return sv_2mortal(newSVpvs("invalid status in the response (three digits, 101 or 200-599, expected)"));
    case RESPONSE_BAD_CONTENT_LENGTH:
        return sv_2mortal(newSVpvs("invalid Content-Length in the response (not digits, repeated, or with Transfer-Encoding)"));
    case RESPONSE_BAD_HEADER_LIST:
        return sv_2mortal(newSVpvs("invalid response headers: not an array reference of name/value pairs"));
    case RESPONSE_TOO_LATE:
        return sv_2mortal(newSVpvs("the response has already started"));
    case RESPONSE_BAD_GRIP:
        return sv_2mortal(newSVpvf("invalid Grip-* instruction in the response (--grip): %" SVf,
                                   SVfARG(bad_header ? bad_header : &PL_sv_undef)));
    case RESPONSE_BAD_UPGRADE:
        return sv_2mortal(newSVpvs("101 Switching Protocols to a request that offered no upgrade, or "
                                   "without an Upgrade header naming the protocol (RFC 9110 7.8)"));
    case RESPONSE_WIDE_CHARACTER:
        why = "wide character (PSGI headers and bodies are bytes: encode them)";
        break;
    case RESPONSE_BAD_HEADER_NAME:
        why = "the name is undefined, empty or not a token";
        break;
    case RESPONSE_CODING_FOR_HTTP10:
        if (bad_header) /* (the value is the header's, for the log) */
            return sv_2mortal(newSVpvf("response header '%" SVf "' to an HTTP/1.0 request: HTTP/1.0 "
                                       "knows no transfer coding (RFC 9112 6.1) and only chunked can "
                                       "be taken off, so the body would arrive still coded",
                                       SVfARG(bad_header)));
        why = "a transfer coding other than chunked to an HTTP/1.0 request";
        break;
    default:
        why = "the value is undefined or holds CR, LF, NUL or another control character";
        break;
    }
    if (bad_header)
        return sv_2mortal(newSVpvf("invalid response header '%" SVf "': %s", SVfARG(bad_header), why));
    return sv_2mortal(newSVpvf("invalid response: %s", why));
}

int serow_response_result(pTHX_ int r, SV *bad_header)
{
    SV *error = response_error(aTHX_ r, bad_header);
    if (error)
        croak("%" SVf, SVfARG(error));
    return r == RESPONSE_OK;
}

/* ---- how the response went ------------------------------------------------
 *
 * The response's part of struct serow_request, as psgi_response.c left it,
 * read at the end of the request. */

/* 1 when the body given differs from the Content-Length announced (the
 * connection is then closed after it), with both lengths. */
static int response_length_mismatch(const struct serow_response *response, uint64_t *announced,
                                    uint64_t *given)
{
    if (!response->active || !response->framing.body_allowed ||
        !response->framing.has_content_length ||
        response->body_given == response->framing.content_length)
        return 0;
    *announced = response->framing.content_length;
    *given = response->body_given;
    return 1;
}

/* Whether the response sent allows the connection to stay open: the app's
 * and client's wishes, and whether the body was delimited as announced. */
static int response_keeps_alive(const struct serow_response *response)
{
    uint64_t announced, given;
    if (!response->active || response->failed || !response->framing.keep_alive)
        return 0;
    /* A body shorter or longer than its Content-Length, or chunked framing
     * of the app's that broke or ended early, desynchronises the connection:
     * close it rather than let the next response be misread. */
    return !response_length_mismatch(response, &announced, &given) &&
           response->app_framing_error == NULL;
}

/* What went wrong with a response that went out, for the error log (a new
 * mortal string), or NULL: a body that did not have the Content-Length
 * announced, or chunked framing of the app's that was cut.  (Never both:
 * the app's Content-Length and Transfer-Encoding together are refused.)
 * Either closes the connection after the response. */
static SV *response_fault(pTHX_ const struct serow_response *response)
{
    uint64_t announced, given;
    if (response_length_mismatch(response, &announced, &given)) {
        /* (the numbers as Perl writes them, as when the worker formatted them) */
        SV *a = sv_2mortal(newSVnv((NV)announced)), *g = sv_2mortal(newSVnv((NV)given));
        return sv_2mortal(newSVpvf("the app's Content-Length is %" SVf " but its body has %" SVf
                                   " bytes: the connection is closed after it",
                                   SVfARG(a), SVfARG(g)));
    }
    const char *why = response->active ? response->app_framing_error : NULL;
    if (why != NULL)
        return sv_2mortal(newSVpvf("the body the app chunked itself %s: it is cut there, and "
                                   "the connection is closed after it", why));
    return NULL;
}

/* ---- the end of a request ---------------------------------------------- */

/* psgix.io, when the app read it: a handle the app kept (a WebSocket, say)
 * now owns the connection, which the server lets go of without closing it
 * (1); else our duplicate is closed (0).  The env's own copy of the handle
 * goes first, so that only the app's references count. */
static int socket_kept_by_app(pTHX_ struct serow_request *req, HV *env)
{
    if (req->socket.handle == NULL)
        return 0; /* (the usual case, without a call) */
    SV *handle = serow_psgi_env_take_socket_handle(aTHX_ req);
    if (env != NULL)
        (void)hv_deletes(env, "psgix.io", G_DISCARD);
    int kept = SvROK(handle) && SvREFCNT(SvRV(handle)) > 1;
    if (kept)
        (void)serow_tls_socket_take_connection(req); /* (TLS: the handle's from now) */
    SvREFCNT_dec(handle); /* ours: closes the duplicate unless the app holds it */
    return kept;
}

void serow_request_end(pTHX_ struct serow_request *req, HV *env, int fail_status)
{
    if (req->conn != NULL) {
        /* The response, for the access log and the metrics, before the
         * loop writes them. */
        const struct serow_response *response = &req->response;
        serow_request_accounting_note_response(req, response->active ? response->status : 0,
                                         response->active ? response->body_sent : 0);
        if (fail_status == 0 && response->grip_hold) {
            serow_psgi_hold_hand_over(req); /* the holder's from now (psgi_hold.c) */
        } else if (fail_status == 0 && socket_kept_by_app(aTHX_ req, env)) {
            serow_worker_loop_release_request(req);
        } else {
            /* (the app's psgix.io made the socket blocking) */
            serow_socket_back_to_server(req);
            if (fail_status != 0)
                serow_worker_loop_fail_request(req, fail_status);
            else
                serow_worker_loop_finish_request(req, response_keeps_alive(response));
        }
    }
    /* The connection's part is over: the response's and psgix.io's go. */
    serow_reset_psgi_response(req);
    serow_psgi_env_request_done(aTHX_ req);
}

/* ---- serving ------------------------------------------------------------ */

/* A value of the env, or NULL. */
static SV *env_value(pTHX_ HV *env, const char *key, I32 len)
{
    SV **v = hv_fetch(env, key, len, 0);
    return v ? *v : NULL;
}
#define ENV_VALUE(env, key) env_value(aTHX_ (env), "" key "", sizeof(key) - 1)

/* What became of the app's part of a request. */
enum app_outcome {
    APP_ANSWERED,  /* its response went out (or was cut: the client left) */
    APP_TIMED_OUT, /* it ran longer than --request-timeout: answered 503 */
    APP_FAILED,    /* it died, or answered what cannot be sent: answered 500 */
};

/* Runs the app (or a streaming app's callback) as `my $res = eval {
 * $app->($env) }` would: scalar context, $@ set.  Its answer, a new mortal
 * (NULL when !want_answer: void context, as `eval { $callback->($responder) }`).
 * *timed_out: it ran longer than --request-timeout (request_timeout.c; off,
 * one test). */
static SV *run_app(pTHX_ struct serow_request *req, SV *app, SV *arg, int want_answer,
                   int *timed_out)
{
    dSP;
    SV *answer = NULL;
    int timed = serow_worker_loop_request_timeout_on(req->worker);
    if (timed)
        serow_worker_loop_app_timer_start(req);
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    XPUSHs(arg);
    PUTBACK;
    if (want_answer) {
        call_sv(app, G_SCALAR | G_EVAL);
        SPAGAIN;
        answer = newSVsv(POPs);
        PUTBACK;
    } else {
        call_sv(app, G_VOID | G_DISCARD | G_EVAL);
    }
    FREETMPS;
    LEAVE;
    *timed_out = timed && serow_worker_loop_app_timer_stop(req);
    return answer ? sv_2mortal(answer) : NULL; /* (after FREETMPS, which would free it) */
}

/* ---- a streamed response: psgi.streaming -----------------------------------
 *
 * An app that answers with a code reference is called back with a responder
 * (PSGI's delayed response).  Called with [status, headers], the responder
 * starts the response and returns a writer (Serow::Writer, below); called
 * with a whole [status, headers, body], it hands that to the worker's Perl
 * (set_triple_responder: the worker's own way for a handle or a malformed
 * answer).  The responder is an XSUB: a closure of Perl's was cloned and
 * freed for each request.  It points at the request of its stream
 * (CvXSUBANY) while the stream is in progress, and refuses to answer once it
 * is over; the stream's state is its request's (struct serow_stream).  One
 * the app did not keep is kept for the next stream (a per-process cache). */

static CV *free_responder;   /* a responder of ours, for the next stream */
static SV *triple_responder; /* Perl code: ($env, [status, headers, body]); the worker's */

void serow_set_triple_responder(pTHX_ SV *code)
{
    SV *old = triple_responder;
    triple_responder = newSVsv(code);
    SvREFCNT_dec(old);
}

/* psgix.harakiri.commit, as the app has set it so far. */
static int last_one_asked(pTHX_ HV *env)
{
    SV *harakiri = ENV_VALUE(env, "psgix.harakiri.commit");
    return harakiri && SvTRUE(harakiri);
}

/* A response is about to go out: when the worker leaves after it
 * (psgix.harakiri.commit), the loop stops now, so that the response closes
 * the connection or hands it to the holder rather than keep it for a
 * request this worker would not serve. */
static void stop_if_last_one(pTHX_ struct serow_request *req, SV *env_ref)
{
    if (last_one_asked(aTHX_ (HV *)SvRV(env_ref)))
        serow_worker_loop_stop(req->worker);
}

/* A whole response the server does not send itself (a handle as the body,
 * a malformed one), given to the worker's Perl with the env. */
static void answer_triple(pTHX_ SV *env_ref, SV *res)
{
    dSP;
    if (triple_responder == NULL)
        croak("the PSGI responder cannot take a whole response here\n");
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    EXTEND(SP, 2);
    PUSHs(env_ref);
    PUSHs(res);
    PUTBACK;
    call_sv(triple_responder, G_VOID | G_DISCARD);
    FREETMPS;
    LEAVE;
}

/*
 * A whole answer, [status, headers, body], that the app returned or gave a
 * streaming app's responder: its shape checked (here only), then an array
 * body sent here in one call, and any other (a handle, an object with
 * getline, a tied array) by the worker's Perl (answer_triple).  NULL when
 * it went out (or the client left), else why it could not (a new mortal,
 * for the log: the request is answered 500).
 */
static SV *answer_whole(pTHX_ struct serow_request *req, SV *env_ref, SV *res)
{
    AV *triple = (AV *)SvRV(res);
    SV **body = av_count(triple) == 3 ? av_fetch(triple, 2, 0) : NULL;
    if (body != NULL)
        SvGETMAGIC(*body);
    if (body == NULL || !SvROK(*body))
        return sv_2mortal(newSVpvs("bad response: not [status, headers, body] with an array or "
                                   "a handle as the body"));
    stop_if_last_one(aTHX_ req, env_ref);
    if (SvRMAGICAL((SV *)triple) || SvGMAGICAL(*body) || SvTYPE(SvRV(*body)) != SVt_PVAV ||
        SvOBJECT(SvRV(*body))) {
        answer_triple(aTHX_ env_ref, res);
        return NULL;
    }
    SV *bad = NULL;
    SV **status = av_fetch(triple, 0, 0), **headers = av_fetch(triple, 1, 0);
    int r = serow_send_psgi_response(aTHX_ req, status ? *status : &PL_sv_undef,
                                     headers ? *headers : &PL_sv_undef, (AV *)SvRV(*body), &bad);
    SV *error = response_error(aTHX_ r, bad);
    return error ? sv_2mortal(newSVpvf("bad response: %" SVf, SVfARG(error))) : NULL;
}

XS_INTERNAL(stream_responder)
{
    dXSARGS;
    struct serow_request *req = (struct serow_request *)CvXSUBANY(cv).any_ptr;
    if (req == NULL || !req->stream.active)
        croak("the PSGI responder was called after its request ended\n");
    struct serow_stream *stream = &req->stream;
    if (stream->responded)
        croak("the PSGI responder was called twice\n");
    SV *res = items > 0 ? ST(0) : &PL_sv_undef;
    SvGETMAGIC(res);
    if (!SvROK(res) || SvTYPE(SvRV(res)) != SVt_PVAV || SvOBJECT(SvRV(res)))
        croak("the PSGI responder takes an array reference\n");
    AV *av = (AV *)SvRV(res);
    if (av_count(av) >= 3) {
        stream->responded = 1;
        SV *env_ref = (SV *)stream->env_ref, *error = answer_whole(aTHX_ req, env_ref, res);
        if (error != NULL)
            serow_request_fail(aTHX_ req, (HV *)SvRV(env_ref), error, 500);
        XSRETURN_EMPTY;
    }
    stop_if_last_one(aTHX_ req, (SV *)stream->env_ref);
    SV **status = av_fetch(av, 0, 0), **headers = av_fetch(av, 1, 0);
    SV *bad = NULL;
    int r = serow_start_psgi_response(aTHX_ req, status ? *status : &PL_sv_undef,
                                      headers ? *headers : &PL_sv_undef, -1, &bad);
    serow_response_result(aTHX_ r, bad); /* dies on a bad head */
    stream->responded = 1;
    stream->writer = (struct sv *)serow_writer_new(aTHX_ req);
    ST(0) = sv_mortalcopy((SV *)stream->writer);
    XSRETURN(1);
}

/* Whether nothing but our own reference holds sv, not even a weak
 * reference (its backreference is magic): then the app cannot reach it. */
static int only_ours(pTHX_ SV *sv)
{
    PERL_UNUSED_CONTEXT;
    return SvREFCNT(sv) == 1 && !SvMAGICAL(sv);
}

/* A responder for req's stream: the free one when the app kept none of it
 * (known only once the stream's own references are gone: at the next
 * stream), or a new one.  Ours, a reference in req->stream.responder until
 * the stream is over. */
static CV *responder_for(pTHX_ struct serow_request *req)
{
    CV *cv = free_responder;
    free_responder = NULL;
    if (cv != NULL && !only_ours(aTHX_ (SV *)cv)) {
        SvREFCNT_dec((SV *)cv); /* the app's now: it answers no stream */
        cv = NULL;
    }
    if (cv == NULL)
        cv = newXS(NULL, stream_responder, __FILE__);
    CvXSUBANY(cv).any_ptr = req;
    req->stream.responder = (struct cv *)cv;
    return cv;
}

/* req's stream is over: its responder dies from now on, and is free for the
 * next stream. */
static void responder_done(pTHX_ struct serow_request *req)
{
    CV *cv = (CV *)req->stream.responder;
    req->stream.responder = NULL;
    CvXSUBANY(cv).any_ptr = NULL;
    if (free_responder == NULL)
        free_responder = cv;
    else
        SvREFCNT_dec((SV *)cv);
}

/* Runs the app's callback with a responder, as `eval { $callback->($responder) }`
 * would, then ends the body it left open.  APP_ANSWERED when the response
 * is out (or cut: the client left); else APP_TIMED_OUT, or APP_FAILED with
 * *error. */
static enum app_outcome serve_stream(pTHX_ struct serow_request *req, SV *callback, SV *env_ref,
                                     SV **error)
{
    struct serow_stream *stream = &req->stream;
    stream->active = 1;
    stream->responded = 0;
    stream->writer = NULL;
    stream->env_ref = (struct sv *)env_ref;
    CV *cv = responder_for(aTHX_ req);
    int timed_out;
    run_app(aTHX_ req, callback, sv_2mortal(newRV_inc((SV *)cv)), 0, &timed_out);
    stream->active = 0;
    responder_done(aTHX_ req);
    SV *writer = stream->writer ? sv_2mortal((SV *)stream->writer) : NULL;
    stream->writer = NULL;
    stream->env_ref = NULL;
    enum app_outcome outcome = APP_ANSWERED;
    if (timed_out) {
        outcome = APP_TIMED_OUT;
    } else if (SvTRUE(ERRSV)) {
        if (writer && serow_writer_gone(aTHX_ writer)) {
            /* The client left while the app streamed, and the app (or its
             * framework) died of it anyway: no error of the app's.  The
             * access log says 499. */
            STRLEN len;
            const char *p = SvPV(ERRSV, len);
            serow_log_debug("the app died after its client had gone: %.*s", (int)len, p);
            serow_psgi_response_client_gone(req); /* (if no write had found it yet) */
            if (req->conn != NULL)
                serow_request_end(aTHX_ req, (HV *)SvRV(env_ref), 500);
        } else {
            *error = sv_2mortal(newSVpvf("the app died while streaming: %" SVf, SVfARG(ERRSV)));
            outcome = APP_FAILED;
        }
    } else if (writer && !serow_writer_closed(aTHX_ writer)) {
        serow_writer_close(aTHX_ writer); /* the app forgot: the client is not left waiting */
    } else if (!stream->responded && !req->response_started &&
               req->conn != NULL && req->socket.handle == NULL) {
        /* (An app that read psgix.io may have answered on the socket itself.) */
        *error = sv_2mortal(newSVpvs("the streaming app never called the responder"));
        outcome = APP_FAILED;
    }
    /* A writer the app kept must not write into a later response. */
    if (writer)
        serow_writer_abandon(aTHX_ writer);
    return outcome;
}

/* The env values the log format names (%{NAME}e), as the app left them:
 * strings and numbers; a reference or an undefined value logs as absent. */
static void note_env_values(pTHX_ struct serow_request *req, HV *env)
{
    const struct access_log_name *names;
    int count = serow_request_accounting_env_names(req, &names);
    for (int i = 0; i < count; i++) {
        SV **sv = hv_fetch(env, names[i].name, (I32)names[i].len, 0);
        if (sv == NULL || !SvOK(*sv) || SvROK(*sv))
            continue;
        STRLEN len;
        const char *p = SvPV(*sv, len);
        serow_request_accounting_note_env(req, i, p, len);
    }
}

/* ---- the errors of a request ------------------------------------------- */

void serow_request_log_error(pTHX_ HV *env, SV *message)
{
    SV *method = env ? ENV_VALUE(env, "REQUEST_METHOD") : NULL;
    SV *uri = env ? ENV_VALUE(env, "REQUEST_URI") : NULL;
    SV *line = sv_2mortal(newSVpvf("%" SVf " %" SVf ": %" SVf,
                                   SVfARG(method && SvOK(method) ? method : &PL_sv_no),
                                   SVfARG(uri && SvOK(uri) ? uri : &PL_sv_no), SVfARG(message)));
    STRLEN len;
    const char *p = SvPV(line, len);
    serow_log_line(SEROW_LOG_ERROR, p, len);
}

void serow_request_fail(pTHX_ struct serow_request *req, HV *env, SV *message, int status)
{
    if (message != NULL)
        serow_request_log_error(aTHX_ env, message);
    if (req->conn == NULL)
        return;
    /* The app read psgix.io and sent nothing through the server: it may have
     * written on the socket itself, and an error page could land among its
     * bytes.  The end of the request closes the connection instead. */
    if (!req->response_started && req->socket.handle != NULL)
        return;
    serow_request_end(aTHX_ req, env, status);
}

/*
 * The app returned (or died) after --request-timeout: whatever it answered
 * is dropped, and the client gets 503 with Connection: close (once a
 * response started, it is cut instead).  503, not 504: 504 says a gateway's
 * upstream did not answer, and Serow is the server; 503 says this server
 * could not answer now, which is so, and lets a proxy in front
 * (proxy_next_upstream http_503) try elsewhere.  Where the app was is in the
 * log already when the worker's SIGALRM handler learned of it
 * (app_overdue_told); else the app's own handler took the signal.
 */
static void answer_timed_out(pTHX_ struct serow_request *req, HV *env)
{
    double limit = serow_worker_loop_settings(req->worker)->request_timeout;
    if (req->conn != NULL && (req->response_started || req->socket.handle != NULL))
        serow_request_log_error(aTHX_ env, sv_2mortal(newSVpvf(
            "the app ran longer than --request-timeout %.15gs after its response had begun: the "
            "connection is closed, the response cut", limit)));
    SV *why = req->app_overdue_told ? NULL : sv_2mortal(newSVpvf(
        "the app ran longer than --request-timeout %.15gs in worker %d (no stack trace: the "
        "SIGALRM went to a handler of the app's)", limit, (int)getpid()));
    serow_request_fail(aTHX_ req, env, why, 503);
}

/* ---- serving ------------------------------------------------------------ */

/* The Perl code that gives a request without psgi.input its input (the
 * worker reads the body its way: in memory, or in a temp file), called with
 * the env: true when psgi.input is there, false when the request was
 * answered (an error, or the client left). */
static SV *input_giver;

void serow_set_input_giver(pTHX_ SV *code)
{
    SV *old = input_giver;
    input_giver = newSVsv(code);
    SvREFCNT_dec(old);
}

static int give_input(pTHX_ SV *env_ref)
{
    dSP;
    if (input_giver == NULL)
        croak("no psgi.input for a request with a body: set_input_giver\n");
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    XPUSHs(env_ref);
    PUTBACK;
    /* (no G_EVAL: a worker that cannot make a handle dies, as its Perl would) */
    int n = call_sv(input_giver, G_SCALAR);
    SPAGAIN;
    int given = n == 1 && SvTRUE(POPs);
    PUTBACK;
    FREETMPS;
    LEAVE;
    return given;
}

/* Runs the app and sends its answer: an array triple and a streamed
 * response here, any other whole answer (a handle as the body, a malformed
 * one) by the worker's Perl (the triple responder). */
static enum app_outcome run_and_answer(pTHX_ struct serow_request *req, SV *app, SV *env_ref,
                                       SV **error)
{
    int timed_out;
    SV *res = run_app(aTHX_ req, app, env_ref, 1, &timed_out);
    if (timed_out)
        return APP_TIMED_OUT; /* its answer, whatever it is, is dropped */
    if (SvTRUE(ERRSV)) {
        *error = sv_2mortal(newSVpvf("the app died: %" SVf, SVfARG(ERRSV)));
        return APP_FAILED;
    }
    SV *answered = SvROK(res) ? SvRV(res) : NULL;
    if (answered && SvTYPE(answered) == SVt_PVAV)
        return (*error = answer_whole(aTHX_ req, env_ref, res)) == NULL ? APP_ANSWERED : APP_FAILED;
    if (answered && SvTYPE(answered) == SVt_PVCV)
        return serve_stream(aTHX_ req, res, env_ref, error);
    *error = SvOK(res) ? sv_2mortal(newSVpvf("the app returned '%" SVf "' instead of an array or "
                                             "a code reference", SVfARG(res)))
                       : sv_2mortal(newSVpvs("the app returned undef instead of an array or a "
                                             "code reference"));
    return APP_FAILED;
}

/* The response is out (or failed): REMOTE_USER and env values for the log,
 * what went wrong with it to the error log, then the end of the request (a
 * no-op when the failure ended it). */
static void finish_served(pTHX_ struct serow_request *req, HV *env, int note_remote_user)
{
    if (note_remote_user && req->conn != NULL) {
        SV *user = ENV_VALUE(env, "REMOTE_USER");
        if (user && SvOK(user)) {
            STRLEN len;
            const char *p = SvPV(user, len);
            serow_request_accounting_note_remote_user(req, p, len);
        }
        note_env_values(aTHX_ req, env);
    }
    SV *fault = response_fault(aTHX_ &req->response);
    if (fault != NULL)
        serow_request_log_error(aTHX_ env, fault);
    serow_request_end(aTHX_ req, env, 0);
}

/* After the response is out (and the connection kept or closed): the client
 * does not wait for these.  Run, they go: a handler that closes over the env
 * would otherwise keep it alive through the env's own array (a cycle, never
 * freed), and the env could not be reused for the next request. */
static void run_cleanup_handlers(pTHX_ HV *env, SV *env_ref)
{
    SV *handlers = ENV_VALUE(env, "psgix.cleanup.handlers");
    if (handlers == NULL || !SvROK(handlers) || SvTYPE(SvRV(handlers)) != SVt_PVAV ||
        av_count((AV *)SvRV(handlers)) == 0)
        return;
    AV *av = (AV *)SvREFCNT_inc_simple_NN(SvRV(handlers));
    /* (a handler may add one: the count is read again each time) */
    for (SSize_t i = 0; i < (SSize_t)av_count(av); i++) {
        SV **handler = av_fetch(av, i, 0);
        if (handler == NULL)
            continue;
        dSP;
        ENTER;
        SAVETMPS;
        PUSHMARK(SP);
        XPUSHs(env_ref);
        PUTBACK;
        call_sv(*handler, G_VOID | G_DISCARD | G_EVAL);
        if (SvTRUE(ERRSV))
            serow_log(SEROW_LOG_ERROR, "a psgix.cleanup handler died: %s", SvPV_nolen(ERRSV));
        FREETMPS;
        LEAVE;
    }
    av_clear(av);
    SvREFCNT_dec((SV *)av);
}

int serow_serve_request(pTHX_ struct serow_request *req, SV *app, SV *env_ref,
                        int note_remote_user)
{
    HV *env = (HV *)SvRV(env_ref);
    /* (psgi_env.c gives bodiless requests, and small bodies that came
     * whole, their input) */
    SV *input = ENV_VALUE(env, "psgi.input");
    if ((input == NULL || !SvOK(input)) && !give_input(aTHX_ env_ref))
        return 1; /* answered before the app ran */
    SV *error = NULL;
    switch (run_and_answer(aTHX_ req, app, env_ref, &error)) {
    case APP_TIMED_OUT:
        answer_timed_out(aTHX_ req, env);
        break;
    case APP_FAILED:
        serow_request_fail(aTHX_ req, env, error, 500);
        break;
    case APP_ANSWERED:
        break;
    }
    finish_served(aTHX_ req, env, note_remote_user);
    run_cleanup_handlers(aTHX_ env, env_ref);
    return !last_one_asked(aTHX_ env);
}

/* ---- the worker's calls --------------------------------------------------- */

SV *serow_request_next(pTHX_ struct worker_loop *loop)
{
    /* The worker's reference to the previous env is gone (its loop's scope
     * ended): it may be reused, and what the app left in it is freed before
     * the wait, not after it. */
    serow_psgi_env_retire(aTHX);
    struct serow_request *req = serow_worker_loop_request(loop);
    if (!serow_worker_loop_next_request(loop, req))
        return &PL_sv_undef;
    return newRV_inc((SV *)serow_build_psgi_env(aTHX_ req));
}
