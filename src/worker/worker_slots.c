/*
 * worker_slots.c - how the connection holder sees this worker's connections:
 * one slot per connection in the shared state (shared_state.h), whose state
 * says who may touch it, and the flags the holder reads to decide where
 * connections should go (busy, free, the request being answered).
 *
 * A connection's slot is SLOT_IN_WORKER while the worker reads or serves it,
 * SLOT_IDLE while it is parked between requests (the holder, or a gathering
 * worker, may then take it: SLOT_STEALING, SLOT_STOLEN), and SLOT_FREE when
 * the worker no longer has it.  Every touch of a parked connection claims
 * its slot first, with a compare-and-swap against the holder's.
 *
 * Owns: the connection slots of this worker's slot (free list, owners,
 * counters).  What the worker itself is doing (busy, free, its current
 * request) is announced by worker_loop.c, which alone knows it.  It may not
 * close or forget connections (that is
 * worker_connections.c's, which calls serow_slot_release when one goes), nor
 * decide when one is parked (worker_parking.c).  With no holder (loop->slot
 * NULL) every function here does nothing: a connection is never stealable.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

int serow_slots_join(struct worker_loop *loop, struct shared_state *shared,
                     uint32_t worker_index, int wake_fd, int ready_channel,
                     int handback_channel)
{
    if (worker_index >= shared->max_workers)
        return -1;
    loop->slot_owner = calloc(SHARED_SLOTS_PER_WORKER, sizeof(*loop->slot_owner));
    loop->free_slots = malloc(SHARED_SLOTS_PER_WORKER * sizeof(*loop->free_slots));
    if (loop->slot_owner == NULL || loop->free_slots == NULL)
        return -1;
    /* lowest numbers on top: the holder scans up to the high-water mark */
    for (uint32_t i = 0; i < SHARED_SLOTS_PER_WORKER; i++)
        loop->free_slots[i] = SHARED_SLOTS_PER_WORKER - 1 - i;
    loop->free_slot_count = SHARED_SLOTS_PER_WORKER;
    loop->shared = shared;
    loop->slot = &shared->workers[worker_index];
    loop->ready_channel = ready_channel;
    loop->handback_channel = handback_channel;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = READY_CHANNEL_TAG};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, ready_channel, &ev) != 0)
        return -1;
    /* Without it, the copy of a connection the holder took from this worker
     * while it waited would stay open until the worker next woke up: the
     * holder could not close it.  The master rings it too, when it asks
     * something (shared_state.h, stop_requested): it made it for that. */
    loop->wake_fd = wake_fd >= 0 ? wake_fd : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wake = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
    if (loop->wake_fd < 0 || epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->wake_fd, &wake) != 0)
        return -1;
    atomic_store(&loop->slot->wake_fd, loop->wake_fd);
    atomic_store(&loop->slot->pid, (int32_t)getpid());
    loop->worker_index = worker_index;
    uint32_t used = atomic_load(&shared->worker_slots_used);
    while (used < worker_index + 1 &&
           !atomic_compare_exchange_weak(&shared->worker_slots_used, &used, worker_index + 1))
        ;
    return 0;
}

void serow_slot_assign(struct worker_loop *loop, struct connection *conn)
{
    if (loop->slot == NULL || loop->free_slot_count == 0)
        return; /* not stealable: it stays with this worker */
    uint32_t index = loop->free_slots[--loop->free_slot_count];
    struct connection_slot *s = &loop->slot->connections_table[index];
    s->fd = conn->fd;
    s->listener_index = (uint32_t)conn->listener_index;
    serow_connection_state_copy(&s->carried, &conn->carried);
    atomic_store(&s->state, SLOT_IN_WORKER);
    conn->slot = (int32_t)index;
    loop->slot_owner[index] = conn;
    if (index >= atomic_load(&loop->slot->slots_high_water))
        atomic_store(&loop->slot->slots_high_water, index + 1);
    atomic_fetch_add(&loop->slot->connections, 1);
}

void serow_slot_release(struct worker_loop *loop, struct connection *conn)
{
    if (conn->slot < 0)
        return;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    uint32_t state = atomic_load(&s->state);
    if (state == SLOT_IDLE)
        atomic_fetch_sub(&loop->slot->idle_connections, 1);
    atomic_store(&s->state, SLOT_FREE);
    loop->slot_owner[conn->slot] = NULL;
    loop->free_slots[loop->free_slot_count++] = (uint32_t)conn->slot;
    conn->slot = -1;
    /* a stolen one stopped counting when it was taken (serow_take_parked_connection) */
    if (state != SLOT_STOLEN)
        atomic_fetch_sub(&loop->slot->connections, 1);
}

/* Idle with nothing buffered since idle_since_ms: from now on the holder (or
 * a gathering worker) may take it. */
void serow_slot_park(struct worker_loop *loop, struct connection *conn, uint64_t idle_since_ms)
{
    if (conn->slot < 0)
        return;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    s->requests_served = (uint32_t)conn->requests_served;
    /* (with TLS, as it is after the last response: the taker goes on from it) */
    serow_connection_state_copy(&s->carried, &conn->carried);
    atomic_store(&s->idle_since_ms, idle_since_ms);
    atomic_fetch_add(&loop->slot->idle_connections, 1);
    atomic_store(&s->state, SLOT_IDLE);
}

/* Takes a parked connection back before touching it.  0 when the holder got
 * there first: the connection is no longer ours to read. */
int serow_slot_claim(struct worker_loop *loop, struct connection *conn)
{
    if (conn->slot < 0)
        return 1;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    uint32_t expected = SLOT_IDLE;
    while (!atomic_compare_exchange_strong(&s->state, &expected, SLOT_IN_WORKER)) {
        if (expected == SLOT_IN_WORKER)
            return 1; /* it was never parked */
        if (expected != SLOT_STEALING)
            break;
        /* The holder is copying the descriptor (one system call): whether
         * it gets it is not known yet.  If pidfd_getfd fails, the slot goes
         * back to SLOT_IDLE and the connection is still ours: giving it up
         * now would leave its request unread by anyone. */
        sched_yield();
        expected = SLOT_IDLE;
    }
    if (expected == SLOT_IDLE) {
        atomic_fetch_sub(&loop->slot->idle_connections, 1);
        return 1;
    }
    /* Stolen (or being stolen): stop watching it; the ring tells us when our
     * copy may be closed (serow_drop_stolen_connections). */
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    serow_timer_remove(loop, conn);
    serow_ready_remove(loop, conn);
    conn->state = CONNECTION_GONE;
    return 0;
}

/* A parked connection claimed for a read that found nothing: an event that
 * was not its own (epoll keeps a closed connection's entry while another
 * process holds a copy, and reports it under the number a new connection now
 * has; or a batch of events was older than the connection).  Left claimed,
 * it could never be taken again (handed to the holder after idle_handoff, or
 * gathered): it goes back to being parked, idle since when it was. */
void serow_park_again_if_nothing_came(struct worker_loop *loop, struct connection *conn)
{
    if (conn->slot < 0 || conn->state != CONNECTION_IDLE || conn->buffer_len > 0)
        return;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    if (atomic_load(&s->state) != SLOT_IN_WORKER)
        return; /* parked already (stray empty lines) */
    serow_connection_release_buffer(conn); /* (the read made one) */
    serow_slot_park(loop, conn, atomic_load(&s->idle_since_ms));
}
