/*
 * deadline_list.h - deadlines kept in order in a doubly linked list, for
 * timers that many connections share (websocket_holds.c's idle pings, their
 * answers' timeouts, the app's keep-alives).
 *
 * Why a list and not a walk over every connection when the earliest is
 * due: 10,000 idle WebSockets pinged every 30 s would make that walk, over
 * all of them, every few milliseconds.  A list whose deadlines are all set
 * as "now plus one same delay" is in order by construction: a new deadline
 * goes at the tail, and the due ones are taken from the head, so the
 * holder's work is O(1) per deadline set and per deadline reached, and
 * nothing per connection that is not due.  A deadline set earlier than the
 * tail's (delays that differ: an app's keep-alives) is put in order from
 * the tail, which costs as many steps as deadlines it passes.
 *
 * An entry lives inside its owner's struct (container_of style); at_ms 0
 * means not in a list.
 */
#ifndef SEROW_DEADLINE_LIST_H
#define SEROW_DEADLINE_LIST_H

#include <stddef.h>
#include <stdint.h>

struct serow_deadline {
    struct serow_deadline *prev, *next;
    uint64_t at_ms; /* 0: in no list */
};

struct serow_deadline_list {
    struct serow_deadline *head, *tail;
};

static inline void serow_deadline_unset(struct serow_deadline_list *l, struct serow_deadline *d)
{
    if (d->at_ms == 0)
        return;
    if (d->prev)
        d->prev->next = d->next;
    else
        l->head = d->next;
    if (d->next)
        d->next->prev = d->prev;
    else
        l->tail = d->prev;
    d->prev = d->next = NULL;
    d->at_ms = 0;
}

/* (Re)sets d to at_ms (> 0) in l; d must be in l or in no list. */
static inline void serow_deadline_set(struct serow_deadline_list *l, struct serow_deadline *d, uint64_t at_ms)
{
    serow_deadline_unset(l, d);
    struct serow_deadline *after = l->tail;
    while (after && after->at_ms > at_ms)
        after = after->prev;
    d->at_ms = at_ms ? at_ms : 1;
    d->prev = after;
    d->next = after ? after->next : l->head;
    if (d->next)
        d->next->prev = d;
    else
        l->tail = d;
    if (after)
        after->next = d;
    else
        l->head = d;
}

/* The first deadline reached by now_ms, taken out of l; NULL: none. */
static inline struct serow_deadline *serow_deadline_due(struct serow_deadline_list *l, uint64_t now_ms)
{
    struct serow_deadline *d = l->head;
    if (d == NULL || d->at_ms > now_ms)
        return NULL;
    serow_deadline_unset(l, d);
    return d;
}

/* The ms until l's first deadline, combined with next (-1: none) as the
 * smaller of the two (a day at most: an int, and the loop looks again). */
static inline int serow_deadline_next(const struct serow_deadline_list *l, uint64_t now_ms, int next)
{
    if (l->head == NULL)
        return next;
    uint64_t wait = l->head->at_ms > now_ms ? l->head->at_ms - now_ms : 0;
    int in = wait > 86400000u ? 86400000 : (int)wait;
    return next < 0 || in < next ? in : next;
}

#endif
