/*
 * The master's answer to the client of a worker it killed past
 * --request-timeout (src/shared/connection_transfer.c): the connection is copied
 * before the kill, and answered 503 after it only if the app still ran the
 * request taken when the worker died, and no byte of its response went out.
 * Between the copy and the kill the app may return, and the worker finish
 * that response and begin another request: the slot then speaks of that
 * one, and a 503 would follow a whole response (and be logged as the other
 * request).  That race cannot be timed from outside; here the slot is set
 * by hand, as a worker would leave it, in a slot of shared memory whose
 * "worker" is this process (pidfd_getfd of its own descriptors).  Prints
 * "ok - NAME" / "not ok - NAME" per check (t/process/stuck_answer.t).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shared/connection_transfer.h"
#include "shared/shared_state.h"
#include "serow_unit.h"

/* What the client of a connection got, up to its end (it must end: the
 * worker's end is closed and the master's copy answered or closed). */
static size_t client_got(int fd, char *out, size_t size)
{
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t r = recv(fd, out + n, size - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    out[n] = '\0';
    return n;
}

/* One request the app runs in the "worker" (this process): a connection,
 * the worker's end in the slot as its app would leave it. */
struct request {
    int worker_end, client_end;
};

static void app_runs(struct worker_slot *w, struct request *r, uint64_t since_ms)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("socketpair");
        _exit(2);
    }
    r->worker_end = sv[0];
    r->client_end = sv[1];
    snprintf(w->current_request, sizeof(w->current_request), "GET /stuck HTTP/1.1");
    atomic_store(&w->request_id_len, 0);
    atomic_store(&w->app_fd, r->worker_end);
    atomic_store(&w->app_answered, 0);
    atomic_store(&w->app_since_ms, since_ms);
}

/* The worker dies: its descriptors close. */
static void worker_dies(struct request *r)
{
    close(r->worker_end);
}

/* What becomes of the request taken, after what happen() does to the slot
 * between the copy and the kill: the answer's result and whether its client
 * got a 503 or nothing at all. */
struct outcome {
    int taken, result, got_503, got_nothing;
};

static struct outcome take_then(struct shared_state *shared,
                                void (*happen)(struct worker_slot *w, struct request *r))
{
    struct worker_slot *w = &shared->workers[0];
    struct request r, other = {-1, -1};
    struct outcome o = {0, 0, 0, 0};
    app_runs(w, &r, 1000);
    uint64_t since_ms = 0;
    int32_t app_fd = -1;
    int copy = serow_take_app_connection(shared, 0, &since_ms, &app_fd);
    o.taken = copy >= 0 && since_ms == 1000 && app_fd == r.worker_end;
    if (happen)
        happen(w, &other);
    worker_dies(&r);
    if (other.worker_end >= 0)
        worker_dies(&other);
    if (copy >= 0)
        o.result = serow_answer_app_connection(shared, 0, copy, since_ms, app_fd, NULL, 0, NULL);
    char got[1024];
    size_t n = client_got(r.client_end, got, sizeof(got));
    o.got_503 = strncmp(got, "HTTP/1.1 503 ", 13) == 0;
    o.got_nothing = n == 0;
    close(r.client_end);
    if (other.client_end >= 0)
        close(other.client_end);
    return o;
}

/* ---- what may happen between the copy and the kill ---------------------- */

/* Bytes of the response went out (serow_response_starts). */
static void response_began(struct worker_slot *w, struct request *other)
{
    (void)other;
    atomic_store(&w->app_answered, 1);
}

/* The app returned (serow_app_timer_stop), and the worker waits. */
static void app_returned(struct worker_slot *w, struct request *other)
{
    (void)other;
    atomic_store(&w->app_since_ms, 0);
}

/* The app returned, the response went out, and the app now runs the
 * request of another connection, nothing of its response out yet. */
static void next_request_elsewhere(struct worker_slot *w, struct request *other)
{
    app_returned(w, other);
    app_runs(w, other, 2000);
}

/* ... or the next request on the same connection (kept alive). */
static void next_request_here(struct worker_slot *w, struct request *other)
{
    (void)other;
    atomic_store(&w->app_since_ms, 0);
    atomic_store(&w->app_answered, 0);
    atomic_store(&w->app_since_ms, 2000);
}

/* The descriptor number alone changed (the same start, to the millisecond,
 * for a request on another connection). */
static void other_connection_same_ms(struct worker_slot *w, struct request *other)
{
    int32_t fd = atomic_load(&w->app_fd);
    app_runs(w, other, 1000);
    check(atomic_load(&w->app_fd) != fd, "(another descriptor number)");
}

int main(void)
{
    struct shared_state *shared = serow_shared_state_create(1);
    if (shared == NULL) {
        perror("serow_shared_state_create");
        return 2;
    }
    atomic_store(&shared->workers[0].pid, (int32_t)getpid());

    struct outcome o = take_then(shared, NULL);
    check(o.taken, "the connection of the request the app runs is taken, with its start and descriptor");
    check(o.result == 1 && o.got_503, "the app still stuck in it when the worker dies: its client gets 503");

    o = take_then(shared, response_began);
    check(o.taken && o.result == 0 && o.got_nothing,
          "bytes of its response went out: closed, no 503 (0: the response is cut)");

    o = take_then(shared, app_returned);
    check(o.taken && o.result == -1 && o.got_nothing,
          "the app returned before the kill: closed, no 503 (-1)");

    o = take_then(shared, next_request_elsewhere);
    check(o.taken && o.result == -1 && o.got_nothing,
          "the worker went on to a request on another connection: no 503 on this one");

    o = take_then(shared, next_request_here);
    check(o.taken && o.result == -1 && o.got_nothing,
          "the worker went on to the next request on this connection: no 503 after the response");

    o = take_then(shared, other_connection_same_ms);
    check(o.taken && o.result == -1 && o.got_nothing,
          "another request begun in the same millisecond: its descriptor tells them apart");

    /* Nothing to take when the app does not run. */
    struct worker_slot *w = &shared->workers[0];
    struct request r;
    app_runs(w, &r, 0);
    uint64_t since_ms = 7;
    int32_t app_fd = 7;
    check(serow_take_app_connection(shared, 0, &since_ms, &app_fd) == -1,
          "no app running: nothing taken");
    atomic_store(&w->app_since_ms, 1000);
    atomic_store(&w->app_fd, -1);
    check(serow_take_app_connection(shared, 0, &since_ms, &app_fd) == -1,
          "no connection (the app runs without one): nothing taken");
    worker_dies(&r);
    close(r.client_end);
    return checks_done();
}
