/*
 * worker_connections.c - the worker's table of connections, indexed by
 * descriptor: how a connection starts being watched, and the ways it stops
 * being this worker's (forgotten when it lives on elsewhere, closed, or
 * closed after lingering so that the client reads our last response).
 *
 * Owns: loop->connections, num_connections, the server-wide count of open
 * connections, and the connection's epoll entry.  It may not decide when a
 * connection goes (its callers do); it gives up the connection's slot
 * (worker_slots.c) and timers, so that nothing points at a freed one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* A closing connection whose client still sends is drained this long, and at
 * most this much, so that the client reads our response instead of a reset. */
#define LINGER_SECONDS 2.0
#define LINGER_MAX_BYTES (1024 * 1024)

int serow_track_connection(struct worker_loop *loop, struct connection *conn)
{
    if (conn->fd >= loop->connections_size) {
        int size = loop->connections_size ? loop->connections_size : 256;
        while (size <= conn->fd)
            size *= 2;
        struct connection **grown = realloc(loop->connections, sizeof(*grown) * (size_t)size);
        if (grown == NULL)
            return -1;
        memset(grown + loop->connections_size, 0,
               sizeof(*grown) * (size_t)(size - loop->connections_size));
        loop->connections = grown;
        loop->connections_size = size;
    }
    struct epoll_event ev = {.events = SEROW_CONNECTION_EVENTS, .data.u64 = (uint64_t)conn->fd};
    /* EEXIST: an entry for this very socket under this number is left (epoll
     * forgets one only with the socket's last copy; serow_forget_connection
     * removes its own, but a copy inherited across a fork may not be): set it
     * anew rather than drop a connection that comes back. */
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, conn->fd, &ev) != 0 &&
        (errno != EEXIST || epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, conn->fd, &ev) != 0))
        return -1;
    loop->connections[conn->fd] = conn;
    loop->num_connections++;
    return 0;
}

/* Our copy goes away; the connection itself may live on elsewhere. */
void serow_forget_connection(struct worker_loop *loop, struct connection *conn)
{
    serow_timer_remove(loop, conn);
    serow_ready_remove(loop, conn);
    if (loop->turn_over == conn)
        loop->turn_over = NULL;
    serow_serving_forget_connection(loop, conn);
    serow_slot_release(loop, conn);
    /* close() removes a descriptor from epoll only with the last copy of its
     * socket, and other copies are common: the app's psgix.io handle, a
     * connection taken away whose old owner has not closed its copy yet.
     * Left in, the entry reports that socket's events under this number,
     * which the next connection here gets: a worker would spin on a socket
     * the app keeps with unread input. */
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    serow_transport_forget(&conn->carried, conn->fd);
    close(conn->fd);
    loop->connections[conn->fd] = NULL;
    loop->num_connections--;
    serow_connection_free(conn);
}

/* The end of a client connection. */
void serow_close_connection(struct worker_loop *loop, struct connection *conn)
{
    /* TLS: close_notify, so that the client can tell the end from a cut
     * (nothing is sent twice: after a lingering close's it is a no-op) */
    if (!SEROW_TRANSPORT_IS_PLAIN(&conn->carried))
        serow_transport_shutdown(&conn->carried, conn->fd);
    if (loop->shared)
        atomic_fetch_sub(&loop->shared->open_connections, 1);
    serow_transport_closed(&conn->carried);
    serow_forget_connection(loop, conn);
}

/* Stop sending, then discard what the client still sends for a while: closing
 * with unread input makes the kernel send a reset, which can destroy the
 * response before the client reads it. */
void serow_close_lingering(struct worker_loop *loop, struct connection *conn)
{
    serow_ready_remove(loop, conn);
    serow_serving_forget_connection(loop, conn);
    serow_transport_shutdown(&conn->carried, conn->fd);
    conn->state = CONNECTION_LINGERING;
    conn->buffer_len = 0;
    conn->requests_served = 0; /* reused as the count of bytes discarded */
    serow_timer_append(loop, conn, TIMER_LINGERING, serow_now_seconds() + LINGER_SECONDS);
}

/* A lingering connection has input: discard it, and close once the client
 * is done or has sent too much. */
void serow_drain_lingering(struct worker_loop *loop, struct connection *conn)
{
    char discard[16384];
    for (;;) {
        ssize_t n = serow_transport_recv(&conn->carried, conn->fd, discard, sizeof(discard), 0);
        if (n > 0) {
            conn->requests_served += (unsigned long)n;
            if (conn->requests_served > LINGER_MAX_BYTES) {
                serow_close_connection(loop, conn);
                return;
            }
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return;
        serow_close_connection(loop, conn);
        return;
    }
}
