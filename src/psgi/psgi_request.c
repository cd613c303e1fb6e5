/*
 * psgi_request.c - the flow of one request through the app: serve it, send
 * the usual answer or stream it (the responder and the writer of
 * psgi.streaming), end it.
 *
 * The usual request (no body to read first, an answer of [status, headers,
 * [parts]] that goes out whole, or a code reference whose responder gets
 * [status, headers] and whose writer sends the parts) is served here in one
 * call from the Perl worker, with no Perl op of the worker's around the app;
 * any other goes back to the worker (lib/Serow/Worker.pm, go_on_with_request)
 * at the first step this file does not take, and the worker comes back here
 * once it has taken it.  So each step is written once: the app runs, a
 * triple is sent and a stream is driven here only, the worker reads bodies,
 * sends handles and writes the log lines.
 *
 * Owns: the order of a request's steps, the end of every request
 * (serow_request_end: the accounting note, the keep-alive decision, the
 * hand-over of psgix.io, the resets of struct serow_request), and the words
 * of what is wrong with a response.  How the env is built (psgi_env.c), how
 * a response goes out (psgi_response.c) and how a connection is kept or
 * closed (worker_loop.c) are theirs: this file only says when.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_request.h"

#include "XSUB.h"

#include "psgi/psgi_env.h"
#include "psgi/psgi_input.h"
#include "psgi/psgi_response.h"
#include "request/request_accounting.h"
#include "http/response_writer.h"
#include "worker/worker_internal.h" /* the current request */

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
static int socket_kept_by_app(pTHX_ struct worker_loop *loop, HV *env)
{
    if (loop->request.socket.handle == NULL)
        return 0; /* (the usual case, without a call) */
    SV *handle = serow_psgi_env_take_socket_handle(aTHX_ loop);
    if (env != NULL)
        (void)hv_deletes(env, "psgix.io", G_DISCARD);
    int kept = SvROK(handle) && SvREFCNT(SvRV(handle)) > 1;
    SvREFCNT_dec(handle); /* ours: closes the duplicate unless the app holds it */
    return kept;
}

void serow_request_end(pTHX_ struct worker_loop *loop, HV *env, int fail_status)
{
    if (loop->request.conn != NULL) {
        /* The response, for the access log and the metrics, before the
         * loop writes them. */
        const struct serow_response *response = &loop->request.response;
        serow_request_accounting_note_response(loop, response->active ? response->status : 0,
                                         response->active ? response->body_sent : 0);
        if (fail_status == 0 && socket_kept_by_app(aTHX_ loop, env)) {
            serow_worker_loop_release_current(loop);
        } else {
            /* (the app's psgix.io made the socket blocking) */
            serow_socket_back_to_server(loop);
            if (fail_status != 0)
                serow_worker_loop_fail_request(loop, fail_status);
            else
                serow_worker_loop_finish_request(loop, response_keeps_alive(response));
        }
    }
    /* The connection's part is over: the response's and psgix.io's go. */
    serow_reset_psgi_response(loop);
    serow_psgi_env_request_done(aTHX_ loop);
}

/* ---- serving ------------------------------------------------------------ */

/* A value of the env, or NULL. */
static SV *env_value(pTHX_ HV *env, const char *key, I32 len)
{
    SV **v = hv_fetch(env, key, len, 0);
    return v ? *v : NULL;
}
#define ENV_VALUE(env, key) env_value(aTHX_ (env), "" key "", sizeof(key) - 1)

/* The usual response, [status, headers, [parts]], in one call: &PL_sv_yes
 * when it went out (or the client left), &PL_sv_no when res is no such
 * triple, else a mortal string saying why it cannot be sent.  last_one
 * (psgix.harakiri.commit): the loop stops first, so that the response
 * closes or hands over the connection. */
static SV *send_array_triple(pTHX_ struct worker_loop *loop, SV *res, int last_one)
{
    AV *triple = SvROK(res) && SvTYPE(SvRV(res)) == SVt_PVAV ? (AV *)SvRV(res) : NULL;
    SV **body = triple && av_count(triple) == 3 && !SvRMAGICAL((SV *)triple)
                    ? av_fetch(triple, 2, 0) : NULL;
    if (body == NULL || SvGMAGICAL(*body) || !SvROK(*body) || SvTYPE(SvRV(*body)) != SVt_PVAV ||
        SvOBJECT(SvRV(*body)))
        return &PL_sv_no;
    SV *bad = NULL;
    if (last_one)
        serow_worker_loop_stop(loop);
    SV **status = av_fetch(triple, 0, 0), **headers = av_fetch(triple, 1, 0);
    int r = serow_send_psgi_response(aTHX_ loop, status ? *status : &PL_sv_undef,
                               headers ? *headers : &PL_sv_undef, (AV *)SvRV(*body), &bad);
    SV *error = response_error(aTHX_ r, bad);
    return error ? error : &PL_sv_yes;
}

/* Runs the app (or a streaming app's callback) as `my $res = eval {
 * $app->($env) }` would: scalar context, $@ set.  Its answer, a new mortal
 * (NULL when !want_answer: void context, as `eval { $callback->($responder) }`).
 * *timed_out: it ran longer than --request-timeout (request_timeout.c; off,
 * one test). */
static SV *run_app(pTHX_ struct worker_loop *loop, SV *app, SV *arg, int want_answer,
                   int *timed_out)
{
    dSP;
    SV *answer = NULL;
    int timed = serow_app_timer_on(loop);
    if (timed)
        serow_app_timer_start(loop);
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
    *timed_out = timed && serow_app_timer_stop(loop);
    return answer ? sv_2mortal(answer) : NULL; /* (after FREETMPS, which would free it) */
}

/* ---- a streamed response: psgi.streaming -----------------------------------
 *
 * An app that answers with a code reference is called back with a responder
 * (PSGI's delayed response).  Called with [status, headers], the responder
 * starts the response and returns a writer (Serow::Writer, below); called
 * with a whole [status, headers, body], it hands that to the worker's Perl
 * (set_triple_responder: the worker's own way for a handle or a malformed
 * answer).  The responder is an XSUB kept for the next stream unless the app
 * kept a reference to it: a closure of Perl's was cloned and freed for each
 * request.  It belongs to the stream whose serial it carries (CvXSUBANY),
 * and refuses to answer once that stream is over. */

static struct {
    IV serial;      /* of the stream in progress; 0: none (its responder dies) */
    int responded;  /* the responder started the response (or gave a triple) */
    SV *writer;     /* the writer it returned (a reference of ours), or NULL */
    SV *env_ref;    /* the request's env, for the triple responder */
    struct worker_loop *loop;
} stream;
static IV last_stream_serial;
static CV *responder;        /* a responder of ours, kept for the next stream */
static SV *triple_responder; /* Perl code: ($env, [status, headers, body]) */

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

static void answer_triple(pTHX_ SV *res)
{
    dSP;
    if (triple_responder == NULL)
        croak("the PSGI responder cannot take a whole response here\n");
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    EXTEND(SP, 2);
    PUSHs(stream.env_ref);
    PUSHs(res);
    PUTBACK;
    call_sv(triple_responder, G_VOID | G_DISCARD);
    FREETMPS;
    LEAVE;
}

XS_INTERNAL(stream_responder)
{
    dXSARGS;
    if (stream.serial == 0 || CvXSUBANY(cv).any_iv != stream.serial)
        croak("the PSGI responder was called after its request ended\n");
    if (stream.responded)
        croak("the PSGI responder was called twice\n");
    SV *res = items > 0 ? ST(0) : &PL_sv_undef;
    SvGETMAGIC(res);
    if (!SvROK(res) || SvTYPE(SvRV(res)) != SVt_PVAV || SvOBJECT(SvRV(res)))
        croak("the PSGI responder takes an array reference\n");
    AV *av = (AV *)SvRV(res);
    struct worker_loop *loop = stream.loop;
    if (av_count(av) >= 3) {
        stream.responded = 1;
        answer_triple(aTHX_ res);
        XSRETURN_EMPTY;
    }
    /* The worker leaves after this response: stopping now makes it hand the
     * connection to the holder afterwards (or say "Connection: close")
     * rather than wait for a next request that it would not serve. */
    if (last_one_asked(aTHX_ (HV *)SvRV(stream.env_ref)))
        serow_worker_loop_stop(loop);
    SV **status = av_fetch(av, 0, 0), **headers = av_fetch(av, 1, 0);
    SV *bad = NULL;
    int r = serow_start_psgi_response(aTHX_ loop, status ? *status : &PL_sv_undef,
                                      headers ? *headers : &PL_sv_undef, -1, &bad);
    serow_response_result(aTHX_ r, bad); /* dies on a bad head */
    stream.responded = 1;
    stream.writer = serow_writer_new(aTHX_ loop);
    ST(0) = sv_mortalcopy(stream.writer);
    XSRETURN(1);
}

/* Whether nothing but our own reference holds sv, not even a weak
 * reference (its backreference is magic): then the app cannot reach it. */
static int only_ours(pTHX_ SV *sv)
{
    PERL_UNUSED_CONTEXT;
    return SvREFCNT(sv) == 1 && !SvMAGICAL(sv);
}

/* The responder for the next stream: ours again when the app kept none of
 * the last one. */
static CV *responder_for(pTHX_ IV serial)
{
    if (responder != NULL && !only_ours(aTHX_ (SV *)responder)) {
        SvREFCNT_dec((SV *)responder); /* the app's now: its serial says it is over */
        responder = NULL;
    }
    if (responder == NULL)
        responder = newXS(NULL, stream_responder, __FILE__);
    CvXSUBANY(responder).any_iv = serial;
    return responder;
}

/* Runs the app's callback with a responder, as `eval { $callback->($responder) }`
 * would, then ends the body it left open.  SERVE_SENT when the response is
 * out (or cut: the client left); else SERVE_TIMED_OUT, or SERVE_APP_FAILED
 * with *error. */
static enum serve_stage serve_stream(pTHX_ struct worker_loop *loop, SV *callback, SV *env_ref,
                                     SV **error)
{
    stream.serial = ++last_stream_serial;
    stream.responded = 0;
    stream.writer = NULL;
    stream.env_ref = env_ref;
    stream.loop = loop;
    CV *cv = responder_for(aTHX_ stream.serial);
    int timed_out;
    run_app(aTHX_ loop, callback, sv_2mortal(newRV_inc((SV *)cv)), 0, &timed_out);
    stream.serial = 0; /* over: its responder dies from now on */
    SV *writer = stream.writer ? sv_2mortal(stream.writer) : NULL;
    stream.writer = NULL;
    enum serve_stage stage = SERVE_SENT;
    if (timed_out) {
        stage = SERVE_TIMED_OUT;
    } else if (SvTRUE(ERRSV)) {
        if (writer && serow_writer_gone(aTHX_ writer)) {
            /* The client left while the app streamed: nothing to report. */
            if (loop->request.conn != NULL)
                serow_request_end(aTHX_ loop, (HV *)SvRV(env_ref), 500);
        } else {
            *error = sv_2mortal(newSVpvf("the app died while streaming: %" SVf, SVfARG(ERRSV)));
            stage = SERVE_APP_FAILED;
        }
    } else if (writer && !serow_writer_closed(aTHX_ writer)) {
        serow_writer_close(aTHX_ writer); /* the app forgot: the client is not left waiting */
    } else if (!stream.responded && !loop->request.response_started &&
               loop->request.conn != NULL && loop->request.socket.handle == NULL) {
        /* (An app that read psgix.io may have answered on the socket itself.) */
        *error = sv_2mortal(newSVpvs("the streaming app never called the responder"));
        stage = SERVE_APP_FAILED;
    }
    /* A writer the app kept must not write into a later response. */
    if (writer)
        serow_writer_abandon(aTHX_ writer);
    return stage;
}

/* The env values the log format names (%{NAME}e), as the app left them:
 * strings and numbers; a reference or an undefined value logs as absent. */
static void note_env_values(pTHX_ struct worker_loop *loop, HV *env)
{
    const struct access_log_name *names;
    int count = serow_request_accounting_env_names(loop, &names);
    for (int i = 0; i < count; i++) {
        SV **sv = hv_fetch(env, names[i].name, (I32)names[i].len, 0);
        if (sv == NULL || !SvOK(*sv) || SvROK(*sv))
            continue;
        STRLEN len;
        const char *p = SvPV(*sv, len);
        serow_request_accounting_note_env(loop, i, p, len);
    }
}

/* The response is out: REMOTE_USER and env values for the log, then the end
 * of the request, unless the response went wrong (the worker logs that
 * first). */
static enum serve_stage finish_served(pTHX_ struct worker_loop *loop, HV *env,
                                      int note_remote_user, SV **error)
{
    SV *user = note_remote_user ? ENV_VALUE(env, "REMOTE_USER") : NULL;
    if (user && SvOK(user) && loop->request.conn != NULL) {
        STRLEN len;
        const char *p = SvPV(user, len);
        serow_request_accounting_note_remote_user(loop, p, len);
    }
    if (note_remote_user && loop->request.conn != NULL && loop->access_log &&
        loop->access_log->format.num_env)
        note_env_values(aTHX_ loop, env);
    if ((*error = response_fault(aTHX_ &loop->request.response)) != NULL)
        return SERVE_SENT;
    serow_request_end(aTHX_ loop, env, 0);
    return SERVE_DONE;
}

enum serve_stage serow_serve_request(pTHX_ struct worker_loop *loop, SV *app, SV *env_ref,
                                     int note_remote_user, enum serve_stage from,
                                     SV **answer, SV **error)
{
    HV *env = (HV *)SvRV(env_ref);
    *answer = *error = NULL;
    /* (the worker looks at what is left after it: cleanup handlers, harakiri) */
    if (from == SERVE_SENT)
        return finish_served(aTHX_ loop, env, note_remote_user, error);
    SV *input = ENV_VALUE(env, "psgi.input");
    if (input == NULL || !SvOK(input))
        return SERVE_HANDLE; /* a body (psgi_env.c gives bodiless requests their input) */
    int timed_out;
    *answer = run_app(aTHX_ loop, app, env_ref, 1, &timed_out);
    if (timed_out)
        return SERVE_TIMED_OUT; /* its answer, whatever it is, is dropped: 503 */
    SV *answered = !SvTRUE(ERRSV) && SvROK(*answer) ? SvRV(*answer) : NULL;
    int last_one;
    if (answered && SvTYPE(answered) == SVt_PVAV) {
        /* (set by the app, which has run: read once) */
        last_one = last_one_asked(aTHX_ env);
        SV *sent = send_array_triple(aTHX_ loop, *answer, last_one);
        if (sent == &PL_sv_no)
            return SERVE_RESPOND; /* the worker's own way: a handle body, ... */
        if (sent != &PL_sv_yes) {
            *error = sent;
            return SERVE_BAD_RESPONSE;
        }
    } else if (answered && SvTYPE(answered) == SVt_PVCV) {
        enum serve_stage streamed = serve_stream(aTHX_ loop, *answer, env_ref, error);
        if (streamed != SERVE_SENT)
            return streamed;
        last_one = last_one_asked(aTHX_ env);
    } else {
        *error = sv_mortalcopy(ERRSV); /* it died, or answered something else */
        return SERVE_RESPOND;
    }
    enum serve_stage stage = finish_served(aTHX_ loop, env, note_remote_user, error);
    if (stage != SERVE_DONE)
        return stage;
    SV *handlers = ENV_VALUE(env, "psgix.cleanup.handlers");
    if (last_one || (handlers && SvROK(handlers) && SvTYPE(SvRV(handlers)) == SVt_PVAV &&
                     av_count((AV *)SvRV(handlers)) > 0))
        return SERVE_FINISHED;
    return SERVE_DONE;
}

/* ---- the worker's calls --------------------------------------------------- */

SV *serow_request_next(pTHX_ struct worker_loop *loop)
{
    /* The worker's reference to the previous env is gone (its loop's scope
     * ended): it may be reused, and what the app left in it is freed before
     * the wait, not after it. */
    serow_psgi_env_retire(aTHX);
    if (!serow_worker_loop_next_request(loop))
        return &PL_sv_undef;
    return newRV_inc((SV *)serow_build_psgi_env(aTHX_ loop));
}

/* ---- the streaming writer: Serow::Writer -----------------------------------
 *
 * What a psgi.streaming app's responder returns, and what sends a body
 * handle's lines (lib/Serow/Writer.pm is its manual).  Its state is a
 * struct in ext magic of the scalar the object refers to, magic that only
 * this file can add (its vtable's address is the mark): no hash to look up,
 * no method of Perl's per write, and no scalar of Perl's taken for a writer
 * (a string blessed into Serow::Writer, a copy of a writer's scalar).
 * Each write goes out at once, in one writev with its chunk framing (and
 * the head, on the first): nothing waits in the server for a next write,
 * except the first bytes of a compressed body (see serow_compression_header_size). */

struct serow_writer {
    struct worker_loop *loop;
    int closed; /* closed, or abandoned when its request ended: writes do nothing */
    int gone;   /* a write found the client gone */
};

static HV *writer_stash;

/* The mark of a writer's magic: no callbacks (the struct is the magic's
 * own copy, freed with it), only this address, which Perl code cannot
 * give a magic of its own. */
static const MGVTBL writer_vtbl = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

/* The writer of a scalar, or NULL when it is none of ours.  (Every method
 * call asks: ours is looked at first, the only magic of a writer the app
 * did not weaken or tie, before a walk of them all.) */
static inline struct serow_writer *writer_state(pTHX_ SV *state)
{
    PERL_UNUSED_CONTEXT;
    if (!SvMAGICAL(state))
        return NULL;
    MAGIC *mg = SvMAGIC(state);
    if (mg->mg_virtual != &writer_vtbl || mg->mg_type != PERL_MAGIC_ext)
        mg = mg_findext(state, PERL_MAGIC_ext, &writer_vtbl);
    return mg ? (struct serow_writer *)mg->mg_ptr : NULL;
}

/* The scalar of the last writer made, kept for the next response while
 * nothing but this holds it (a blessed scalar made and freed per response
 * cost a few hundred instructions, its free a look for a DESTROY).  One
 * the app kept, even weakly (a backreference is magic besides ours), is
 * left to it (abandoned when its request ended) and another is made. */
static SV *kept_writer;

SV *serow_writer_new(pTHX_ struct worker_loop *loop)
{
    if (kept_writer != NULL &&
        (SvREFCNT(kept_writer) != 1 || SvMAGIC(kept_writer)->mg_moremagic != NULL)) {
        SvREFCNT_dec(kept_writer);
        kept_writer = NULL;
    }
    if (kept_writer == NULL) {
        if (writer_stash == NULL)
            writer_stash = gv_stashpvs("Serow::Writer", GV_ADD);
        struct serow_writer fresh = {NULL, 0, 0};
        kept_writer = newSV_type(SVt_PVMG);
        /* (namlen > 0: Perl keeps a copy of the struct, freed with the magic) */
        sv_magicext(kept_writer, NULL, PERL_MAGIC_ext, &writer_vtbl, (const char *)&fresh,
                    sizeof(fresh));
        sv_bless(sv_2mortal(newRV_inc(kept_writer)), writer_stash);
        SvREADONLY_on(kept_writer); /* (after the bless, which would refuse it) */
    }
    struct serow_writer *writer = (struct serow_writer *)SvMAGIC(kept_writer)->mg_ptr;
    writer->loop = loop;
    writer->closed = 0;
    writer->gone = 0;
    return newRV_inc(kept_writer);
}

/* The writer an object holds; dies on anything else. */
static struct serow_writer *writer_of(pTHX_ SV *self)
{
    struct serow_writer *writer = SvROK(self) ? writer_state(aTHX_ SvRV(self)) : NULL;
    if (writer == NULL)
        croak("not a Serow::Writer: a writer is made by the server (the responder, "
              "Serow::Writer->new), not blessed");
    return writer;
}

int serow_writer_send(pTHX_ SV *self, SV *data)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    if (writer->closed)
        return 1;
    SvGETMAGIC(data);
    if (!SvOK(data))
        return 1;
    STRLEN len;
    const char *p = serow_psgi_bytes(aTHX_ data, &len);
    if (p == NULL)
        serow_response_result(aTHX_ RESPONSE_WIDE_CHARACTER, NULL); /* dies */
    if (len == 0)
        return 1;
    if (serow_write_psgi_body(aTHX_ writer->loop, p, len) == RESPONSE_OK)
        return 1;
    writer->gone = writer->closed = 1;
    return 0;
}

void serow_writer_close(pTHX_ SV *self)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    if (writer->closed)
        return;
    writer->closed = 1;
    /* (the held bytes first: a client gone then is one a write found) */
    if (serow_flush_held_psgi_body(aTHX_ writer->loop) != RESPONSE_OK) {
        writer->gone = 1;
        return;
    }
    serow_finish_psgi_body(aTHX_ writer->loop);
}

int serow_writer_closed(pTHX_ SV *self)
{
    return writer_of(aTHX_ self)->closed;
}

int serow_writer_gone(pTHX_ SV *self)
{
    return writer_of(aTHX_ self)->gone;
}

void serow_writer_abandon(pTHX_ SV *self)
{
    writer_of(aTHX_ self)->closed = 1;
}

uint64_t serow_writer_given(pTHX_ SV *self)
{
    return serow_psgi_body_given(writer_of(aTHX_ self)->loop);
}

/* How long poll_cb waits for the client to hang up after a call of its
 * callback that wrote nothing, before it calls it again. */
#define POLL_IDLE_SECONDS 0.05

/*
 * psgi.nonblocking is false: there is no event loop to call back from, and
 * the writer can always take more (a write waits until it has gone).  So
 * the callback runs here, again and again while the writer is open, as a
 * server with an event loop would call it each time the socket can take
 * more: a stream written from it goes on until it closes the writer.  A
 * client that goes away ends it: a write dies then; and a call that wrote
 * nothing waits up to POLL_IDLE_SECONDS for the client to hang up before the
 * next one, so that a callback with nothing to send neither spins the CPU
 * nor outlives its client.  The callback's die goes through, as a write's.
 */
void serow_writer_poll_cb(pTHX_ SV *self, SV *cb)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    /* Held while the callback runs: the app may drop its own references. */
    SV *state = SvREFCNT_inc_simple_NN(SvRV(self));
    ENTER;
    SAVEFREESV(state);
    SV *object = sv_2mortal(newRV_inc(state));
    while (!writer->closed) {
        uint64_t given = serow_psgi_body_given(writer->loop);
        dSP;
        ENTER;
        SAVETMPS;
        PUSHMARK(SP);
        XPUSHs(object);
        PUTBACK;
        call_sv(cb, G_VOID | G_DISCARD);
        FREETMPS;
        LEAVE;
        if (writer->closed || serow_psgi_body_given(writer->loop) != given)
            continue;
        if (serow_client_hung_up(writer->loop, POLL_IDLE_SECONDS)) {
            writer->gone = writer->closed = 1;
            croak("%s", SEROW_CLIENT_GONE_MESSAGE);
        }
    }
    LEAVE;
}
