/*
 * Serow.xs - the Perl face of the C core: Serow::Loop wraps one worker's
 * event loop (src/worker/worker_loop.c) and the request it serves
 * (src/psgi/psgi_request.c); the other packages' glue is in the files it
 * INCLUDEs at its end (xs/writer.xsh, xs/shared.xsh, xs/process.xsh,
 * xs/publish.xsh, xs/holding.xsh, xs/tls_socket.xsh).
 * Glue only: it converts arguments and calls src/, which decides.
 */
#define PERL_NO_GET_CONTEXT
/* (worker_internal.h refuses to be included here: see worker_loop.h) */
#define SEROW_XS_GLUE 1

#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log/access_log.h"
#include "worker/child_signals.h"
#include "holder/connection_holder.h"
#include "holder/redis_link.h"
#include "shared/connection_transfer.h"
#include "connection/fd_passing.h"
#include "connection/tls_transport.h"
#include "log/log.h"
#include "shared/shared_state.h"
#include "psgi/shared_values.h"
#include "worker/worker_loop.h"
#include "psgi/psgi_env.h"
#include "psgi/psgi_input.h"
#include "psgi/psgi_tls_socket.h"
#include "psgi/psgi_request.h"
#include "psgi/psgi_response.h"
#include "psgi/psgi_hold.h"
#include "http/response_writer.h"
#include "http/grip_instruct.h"

typedef struct worker_loop *Serow__Loop;

/* The request a Serow::Loop's methods act on: the one the loop serves for
 * the embedding. */
#define REQUEST(loop) serow_worker_loop_request(loop)
/* A Serow::TLSSocket::Tie's C struct, or NULL once freed (xs/tls_socket.xsh). */
#define TLS_SOCKET(self) \
    (SvROK(self) ? INT2PTR(struct serow_tls_socket *, SvIV(SvRV(self))) : NULL)
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

/* A string setting into out (size bytes, with its NUL). */
static void string_setting(pTHX_ HV *settings, const char *who, const char *name, char *out, size_t size)
{
    SV *sv = given_setting(aTHX_ settings, who, name);
    if (!SvOK(sv))
        croak("%s: no '%s' setting", who, name);
    STRLEN len;
    const char *p = SvPVbyte(sv, len);
    if (len >= size || memchr(p, '\0', len) != NULL)
        croak("%s: %s is longer than %d bytes or has a NUL", who, name, (int)size - 1);
    memcpy(out, p, len);
    out[len] = '\0';
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
    serow_worker_loop_watch_signals(RETVAL, (volatile int *)&PL_sig_pending);
  OUTPUT:
    RETVAL

void
loop_DESTROY(Serow::Loop loop)
  CODE:
    serow_worker_loop_free(loop);

void
loop_add_listener(Serow::Loop loop, int fd, int is_unix, const char *server_name, int server_port, int tls = 0)
  CODE:
    if (serow_worker_loop_add_listener(loop, fd, is_unix, server_name, server_port, tls) != 0)
        croak("cannot watch listen socket %d: %s", fd, strerror(errno));

void
loop_set_env_template(const char *class, HV *template)
  CODE:
    /* (class methods: the env and its handles are the process's, whatever
     * loop serves the request: src/psgi/psgi_env.c, src/psgi/psgi_input.c) */
    PERL_UNUSED_VAR(class);
    serow_psgi_env_set_template(aTHX_ template);

void
loop_set_empty_input(const char *class, SV *handle)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_psgi_env_set_empty_input(aTHX_ handle);

void
loop_set_body_input(const char *class, SV *handle, double max)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_psgi_env_set_body_input(aTHX_ handle, max > 0 ? (size_t)max : 0);

int
loop_has_body_input(const char *class)
  CODE:
    PERL_UNUSED_VAR(class);
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
    RETVAL = serow_worker_loop_request_body_framing(REQUEST(loop));
  OUTPUT:
    RETVAL

double
loop_request_content_length(Serow::Loop loop)
  CODE:
    RETVAL = (double)serow_worker_loop_request_content_length(REQUEST(loop));
  OUTPUT:
    RETVAL

int
loop_read_body(Serow::Loop loop, SV *buffer, size_t max)
  CODE:
    RETVAL = serow_input_read_body(aTHX_ REQUEST(loop), buffer, max);
  OUTPUT:
    RETVAL

int
loop_send_response(Serow::Loop loop, SV *status, SV *headers, AV *body)
  CODE:
    SV *bad = NULL;
    /* (two statements: bad must be read after the call has set it) */
    int r = serow_send_psgi_response(aTHX_ REQUEST(loop), status, headers, body, &bad);
    RETVAL = serow_response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

int
loop_start_response(Serow::Loop loop, SV *status, SV *headers, SV *length)
  CODE:
    SV *bad = NULL;
    int64_t n = SvOK(length) ? (int64_t)SvNV(length) : -1;
    int r = serow_start_psgi_response(aTHX_ REQUEST(loop), status, headers, n, &bad);
    RETVAL = serow_response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

int
loop_sendfile_body(Serow::Loop loop, int fd, double offset, double len)
  CODE:
    RETVAL = serow_sendfile_psgi_body(aTHX_ REQUEST(loop), fd, (uint64_t)offset, (uint64_t)len) == RESPONSE_OK;
  OUTPUT:
    RETVAL

int
loop_finish_body(Serow::Loop loop)
  CODE:
    RETVAL = serow_finish_psgi_body(aTHX_ REQUEST(loop)) == RESPONSE_OK;
  OUTPUT:
    RETVAL

int
loop_send_informational(Serow::Loop loop, SV *status, SV *headers)
  CODE:
    SV *bad = NULL;
    int r = serow_send_informational_response(aTHX_ REQUEST(loop), status, headers, &bad);
    RETVAL = serow_response_result(aTHX_ r, bad);
  OUTPUT:
    RETVAL

int
loop_serve_request(Serow::Loop loop, SV *app, SV *env_ref, int note_remote_user)
  CODE:
    /* 0: the worker stops after it (psgix.harakiri.commit) */
    RETVAL = serow_serve_request(aTHX_ REQUEST(loop), app, env_ref, note_remote_user);
  OUTPUT:
    RETVAL

void
loop_fail_request(Serow::Loop loop, HV *env, SV *message, int status = 500)
  CODE:
    /* message undef: nothing to log */
    serow_request_fail(aTHX_ REQUEST(loop), env, SvOK(message) ? message : NULL, status);

void
loop_log_error(const char *class, HV *env, SV *message)
  CODE:
    /* "METHOD URI: message" */
    PERL_UNUSED_VAR(class);
    serow_request_log_error(aTHX_ env, message);

int
loop_socket_handle_made(Serow::Loop loop)
  CODE:
    RETVAL = serow_psgi_env_socket_handle_made(REQUEST(loop));
  OUTPUT:
    RETVAL

void
loop_set_socket_opener(const char *class, SV *code)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_psgi_env_set_socket_opener(aTHX_ code);

void
loop_set_tls_socket_opener(const char *class, SV *code)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_tls_socket_set_opener(aTHX_ code);

void
loop_set_triple_responder(const char *class, SV *code)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_set_triple_responder(aTHX_ code);

void
loop_set_input_giver(const char *class, SV *code)
  CODE:
    PERL_UNUSED_VAR(class);
    serow_set_input_giver(aTHX_ code);

int
loop_response_started(Serow::Loop loop)
  CODE:
    RETVAL = serow_worker_loop_request_response_started(REQUEST(loop));
  OUTPUT:
    RETVAL

void
loop_end_request(Serow::Loop loop, SV *env_ref, int fail_status)
  CODE:
    HV *env = SvROK(env_ref) && SvTYPE(SvRV(env_ref)) == SVt_PVHV ? (HV *)SvRV(env_ref) : NULL;
    serow_request_end(aTHX_ REQUEST(loop), env, fail_status); /* 0: as the response went */

void
loop_open_access_log(Serow::Loop loop, SV *path, int fd, const char *format)
  CODE:
    /* fd: the master's descriptor on path; -1: standard error */
    const char *p = SvOK(path) ? SvPV_nolen(path) : NULL;
    char error[256];
    struct access_log *log = serow_access_log_open(p, fd, format, error, sizeof(error));
    if (log == NULL)
        croak("cannot use the access log %s: %s", p ? p : "(standard error)", error);
    serow_worker_loop_set_access_log(loop, log);

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
    struct access_log *log = serow_worker_loop_access_log(loop);
    RETVAL = log == NULL || serow_access_log_reopen(log) == 0;
  OUTPUT:
    RETVAL

int
loop_current_fd(Serow::Loop loop)
  CODE:
    RETVAL = serow_worker_loop_request_fd(REQUEST(loop));
  OUTPUT:
    RETVAL

int
loop_request_listener(Serow::Loop loop)
  CODE:
    RETVAL = serow_worker_loop_request_listener(REQUEST(loop));
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
    int asked = serow_worker_loop_take_master_requests(loop);
    if (asked & WORKER_ASKED_STOP)
        mXPUSHp("stop", 4);
    if (asked & WORKER_ASKED_REOPEN_LOGS)
        mXPUSHp("reopen_logs", 11);

SV *
loop_app_overdue(Serow::Loop loop)
  CODE:
    /* Seconds the app has run past --request-timeout, or undef: the
     * SIGALRM handler's question (was this signal the timer's?). */
    double ran = serow_worker_loop_app_overdue(loop);
    RETVAL = ran < 0 ? &PL_sv_undef : newSVnv(ran);
  OUTPUT:
    RETVAL

SV *
loop_request_line(Serow::Loop loop)
  CODE:
    /* "METHOD target" of the request the app runs for, for the log; undef: none. */
    const char *method, *target;
    size_t target_len;
    size_t method_len = serow_worker_loop_app_request_line(loop, &method, &target, &target_len);
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
    RETVAL = serow_worker_loop_is_stopping(loop);
  OUTPUT:
    RETVAL

int
loop_is_drained(Serow::Loop loop)
  CODE:
    RETVAL = serow_worker_loop_is_drained(loop);
  OUTPUT:
    RETVAL

INCLUDE: xs/writer.xsh

INCLUDE: xs/shared.xsh

INCLUDE: xs/process.xsh

INCLUDE: xs/publish.xsh

INCLUDE: xs/holding.xsh

INCLUDE: xs/tls_socket.xsh
