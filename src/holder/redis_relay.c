/*
 * redis_relay.c - publishing through Redis in the holder (redis_relay.h).
 *
 * Owns: the holder's link to Redis (its descriptors in the holder's epoll,
 * its counters in the shared memory) and the publishes sent to Redis and
 * not yet back.  Knows nothing of held connections: what is to be delivered
 * here goes to serow_grip_holds_publish, as a worker's publish does without
 * Redis.
 *
 * Which received message is this host's own: Redis delivers the publishes
 * of one connection to a subscriber in the order it executed them, so this
 * host's own come back in the order sent, and the oldest one not back is
 * compared with each message received (its bytes).  One from another host
 * with the same bytes (same channel, same content) may be taken for it; each
 * is still delivered once, unless the link is lost between the two.
 */
#include "holder/redis_relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "holder/redis_link.h"
#include "log/log.h"
#include "shared/holder_message.h"

/* A publish sent to Redis, not yet back through the subscription. */
struct in_flight {
    struct in_flight *next;
    uint64_t nth;       /* its place among those sent since the link was ready (1: first) */
    size_t len;
    char message[];
};

struct serow_redis_relay {
    struct shared_state *shared;
    int epoll_fd;
    struct serow_grip_holds *grip;
    struct serow_redis_link *link;
    char *where;                /* "redis HOST:PORT", for the log */
    int watched_fd[2];          /* what epoll has of each side; -1: nothing */
    uint32_t watched_events[2];
    int ready;                  /* the link was ready after the last call into it */
    int local_logged;           /* "delivered here only" said since the last change */
    uint64_t sent;              /* publishes sent since the link was ready */
    struct in_flight *oldest, *newest;
    size_t in_flight_bytes;
    uint64_t lost_here;         /* not sent: too many bytes in flight */
};

static void deliver_here(struct serow_redis_relay *r, const char *message, size_t len)
{
    serow_grip_holds_publish(r->grip, message, len);
}

/* A message from the subscription: this host's oldest in flight is back, or
 * another host's; delivered here either way. */
static void received(void *ctx, const char *message, size_t len)
{
    struct serow_redis_relay *r = ctx;
    struct in_flight *f = r->oldest;
    if (f != NULL && f->len == len && memcmp(f->message, message, len) == 0) {
        r->oldest = f->next;
        if (r->oldest == NULL)
            r->newest = NULL;
        r->in_flight_bytes -= f->len;
        free(f);
    }
    deliver_here(r, message, len);
}

/* Redis refused the nth publish: it will not come back, so it is delivered
 * here now (the link counted it as lost). */
static void refused(void *ctx, uint64_t nth)
{
    struct serow_redis_relay *r = ctx;
    struct in_flight **at = &r->oldest, *prev = NULL;
    while (*at != NULL && (*at)->nth != nth) {
        prev = *at;
        at = &(*at)->next;
    }
    struct in_flight *f = *at;
    if (f == NULL)
        return;
    *at = f->next;
    if (r->newest == f)
        r->newest = prev;
    r->in_flight_bytes -= f->len;
    deliver_here(r, f->message, f->len);
    free(f);
}

/* The link was lost with publishes in flight: whether Redis passed them on
 * to the other hosts cannot be known, but they will not come back here, so
 * they are delivered here now, in order. */
static size_t deliver_in_flight(struct serow_redis_relay *r)
{
    size_t n = 0;
    while (r->oldest != NULL) {
        struct in_flight *f = r->oldest;
        r->oldest = f->next;
        deliver_here(r, f->message, f->len);
        free(f);
        n++;
    }
    r->newest = NULL;
    r->in_flight_bytes = 0;
    return n;
}

/* epoll is told of each side's descriptor as the link has it now: a side
 * closed and opened again has a new descriptor (perhaps the same number:
 * closing it took the old one out of epoll), and asks for writing while it
 * connects or has bytes pending. */
static void watch(struct serow_redis_relay *r)
{
    for (int side = 0; side < 2; side++) {
        int fd = serow_redis_link_fd(r->link, (enum serow_redis_side)side);
        uint32_t events = EPOLLIN | (serow_redis_link_wants_write(r->link, (enum serow_redis_side)side)
                                     ? EPOLLOUT : 0);
        if (fd < 0) {
            r->watched_fd[side] = -1; /* (closed, so no longer in epoll) */
            continue;
        }
        if (fd == r->watched_fd[side] && events == r->watched_events[side])
            continue;
        struct epoll_event ev = {.events = events, .data.u64 = SEROW_REDIS_TAG | (uint64_t)side};
        int op = fd == r->watched_fd[side] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
        if (epoll_ctl(r->epoll_fd, op, fd, &ev) != 0
            && epoll_ctl(r->epoll_fd, op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0) {
            serow_log_error("%s: cannot watch its connection: %s", r->where, strerror(errno));
            continue;
        }
        r->watched_fd[side] = fd;
        r->watched_events[side] = events;
    }
}

static void count(struct serow_redis_relay *r)
{
    const struct serow_redis_stats *s = serow_redis_link_stats(r->link);
    struct shared_redis_counts *c = &r->shared->redis;
    atomic_store(&c->up, (uint32_t)r->ready);
    atomic_store(&c->received, s->received);
    atomic_store(&c->rejected, s->rejected);
    atomic_store(&c->published, s->published);
    atomic_store(&c->lost, s->lost + r->lost_here);
    atomic_store(&c->gaps, s->gaps);
    atomic_store(&c->reconnects, s->reconnects);
}

/* After every call into the link: its change of state acted on (once), its
 * descriptors watched, its counters shown. */
static void after_link(struct serow_redis_relay *r)
{
    int ready = serow_redis_link_ready(r->link);
    if (ready != r->ready) {
        r->ready = ready;
        r->local_logged = 0;
        if (ready) {
            r->sent = 0;
            serow_log_info("%s: subscribed: publishing through Redis", r->where);
        } else {
            size_t n = deliver_in_flight(r);
            serow_log_warn("%s: the link is lost: %zu publish(es) sent and not back delivered on "
                           "this host; until it is back, publishes are delivered on this host only "
                           "(counted as lost)", r->where, n);
            r->local_logged = 1;
        }
    }
    watch(r);
    count(r);
}

struct serow_redis_relay *serow_redis_relay_new(struct shared_state *shared, int epoll_fd,
                                                struct serow_grip_holds *grip, const char *host,
                                                int port, const char *prefix, uint64_t now_ms)
{
    struct serow_redis_relay *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    size_t where = strlen(host) + 32;
    r->where = malloc(where);
    if (r->where == NULL) {
        free(r);
        return NULL;
    }
    snprintf(r->where, where, "redis %s:%d", host, port);
    r->shared = shared;
    r->epoll_fd = epoll_fd;
    r->grip = grip;
    r->watched_fd[0] = r->watched_fd[1] = -1;
    r->link = serow_redis_link_open(host, port, prefix, received, r, now_ms);
    if (r->link == NULL) {
        free(r->where);
        free(r);
        return NULL;
    }
    serow_redis_link_on_refused(r->link, refused);
    atomic_store(&shared->redis.configured, 1);
    after_link(r);
    return r;
}

void serow_redis_relay_publish(struct serow_redis_relay *r, const char *message, size_t len)
{
    enum serow_holder_message_type type;
    const char *body, *error;
    size_t body_len;
    struct serow_publish_item item;
    if (serow_holder_frame(message, len, &type, &body, &body_len) != (long)len || type != SEROW_HOLDER_PUBLISH
        || serow_publish_decode(body, body_len, &item, &error) != 0) {
        deliver_here(r, message, len); /* (the store refuses it, and logs why) */
        return;
    }
    struct in_flight *f = NULL;
    if (!r->ready) {
        /* refused, and counted as lost, by the link */
        (void)serow_redis_link_publish(r->link, item.channel.p, item.channel.len, message, len);
    } else if (r->in_flight_bytes + len > SEROW_REDIS_MAX_PENDING || (f = malloc(sizeof(*f) + len)) == NULL) {
        r->lost_here++; /* Redis is too far behind: shared with nobody */
    } else if (serow_redis_link_publish(r->link, item.channel.p, item.channel.len, message, len) == 0) {
        f->next = NULL;
        f->nth = ++r->sent;
        f->len = len;
        memcpy(f->message, message, len);
        if (r->newest)
            r->newest->next = f;
        else
            r->oldest = f;
        r->newest = f;
        r->in_flight_bytes += len;
        if (r->local_logged) { /* (it was too far behind) */
            serow_log_info("%s: caught up: publishing through Redis again", r->where);
            r->local_logged = 0;
        }
        after_link(r);
        return;
    }
    free(f);
    if (!r->local_logged) {
        serow_log_warn("%s: %s: publishes are delivered on this host only (counted as lost) until "
                       "it is", r->where, r->ready ? "too far behind" : "not ready");
        r->local_logged = 1;
    }
    deliver_here(r, message, len);
    after_link(r);
}

void serow_redis_relay_event(struct serow_redis_relay *r, int side, uint64_t now_ms)
{
    serow_redis_link_handle(r->link, side ? SEROW_REDIS_PUB : SEROW_REDIS_SUB, now_ms);
    after_link(r);
}

int serow_redis_relay_timers(struct serow_redis_relay *r, uint64_t now_ms)
{
    uint64_t due = serow_redis_link_due(r->link);
    if (due == 0)
        return -1;
    if (now_ms < due)
        return (int)(due - now_ms);
    serow_redis_link_tick(r->link, now_ms);
    after_link(r);
    due = serow_redis_link_due(r->link);
    return due == 0 ? -1 : due > now_ms ? (int)(due - now_ms) : 0;
}

void serow_redis_relay_free(struct serow_redis_relay *r)
{
    if (r == NULL)
        return;
    /* The holder stops (its held connections are ended after this): what a
     * last request published is on its way through Redis and will not come
     * back before the link closes, so it is delivered here now, as when the
     * link is lost. */
    deliver_in_flight(r);
    serow_redis_link_close(r->link);
    atomic_store(&r->shared->redis.up, 0);
    free(r->where);
    free(r);
}
