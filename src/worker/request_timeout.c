/*
 * request_timeout.c - --request-timeout: the time the app may run for one
 * request, in a worker.
 *
 * While the app runs (its call, and the callback of a streaming response),
 * a one-shot POSIX timer of its own (timer_create, CLOCK_MONOTONIC) is armed
 * to send SIGALRM when the time is up.  Its own timer, not alarm(2)'s: an
 * app that uses alarm or setitimer neither cancels nor moves it.  The Perl
 * worker's SIGALRM handler (lib/Serow/Worker.pm) asks serow_worker_loop_app_overdue
 * whether the signal is this timer's, logs where the app was and dies inside
 * it.  When the app returns, serow_worker_loop_app_timer_stop says whether it outlived
 * the timeout: then its answer is dropped and the client gets 503, whatever
 * the app made of the die (a framework's 500 page, an eval that swallowed
 * it).  An app the die does not reach (a blocking C call, SIGALRM ignored,
 * a die caught in a loop) is the master's: the slot says since when the app
 * runs (app_since_ms), and the master kills the worker after the grace.
 * The slot also says which connection the app answers and whether bytes of
 * its response went out (app_fd, app_answered, kept up to date by
 * serow_worker_loop_response_starts and the lending of psgix.io; a 1xx before the
 * response marks it only while it goes: serow_worker_loop_write_interim):
 * the master takes that connection before the kill and answers it 503
 * after, if none did and the app still runs that request; with an
 * access log, the worker also copies there what that 503's line needs
 * (serow_request_accounting_publish_for_master).  A TLS connection's state
 * is copied there too (app_carried), and again each time records are
 * sealed for it while the app runs (a 100 Continue, a 1xx, a fatal alert
 * after a bad record of its body), before they are sent: the master seals
 * its 503 from it, and a copy behind a record on the wire would make it
 * reuse a nonce.  While a copy is being written its transport says
 * SEROW_TRANSPORT_KINDS, which the master takes as "do not answer": a
 * worker killed in the middle leaves no torn state that could be used.
 *
 * Owns: the timer (one per worker: the app runs for one request at a time)
 * and that verdict; when the app began to run is its request's
 * (app_started_ns).  With the option off nothing here runs: the callers
 * test serow_worker_loop_request_timeout_on first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <signal.h>
#include <string.h>

#include "connection/tls_transport.h" /* serow_tls_set_seal_observer */
#include "request/request_accounting.h" /* the master's access log line */
#include "shared/request_metrics.h" /* serow_metrics_clock_ns */

/* The loop whose app timer runs in this process (one per worker). */
static struct worker_loop *timed_loop;

/* The slot's copy of the state of the connection the app answers becomes
 * cs (a TLS one): never a torn one, for the master that reads it once we
 * are dead. */
static void publish_state(struct worker_slot *slot, const struct serow_connection_state *cs)
{
    __atomic_store_n(&slot->app_carried.transport, SEROW_TRANSPORT_KINDS, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE); /* (the mark before the bytes) */
    memcpy((char *)&slot->app_carried + sizeof cs->transport, (const char *)cs + sizeof cs->transport,
           sizeof *cs - sizeof cs->transport);
    __atomic_store_n(&slot->app_carried.transport, cs->transport, __ATOMIC_RELEASE);
}

/* serow_tls_set_seal_observer's: records sealed for the connection whose
 * request the app runs, not sent yet. */
static void state_sealed(const struct serow_connection_state *cs)
{
    struct worker_loop *loop = timed_loop;
    struct serow_request *r = loop ? loop->app_timer.running : NULL;
    if (r != NULL && r->conn != NULL && cs == &r->conn->carried && loop->slot != NULL)
        publish_state(loop->slot, cs);
}

int serow_app_timer_init(struct worker_loop *loop, double seconds)
{
    if (seconds <= 0)
        return 0;
    timed_loop = loop;
    serow_tls_set_seal_observer(state_sealed);
    struct sigevent ev;
    memset(&ev, 0, sizeof(ev));
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGALRM;
    if (timer_create(CLOCK_MONOTONIC, &ev, &loop->app_timer.id) != 0)
        return -1;
    loop->app_timer.limit_ns = (uint64_t)(seconds * 1e9);
    return 0;
}

void serow_app_timer_free(struct worker_loop *loop)
{
    if (timed_loop == loop) {
        serow_tls_set_seal_observer(NULL);
        timed_loop = NULL;
    }
    if (loop->app_timer.limit_ns != 0)
        timer_delete(loop->app_timer.id);
    loop->app_timer.limit_ns = 0;
}

static void set_timer(struct worker_loop *loop, uint64_t ns)
{
    struct itimerspec t;
    memset(&t, 0, sizeof(t));
    t.it_value.tv_sec = (time_t)(ns / 1000000000ULL);
    t.it_value.tv_nsec = (long)(ns % 1000000000ULL);
    timer_settime(loop->app_timer.id, 0, &t, NULL);
}

/* Whether the client may have bytes of the response (or the app has the
 * socket, or there is no connection to answer): then the master may not
 * answer it. */
static uint32_t answered(const struct serow_request *r)
{
    return (uint32_t)(r->response_started || r->socket.handle != NULL || r->conn == NULL);
}

void serow_worker_loop_app_timer_start(struct serow_request *r)
{
    struct worker_loop *loop = r->worker;
    r->app_started_ns = serow_metrics_clock_ns();
    r->app_overdue_told = 0;
    loop->app_timer.running = r;
    if (loop->slot != NULL) {
        /* What the master needs to answer the client if it must kill us
         * (its fd first: app_since_ms says the pair is valid). */
        serow_request_accounting_publish_for_master(r);
        atomic_store(&loop->slot->app_fd, r->conn ? r->conn->fd : -1);
        if (r->conn && SEROW_TRANSPORT_IS_PLAIN(&r->conn->carried))
            /* (app_since_ms below publishes it) */
            serow_connection_state_copy(&loop->slot->app_carried, &r->conn->carried);
        else if (r->conn)
            publish_state(loop->slot, &r->conn->carried);
        atomic_store(&loop->slot->app_answered, answered(r));
        atomic_store(&loop->slot->app_since_ms, serow_shared_clock_ms());
    }
    set_timer(loop, loop->app_timer.limit_ns);
}

void serow_app_timer_note_answer(struct serow_request *r)
{
    struct worker_loop *loop = r->worker;
    if (loop->app_timer.running == r && loop->slot != NULL)
        atomic_store(&loop->slot->app_answered, 1);
}

void serow_app_timer_note_interim_sent(struct serow_request *r)
{
    /* (the 1xx marked it while it went: serow_worker_loop_response_starts) */
    struct worker_loop *loop = r->worker;
    if (loop->app_timer.running == r && loop->slot != NULL)
        atomic_store(&loop->slot->app_answered, answered(r));
}

int serow_worker_loop_app_timer_stop(struct serow_request *r)
{
    struct worker_loop *loop = r->worker;
    set_timer(loop, 0);
    loop->app_timer.running = NULL;
    if (loop->slot != NULL)
        atomic_store(&loop->slot->app_since_ms, 0);
    if (serow_metrics_clock_ns() - r->app_started_ns < loop->app_timer.limit_ns)
        return 0;
    if (loop->shared != NULL)
        serow_shared_count_request_timeout(loop->shared);
    return 1;
}

double serow_worker_loop_app_overdue(struct worker_loop *loop)
{
    struct serow_request *r = loop->app_timer.running;
    if (loop->app_timer.limit_ns == 0 || r == NULL)
        return -1;
    uint64_t ran = serow_metrics_clock_ns() - r->app_started_ns;
    if (ran < loop->app_timer.limit_ns)
        return -1;
    r->app_overdue_told = 1;
    return (double)ran / 1e9;
}

int serow_worker_loop_request_timeout_on(const struct worker_loop *loop)
{
    return loop->app_timer.limit_ns != 0;
}

size_t serow_worker_loop_app_request_line(const struct worker_loop *loop, const char **method,
                                          const char **target, size_t *target_len)
{
    const struct serow_request *r = loop->app_timer.running;
    if (r == NULL || r->conn == NULL)
        return 0;
    *method = r->head.method;
    *target = r->head.target;
    *target_len = r->head.target_len;
    return r->head.method_len;
}
