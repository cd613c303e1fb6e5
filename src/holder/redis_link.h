/*
 * redis_link.h - the holder's link to Redis (--publish-redis, docs/holding.md):
 * every Serow sharing a Redis publishes there and receives every publish
 * from there, its own included, so there is one path for delivery.
 *
 * Two connections, through hiredis: one subscribed (PSUBSCRIBE PREFIX:*),
 * which Redis allows nothing else on, and one that sends PUBLISH
 * PREFIX:CHANNEL with the encoded publish message (holder_message.h) as the
 * payload.  Both non-blocking, driven by the caller's loop (the holder's
 * epoll): it watches each side's descriptor, calls serow_redis_link_handle
 * when one is ready and serow_redis_link_tick when serow_redis_link_due
 * says, and gets each message received through a callback.
 *
 * When Redis goes away (or answers what it should not) both sides are closed
 * and opened again after a wait that doubles from 100 ms up to 5 s.  Redis
 * keeps nothing for a subscriber that is away: each time the subscription is
 * lost is a gap (counted; the channel store's replay then covers less), and a
 * publish while the publishing side is down is lost (counted, refused).
 * Every error is logged once per change of state, not once per attempt.
 */
#ifndef SEROW_REDIS_LINK_H
#define SEROW_REDIS_LINK_H

#include <stddef.h>
#include <stdint.h>

#define SEROW_REDIS_MAX_PREFIX 64
/* Bytes waiting to go to Redis past which a publish is refused (lost):
 * Redis that does not read must not grow the holder without bound. */
#define SEROW_REDIS_MAX_PENDING (8u << 20)

enum serow_redis_side { SEROW_REDIS_SUB = 0, SEROW_REDIS_PUB = 1 };

struct serow_redis_stats {
    uint64_t received;      /* publish messages received and given to the callback */
    uint64_t rejected;      /* payloads that were not a valid publish message for their channel */
    uint64_t published;     /* PUBLISH commands sent */
    uint64_t lost;          /* publishes refused: the link not ready or too far behind, or Redis refused it */
    uint64_t gaps;          /* subscriptions lost (Redis gone): what was published then never came */
    uint64_t reconnects;    /* both sides connected again after a loss */
};

struct serow_redis_link;

/* Whether a prefix may name a link's channels: a channel name's bytes
 * (grip_instruct.h), less those of a pattern (* ? [ ]), which would make
 * PSUBSCRIBE PREFIX:* match other channels; at most SEROW_REDIS_MAX_PREFIX. */
int serow_redis_prefix_ok(const char *prefix, size_t len);

/* Called with each valid publish message received: the whole message (frame
 * head and body, serow_holder_frame's), valid only during the call. */
typedef void (*serow_redis_on_publish)(void *ctx, const char *message, size_t len);
/* Called when Redis answers a PUBLISH with an error (an ACL that refuses the
 * channel): it will never come back through the subscription.  nth: the
 * PUBLISH's place among those sent since the link was last ready (1: the
 * first), since the answers come in that order. */
typedef void (*serow_redis_on_refused)(void *ctx, uint64_t nth);

/* A link to host:port whose channels are "PREFIX:NAME"; connecting starts at
 * once (now_ms is the caller's monotonic clock).  NULL on a bad argument
 * (prefix longer than SEROW_REDIS_MAX_PREFIX or with a byte a channel name
 * may not have) or no memory. */
struct serow_redis_link *serow_redis_link_open(const char *host, int port, const char *prefix,
                                               serow_redis_on_publish on_publish, void *ctx,
                                               uint64_t now_ms);
void serow_redis_link_close(struct serow_redis_link *link);
/* Whom to tell of a refused PUBLISH (none by default: only counted). */
void serow_redis_link_on_refused(struct serow_redis_link *link, serow_redis_on_refused on_refused);

/* A side's descriptor (-1 while it has none: waiting to reconnect), and
 * whether the loop should wait for it to be writable (connecting, or bytes
 * pending) besides readable.  Both change after every call below: the loop
 * asks again (the descriptor may be new). */
int serow_redis_link_fd(const struct serow_redis_link *link, enum serow_redis_side side);
int serow_redis_link_wants_write(const struct serow_redis_link *link, enum serow_redis_side side);

/* A side's descriptor is ready: finishes connecting, writes what is
 * pending, reads and handles every whole reply. */
void serow_redis_link_handle(struct serow_redis_link *link, enum serow_redis_side side, uint64_t now_ms);

/* When the loop must call serow_redis_link_tick (a reconnect due), or 0
 * when nothing is. */
uint64_t serow_redis_link_due(const struct serow_redis_link *link);
void serow_redis_link_tick(struct serow_redis_link *link, uint64_t now_ms);

/* Whether both sides are up and the subscription confirmed. */
int serow_redis_link_ready(const struct serow_redis_link *link);

/* PUBLISH PREFIX:channel message.  0 when sent or queued, -1 when lost
 * (counted): the link is not ready (a publish sent before the subscription
 * is confirmed might never come back to this host), or too far behind. */
int serow_redis_link_publish(struct serow_redis_link *link, const char *channel, size_t channel_len,
                             const char *message, size_t len);

const struct serow_redis_stats *serow_redis_link_stats(const struct serow_redis_link *link);

#endif
