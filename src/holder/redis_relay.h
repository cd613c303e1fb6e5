/*
 * redis_relay.h - publishing through Redis in the holder (--publish-redis,
 * docs/holding.md): the holder's link to Redis (redis_link.h) in its epoll
 * loop, and the one rule for where a publish goes.
 *
 * While the link is ready, a publish from a worker goes to Redis only, and
 * is delivered here (serow_grip_holds_publish) when it comes back through
 * the subscription, as every other host's are: one path for delivery, so
 * every host's channel store keeps the same items.  While it is not, a
 * publish is delivered here at once (local subscribers lose nothing) and
 * counted as lost, not shared.  A publish sent and not yet back when the
 * link is lost, or refused by Redis, is delivered here then: each item is
 * delivered once here, whatever happens to the link.
 */
#ifndef SEROW_REDIS_RELAY_H
#define SEROW_REDIS_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "holder/grip_holds.h"
#include "shared/shared_state.h"

/* epoll tag of the link's descriptors: this bit and the side (redis_link.h). */
#define SEROW_REDIS_TAG (1ULL << 47)

struct serow_redis_relay;

/* The link to host:port with channels "PREFIX:NAME", its descriptors in
 * epoll_fd, what it receives delivered to grip; connecting starts at once.
 * NULL on a bad argument (redis_link.h) or no memory. */
struct serow_redis_relay *serow_redis_relay_new(struct shared_state *shared, int epoll_fd,
                                                struct serow_grip_holds *grip, const char *host,
                                                int port, const char *prefix, uint64_t now_ms);
/* A publish message from a worker (a whole frame). */
void serow_redis_relay_publish(struct serow_redis_relay *r, const char *message, size_t len);
/* epoll said something of a descriptor tagged SEROW_REDIS_TAG | side. */
void serow_redis_relay_event(struct serow_redis_relay *r, int side, uint64_t now_ms);
/* A reconnect due by now_ms is made; the ms until the next (-1: none). */
int serow_redis_relay_timers(struct serow_redis_relay *r, uint64_t now_ms);
/* The link closed; a publish still in flight is delivered here first (the
 * holds it reaches must still be open). */
void serow_redis_relay_free(struct serow_redis_relay *r);

#endif
