/*
 * connection_transfer.c - taking parked connections out of workers.
 *
 * Owns: the handles on other workers (pidfd, their eventfd) and the claim
 * of a parked connection's slot before pidfd_getfd takes its descriptor.
 * Used by the holder and by gathering; what a slot means is shared_state.h's.
 * Also what the master takes from a worker it is about to kill (its app
 * stuck past --request-timeout and its grace): the stuck request's
 * connection, answered 503 once the worker is dead if the app still ran
 * that request and no byte of its response went out.  And the one way a
 * taken connection is answered with an error page and closed (the holder's
 * --max-queue-wait sheds, the master's stuck requests), and the access log
 * line of the master's 503 (written by access_log.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "shared/connection_transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log/access_log.h"
#include "http/response_writer.h"

void serow_worker_handles_init(struct worker_handle *handles, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        handles[i].pid = 0;
        handles[i].pidfd = handles[i].wake_fd = -1;
    }
}

static void forget_handle(struct worker_handle *handle)
{
    if (handle->pidfd >= 0)
        close(handle->pidfd);
    if (handle->wake_fd >= 0)
        close(handle->wake_fd);
    handle->pid = 0;
    handle->pidfd = handle->wake_fd = -1;
}

void serow_worker_handles_close(struct worker_handle *handles, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        forget_handle(&handles[i]);
}

/* The pidfd of the process now in the slot (a replaced worker gets a new
 * one: a pidfd names one process, never a reused pid). */
static int worker_pidfd(struct worker_handle *handle, int32_t pid)
{
    if (handle->pid != pid) {
        forget_handle(handle);
        handle->pid = pid;
        handle->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (handle->pidfd >= 0)
            fcntl(handle->pidfd, F_SETFD, FD_CLOEXEC);
    }
    return handle->pidfd;
}

int serow_take_parked_connection(struct shared_state *shared, struct worker_handle *handle,
                           uint32_t worker_index, uint32_t slot_index,
                           struct passed_connection *info)
{
    struct worker_slot *w = &shared->workers[worker_index];
    struct connection_slot *s = &w->connections_table[slot_index];
    if (atomic_load(&w->stolen_head) - atomic_load(&w->stolen_tail) >= SHARED_STOLEN_RING)
        return TAKE_LOST; /* the worker has not caught up: it would not learn of this one */

    uint32_t expected = SLOT_IDLE;
    if (!atomic_compare_exchange_strong(&s->state, &expected, SLOT_STEALING))
        return TAKE_LOST;
    int32_t pid = atomic_load(&w->pid);
    int pidfd = pid > 0 ? worker_pidfd(handle, pid) : -1;
    int fd = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, s->fd, 0) : -1;
    if (fd < 0) {
        int refused = errno == EPERM || errno == ENOSYS;
        /* still the worker's: it may be waiting for this (see slot_claim) */
        atomic_store(&s->state, SLOT_IDLE);
        return refused ? TAKE_REFUSED : TAKE_LOST;
    }
    /* A place in the worker's ring of stolen slots.  The holder and
     * gathering workers may take from the same worker at once: each reserves
     * its own entry, and the worker reads an entry only once it is written
     * (see the stolen ring in shared_state.h). */
    uint32_t head = atomic_load(&w->stolen_head);
    do {
        if (head - atomic_load(&w->stolen_tail) >= SHARED_STOLEN_RING) {
            close(fd);
            atomic_store(&s->state, SLOT_IDLE);
            return TAKE_LOST;
        }
    } while (!atomic_compare_exchange_weak(&w->stolen_head, &head, head + 1));
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    info->requests_served = s->requests_served;
    info->listener_index = s->listener_index;
    info->carried = s->carried;
    info->idle_since_ms = atomic_load(&s->idle_since_ms);
    info->peer.len = 0; /* (the client's own socket: getpeername says) */
    atomic_fetch_sub(&w->idle_connections, 1);
    /* No longer the worker's from here, though its copy stays open until it
     * reads the ring (a busy worker reads it after its request): were the
     * worker to die first, the master would take its connections off the
     * open count (serow_shared_reset_worker), and this one lives on here. */
    atomic_fetch_sub(&w->connections, 1);
    /* stolen before the worker can read the entry: it drops only those */
    atomic_store(&s->state, SLOT_STOLEN);
    atomic_store(&w->stolen[head % SHARED_STOLEN_RING], slot_index + 1);
    return fd;
}

void serow_wake_worker(struct shared_state *shared, struct worker_handle *handle,
                 uint32_t worker_index)
{
    int32_t pid = atomic_load(&shared->workers[worker_index].pid);
    if (pid <= 0 || worker_pidfd(handle, pid) < 0)
        return;
    if (handle->wake_fd < 0) {
        int32_t fd = atomic_load(&shared->workers[worker_index].wake_fd);
        handle->wake_fd = fd >= 0 ? (int)syscall(SYS_pidfd_getfd, handle->pidfd, fd, 0) : -1;
        if (handle->wake_fd >= 0)
            fcntl(handle->wake_fd, F_SETFD, FD_CLOEXEC);
    }
    if (handle->wake_fd >= 0) {
        uint64_t one = 1;
        ssize_t ignored = write(handle->wake_fd, &one, sizeof(one));
        (void)ignored;
    }
}

/*
 * What the client sent is read first (up to ANSWER_DRAIN_BYTES, without
 * waiting): a close with unread input resets the connection, and the client
 * could lose the page with it.
 */
#define ANSWER_DRAIN_BYTES 65536
size_t serow_answer_and_shut(struct serow_connection_state *carried, int fd, int status,
                             int head_request, const struct response_header *id_header)
{
    char buf[4096];
    struct serow_connection_state as_they_are = {.transport = SEROW_TRANSPORT_PLAIN};
    for (size_t drained = 0; drained < ANSWER_DRAIN_BYTES;) {
        /* (TLS: the records as they are, through the plain transport, not
         * opened: nothing read is used, and the master's copy of the state
         * reads from where the app started, behind what the worker read) */
        ssize_t n = serow_transport_recv(carried->transport == SEROW_TRANSPORT_TLS ? &as_they_are
                                                                                  : carried,
                                         fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        drained += (size_t)n;
    }
    char response[512];
    size_t body_bytes;
    size_t len = serow_format_error_response(response, sizeof(response), status, head_request,
                                             id_header, &body_bytes);
    serow_transport_send_now(carried, fd, response, len);
    serow_transport_shutdown(carried, fd);
    return body_bytes;
}

/* A copy of descriptor fd of process pid (close-on-exec), or -1. */
static int copy_descriptor(int32_t pid, int fd)
{
    int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
    if (pidfd < 0)
        return -1;
    int copy = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    close(pidfd);
    if (copy >= 0)
        fcntl(copy, F_SETFD, FD_CLOEXEC);
    return copy;
}

int serow_take_app_connection(struct shared_state *shared, uint32_t worker_index,
                              uint64_t *since_ms, int32_t *app_fd)
{
    if (worker_index >= shared->max_workers)
        return -1;
    struct worker_slot *w = &shared->workers[worker_index];
    uint64_t since = atomic_load(&w->app_since_ms);
    int32_t fd = atomic_load(&w->app_fd);
    if (since == 0 || fd < 0)
        return -1;
    int copy = copy_descriptor(atomic_load(&w->pid), fd);
    /* The app returned meanwhile: the descriptor may be another's now. */
    if (copy >= 0 && atomic_load(&w->app_since_ms) != since) {
        close(copy);
        return -1;
    }
    *since_ms = since;
    *app_fd = fd;
    return copy;
}

/* A span of the bytes the worker copied, NULL when absent or out of them
 * (the master does not trust what shared memory says of its own bounds). */
static struct access_log_span logged_span(const struct shared_logged_request *q, uint32_t offset,
                                          uint32_t len)
{
    if (len == UINT32_MAX || offset > sizeof(q->bytes) || len > sizeof(q->bytes) - offset)
        return (struct access_log_span){NULL, 0};
    return (struct access_log_span){q->bytes + offset, len};
}

/*
 * The access log line of the master's 503, written as a worker writes the
 * line of a request it answered (access_log.c), from what the dead worker
 * copied into its slot when the app started: the request line and fields,
 * the client, the listener, the times (the end is now).  %P is the killed
 * worker's pid, the one its error log line names; %u and %{NAME}e, which
 * only the app sets, are empty.
 */
static void log_app_connection(struct access_log *log, const struct worker_slot *w, size_t body,
                               struct access_log_span id, const char *id_name, size_t id_name_len)
{
    const struct shared_logged_request *q = &w->logged_request;
    const struct access_log_format *f = &log->format;
    char remote[SEROW_REMOTE_ADDR_SIZE], server_name[SHARED_SERVER_NAME];
    /* (at most their arrays' length: not trusted to end in a NUL either) */
    snprintf(remote, sizeof(remote), "%.*s", (int)sizeof(q->remote_addr) - 1, q->remote_addr);
    snprintf(server_name, sizeof(server_name), "%.*s", (int)sizeof(q->server_name) - 1,
             q->server_name);
    struct access_log_entry e;
    memset(&e, 0, sizeof(e));
    e.remote_addr = remote;
    struct access_log_span line = logged_span(q, 0, q->line_len);
    e.request_line = line.p;
    e.request_line_len = line.len;
    for (int i = 0; i < f->num_request_headers; i++)
        e.request_headers[i] = logged_span(q, q->header_offset[i], q->header_len[i]);
    e.request_id = id;
    serow_access_log_id_as_request_header(f, &e, id_name, id_name_len);
    serow_access_log_own_response_headers(f, e.response_headers, id, id_name, id_name_len);
    e.server_name = server_name;
    e.server_port = q->server_port;
    e.pid = (int)atomic_load(&w->pid);
    e.keepalive_requests = q->keepalive_requests;
    e.status = 503;
    e.body_bytes = body;
    e.times = (struct access_log_times){q->arrived_ns, q->app_ns, 0, serow_request_clock_ns()};
    serow_access_log_write(log, &e);
}

int serow_answer_app_connection(struct shared_state *shared, uint32_t worker_index, int fd,
                                uint64_t since_ms, int32_t app_fd, const char *id_name,
                                size_t id_name_len, struct access_log *log)
{
    if (worker_index >= shared->max_workers) {
        close(fd);
        return -1;
    }
    struct worker_slot *w = &shared->workers[worker_index];
    /* The slot says what the worker did last; it is about the request taken
     * only if the app still ran that request when the worker died: between
     * the copy and the kill, the app may have returned, the worker finished
     * that response and begun another request (on this connection or on
     * another), whose slot fields then stand here.  Then the client of fd
     * may have had its whole response: no 503 on it, and the other
     * request's line is not this one's.  (The worker is dead: the slot no
     * longer changes.) */
    if (atomic_load(&w->app_since_ms) != since_ms || atomic_load(&w->app_fd) != app_fd) {
        close(fd); /* (the worker's copy is gone: this closes the connection) */
        return -1;
    }
    if (atomic_load(&w->app_answered)) {
        close(fd);
        return 0;
    }
    uint32_t id_len = atomic_load(&w->request_id_len);
    struct response_header id = {id_name, id_name_len, w->request_id,
                                 id_name_len && id_len < REQUEST_ID_MAX ? id_len : 0};
    struct serow_connection_state carried = w->app_carried;
    if (carried.transport >= SEROW_TRANSPORT_KINDS ||
        (carried.transport == SEROW_TRANSPORT_TLS &&
         carried.tls_phase != SEROW_TLS_PHASE_RECORDS)) {
        /* The worker died while it wrote the copy (request_timeout.c: the
         * copy of a TLS state is marked so while it is written), or the
         * slot makes no sense: a 503 from it could reuse a nonce.  The
         * connection is closed unanswered. */
        close(fd);
        return 0;
    }
    /* (TLS: the copy is the state after the last records the worker sealed,
     * taken before they were sent: request_timeout.c) */
    size_t body = serow_answer_and_shut(&carried, fd, 503,
                                        strncmp(w->current_request, "HEAD ", 5) == 0,
                                        id.value_len ? &id : NULL);
    close(fd);
    if (log)
        log_app_connection(log, w, body, (struct access_log_span){id.value_len ? id.value : NULL, id.value_len},
                           id_name, id_name_len);
    return 1;
}
