/*
 * request_timeout.c - --request-timeout: the time the app may run for one
 * request, in a worker.
 *
 * While the app runs (its call, and the callback of a streaming response),
 * a one-shot POSIX timer of its own (timer_create, CLOCK_MONOTONIC) is armed
 * to send SIGALRM when the time is up.  Its own timer, not alarm(2)'s: an
 * app that uses alarm or setitimer neither cancels nor moves it.  The Perl
 * worker's SIGALRM handler (lib/Serow/Worker.pm) asks serow_app_timer_overdue
 * whether the signal is this timer's, logs where the app was and dies inside
 * it.  When the app returns, serow_app_timer_stop says whether it outlived
 * the timeout: then its answer is dropped and the client gets 503, whatever
 * the app made of the die (a framework's 500 page, an eval that swallowed
 * it).  An app the die does not reach (a blocking C call, SIGALRM ignored,
 * a die caught in a loop) is the master's: the slot says since when the app
 * runs (app_since_ms), and the master kills the worker after the grace.
 * The slot also says which connection the app answers and whether bytes of
 * its response went out (app_fd, app_answered, kept up to date by
 * serow_response_starts and the lending of psgix.io; a 1xx before the
 * response marks it only while it goes: serow_worker_loop_write_interim):
 * the master takes that connection before the kill and answers it 503
 * after, if none did and the app still runs that request; with an
 * access log, the worker also copies there what that 503's line needs
 * (serow_request_accounting_publish_for_master).
 *
 * Owns: the timer and that verdict.  With the option off nothing here runs:
 * the callers test serow_app_timer_on (worker_internal.h) first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker_internal.h"

#include <signal.h>
#include <string.h>

#include "request_accounting.h" /* the master's access log line */
#include "request_metrics.h" /* serow_metrics_clock_ns */

int serow_app_timer_init(struct worker_loop *loop, double seconds)
{
    if (seconds <= 0)
        return 0;
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

void serow_app_timer_start(struct worker_loop *loop)
{
    loop->app_timer.started_ns = serow_metrics_clock_ns();
    loop->app_timer.running = 1;
    if (loop->slot != NULL) {
        /* What the master needs to answer the client if it must kill us
         * (its fd first: app_since_ms says the pair is valid). */
        const struct serow_request *r = &loop->request;
        serow_request_accounting_publish_for_master(loop);
        atomic_store(&loop->slot->app_fd, r->conn ? r->conn->fd : -1);
        if (r->conn)
            loop->slot->app_carried = r->conn->carried; /* (app_since_ms below publishes it) */
        atomic_store(&loop->slot->app_answered, answered(r));
        atomic_store(&loop->slot->app_since_ms, serow_shared_clock_ms());
    }
    set_timer(loop, loop->app_timer.limit_ns);
}

void serow_app_timer_note_answer(struct worker_loop *loop)
{
    if (loop->app_timer.running && loop->slot != NULL)
        atomic_store(&loop->slot->app_answered, 1);
}

void serow_app_timer_note_interim_sent(struct worker_loop *loop)
{
    /* (the 1xx marked it while it went: serow_response_starts) */
    if (loop->app_timer.running && loop->slot != NULL)
        atomic_store(&loop->slot->app_answered, answered(&loop->request));
}

int serow_app_timer_stop(struct worker_loop *loop)
{
    set_timer(loop, 0);
    loop->app_timer.running = 0;
    if (loop->slot != NULL)
        atomic_store(&loop->slot->app_since_ms, 0);
    if (serow_metrics_clock_ns() - loop->app_timer.started_ns < loop->app_timer.limit_ns)
        return 0;
    if (loop->shared != NULL)
        serow_shared_count_request_timeout(loop->shared);
    return 1;
}

double serow_app_timer_overdue(struct worker_loop *loop)
{
    if (loop->app_timer.limit_ns == 0 || !loop->app_timer.running)
        return -1;
    uint64_t ran = serow_metrics_clock_ns() - loop->app_timer.started_ns;
    return ran < loop->app_timer.limit_ns ? -1 : (double)ran / 1e9;
}

int serow_loop_request_timeout_on(struct worker_loop *loop)
{
    return serow_app_timer_on(loop);
}

size_t serow_loop_request_line(struct worker_loop *loop, const char **method, const char **target,
                               size_t *target_len)
{
    if (loop->request.conn == NULL)
        return 0;
    *method = loop->request.head.method;
    *target = loop->request.head.target;
    *target_len = loop->request.head.target_len;
    return loop->request.head.method_len;
}
