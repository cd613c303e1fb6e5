/*
 * worker_timers.c - the worker's timeouts: what each deadline means when it
 * passes, when the loop must next wake up for one, and capping them when the
 * whole server stops.
 *
 * A connection is on at most one timer list (worker_internal.h has the lists
 * and their inline append and remove, which every request passes through):
 * reading a head (--header-timeout), reading a body ahead of serving
 * (--read-timeout), idle between requests (--keep-alive-timeout), or
 * lingering after a close.  Every list has one timeout for all its members,
 * so each stays in deadline order and only its first members are looked at.
 *
 * Owns: expiry.  A new timeout belongs here (a list in enum
 * timer_list_kind, its expiry below).  It calls down into the intake (read
 * before expiring, reject with 408), the slots (claim before touching a
 * parked connection) and the connection table (close); nothing calls into it
 * but the loop.  The body read while serving keeps its own time
 * (worker_request_body.c): the worker waits in that one connection then.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

/*
 * The header and keep-alive timeouts are the client's time, but a worker busy
 * with a request reads nobody meanwhile.  So before a connection is expired,
 * all it has sent is read (up to EAGAIN: a short read does not say that
 * nothing more is there): a head that arrived complete in time is served,
 * not answered 408, and a request sent on an idle connection is not dropped,
 * just because the worker got to them late.
 */
void serow_expire_timers(struct worker_loop *loop, double now)
{
    struct connection *conn;
    while ((conn = loop->timers[TIMER_READING_HEAD].first) && conn->deadline <= now) {
        if (!conn->in_ready_queue && serow_read_all_sent(loop, conn) < 0)
            continue; /* the client has gone */
        if (conn->state == CONNECTION_LINGERING)
            continue; /* what arrived was answered with an error */
        if (conn->in_ready_queue) {
            /* served next; the timer only matters if its head turns out to be
             * empty lines, and appending keeps the list in deadline order */
            serow_timer_append(loop, conn, TIMER_READING_HEAD, now + loop->settings.header_timeout);
        } else if (conn->buffer_len == 0) {
            serow_close_connection(loop, conn); /* nothing sent: nothing to answer */
        } else {
            serow_reject_timed_out(loop, conn);
        }
    }
    while ((conn = loop->timers[TIMER_READING_BODY].first) && conn->deadline <= now) {
        if (serow_read_all_sent(loop, conn) < 0 || conn->in_ready_queue || conn->deadline > now)
            continue; /* gone, or its body (or more of it) came in time */
        serow_reject_timed_out(loop, conn);
    }
    while ((conn = loop->timers[TIMER_IDLE].first) && conn->deadline <= now) {
        if (!serow_slot_claim(loop, conn))
            continue; /* the holder has it, and keeps its own time */
        if (serow_read_all_sent(loop, conn) < 0)
            continue;
        if (conn->state == CONNECTION_IDLE)
            serow_close_connection(loop, conn); /* still nothing: now it is idle too long */
    }
    while ((conn = loop->timers[TIMER_LINGERING].first) && conn->deadline <= now)
        serow_close_connection(loop, conn);
}

/* How long the loop may wait for events: until the earliest deadline, or
 * -1 (for ever) when no connection has one. */
int serow_next_timeout_ms(struct worker_loop *loop, double now)
{
    double earliest = -1;
    for (int k = 0; k < TIMER_LIST_COUNT; k++) {
        struct connection *first = loop->timers[k].first;
        if (first && (earliest < 0 || first->deadline < earliest))
            earliest = first->deadline;
    }
    if (earliest < 0)
        return -1;
    double ms = (earliest - now) * 1000.0 + 10.0; /* coarse clock: do not wake early */
    return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

/* Caps the deadlines of a timer list: min() keeps the list in order. */
void serow_cap_deadlines(struct worker_loop *loop, enum timer_list_kind kind, double deadline)
{
    for (struct connection *conn = loop->timers[kind].first; conn; conn = conn->timer_link.next)
        if (conn->deadline > deadline)
            conn->deadline = deadline;
}
