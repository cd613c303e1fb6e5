/*
 * Serow.xs - the Perl face of the C core: Serow::Loop wraps one worker's
 * event loop (src/worker/worker_loop.c) and its request (src/psgi/psgi_request.c).
 * Glue only: it converts arguments and calls src/, which decides.
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

#include "log/access_log.h"
#include "worker/child_signals.h"
#include "holder/connection_holder.h"
#include "shared/connection_transfer.h"
#include "connection/fd_passing.h"
#include "log/log.h"
#include "shared/shared_state.h"
#include "psgi/shared_values.h"
#include "worker/worker_loop.h"
#include "psgi/psgi_env.h"
#include "psgi/psgi_input.h"
#include "psgi/psgi_request.h"
#include "psgi/psgi_response.h"
#include "http/response_writer.h"

typedef struct worker_loop *Serow__Loop;
typedef struct shared_state *Serow__Shared;

/* The Serow::Loop package, for the typemap's quick check of the object. */
static HV *serow_loop_stash;

/* A setting the caller gives (Serow::Options owns every default, and
 * lib/Serow/Worker.pm and lib/Serow/ConnectionHolder.pm pass every value):
 * a missing one is an error naming it, never a number of the glue's own. */
static SV *given_setting(pTHX_ HV *settings, const char *who, const char *name)
{
    SV **sv = hv_fetch(settings, name, (I32)strlen(name), 0);
    if (sv == NULL)
        croak("%s: no '%s' setting", who, name);
    return *sv;
}

/* The request_id_header setting ("": off) into out (size bytes, with its
 * NUL); returns its length. */
static size_t id_header_setting(pTHX_ HV *settings, const char *who, char *out, size_t size)
{
    SV *sv = given_setting(aTHX_ settings, who, "request_id_header");
    if (!SvOK(sv))
        croak("%s: no 'request_id_header' setting", who);
    STRLEN len;
    const char *name = SvPV(sv, len);
    if (len >= size)
        croak("%s: request_id_header is longer than %d bytes", who, (int)size - 1);
    memcpy(out, name, len);
    out[len] = '\0';
    return len;
}

static double setting(pTHX_ HV *settings, const char *who, const char *name)
{
    SV *sv = given_setting(aTHX_ settings, who, name);
    if (!SvOK(sv))
        croak("%s: no '%s' setting", who, name);
    return SvNV(sv);
}

/*
 * The access log settings of a process that writes lines besides the
 * workers (the holder, the master's 503s): access_log, its path (undef:
 * none), access_log_fd, the master's descriptor on it (-1: standard error),
 * and access_log_format.  *log: the log opened on a copy of that descriptor
 * (serow_access_log_close it), or NULL for none.  A missing setting croaks;
 * a log that cannot be opened is -1, its reason in error (size bytes).
 */
static int access_log_setting(pTHX_ HV *settings, const char *who, struct access_log **log,
                              char *error, size_t size)
{
    SV *path = given_setting(aTHX_ settings, who, "access_log");
    int fd = (int)setting(aTHX_ settings, who, "access_log_fd");
    SV *format = given_setting(aTHX_ settings, who, "access_log_format");
    if (!SvOK(format))
        croak("%s: no 'access_log_format' setting", who);
    *log = NULL;
    if (!SvOK(path))
        return 0;
    *log = serow_access_log_open(fd >= 0 ? SvPV_nolen(path) : NULL, fd, SvPV_nolen(format),
                                 error, size);
    return *log ? 0 : -1;
}

/* A number the Perl side compares with, as a constant sub of the Serow
 * package made from its C name (see the BOOT of that package below). */
#define SEROW_CONSTANT(stash, perl_name, value) newCONSTSUB((stash), (perl_name), newSViv(value))

/* A signal mask that block_signals returned. */
static void signal_mask_from_sv(pTHX_ SV *mask, sigset_t *set)
{
    STRLEN len;
    const char *p = SvPV(mask, len);
    if (len != sizeof(*set))
        croak("not a signal mask from block_signals");
    memcpy(set, p, sizeof(*set));
}

MODULE = Serow    PACKAGE = Serow::Loop    PREFIX = loop_

PROTOTYPES: DISABLE

BOOT:
    serow_psgi_env_init(aTHX);
    serow_loop_stash = gv_stashpvs("Serow::Loop", GV_ADD);

Serow::Loop
loop_new(const char *class, HV *settings)
  CODE:
    struct worker_settings s;
    const char *who = "Serow::Loop->new";
    PERL_UNUSED_VAR(class);
    s.limits.max_request_line = (size_t)setting(aTHX_ settings, who, "max_request_line");
    s.limits.max_header_size = (size_t)setting(aTHX_ settings, who, "max_header_size");
    s.limits.max_headers = (size_t)setting(aTHX_ settings, who, "max_headers");
    s.max_body_size = (uint64_t)setting(aTHX_ settings, who, "max_body_size");
    s.max_chunk_extensions = (uint64_t)setting(aTHX_ settings, who, "max_chunk_extensions");
    s.header_timeout = setting(aTHX_ settings, who, "header_timeout");
    s.read_timeout = setting(aTHX_ settings, who, "read_timeout");
    s.min_body_rate = setting(aTHX_ settings, who, "min_body_rate");
    s.write_timeout = setting(aTHX_ settings, who, "write_timeout");
    s.keepalive_timeout = setting(aTHX_ settings, who, "keepalive_timeout");
    s.max_keepalive_requests = (unsigned long)setting(aTHX_ settings, who, "max_keepalive_requests");
    s.max_keepalive_connections = (unsigned long)setting(aTHX_ settings, who, "max_keepalive_connections");
    s.request_timeout = setting(aTHX_ settings, who, "request_timeout");
    s.max_queue_wait_ms = (uint64_t)setting(aTHX_ settings, who, "max_queue_wait");
    s.slow_request_us = (uint64_t)(setting(aTHX_ settings, who, "slow_request_log") * 1000);
    s.request_id_header_len = id_header_setting(aTHX_ settings, who, s.request_id_header,
                                                sizeof(s.request_id_header)); /* "": off */
    RETVAL = serow_worker_loop_new(&s);
    if (RETVAL == NULL)
        croak("cannot create the event loop: %s", strerror(errno));
    /* Perl's "a signal waits for its handler" flag: see wait_for_events. */
    serow_loop_watch_signals(RETVAL, (volatile int *)&PL_sig_pending);
  OUTPUT:
    RETVAL

void
loop_DESTROY(Serow::Loop loop)
  CODE:
    serow_worker_loop_free(loop);

void
loop_add_listener(Serow::Loop loop, int fd, int is_unix, const char *server_name, int server_port)
  CODE:
    if (serow_worker_loop_add_listener(loop, fd, is_unix, server_name, server_port) != 0)
        croak("cannot watch listen socket %d: %s", fd, strerror(errno));

void
loop_set_env_template(Serow::Loop loop, HV *template)
  CODE:
    PERL_UNUSED_VAR(loop);
    serow_psgi_env_set_template(aTHX_ template);

void
loop_set_empty_input(Serow::Loop loop, SV *handle)
  CODE:
    PERL_UNUSED_VAR(loop);
    serow_psgi_env_set_empty_input(aTHX_ handle);

void
loop_set_body_input(Serow::Loop loop, SV *handle, double max)
  CODE:
    PERL_UNUSED_VAR(loop);
    serow_psgi_env_set_body_input(aTHX_ handle, max > 0 ? (size_t)max : 0);

int
loop_has_body_input(Serow::Loop loop)
  CODE:
    PERL_UNUSED_VAR(loop);
    RETVAL = serow_psgi_env_has_body_input();
  OUTPUT:
    RETVAL

SV *
loop_next_request(Serow::Loop loop)
  CODE:
    RETVAL = serow_request_next(aTHX_ loop);
  OUTPUT:
    RETVAL

int
loop_request_body_framing(Serow::Loop loop)
  CODE:
    /* Serow::BODY_NONE, BODY_LENGTH or BODY_CHUNKED */
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
    RETVAL = serow_input_read_body(aTHX_ loop, buffer, max);
  OUTPUT:
    RETVAL

int
loop_send_response(Serow::Loop loop, SV *status, SV *headers, AV *body)
  CODE:
    SV *bad = NULL;
    /* (two statements: bad must be read after the call has set it) */
    int r = serow_send_psgi_response(aTHX_ loop, status, headers, body, &bad);
    RETVAL = serow_response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

int
loop_start_response(Serow::Loop loop, SV *status, SV *headers, SV *length)
  CODE:
    SV *bad = NULL;
    int64_t n = SvOK(length) ? (int64_t)SvNV(length) : -1;
    int r = serow_start_psgi_response(aTHX_ loop, status, headers, n, &bad);
    RETVAL = serow_response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

int
loop_sendfile_body(Serow::Loop loop, int fd, double offset, double len)
  CODE:
    RETVAL = serow_sendfile_psgi_body(aTHX_ loop, fd, (uint64_t)offset, (uint64_t)len) == RESPONSE_OK;
  OUTPUT:
    RETVAL

int
loop_finish_body(Serow::Loop loop)
  CODE:
    RETVAL = serow_finish_psgi_body(aTHX_ loop) == RESPONSE_OK;
  OUTPUT:
    RETVAL

int
loop_send_informational(Serow::Loop loop, SV *status, SV *headers)
  CODE:
    SV *bad = NULL;
    int r = serow_send_informational_response(aTHX_ loop, status, headers, &bad);
    RETVAL = serow_response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

void
loop_serve_request(Serow::Loop loop, SV *app, SV *env_ref, int note_remote_user, int from = SERVE_DONE)
  PPCODE:
    /* () when done; else (stage, answer, error) for the worker to go on */
    SV *answer, *error;
    enum serve_stage stage = serow_serve_request(aTHX_ loop, app, env_ref, note_remote_user,
                                                 (enum serve_stage)from, &answer, &error);
    SP = PL_stack_base + ax - 1; /* (the app may have grown the stack) */
    if (stage != SERVE_DONE) {
        EXTEND(SP, 3);
        mPUSHi(stage);
        PUSHs(answer ? answer : &PL_sv_undef);
        PUSHs(error ? error : &PL_sv_undef);
    }

int
loop_socket_handle_made(Serow::Loop loop)
  CODE:
    RETVAL = serow_psgi_env_socket_handle_made(loop);
  OUTPUT:
    RETVAL

void
loop_set_socket_opener(const char *class, SV *code)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_psgi_env_set_socket_opener(aTHX_ code);

void
loop_set_triple_responder(const char *class, SV *code)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_set_triple_responder(aTHX_ code);

int
loop_response_started(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_response_started(loop);
  OUTPUT:
    RETVAL

void
loop_end_request(Serow::Loop loop, SV *env_ref, int fail_status)
  CODE:
    HV *env = SvROK(env_ref) && SvTYPE(SvRV(env_ref)) == SVt_PVHV ? (HV *)SvRV(env_ref) : NULL;
    serow_request_end(aTHX_ loop, env, fail_status); /* 0: as the response went */

void
loop_open_access_log(Serow::Loop loop, SV *path, int fd, const char *format)
  CODE:
    /* fd: the master's descriptor on path; -1: standard error */
    const char *p = SvOK(path) ? SvPV_nolen(path) : NULL;
    char error[256];
    struct access_log *log = serow_access_log_open(p, fd, format, error, sizeof(error));
    if (log == NULL)
        croak("cannot use the access log %s: %s", p ? p : "(standard error)", error);
    serow_loop_set_access_log(loop, log);

SV *
loop_access_log_format_error(const char *class, const char *format)
  CODE:
    /* undef: the format compiles (the master asks at start-up); else why not */
    PERL_UNUSED_VAR(class);
    struct access_log_format f;
    char error[256];
    if (serow_access_log_compile(format, &f, error, sizeof(error)) == 0) {
        serow_access_log_format_free(&f);
        RETVAL = &PL_sv_undef;
    } else {
        RETVAL = newSVpv(error, 0);
    }
  OUTPUT:
    RETVAL

int
loop_reopen_access_log(Serow::Loop loop)
  CODE:
    /* 1 done (or nothing to do), 0 failed with $! set: the old file stays */
    struct access_log *log = serow_loop_access_log(loop);
    RETVAL = log == NULL || serow_access_log_reopen(log) == 0;
  OUTPUT:
    RETVAL

int
loop_current_fd(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_current_fd(loop);
  OUTPUT:
    RETVAL

void
loop_join_holder(Serow::Loop loop, Serow::Shared shared, unsigned int worker_index, int wake_fd, int ready_channel, int handback_channel)
  CODE:
    if (serow_worker_loop_join_holder(loop, shared, worker_index, wake_fd, ready_channel, handback_channel) != 0)
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
loop_start_app_timer(Serow::Loop loop)
  CODE:
    /* --request-timeout around a streaming response's callback (the app's
     * own call is timed in C): a no-op with the option off. */
    if (serow_loop_request_timeout_on(loop))
        serow_app_timer_start(loop);

int
loop_stop_app_timer(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_request_timeout_on(loop) && serow_app_timer_stop(loop);
  OUTPUT:
    RETVAL

SV *
loop_app_overdue(Serow::Loop loop)
  CODE:
    /* Seconds the app has run past --request-timeout, or undef: the
     * SIGALRM handler's question (was this signal the timer's?). */
    double ran = serow_app_timer_overdue(loop);
    RETVAL = ran < 0 ? &PL_sv_undef : newSVnv(ran);
  OUTPUT:
    RETVAL

SV *
loop_request_line(Serow::Loop loop)
  CODE:
    /* "METHOD target" of the current request, for the log; undef: none. */
    const char *method, *target;
    size_t target_len;
    size_t method_len = serow_loop_request_line(loop, &method, &target, &target_len);
    RETVAL = method_len == 0 ? &PL_sv_undef
           : newSVpvf("%.*s %.*s", (int)method_len, method, (int)target_len, target);
  OUTPUT:
    RETVAL

void
loop_stop(Serow::Loop loop)
  CODE:
    serow_worker_loop_stop(loop);

int
loop_is_stopping(Serow::Loop loop)
  CODE:
    RETVAL = serow_loop_is_stopping(loop);
  OUTPUT:
    RETVAL

int
loop_is_drained(Serow::Loop loop)
  CODE:
    RETVAL = serow_worker_loop_is_drained(loop);
  OUTPUT:
    RETVAL

MODULE = Serow    PACKAGE = Serow::Writer    PREFIX = writer_

BOOT:
    {
        /* What write (and poll_cb) die with when the client has gone away. */
        HV *stash = gv_stashpvs("Serow::Writer", GV_ADD);
        newCONSTSUB(stash, "CLIENT_GONE", newSVpvs(SEROW_CLIENT_GONE_MESSAGE));
    }

SV *
writer_new(const char *class, Serow::Loop loop)
  CODE:
    PERL_UNUSED_VAR(class);
    RETVAL = serow_writer_new(aTHX_ loop);
  OUTPUT:
    RETVAL

void
writer_write(SV *self, SV *data)
  CODE:
    /* Dies when the client has gone away: an app streaming without end
     * (server-sent events, say) would otherwise keep the worker forever. */
    if (!serow_writer_send(aTHX_ self, data))
        croak("%s", SEROW_CLIENT_GONE_MESSAGE);

int
writer_send(SV *self, SV *data)
  CODE:
    RETVAL = serow_writer_send(aTHX_ self, data);
  OUTPUT:
    RETVAL

void
writer_close(SV *self)
  CODE:
    serow_writer_close(aTHX_ self);

int
writer_closed(SV *self)
  CODE:
    RETVAL = serow_writer_closed(aTHX_ self);
  OUTPUT:
    RETVAL

int
writer_gone(SV *self)
  CODE:
    RETVAL = serow_writer_gone(aTHX_ self);
  OUTPUT:
    RETVAL

void
writer_abandon(SV *self)
  CODE:
    serow_writer_abandon(aTHX_ self);

double
writer_given(SV *self)
  CODE:
    RETVAL = (double)serow_writer_given(aTHX_ self);
  OUTPUT:
    RETVAL

void
writer_poll_cb(SV *self, SV *cb)
  CODE:
    serow_writer_poll_cb(aTHX_ self, cb);

MODULE = Serow    PACKAGE = Serow::Shared    PREFIX = shared_

Serow::Shared
shared_new(const char *class, unsigned int max_workers)
  CODE:
    PERL_UNUSED_VAR(class);
    RETVAL = serow_shared_state_create(max_workers);
    if (RETVAL == NULL)
        croak("cannot map the shared state: %s", strerror(errno));
  OUTPUT:
    RETVAL

unsigned int
shared_max_workers(Serow::Shared shared)
  CODE:
    RETVAL = serow_shared_max_workers(shared);
  OUTPUT:
    RETVAL

void
shared_make_channel(Serow::Shared shared)
  PPCODE:
    /* (sending end, receiving end) of a SOCK_SEQPACKET channel */
    int fds[2];
    PERL_UNUSED_VAR(shared);
    if (serow_make_channel(fds) != 0)
        croak("cannot make a channel: %s", strerror(errno));
    EXTEND(SP, 2);
    mPUSHi(fds[0]);
    mPUSHi(fds[1]);

void
shared_set_server_stopping(Serow::Shared shared)
  CODE:
    /* From now on a stopping worker closes its connections after their
     * responses instead of handing them to the holder. */
    serow_shared_set_server_stopping(shared);

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
     * "reopen_logs": in the slot, no signal (src/shared/shared_state.h). */
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
    serow_shared_count_worker_restart(shared);

void
shared_set_generation_pids(Serow::Shared shared, ...)
  CODE:
    /* serow FILE: the generation processes running now, for the metrics. */
    int32_t pids[SHARED_GENERATIONS];
    size_t n = 0;
    for (I32 i = 1; i < items && n < SHARED_GENERATIONS; i++)
        pids[n++] = (int32_t)SvIV(ST(i));
    serow_shared_set_generation_pids(shared, pids, n);

void
shared_count_worker_recycled(Serow::Shared shared, const char *reason)
  CODE:
    /* The master asked a worker to leave for reason ("rss"). */
    if (serow_shared_count_worker_recycled(shared, reason) != 0)
        croak("count_worker_recycled: no reason '%s'", reason);

void
shared_app_running(Serow::Shared shared, unsigned int index)
  PPCODE:
    /* (milliseconds, request line, request id or undef) while the app of
     * the worker in slot index runs under --request-timeout; empty when it
     * does not. */
    char request[SHARED_REQUEST_TEXT];
    char id[REQUEST_ID_MAX];
    size_t id_len = 0;
    uint64_t ms = serow_shared_app_running_ms(shared, index, request, id, &id_len);
    if (ms > 0) {
        EXTEND(SP, 3);
        mPUSHn((double)ms);
        mPUSHp(request, strlen(request));
        if (id_len)
            mPUSHp(id, id_len);
        else
            PUSHs(&PL_sv_undef);
    }

void
shared_take_app_connection(Serow::Shared shared, unsigned int index)
  PPCODE:
    /* Before the master kills a stuck worker: (our copy of the connection
     * its app answers, and which request that is: the two values
     * answer_app_connection takes after it), or empty. */
    uint64_t since_ms = 0;
    int32_t app_fd = -1;
    int copy = serow_take_app_connection(shared, index, &since_ms, &app_fd);
    if (copy >= 0) {
        EXTEND(SP, 3);
        mPUSHi(copy);
        mPUSHu((UV)since_ms);
        mPUSHi(app_fd);
    }

int
shared_answer_app_connection(Serow::Shared shared, unsigned int index, int fd, UV since_ms, int app_fd, HV *settings)
  CODE:
    /* Once it is dead: 503 on that copy (1), or only a close when bytes of
     * the response went out (0) or the app had returned from that request
     * (-1).  since_ms, app_fd: what take_app_connection said with the copy.
     * settings (Serow::Master::Limits): the id header, and the access log
     * the 503's line goes to. */
    const char *who = "Serow::Shared->answer_app_connection";
    char id_name[64];
    size_t id_name_len = id_header_setting(aTHX_ settings, who, id_name, sizeof(id_name));
    struct access_log *log = NULL;
    char error[256];
    if (access_log_setting(aTHX_ settings, who, &log, error, sizeof(error)) != 0)
        serow_log_warn("the master cannot write to the access log: %s; the 503 for the request "
                       "of the worker in slot %u has no line", error, index);
    RETVAL = serow_answer_app_connection(shared, index, fd, (uint64_t)since_ms, (int32_t)app_fd,
                                         id_name, id_name_len, log);
    serow_access_log_close(log);
  OUTPUT:
    RETVAL

void
shared_count_request_timeout(Serow::Shared shared)
  CODE:
    /* The master killed a worker whose app outlived --request-timeout. */
    serow_shared_count_request_timeout(shared);

SV *
shared_metrics(Serow::Shared shared)
  CODE:
    RETVAL = serow_shared_metrics_value(aTHX_ shared);
  OUTPUT:
    RETVAL

int
shared_run_holder(Serow::Shared shared, int ready_channel, int handback_channel, HV *settings)
  CODE:
    struct holder_settings s;
    const char *who = "Serow::Shared->run_holder";
    s.keepalive_timeout_ms = (uint64_t)(setting(aTHX_ settings, who, "keepalive_timeout") * 1000);
    s.idle_handoff_ms = (uint64_t)setting(aTHX_ settings, who, "idle_handoff_ms");
    s.max_keepalive_connections = (uint32_t)setting(aTHX_ settings, who, "max_keepalive_connections");
    s.max_queue_wait_ms = (uint64_t)setting(aTHX_ settings, who, "max_queue_wait");
    SV *error_log = given_setting(aTHX_ settings, who, "error_log"); /* undef: none */
    s.error_log = SvOK(error_log) ? SvPV_nolen(error_log) : NULL;
    char error[256];
    if (access_log_setting(aTHX_ settings, who, &s.access_log, error, sizeof(error)) != 0)
        croak("%s: cannot use the access log: %s", who, error);
    s.request_id_header_len = id_header_setting(aTHX_ settings, who, s.request_id_header,
                                                sizeof(s.request_id_header)); /* "": off */
    RETVAL = serow_run_connection_holder(shared, ready_channel, handback_channel, &s);
    if (s.access_log)
        serow_access_log_close(s.access_log);
  OUTPUT:
    RETVAL

SV *
shared_status(Serow::Shared shared)
  CODE:
    RETVAL = serow_shared_status_value(aTHX_ shared);
  OUTPUT:
    RETVAL

INCLUDE: xs/process.xsh
