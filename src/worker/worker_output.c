/*
 * worker_output.c - what a worker writes to a client: a request's
 * response bytes (writev, sendfile, through the connection's transport:
 * connection/transport.h), waiting for a slow reader up to --write-timeout,
 * a streamed body's writes gathered and the thread that sends what the app
 * left gathered, and the error pages sent without waiting.
 *
 * Owns: the write side of a connection, and the bytes held back (below:
 * "gathered writes").  What the bytes say is response_writer.c's (heads,
 * framing, error pages, the Date header) and the PSGI response's
 * (psgi_response.c); this file only moves them.  It may not touch the
 * loop's tables, timers or slots: a write that fails is reported to the
 * caller, which decides what becomes of the connection.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "http/response_writer.h"
#include "connection/transport.h"
#include "log/log.h"

int serow_wait_for(int fd, short events, double timeout)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    double deadline = serow_now_seconds() + timeout;
    for (;;) {
        double left = deadline - serow_now_seconds();
        if (left <= 0)
            return 0;
        int r = poll(&pfd, 1, (int)(left * 1000.0) + 1);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

int serow_worker_loop_client_hung_up(struct serow_request *r, double timeout)
{
    if (r->conn == NULL)
        return 1;
    if (timeout <= 0) {
        /* (serow_wait_for would not look at all) */
        struct pollfd pfd = {.fd = r->conn->fd, .events = POLLRDHUP};
        return poll(&pfd, 1, 0) > 0;
    }
    return serow_wait_for(r->conn->fd, POLLRDHUP, timeout);
}

/* Bytes of the final response are about to go out: no error page can follow
 * them.  While the app runs under --request-timeout the slot learns it too,
 * before the bytes go (the master answers the client of a worker it kills
 * only if none went: request_timeout.c).  (A 1xx's bytes too, while they
 * go: serow_worker_loop_write_interim undoes it after.)  Inline here, for
 * every write; a call for those who write themselves. */
static inline void response_starts(struct serow_request *r)
{
    r->response_started = 1;
    if (r->worker->app_timer.running != NULL)
        serow_app_timer_note_answer(r);
}

void serow_worker_loop_response_starts(struct serow_request *r)
{
    response_starts(r);
}

void serow_worker_loop_socket_lent(struct serow_request *r)
{
    serow_worker_loop_send_held(r); /* (before the app's own bytes) */
    if (r->worker->app_timer.running != NULL)
        serow_app_timer_note_answer(r);
}

/* After a write or sendfile that failed: whether to try again (a signal, or
 * a full socket that drains within --write-timeout). */
static int may_write_again(const struct serow_request *r)
{
    return errno == EINTR ||
           (errno == EAGAIN && serow_wait_for(r->conn->fd, POLLOUT, r->worker->settings.write_timeout));
}

/* Writes all of iov, waiting for the socket up to --write-timeout at a
 * time.  0, or -1 when the client is gone or too slow. */
static int write_waiting(struct serow_request *r, struct iovec *iov, int iovcnt)
{
    struct connection *conn = r->conn;
    while (iovcnt > 0) {
        int batch = iovcnt > IOV_MAX ? IOV_MAX : iovcnt;
        ssize_t n = serow_transport_writev(&conn->carried, conn->fd, iov, batch);
        if (n < 0) {
            if (may_write_again(r))
                continue;
            return -1;
        }
        while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* ---- gathered writes --------------------------------------------------
 *
 * A streamed body comes a piece at a time ($writer->write), and a writev
 * per piece costs a system call each, a TCP segment each (a TLS record
 * each): most of what a small stream costs.  So a piece (with its chunk
 * framing, and the head before the first) is held in a buffer while the
 * app goes on, and leaves with what follows it: the piece that no longer
 * fits (HELD_MAX), the end of the body, any other write to the connection,
 * the end of the request.  An app that stops writing without ending the
 * body (it blocks in a call, sleeps, computes, waits for the next event of
 * a server-sent stream) does not come back to the server: a thread of the
 * worker's sends what it left, the flusher.  While writes come it looks
 * every FLUSH_TICK_NS and sends bytes held across a whole tick (none waits
 * more than two ticks); after IDLE_TICKS with nothing new it sleeps until
 * the next piece is held.  So a busy stream costs no system call per
 * request for the flusher, and an idle worker no wake-ups.
 *
 * Why a thread, and why it is safe:
 * - A signal (as --request-timeout's timer, request_timeout.c) would cut
 *   the app's sleep short (nanosleep, select and poll end with EINTR,
 *   SA_RESTART or not: Perl's sleep returns early), and its handler could
 *   land in the middle of a write: of this buffer, or of a TLS record being
 *   sealed in the transport's scratch buffers.  A timer fd needs someone to
 *   read it, and the app has the only other thread.
 * - The flusher runs no Perl and takes no signal (it blocks them all:
 *   Perl's handlers run on the main thread alone).  It touches `held`,
 *   under its lock, and the connection's transport only while bytes are
 *   held, never waiting: what the socket does not take now is tried again
 *   at the next tick.  Its only other call is nanosleep.
 * - Bytes are held only between a request's writes, and every other use
 *   of a transport by the main thread while it serves (the body read, a
 *   sendfile, psgix.io lent, any write not gathered, the end of the
 *   request) sends them first (serow_worker_loop_send_held): the two
 *   threads never use a transport at once (the TLS transport's scratch
 *   buffers and record state are not for two), and the bytes keep their
 *   order.
 * - A piece is held whole, or sent whole after what was held: a delayed
 *   send never keeps part of a write back (an event written in one write
 *   reaches the client as one).  The socket may still take part of it
 *   (a slow client): the rest follows at the next tick.
 * - A fork (the app's) would copy a lock the flusher may hold and bytes
 *   the parent sends: pthread_atfork takes the lock across it, and the
 *   child starts with nothing held and no flusher (it starts its own if it
 *   writes).
 */

/* Held bytes past this are sent: what a client waits for is bounded, and
 * so is the copy.  One TLS record's plaintext. */
#define HELD_MAX (16 * 1024)
/* The flusher's period: no held byte waits more than two of these. */
#define FLUSH_TICK_NS (1000 * 1000)
/* Ticks with nothing held before the flusher sleeps (a fifth of a second). */
#define IDLE_TICKS 200
#define FLUSHER_STACK (256 * 1024)

enum flusher_state { FLUSHER_NONE, FLUSHER_RUNNING, FLUSHER_UNAVAILABLE };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;         /* the flusher asleep; a piece held wakes it */
    /* Under the lock: */
    struct serow_request *req;   /* whose bytes are held; NULL when none */
    int fd;                      /* its connection's, for the flusher */
    struct serow_connection_state *carried;
    size_t off, len;             /* held: buf[off..len) */
    unsigned generation;         /* counts the times bytes began to be held */
    int failed;                  /* the flusher found req's client gone (what was held is dropped) */
    int ticking;                 /* the flusher looks each tick, else sleeps on wake */
    /* The main thread's alone: */
    enum flusher_state flusher;
    int fork_handlers_set;
    /* Nonzero while bytes are held or a failure is to be told: the main
     * thread looks without the lock (it alone makes it nonzero; the
     * flusher's zero is a release after its write, so that what the write
     * changed in the transport is seen). */
    atomic_int attention;
    char buf[HELD_MAX];
} held = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* Under the lock: nothing held, nothing to tell. */
static void forget_held(void)
{
    held.off = held.len = 0;
    held.req = NULL;
    held.failed = 0;
    atomic_store_explicit(&held.attention, 0, memory_order_relaxed);
}

/* The flusher, under the lock: what the socket takes now of what is held. */
static void flusher_send(void)
{
    while (held.off < held.len) {
        struct iovec iov = {held.buf + held.off, held.len - held.off};
        ssize_t n = serow_transport_writev(held.carried, held.fd, &iov, 1);
        if (n > 0) {
            held.off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return; /* a slow client: the next tick */
        held.failed = 1; /* its next write or end learns it */
        held.off = held.len = 0;
        return;
    }
    held.off = held.len = 0;
    held.req = NULL;
    atomic_store_explicit(&held.attention, 0, memory_order_release);
}

static void *flusher_main(void *unused)
{
    (void)unused;
    unsigned seen = 0;
    int idle = 0;
    pthread_mutex_lock(&held.lock);
    for (;;) {
        if (!held.ticking) {
            while (!held.ticking)
                pthread_cond_wait(&held.wake, &held.lock);
            seen = held.generation; /* (what woke it is a tick old at the next look) */
            idle = 0;
        }
        pthread_mutex_unlock(&held.lock);
        struct timespec tick = {0, FLUSH_TICK_NS};
        nanosleep(&tick, NULL); /* (no signal comes to this thread) */
        pthread_mutex_lock(&held.lock);
        if (held.off < held.len && !held.failed) {
            if (held.generation == seen)
                flusher_send(); /* held across a whole tick */
            idle = 0;
        } else if (held.generation != seen) {
            idle = 0;
        } else if (++idle >= IDLE_TICKS) {
            held.ticking = 0;
        }
        seen = held.generation;
    }
    return NULL;
}

static void before_fork(void)
{
    pthread_mutex_lock(&held.lock);
}

static void after_fork_in_parent(void)
{
    pthread_mutex_unlock(&held.lock);
}

static void after_fork_in_child(void)
{
    /* (the parent sends what is held; a lock and a condition copied from
     * two threads are made anew) */
    pthread_mutex_init(&held.lock, NULL);
    pthread_cond_init(&held.wake, NULL);
    forget_held();
    held.ticking = 0;
    held.flusher = FLUSHER_NONE;
}

/* Whether the flusher runs (started on the first piece held in a process).
 * Without it (no thread to be had) every write goes at once. */
static int flusher_running(void)
{
    if (__builtin_expect(held.flusher == FLUSHER_RUNNING, 1))
        return 1;
    if (held.flusher == FLUSHER_UNAVAILABLE)
        return 0;
    held.flusher = FLUSHER_UNAVAILABLE;
    if (!held.fork_handlers_set) {
        if (pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) != 0)
            return 0;
        held.fork_handlers_set = 1;
    }
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;
    if (pthread_attr_init(&attr) != 0)
        return 0;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, FLUSHER_STACK);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* (the thread is born with this mask) */
    int e = pthread_create(&thread, &attr, flusher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        serow_log_warn("no thread to send streamed writes a blocked app leaves: each goes at once (%s)",
                       strerror(e));
        return 0;
    }
    held.flusher = FLUSHER_RUNNING;
    return 1;
}

/* What is held goes out, then iov[0..iovcnt) of r (in the same writevs
 * when both are r's), waiting as any write.  0, or -1 when r's client is
 * gone (what another request held is sent for it: its own next write
 * learns whether its client is). */
static int send_held_then(struct serow_request *r, struct iovec *iov, int iovcnt)
{
    struct iovec joined[8];
    int result = 0;
    pthread_mutex_lock(&held.lock);
    struct serow_request *owner = held.req;
    if (held.failed) {
        result = owner == r ? -1 : 0;
    } else if (held.off < held.len) {
        struct iovec first = {held.buf + held.off, held.len - held.off};
        if (owner == r && iovcnt < (int)(sizeof(joined) / sizeof(joined[0]))) {
            joined[0] = first;
            if (iovcnt > 0) /* (iov is NULL for a send of what is held alone) */
                memcpy(joined + 1, iov, sizeof(*iov) * (size_t)iovcnt);
            iov = joined;
            iovcnt++;
        } else if (owner->conn != NULL && write_waiting(owner, &first, 1) != 0 && owner == r) {
            result = -1;
        }
    }
    /* (the flusher has nothing to send from here: joined's bytes are the
     * main thread's until it holds a piece again) */
    forget_held();
    pthread_mutex_unlock(&held.lock);
    if (result == 0 && iovcnt > 0)
        result = write_waiting(r, iov, iovcnt);
    return result;
}

int serow_worker_loop_send_held(struct serow_request *r)
{
    if (__builtin_expect(!atomic_load_explicit(&held.attention, memory_order_acquire), 1))
        return 0;
    return send_held_then(r, NULL, 0);
}

int serow_worker_loop_write(struct serow_request *r, struct iovec *iov, int iovcnt)
{
    if (r->conn == NULL)
        return -1;
    response_starts(r);
    if (atomic_load_explicit(&held.attention, memory_order_acquire))
        return send_held_then(r, iov, iovcnt);
    return write_waiting(r, iov, iovcnt);
}

int serow_worker_loop_write_soon(struct serow_request *r, struct iovec *iov, int iovcnt)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    /* (psgix.io lent: the app may write on the socket itself, in order) */
    if (r->conn == NULL || total > HELD_MAX || r->socket.handle != NULL || !flusher_running())
        return serow_worker_loop_write(r, iov, iovcnt);
    response_starts(r);
    pthread_mutex_lock(&held.lock);
    if ((held.req != NULL && held.req != r) || held.failed ||
        held.len - held.off + total > HELD_MAX) {
        pthread_mutex_unlock(&held.lock);
        return send_held_then(r, iov, iovcnt);
    }
    if (held.off > 0) { /* (what a slow client left of a send) */
        memmove(held.buf, held.buf + held.off, held.len - held.off);
        held.len -= held.off;
        held.off = 0;
    }
    int starts = held.len == 0;
    for (int i = 0; i < iovcnt; i++) {
        memcpy(held.buf + held.len, iov[i].iov_base, iov[i].iov_len);
        held.len += iov[i].iov_len;
    }
    if (starts && held.len > 0) {
        held.req = r;
        held.fd = r->conn->fd;
        held.carried = &r->conn->carried;
        held.generation++;
        atomic_store_explicit(&held.attention, 1, memory_order_relaxed);
        if (!held.ticking) {
            held.ticking = 1;
            pthread_cond_signal(&held.wake);
        }
    }
    pthread_mutex_unlock(&held.lock);
    return 0;
}

int serow_worker_loop_write_interim(struct serow_request *r, struct iovec *iov, int iovcnt)
{
    int result = serow_worker_loop_write(r, iov, iovcnt);
    r->response_started = 0;
    if (result == 0 && r->worker->app_timer.running != NULL)
        serow_app_timer_note_interim_sent(r);
    return result;
}

int serow_worker_loop_sendfile(struct serow_request *r, int file_fd, uint64_t offset,
                               uint64_t len)
{
    struct connection *conn = r->conn;
    if (conn == NULL)
        return -1;
    response_starts(r);
    if (serow_worker_loop_send_held(r) != 0)
        return -1;
    off_t off = (off_t)offset;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = serow_transport_sendfile(&conn->carried, conn->fd, file_fd, &off, chunk);
        if (n > 0) {
            len -= (uint64_t)n;
            continue;
        }
        if (n == 0)
            return -2; /* the file is shorter than it said */
        if (may_write_again(r))
            continue;
        return -1;
    }
    return 0;
}

/* Without waiting: a client that does not read gets nothing more.  A
 * response to HEAD keeps the Content-Length but sends no content (RFC 9110
 * 9.3.2). */
size_t serow_send_error_response(struct connection *conn, int status,
                                 const struct http_request_head *head,
                                 const struct response_header *id_header)
{
    char response[512];
    size_t body = 0;
    size_t n = serow_format_error_response(response, sizeof(response), status, serow_is_head_request(head),
                                           id_header, &body);
    serow_transport_send_now(&conn->carried, conn->fd, response, n);
    return body;
}
