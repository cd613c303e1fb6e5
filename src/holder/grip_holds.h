/*
 * grip_holds.h - the connections the holder holds for a GRIP stream or long
 * poll (docs/holding.md): each subscribed in the channel store
 * (channel_store.h), written to as items are published, answered at its
 * timeout, kept alive while quiet, closed when its client goes or stops
 * reading.  The holder's loop (connection_holder.c) owns the epoll and the
 * clock and calls in here; this file owns every held connection's state.
 */
#ifndef SEROW_GRIP_HOLDS_H
#define SEROW_GRIP_HOLDS_H

#include <stddef.h>
#include <stdint.h>

#include "connection/fd_passing.h"
#include "log/access_log.h"
#include "shared/holding_channel.h"
#include "shared/shared_state.h"

/* epoll tag of a held connection: this bit and its descriptor. */
#define SEROW_GRIP_TAG (1ULL << 48)

struct serow_grip_settings {
    size_t max_pending;     /* --hold-max-pending: bytes queued for one client */
    uint32_t max_held;      /* --max-held-connections; 0: no limit */
    uint32_t items_per_channel; /* 0: the store's default */
    uint32_t max_channels;  /* --hold-max-channels: subscriptions per connection */
    uint32_t max_item;      /* --publish-max-item (serow_publish_item_bytes) */
    struct access_log *access_log; /* a line when a hold ends; NULL: none */
};

/* A response hold answered on a connection that stays open: it becomes an
 * ordinary idle keep-alive connection of the holder's. */
typedef void (*serow_grip_back_to_idle)(void *arg, int fd, const struct passed_connection *info);

struct serow_grip_holds;

struct serow_grip_holds *serow_grip_holds_new(struct shared_state *shared, int epoll_fd,
                                              const struct serow_grip_settings *settings,
                                              serow_grip_back_to_idle back, void *arg);
/* A hold from a worker: head, its descriptor, the hold message (a whole
 * frame) and the request line (head->request_line_len bytes).  The
 * descriptor is ours from here (closed on any refusal). */
void serow_grip_holds_add(struct serow_grip_holds *g, const struct serow_holding_head *head, int fd,
                          const char *message, size_t len, const char *request_line);
/* A publish message (a whole frame), fanned out. */
void serow_grip_holds_publish(struct serow_grip_holds *g, const char *message, size_t len);
/* Around what one turn of the loop reads at once (the messages waiting on
 * the hand-back channel, the replies in one read from Redis): what is
 * queued for a connection meanwhile is written when the batch ends, so that
 * a burst of publishes costs each subscriber one send, not one per item.
 * Nothing waits past the turn that read it; a lone publish costs a copy of
 * its bytes per subscriber more (a send costs far more).  (NULL: nothing.) */
void serow_grip_holds_batch_begin(struct serow_grip_holds *g);
void serow_grip_holds_batch_end(struct serow_grip_holds *g);
/* epoll said something of a held connection (SEROW_GRIP_TAG | fd). */
void serow_grip_holds_event(struct serow_grip_holds *g, int fd, uint32_t events);
/* Timeouts and keep-alives due by now_ms; the ms until the next (-1: none). */
int serow_grip_holds_timers(struct serow_grip_holds *g, uint64_t now_ms);
/* The server stops gracefully: every hold ends as a client expects one to
 * end, not cut: a stream's body ends (its last chunk, or the close of a
 * close-delimited body) after its pending output, a long poll is answered
 * with the app's response at its timeout; each connection is closed once
 * its output is out, and logged.  The loop then waits for the sockets to
 * take it (serow_grip_holds_event), bounded, until the count is 0. */
void serow_grip_holds_end(struct serow_grip_holds *g);
/* The channel store, which the holder's WebSockets subscribe in too
 * (websocket_holds.c): a subscriber is a descriptor, theirs or ours. */
struct serow_channels *serow_grip_holds_store(struct serow_grip_holds *g);
/* Who takes the deliveries to subscribers that are not held here (a
 * WebSocket's): called once for each, in the order they come. */
struct serow_delivery;
typedef void (*serow_grip_elsewhere)(void *arg, const struct serow_delivery *d);
void serow_grip_holds_deliver_elsewhere(struct serow_grip_holds *g, serow_grip_elsewhere to, void *arg);
/* Held connections now (0 for NULL: --grip off). */
uint32_t serow_grip_holds_count(const struct serow_grip_holds *g);
/* Closes every held connection (the holder stops). */
void serow_grip_holds_free(struct serow_grip_holds *g);

#endif
