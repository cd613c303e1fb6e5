/*
 * worker_parking.c - where a connection waits between two requests, and how
 * it leaves this worker without being closed.
 *
 * Idle with nothing buffered, a connection is parked: it waits in the
 * worker's epoll under the keep-alive timeout, and its slot says the holder
 * may take it (to give it to a free worker when this one is stuck in a long
 * request).  A stopping worker hands its idle connections back to the holder
 * instead, which keeps them for the workers that stay; and a connection the
 * holder or another worker took is dropped here once the taker says so.
 *
 * Owns: the decision park / hand back / wait out the stop grace, and the
 * hand-back channel.  The slot states are worker_slots.c's; forgetting and
 * closing are worker_connections.c's.  It may not read connections.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include "connection/fd_passing.h"

/* Gives connections (idle, nothing buffered, claimed) to the holder, which
 * keeps them for the workers that stay: a restart or recycling closes no
 * kept-alive connection.  Without a holder they are closed. */
static void hand_back_connections(struct worker_loop *loop, struct connection **conns, size_t n)
{
    int fds[FD_PASSING_BATCH];
    struct passed_connection info[FD_PASSING_BATCH];
    for (size_t i = 0; i < n; i++) {
        fds[i] = conns[i]->fd;
        info[i].requests_served = (uint32_t)conns[i]->requests_served;
        info[i].listener_index = (uint32_t)conns[i]->listener_index;
        info[i].carried = conns[i]->carried;
        info[i].idle_since_ms = serow_shared_clock_ms();
        info[i].peer.len = 0; /* (the client's own socket: getpeername says) */
    }
    /* When the whole server stops, the holder would only close them too. */
    int sent = n > 0 && loop->handback_channel >= 0 &&
               !atomic_load(&loop->shared->server_stopping) &&
               serow_send_connections(loop->handback_channel, fds, info, n) == 0;
    for (size_t i = 0; i < n; i++) {
        if (sent)
            serow_forget_connection(loop, conns[i]);
        else
            serow_close_connection(loop, conns[i]);
    }
}

/* Between two requests with nothing buffered: the connection waits for its
 * next request parked (the holder may take it), or goes to the holder at once
 * if this worker is stopping, or, when the whole server stops, waits here for
 * STOP_GRACE_SECONDS: its response promised keep-alive, so the next request
 * may be on its way already (it is answered with Connection: close). */
void serow_park_idle_connection(struct worker_loop *loop, struct connection *conn)
{
    if (serow_transport_buffered(&conn->carried, conn->fd)) {
        /* TLS: the next request's bytes are opened already, where epoll
         * cannot see them (a record longer than a read's room): not idle */
        conn->state = CONNECTION_READING_HEAD;
        serow_timer_append(loop, conn, TIMER_READING_HEAD,
                           serow_now_seconds() + loop->settings.header_timeout);
        serow_read_connection(loop, conn);
        return;
    }
    serow_connection_release_buffer(conn);
    if (loop->whole_server_stopping) {
        conn->state = CONNECTION_IDLE;
        serow_timer_append(loop, conn, TIMER_IDLE, serow_now_seconds() + STOP_GRACE_SECONDS);
        return;
    }
    if (loop->stopping) {
        hand_back_connections(loop, &conn, 1);
        return;
    }
    conn->state = CONNECTION_IDLE;
    serow_timer_append(loop, conn, TIMER_IDLE,
                       serow_now_seconds() + loop->settings.keepalive_timeout);
    serow_slot_park(loop, conn, serow_shared_clock_ms());
}

/* A worker that stops: every parked connection goes to the holder, in
 * batches of what one message can pass. */
void serow_hand_back_idle_connections(struct worker_loop *loop)
{
    struct connection *conn;
    while ((conn = loop->timers[TIMER_IDLE].first)) {
        struct connection *batch[FD_PASSING_BATCH];
        size_t n = 0;
        struct connection *next;
        for (; conn && n < FD_PASSING_BATCH; conn = next) {
            next = conn->timer_link.next;
            serow_timer_remove(loop, conn);
            if (serow_slot_claim(loop, conn))
                batch[n++] = conn; /* else the holder has it already */
        }
        hand_back_connections(loop, batch, n);
    }
}

/* The ring of stolen ones has entries (serow_drop_stolen_connections): the
 * taker writes their slots there. */
void serow_drop_stolen_connections_in_ring(struct worker_loop *loop)
{
    uint32_t tail = atomic_load(&loop->slot->stolen_tail);
    uint32_t head = atomic_load(&loop->slot->stolen_head);
    while (tail != head) {
        _Atomic uint32_t *entry = &loop->slot->stolen[tail % SHARED_STOLEN_RING];
        uint32_t written = atomic_load(entry);
        if (written == 0)
            break; /* reserved, not written yet: read it next time */
        atomic_store(entry, 0);
        tail++;
        uint32_t index = written - 1;
        struct connection *conn = index < SHARED_SLOTS_PER_WORKER ? loop->slot_owner[index] : NULL;
        if (conn == NULL || conn->slot != (int32_t)index ||
            atomic_load(&loop->slot->connections_table[index].state) != SLOT_STOLEN)
            continue;
        serow_forget_connection(loop, conn);
    }
    atomic_store(&loop->slot->stolen_tail, tail);
}
