/*
 * connection_transfer.c - taking parked connections out of workers.
 *
 * Owns: the handles on other workers (pidfd, their eventfd) and the claim
 * of a parked connection's slot before pidfd_getfd takes its descriptor.
 * Used by the holder and by gathering; what a slot means is shared_state.h's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "connection_transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

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
    info->idle_since_ms = atomic_load(&s->idle_since_ms);
    atomic_fetch_sub(&w->idle_connections, 1);
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
