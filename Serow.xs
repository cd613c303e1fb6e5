/*
 * Serow.xs - the Perl face of the C core: Serow::Loop wraps one worker's
 * event loop (src/worker_loop.c) and the response writer.  Glue only: every
 * decision is made in src/, except serve_request's, which takes the Perl
 * worker's steps for the usual request (lib/Serow/Worker.pm,
 * go_on_with_request) without a Perl op around the app.
 */
#define PERL_NO_GET_CONTEXT
/* (worker_internal.h refuses to be included here: see worker_loop.h) */
#define SEROW_XS_GLUE 1

#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/eventfd.h>

#include "src/access_log.h"
#include "src/child_signals.h"
#include "src/connection_holder.h"
#include "src/fd_passing.h"
#include "src/shared_state.h"
#include "src/worker_loop.h"
#include "src/psgi_env.h"
#include "src/psgi_response.h"
#include "src/request_accounting.h"
#include "src/response_writer.h"

typedef struct worker_loop *Serow__Loop;
typedef struct shared_state *Serow__Shared;

/* The Serow::Loop package, for the typemap's quick check of the object. */
static HV *serow_loop_stash;

static double setting(pTHX_ HV *settings, const char *name, double fallback)
{
    SV **sv = hv_fetch(settings, name, (I32)strlen(name), 0);
    return sv && SvOK(*sv) ? SvNV(*sv) : fallback;
}

/* A signal mask that block_signals returned. */
static void signal_mask_from_sv(pTHX_ SV *mask, sigset_t *set)
{
    STRLEN len;
    const char *p = SvPV(mask, len);
    if (len != sizeof(*set))
        croak("not a signal mask from block_signals");
    memcpy(set, p, sizeof(*set));
}

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
    case RESPONSE_WIDE_CHARACTER:
        why = "wide character (PSGI headers and bodies are bytes: encode them)";
        break;
    case RESPONSE_BAD_HEADER_NAME:
        why = "the name is undefined, empty or not a token";
        break;
    default:
        why = "the value is undefined or holds CR, LF, NUL or another control character";
        break;
    }
    if (bad_header)
        return sv_2mortal(newSVpvf("invalid response header '%" SVf "': %s", SVfARG(bad_header), why));
    return sv_2mortal(newSVpvf("invalid response: %s", why));
}

/* Turns a writer result into what the Perl side sees: 1 sent, 0 client gone;
 * a malformed response dies with a message naming what is wrong. */
static int response_result(pTHX_ int r, SV *bad_header)
{
    SV *error = response_error(aTHX_ r, bad_header);
    if (error)
        croak("%" SVf, SVfARG(error));
    return r == RESPONSE_OK;
}

/* Tells the loop what response went out, for the access log and metrics. */
static void note_response_outcome(struct worker_loop *loop)
{
    uint64_t body_bytes;
    int status = psgi_response_outcome(&body_bytes);
    request_accounting_note_response(loop, status, body_bytes);
}

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
        worker_loop_stop(loop);
    SV **status = av_fetch(triple, 0, 0), **headers = av_fetch(triple, 1, 0);
    int r = send_psgi_response(aTHX_ loop, status ? *status : &PL_sv_undef,
                               headers ? *headers : &PL_sv_undef, (AV *)SvRV(*body), &bad);
    SV *error = response_error(aTHX_ r, bad);
    return error ? error : &PL_sv_yes;
}

/* Ends the request when there is nothing for the worker to look at: the
 * body had its Content-Length (or the app's chunked framing was whole) and
 * psgix.io was not made.  1 when done (or
 * no request is current), 0 when the worker must see to it. */
static int finish_plain_request(pTHX_ struct worker_loop *loop)
{
    uint64_t announced, given;
    if (psgi_response_length_mismatch(&announced, &given) || psgi_response_app_framing_error() ||
        psgi_env_socket_handle_made())
        return 0;
    if (serow_loop_has_request(loop)) {
        note_response_outcome(loop);
        worker_loop_finish_request(loop, psgi_response_keeps_alive());
        reset_psgi_response();
    }
    psgi_env_request_done(aTHX);
    return 1;
}

/* A value of the env, or NULL. */
static SV *env_value(pTHX_ HV *env, const char *key, I32 len)
{
    SV **v = hv_fetch(env, key, len, 0);
    return v ? *v : NULL;
}
#define ENV_VALUE(env, key) env_value(aTHX_ (env), "" key "", sizeof(key) - 1)

/* Where serve_request left a request for the Perl worker to go on with
 * (go_on_with_request in lib/Serow/Worker.pm, whose STAGE_ constants are
 * these numbers). */
enum serve_stage {
    SERVE_DONE = 0,    /* answered, finished, nothing left to do */
    SERVE_HANDLE,      /* nothing done: the body is to be read first */
    SERVE_RESPOND,     /* the app ran (or died): its answer is the worker's to send */
    SERVE_BAD_RESPONSE,/* the triple could not be sent: why, for the log */
    SERVE_SENT,        /* sent; finishing is the worker's (remote user, length, psgix.io) */
    SERVE_FINISHED,    /* finished; cleanup handlers or psgix.harakiri.commit remain */
};

MODULE = Serow    PACKAGE = Serow::Loop    PREFIX = loop_

PROTOTYPES: DISABLE

BOOT:
    psgi_env_init(aTHX);
    serow_loop_stash = gv_stashpvs("Serow::Loop", GV_ADD);

Serow::Loop
loop_new(const char *class, HV *settings)
  CODE:
    struct worker_settings s;
    PERL_UNUSED_VAR(class);
    s.limits.max_request_line = (size_t)setting(aTHX_ settings, "max_request_line", 8192);
    s.limits.max_header_size = (size_t)setting(aTHX_ settings, "max_header_size", 65536);
    s.limits.max_headers = (size_t)setting(aTHX_ settings, "max_headers", 100);
    s.max_body_size = (uint64_t)setting(aTHX_ settings, "max_body_size", 0);
    s.header_timeout = setting(aTHX_ settings, "header_timeout", 10);
    s.read_timeout = setting(aTHX_ settings, "read_timeout", 60);
    s.min_body_rate = setting(aTHX_ settings, "min_body_rate", 1024);
    s.write_timeout = setting(aTHX_ settings, "write_timeout", 60);
    s.keepalive_timeout = setting(aTHX_ settings, "keepalive_timeout", 5);
    s.max_keepalive_requests = (unsigned long)setting(aTHX_ settings, "max_keepalive_requests", 0);
    s.max_keepalive_connections = (unsigned long)setting(aTHX_ settings, "max_keepalive_connections", 0);
    RETVAL = worker_loop_new(&s);
    if (RETVAL == NULL)
        croak("cannot create the event loop: %s", strerror(errno));
    /* Perl's "a signal waits for its handler" flag: see wait_for_events. */
    serow_loop_watch_signals(RETVAL, (volatile int *)&PL_sig_pending);
  OUTPUT:
    RETVAL

void
loop_DESTROY(Serow::Loop loop)
  CODE:
    worker_loop_free(loop);

void
loop_add_listener(Serow::Loop loop, int fd, int is_unix, const char *server_name, int server_port)
  CODE:
    if (worker_loop_add_listener(loop, fd, is_unix, server_name, server_port) != 0)
        croak("cannot watch listen socket %d: %s", fd, strerror(errno));

void
loop_set_env_template(Serow::Loop loop, HV *template)
  CODE:
    PERL_UNUSED_VAR(loop);
    psgi_env_set_template(aTHX_ template);

void
loop_set_empty_input(Serow::Loop loop, SV *handle)
  CODE:
    PERL_UNUSED_VAR(loop);
    psgi_env_set_empty_input(aTHX_ handle);

void
loop_set_body_input(Serow::Loop loop, SV *handle, double max)
  CODE:
    PERL_UNUSED_VAR(loop);
    psgi_env_set_body_input(aTHX_ handle, max > 0 ? (size_t)max : 0);

int
loop_has_body_input(Serow::Loop loop)
  CODE:
    PERL_UNUSED_VAR(loop);
    RETVAL = psgi_env_has_body_input();
  OUTPUT:
    RETVAL

SV *
loop_next_request(Serow::Loop loop)
  CODE:
    /* The worker's reference to the previous env is gone (its loop's
     * scope ended): it may be reused, and what the app left in it is freed
     * before the wait, not after it. */
    psgi_env_retire(aTHX);
    if (worker_loop_next_request(loop))
        RETVAL = newRV_inc((SV *)build_psgi_env(aTHX_ loop));
    else
        RETVAL = &PL_sv_undef;
  OUTPUT:
    RETVAL

int
loop_request_body_framing(Serow::Loop loop)
  CODE:
    /* 0: no body, 1: Content-Length, 2: chunked */
    RETVAL = serow_loop_body_framing(loop);
  OUTPUT:
    RETVAL

double
loop_request_content_length(Serow::Loop loop)
  CODE:
    RETVAL = (double)serow_loop_content_length(loop);
  OUTPUT:
    RETVAL

int
loop_read_body(Serow::Loop loop, SV *buffer, size_t max)
  CODE:
    /* Appends up to max body bytes to buffer.  Returns the count, 0 at the
     * end of the body, -1 when the client is gone, or -STATUS (400, 408, 413). */
    size_t got = 0;
    STRLEN cur;
    if (!SvOK(buffer))
        sv_setpvs(buffer, "");
    (void)SvPV_force(buffer, cur);
    /* Room for what can still come, not max more each call: a body read
     * in several calls then grows the string once, not once per call (each
     * growth a copy of all that was read). */
    max = serow_loop_body_read_size(loop, max);
    char *p = SvGROW(buffer, cur + max + 1);
    int r = worker_loop_read_body(loop, p + cur, max, &got);
    if (r == 0) {
        SvCUR_set(buffer, cur + got);
        p[cur + got] = '\0';
        RETVAL = (int)got;
    } else {
        RETVAL = r < 0 ? -1 : -r;
    }
  OUTPUT:
    RETVAL

int
loop_send_response(Serow::Loop loop, SV *status, SV *headers, AV *body)
  CODE:
    SV *bad = NULL;
    /* (two statements: bad must be read after the call has set it) */
    int r = send_psgi_response(aTHX_ loop, status, headers, body, &bad);
    RETVAL = response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

int
loop_start_response(Serow::Loop loop, SV *status, SV *headers, SV *length)
  CODE:
    SV *bad = NULL;
    int64_t n = SvOK(length) ? (int64_t)SvNV(length) : -1;
    int r = start_psgi_response(aTHX_ loop, status, headers, n, &bad);
    RETVAL = response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

int
loop_write_body(Serow::Loop loop, SV *data)
  CODE:
    STRLEN len;
    SvGETMAGIC(data);
    const char *p = psgi_bytes(aTHX_ data, &len);
    if (p == NULL)
        response_result(aTHX_ RESPONSE_WIDE_CHARACTER, NULL);
    RETVAL = write_psgi_body(aTHX_ loop, p, len) == RESPONSE_OK;
  OUTPUT:
    RETVAL

int
loop_sendfile_body(Serow::Loop loop, int fd, double offset, double len)
  CODE:
    RETVAL = sendfile_psgi_body(aTHX_ loop, fd, (uint64_t)offset, (uint64_t)len) == RESPONSE_OK;
  OUTPUT:
    RETVAL

int
loop_client_hung_up(Serow::Loop loop, double timeout)
  CODE:
    RETVAL = serow_client_hung_up(loop, timeout);
  OUTPUT:
    RETVAL

int
loop_finish_body(Serow::Loop loop)
  CODE:
    RETVAL = finish_psgi_body(aTHX_ loop) == RESPONSE_OK;
  OUTPUT:
    RETVAL

int
loop_send_informational(Serow::Loop loop, SV *status, SV *headers)
  CODE:
    SV *bad = NULL;
    int r = send_informational_response(aTHX_ loop, status, headers, &bad);
    RETVAL = response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

SV *
loop_send_array_triple(Serow::Loop loop, SV *res, SV *last_one)
  CODE:
    /* 1 sent (or the client left), 0 not such a triple (the worker sends
     * it its own way, or says what is wrong), else why it cannot be sent */
    RETVAL = send_array_triple(aTHX_ loop, res, SvTRUE(last_one));
    SvREFCNT_inc_simple_void_NN(RETVAL); /* (a macro: its argument is evaluated twice) */
  OUTPUT:
    RETVAL

void
loop_serve_request(Serow::Loop loop, SV *app, SV *env_ref, int note_remote_user)
  PPCODE:
    /* The usual request in one call, with no Perl op of the worker's
     * around the app: no body to read first, an answer of [status,
     * headers, [parts]] that goes out whole, nothing left for the worker
     * to look at.  Returns nothing then; else (stage, answer, error): how
     * far it got (enum serve_stage), for the worker to go on from there
     * with the same steps it takes for any request (lib/Serow/Worker.pm).
     * note_remote_user: the access log wants REMOTE_USER. */
    HV *env = (HV *)SvRV(env_ref);
    SV *input = ENV_VALUE(env, "psgi.input");
    enum serve_stage stage = SERVE_DONE;
    SV *answer = NULL, *error = NULL;
    if (input == NULL || !SvOK(input)) {
        stage = SERVE_HANDLE; /* a body (src/psgi_env.c gives bodiless requests their input) */
    } else {
        ENTER;
        SAVETMPS;
        PUSHMARK(SP);
        XPUSHs(env_ref);
        PUTBACK;
        /* as `my $res = eval { $app->($env) }`: scalar context, $@ set */
        call_sv(app, G_SCALAR | G_EVAL);
        SPAGAIN;
        answer = newSVsv(POPs);
        PUTBACK;
        FREETMPS;
        LEAVE;
        sv_2mortal(answer);
        if (SvTRUE(ERRSV) || !SvROK(answer) || SvTYPE(SvRV(answer)) != SVt_PVAV) {
            stage = SERVE_RESPOND;
            error = sv_mortalcopy(ERRSV);
        } else {
            /* (set by the app, which has run: read once) */
            SV *harakiri = ENV_VALUE(env, "psgix.harakiri.commit");
            int last_one = harakiri && SvTRUE(harakiri);
            SV *sent = send_array_triple(aTHX_ loop, answer, last_one);
            if (sent == &PL_sv_no) {
                stage = SERVE_RESPOND; /* the worker's own way: a handle body, ... */
            } else if (sent != &PL_sv_yes) {
                stage = SERVE_BAD_RESPONSE;
                error = sent;
            } else {
                SV *user = note_remote_user ? ENV_VALUE(env, "REMOTE_USER") : NULL;
                if ((user && SvOK(user)) || !finish_plain_request(aTHX_ loop)) {
                    stage = SERVE_SENT;
                } else {
                    SV *handlers = ENV_VALUE(env, "psgix.cleanup.handlers");
                    if (last_one || (handlers && SvROK(handlers) &&
                                     SvTYPE(SvRV(handlers)) == SVt_PVAV &&
                                     av_count((AV *)SvRV(handlers)) > 0))
                        stage = SERVE_FINISHED;
                }
            }
        }
    }
    if (stage != SERVE_DONE) {
        EXTEND(SP, 3);
        mPUSHi(stage);
        PUSHs(answer ? answer : &PL_sv_undef);
        PUSHs(error ? error : &PL_sv_undef);
    }

void
loop_length_mismatch(Serow::Loop loop)
  PPCODE:
    /* (announced, given) when the body did not have its Content-Length */
    uint64_t announced, given;
    PERL_UNUSED_VAR(loop);
    if (psgi_response_length_mismatch(&announced, &given)) {
        mXPUSHn((NV)announced);
        mXPUSHn((NV)given);
    }

SV *
loop_app_framing_error(Serow::Loop loop)
  CODE:
    /* why the chunked framing the app wrote was cut, or undef */
    PERL_UNUSED_VAR(loop);
    const char *why = psgi_response_app_framing_error();
    RETVAL = why ? newSVpv(why, 0) : &PL_sv_undef;
  OUTPUT:
    RETVAL

int
loop_socket_handle_made(Serow::Loop loop)
  CODE:
    PERL_UNUSED_VAR(loop);
    RETVAL = psgi_env_socket_handle_made();
  OUTPUT:
    RETVAL

SV *
loop_take_socket_handle(Serow::Loop loop)
  CODE:
    PERL_UNUSED_VAR(loop);
    RETVAL = psgi_env_take_socket_handle(aTHX);
    if (RETVAL == NULL)
        RETVAL = &PL_sv_undef;
  OUTPUT:
    RETVAL

void
loop_set_socket_opener(const char *class, SV *code)
  CODE:
    PERL_UNUSED_VAR(class);
    psgi_env_set_socket_opener(aTHX_ code);

int
loop_response_started(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_response_started(loop);
  OUTPUT:
    RETVAL

void
loop_finish_request(Serow::Loop loop)
  CODE:
    note_response_outcome(loop);
    serow_socket_back_to_server();
    worker_loop_finish_request(loop, psgi_response_keeps_alive());
    reset_psgi_response();
    psgi_env_request_done(aTHX);

int
loop_finish_plain_request(Serow::Loop loop)
  CODE:
    /* finish_request when there is nothing for the worker to look at: 1
     * done (or no request is current), 0 the worker must see to it */
    RETVAL = finish_plain_request(aTHX_ loop);
  OUTPUT:
    RETVAL

void
loop_fail_request(Serow::Loop loop, int status)
  CODE:
    note_response_outcome(loop);
    serow_socket_back_to_server();
    worker_loop_fail_request(loop, status);
    reset_psgi_response();
    psgi_env_request_done(aTHX);

void
loop_release_current(Serow::Loop loop)
  CODE:
    note_response_outcome(loop);
    worker_loop_release_current(loop);
    reset_psgi_response();
    psgi_env_request_done(aTHX);

void
loop_open_access_log(Serow::Loop loop, SV *path, int fd)
  CODE:
    /* fd: the master's descriptor on path; -1: standard error */
    const char *p = SvOK(path) ? SvPV_nolen(path) : NULL;
    struct access_log *log = access_log_open(p, fd);
    if (log == NULL)
        croak("cannot use the access log %s: %s", p ? p : "(standard error)", strerror(errno));
    serow_loop_set_access_log(loop, log);

int
loop_reopen_access_log(Serow::Loop loop)
  CODE:
    /* 1 done (or nothing to do), 0 failed with $! set: the old file stays */
    struct access_log *log = serow_loop_access_log(loop);
    RETVAL = log == NULL || access_log_reopen(log) == 0;
  OUTPUT:
    RETVAL

void
loop_note_remote_user(Serow::Loop loop, SV *user)
  CODE:
    STRLEN len;
    const char *p = SvPV(user, len);
    request_accounting_note_remote_user(loop, p, len);

int
loop_current_fd(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_current_fd(loop);
  OUTPUT:
    RETVAL

void
loop_join_holder(Serow::Loop loop, Serow::Shared shared, unsigned int worker_index, int wake_fd, int ready_channel, int handback_channel)
  CODE:
    if (worker_loop_join_holder(loop, shared, worker_index, wake_fd, ready_channel, handback_channel) != 0)
        croak("cannot join the connection holder: %s", strerror(errno));

void
loop_take_master_requests(Serow::Loop loop)
  PPCODE:
    /* What the master asked (Serow::Shared::ask_worker) since the last
     * call, by name: "stop", "reopen_logs". */
    int asked = serow_loop_take_master_requests(loop);
    if (asked & WORKER_ASKED_STOP)
        mXPUSHp("stop", 4);
    if (asked & WORKER_ASKED_REOPEN_LOGS)
        mXPUSHp("reopen_logs", 11);

void
loop_stop(Serow::Loop loop)
  CODE:
    worker_loop_stop(loop);

int
loop_is_stopping(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_is_stopping(loop);
  OUTPUT:
    RETVAL

int
loop_is_drained(Serow::Loop loop)
  CODE:
    RETVAL = worker_loop_is_drained(loop);
  OUTPUT:
    RETVAL

int
loop_connection_count(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_connection_count(loop);
  OUTPUT:
    RETVAL

double
loop_requests_total(Serow::Loop loop)
  CODE:
    RETVAL = (double)serow_loop_requests_total(loop);
  OUTPUT:
    RETVAL

MODULE = Serow    PACKAGE = Serow::Shared    PREFIX = shared_

Serow::Shared
shared_new(const char *class, unsigned int max_workers)
  CODE:
    PERL_UNUSED_VAR(class);
    RETVAL = shared_state_create(max_workers);
    if (RETVAL == NULL)
        croak("cannot map the shared state: %s", strerror(errno));
    RETVAL->holder_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  OUTPUT:
    RETVAL

unsigned int
shared_max_workers(Serow::Shared shared)
  CODE:
    RETVAL = shared->max_workers;
  OUTPUT:
    RETVAL

void
shared_make_channel(Serow::Shared shared)
  PPCODE:
    /* (sending end, receiving end) of a SOCK_SEQPACKET channel */
    int fds[2];
    PERL_UNUSED_VAR(shared);
    if (make_channel(fds) != 0)
        croak("cannot make a channel: %s", strerror(errno));
    EXTEND(SP, 2);
    mPUSHi(fds[0]);
    mPUSHi(fds[1]);

void
shared_set_server_stopping(Serow::Shared shared)
  CODE:
    /* From now on a stopping worker closes its connections after their
     * responses instead of handing them to the holder. */
    atomic_store(&shared->server_stopping, 1);

void
shared_reset_worker(Serow::Shared shared, unsigned int index)
  CODE:
    /* The worker in this slot is gone: whatever it published is void.
     * Its counters stay: the next worker in the slot counts on. */
    serow_shared_reset_worker(shared, index);

void
shared_ask_worker(Serow::Shared shared, unsigned int index, int wake_fd, const char *what)
  CODE:
    /* The master asks the worker in slot index, whose eventfd is wake_fd
     * (Serow::make_eventfd, made before the fork), to "stop" or to
     * "reopen_logs": in the slot, no signal (src/shared_state.h). */
    enum shared_worker_request request;
    if (strEQ(what, "stop"))
        request = SHARED_ASK_STOP;
    else if (strEQ(what, "reopen_logs"))
        request = SHARED_ASK_REOPEN_LOGS;
    else
        croak("ask_worker: no request '%s'", what);
    if (serow_shared_ask_worker(shared, index, wake_fd, request) != 0)
        croak("cannot wake worker slot %u: %s", index, strerror(errno));

void
shared_count_worker_restart(Serow::Shared shared)
  CODE:
    /* The master replaced a worker that left while the server ran. */
    atomic_fetch_add(&shared->worker_restarts, 1);

SV *
shared_metrics(Serow::Shared shared)
  CODE:
    /* The numbers behind the Prometheus metrics (Serow::Metrics), summed
     * over every worker slot. */
    struct request_totals t;
    request_metrics_sum(shared, &t);
    HV *m = newHV();
    HV *by_status = newHV();
    uint64_t count = 0;
    for (int i = 0; i < METRICS_STATUS_SLOTS; i++) {
        if (t.by_status[i] == 0)
            continue;
        char code[8];
        int n = snprintf(code, sizeof(code), "%d", i);
        hv_store(by_status, code, n, newSVnv((double)t.by_status[i]), 0);
    }
    AV *buckets = newAV();
    for (int i = 0; i <= METRICS_DURATION_BUCKETS; i++) {
        count += t.duration_buckets[i];
        AV *pair = newAV();
        av_push(pair, i < METRICS_DURATION_BUCKETS ? newSVnv(metrics_duration_bounds[i]) : newSVpvs("+Inf"));
        av_push(pair, newSVnv((double)count)); /* cumulative, as Prometheus wants */
        av_push(buckets, newRV_noinc((SV *)pair));
    }
    struct shared_worker_counts workers;
    serow_shared_count_workers(shared, &workers);
    uint32_t waiting = atomic_load(&shared->held_connections) + workers.idle_connections;
    hv_stores(m, "requests_by_status", newRV_noinc((SV *)by_status));
    hv_stores(m, "duration_buckets", newRV_noinc((SV *)buckets));
    hv_stores(m, "duration_count", newSVnv((double)count));
    hv_stores(m, "duration_sum", newSVnv((double)t.duration_sum_ns / 1e9));
    hv_stores(m, "connections_accepted", newSVnv((double)t.connections_accepted));
    hv_stores(m, "worker_restarts", newSVnv((double)atomic_load(&shared->worker_restarts)));
    hv_stores(m, "connections_stolen", newSVnv((double)atomic_load(&shared->connections_stolen)));
    hv_stores(m, "connections_gathered", newSVnv((double)atomic_load(&shared->connections_gathered)));
    hv_stores(m, "busy_workers", newSVuv(workers.busy));
    hv_stores(m, "idle_workers", newSVuv(workers.idle));
    hv_stores(m, "idle_connections", newSVuv(waiting));
    hv_stores(m, "queued_connections", newSVuv(atomic_load(&shared->queued_connections)));
    hv_stores(m, "open_connections", newSVuv(atomic_load(&shared->open_connections)));
    hv_stores(m, "started", newSVnv((double)shared->started_ms / 1000.0));
    RETVAL = newRV_noinc((SV *)m);
  OUTPUT:
    RETVAL

int
shared_run_holder(Serow::Shared shared, int ready_channel, int handback_channel, HV *settings)
  CODE:
    struct holder_settings s;
    s.keepalive_timeout_ms = (uint64_t)(setting(aTHX_ settings, "keepalive_timeout", 5) * 1000);
    s.idle_handoff_ms = (uint64_t)setting(aTHX_ settings, "idle_handoff_ms", 500);
    s.max_keepalive_connections = (uint32_t)setting(aTHX_ settings, "max_keepalive_connections", 0);
    SV **error_log = hv_fetchs(settings, "error_log", 0);
    s.error_log = error_log && SvOK(*error_log) ? SvPV_nolen(*error_log) : NULL;
    RETVAL = run_connection_holder(shared, ready_channel, handback_channel, &s);
  OUTPUT:
    RETVAL

SV *
shared_status(Serow::Shared shared)
  CODE:
    /* A snapshot for the status page: totals and one hash per worker. */
    HV *status = newHV();
    AV *workers = newAV();
    uint32_t processing = 0, waiting = atomic_load(&shared->held_connections);
    uint32_t queued = atomic_load(&shared->queued_connections);
    for (uint32_t i = 0; i < shared->max_workers; i++) {
        struct shared_worker_status w;
        if (!serow_shared_worker_status(shared, i, &w))
            continue;
        HV *h = newHV();
        processing += w.busy;
        waiting += w.idle_connections;
        hv_stores(h, "pid", newSViv(w.pid));
        hv_stores(h, "slot", newSVuv(i));
        hv_stores(h, "busy", newSViv(w.busy));
        hv_stores(h, "requests", newSVnv((double)w.requests));
        hv_stores(h, "connections", newSVuv(w.connections));
        hv_stores(h, "idle_connections", newSVuv(w.idle_connections));
        if (w.busy) {
            hv_stores(h, "request", newSVpv(w.request, 0));
            hv_stores(h, "busy_for_ms", newSVnv((double)w.busy_for_ms));
        }
        av_push(workers, newRV_noinc((SV *)h));
    }
    hv_stores(status, "processing", newSVuv(processing));
    hv_stores(status, "waiting", newSVuv(waiting));
    hv_stores(status, "queued", newSVuv(queued));
    hv_stores(status, "held_by_holder", newSVuv(atomic_load(&shared->held_connections)));
    hv_stores(status, "open_connections", newSVuv(atomic_load(&shared->open_connections)));
    hv_stores(status, "connections_stolen", newSVnv((double)atomic_load(&shared->connections_stolen)));
    hv_stores(status, "connections_gathered", newSVnv((double)atomic_load(&shared->connections_gathered)));
    hv_stores(status, "requests_total", newSVnv((double)atomic_load(&shared->requests_total)));
    hv_stores(status, "started", newSVnv((double)shared->started_ms / 1000.0));
    hv_stores(status, "holder_pid", newSViv(atomic_load(&shared->holder_pid)));
    hv_stores(status, "workers", newRV_noinc((SV *)workers));
    RETVAL = newRV_noinc((SV *)status);
  OUTPUT:
    RETVAL

MODULE = Serow    PACKAGE = Serow

int
referent_refcount(SV *ref)
  CODE:
    /* How many references the thing ref points at has: a psgix.io handle
     * with more than ours is one the app kept. */
    RETVAL = SvROK(ref) ? (int)SvREFCNT(SvRV(ref)) : 0;
  OUTPUT:
    RETVAL

# The few POSIX calls the master and workers make, here so that they do not
# load POSIX.pm: what the master loads is in every worker's memory.

int
signal_number(const char *name)
  CODE:
    /* "TERM" -> 15; -1 for a name this system does not have */
    RETVAL = whichsig_pv(name);
  OUTPUT:
    RETVAL

SV *
block_signals(...)
  CODE:
    /* Blocks the signals named; returns the mask before (for set_signal_mask). */
    sigset_t block, old;
    sigemptyset(&block);
    for (I32 i = 0; i < items; i++) {
        int n = whichsig_pv(SvPV_nolen(ST(i)));
        if (n <= 0)
            croak("block_signals: no signal '%s'", SvPV_nolen(ST(i)));
        sigaddset(&block, n);
    }
    if (sigprocmask(SIG_BLOCK, &block, &old) != 0)
        croak("sigprocmask: %s", strerror(errno));
    RETVAL = newSVpvn((const char *)&old, sizeof(old));
  OUTPUT:
    RETVAL

void
set_signal_mask(SV *mask)
  CODE:
    sigset_t set;
    signal_mask_from_sv(aTHX_ mask, &set);
    if (sigprocmask(SIG_SETMASK, &set, NULL) != 0)
        croak("sigprocmask: %s", strerror(errno));

void
exit_now(int status)
  CODE:
    /* _exit(2): no END blocks, no destructors, no buffers flushed (a child
     * must not flush what its parent had buffered). */
    _exit(status);

int
WNOHANG()
  CODE:
    RETVAL = WNOHANG;
  OUTPUT:
    RETVAL

double
open_file_limit()
  CODE:
    /* The soft limit on open descriptors, or -1 when there is none. */
    struct rlimit rl;
    RETVAL = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (double)rl.rlim_cur : -1;
  OUTPUT:
    RETVAL

int
make_eventfd()
  CODE:
    /* A new eventfd (non-blocking, close-on-exec): a worker's doorbell,
     * which the master makes before forking it.  -1 on failure (errno). */
    RETVAL = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  OUTPUT:
    RETVAL

void
close_fd(int fd)
  CODE:
    close(fd);

void
default_signals_in_children(...)
  CODE:
    /* The signals named, which this process ignores, are set back to their
     * default action in every process it forks from now on: see
     * src/child_signals.h. */
    for (I32 i = 0; i < items; i++) {
        int n = whichsig_pv(SvPV_nolen(ST(i)));
        if (n <= 0)
            croak("default_signals_in_children: no signal '%s'", SvPV_nolen(ST(i)));
        int err = serow_default_signal_in_children(n);
        if (err != 0)
            croak("default_signals_in_children: %s", strerror(err));
    }

int
set_parent_death_signal(int signal)
  CODE:
    /* The kernel sends signal to this process when its parent exits. */
    RETVAL = prctl(PR_SET_PDEATHSIG, (unsigned long)signal) == 0;
  OUTPUT:
    RETVAL

int
set_dumpable(int dumpable)
  CODE:
    /* Changing a process's uid clears its dumpable flag; the connection
     * holder needs it set to take a worker's connections with
     * pidfd_getfd (which asks for ptrace access to the worker). */
    RETVAL = prctl(PR_SET_DUMPABLE, (unsigned long)dumpable) == 0;
  OUTPUT:
    RETVAL

int
set_ptracer(int pid)
  CODE:
    /* Yama (ptrace_scope 1) lets only a declared ptracer and its
     * descendants take a process's descriptors: a worker names the master,
     * so that the connection holder, the master's child, may.  Without
     * Yama the call fails with EINVAL and nothing is needed. */
#ifdef PR_SET_PTRACER
    RETVAL = prctl(PR_SET_PTRACER, (unsigned long)pid) == 0;
#else
    RETVAL = 0;
#endif
  OUTPUT:
    RETVAL
