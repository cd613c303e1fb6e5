/*
 * channel_store.h - the channel store of the connection holder: channels by
 * name, each with the last items published to it and its subscribers; no
 * I/O, no clock, no Perl.  docs/holding.md says how the holder uses it.
 *
 *   serow_channels_publish()      keeps an item (a publish message,
 *                                 holder_message.h) in its channel's ring and
 *                                 says who gets it: a list of (subscriber, item)
 *                                 deliveries.
 *   serow_channels_subscribe()    subscribes, and replays the kept items
 *                                 published after a prev-id, as deliveries.
 *   serow_channels_unsubscribe(), serow_channels_unsubscribe_all()
 *   serow_channels_stats()        counts and bytes, the store's and one
 *                                 subscriber's or channel's.
 *   serow_channels_busiest()      the channels with the most subscribers,
 *                                 with each one's counts (the holder shows
 *                                 them in the metrics and the status page).
 *
 * A subscriber is a number the caller chooses and owns (the holder's index
 * of a held connection), below limits.max_subscribers: the store keeps 4
 * bytes per number up to the highest one used, and 20 per subscription.
 * An item is one allocation, the publish message's bytes behind a small
 * head, shared by every delivery and counted by reference: a caller that
 * keeps one past its next call into the store takes a reference
 * (serow_channel_item_ref) and gives it back with serow_channels_unref,
 * every one before the store is freed.
 * The list of deliveries a call returns is the store's and lasts until the
 * next call.
 *
 * Replay: a subscription that names a prev-id gets the kept items published
 * after the one with that id.  When no kept item has that id (it is older
 * than the ring, from before a restart, or never was), it gets every kept
 * item and the call says SEROW_CHANNELS_REPLAY_GAP: the subscriber may have
 * missed items, and this is as much as the server still has.  An item whose
 * id is already among its channel's kept items is a duplicate: not kept,
 * not delivered.  Items are kept in the order they arrive; a prev-id on a
 * published item is kept with it, not used to reorder.
 */
#ifndef SEROW_CHANNEL_STORE_H
#define SEROW_CHANNEL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "shared/holder_message.h"

struct serow_channels_limits {
    uint32_t max_channels;       /* channels kept at once (with subscribers or items) */
    uint32_t items_per_channel;  /* N: the ring of each channel (at least 1) */
    uint32_t max_item_bytes;     /* an item's size (serow_publish_item_bytes: --publish-max-item) */
    uint32_t max_subscriptions;  /* per subscriber (--hold-max-channels) */
    uint32_t max_subscribers;    /* subscriber numbers are below this */
};

/* Defaults (docs/holding.md). */
#define SEROW_CHANNELS_DEFAULT_MAX_CHANNELS      100000
#define SEROW_CHANNELS_DEFAULT_ITEMS             16
#define SEROW_CHANNELS_DEFAULT_MAX_ITEM_BYTES    (64 * 1024)
#define SEROW_CHANNELS_DEFAULT_MAX_SUBSCRIPTIONS SEROW_GRIP_MAX_CHANNELS
#define SEROW_CHANNELS_DEFAULT_MAX_SUBSCRIBERS   (1u << 20)

/* Results.  Non-negative: done. */
#define SEROW_CHANNELS_OK                   0
#define SEROW_CHANNELS_REPLAY_GAP           1  /* subscribed; prev-id not kept: every kept item replayed */
#define SEROW_CHANNELS_DUPLICATE            2  /* published id already kept: nothing kept, nothing delivered */
#define SEROW_CHANNELS_BAD_MESSAGE         (-1) /* not a valid publish message */
#define SEROW_CHANNELS_TOO_LARGE           (-2) /* item over max_item_bytes */
#define SEROW_CHANNELS_TOO_MANY_CHANNELS   (-3)
#define SEROW_CHANNELS_TOO_MANY_SUBSCRIPTIONS (-4)
#define SEROW_CHANNELS_BAD_SUBSCRIBER      (-5) /* at or past max_subscribers */
#define SEROW_CHANNELS_BAD_NAME            (-6) /* serow_grip_channel_name_ok() says no */
#define SEROW_CHANNELS_NO_MEMORY           (-7)

/* One kept item: the publish message's bytes, with where the fields the
 * holder reads for every delivery lie in them.  Never changed once kept. */
struct serow_channel_item {
    uint32_t refs;
    uint32_t len;            /* of bytes: the whole publish message */
    uint16_t id_off, id_len; /* id_len 0: no id */
    uint32_t stream_off, stream_len; /* http-stream content */
    uint8_t formats;         /* SEROW_FORMAT_* */
    uint8_t stream_action;   /* SEROW_ACTION_* */
    char bytes[];
};

struct serow_delivery {
    uint32_t subscriber;
    uint32_t channel; /* the store's index of the item's channel (serow_channels_delivered) */
    const struct serow_channel_item *item;
};

/* One channel's counts, since the store made it (a channel forgotten and
 * made again starts from 0).  name points into the store: valid until the
 * next call that may forget a channel. */
struct serow_channel_figures {
    const char *name;
    size_t name_len;
    uint32_t subscribers;
    uint64_t publishes;  /* items published to it, duplicates included */
    uint64_t deliveries; /* its items the caller delivered (serow_channels_delivered) */
    uint64_t drops;      /* subscribers dropped while on it (serow_channels_dropped) */
};

struct serow_channels_stats {
    size_t channels, subscriptions, items; /* items: alive, in rings or referenced */
    uint64_t published, deliveries, duplicates, replay_gaps, refused;
    size_t bytes;               /* everything the store has allocated */
    size_t bytes_items;         /* of which items */
    size_t bytes_subscriptions; /* of which the subscriber table and the subscriptions */
};

struct serow_channels;

/* NULL when out of memory.  Zero limits take the defaults. */
struct serow_channels *serow_channels_new(const struct serow_channels_limits *limits);
void serow_channels_free(struct serow_channels *s);

int serow_channels_publish(struct serow_channels *s, const char *message, size_t len,
                           const struct serow_delivery **deliveries, size_t *count);

/* prev_id NULL: no replay.  Subscribing again to a channel already
 * subscribed to is no change and no replay. */
int serow_channels_subscribe(struct serow_channels *s, uint32_t subscriber, const char *name, size_t name_len,
                             const char *prev_id, size_t prev_id_len,
                             const struct serow_delivery **deliveries, size_t *count);

/* 1 when it was subscribed, 0 when not. */
int serow_channels_unsubscribe(struct serow_channels *s, uint32_t subscriber, const char *name, size_t name_len);
/* The number of subscriptions ended: when the subscriber's connection ends. */
size_t serow_channels_unsubscribe_all(struct serow_channels *s, uint32_t subscriber);

void serow_channels_stats(const struct serow_channels *s, struct serow_channels_stats *stats);

/* The caller delivered d (one of the deliveries a call returned): counted
 * for its channel.  Not every delivery the store lists is delivered (a
 * hold takes only the format it needs), so the caller says which. */
void serow_channels_delivered(struct serow_channels *s, const struct serow_delivery *d);
/* The subscriber is being dropped (it did not read): counted for each of
 * its channels.  Before serow_channels_unsubscribe_all. */
void serow_channels_dropped(struct serow_channels *s, uint32_t subscriber);
/* The (at most) n channels with the most subscribers, the most published to
 * first among equals, into out, most first; how many. */
size_t serow_channels_busiest(const struct serow_channels *s, struct serow_channel_figures *out, size_t n);
/* The bytes held for one subscriber (its subscriptions and its table entry),
 * and for one channel (its head, name, ring and kept items); 0 for none. */
size_t serow_channels_subscriber_bytes(const struct serow_channels *s, uint32_t subscriber);
size_t serow_channels_channel_bytes(const struct serow_channels *s, const char *name, size_t name_len);
size_t serow_channels_subscribers(const struct serow_channels *s, const char *name, size_t name_len);

static inline void serow_channel_item_ref(const struct serow_channel_item *item)
{
    ((struct serow_channel_item *)item)->refs++;
}
void serow_channels_unref(struct serow_channels *s, const struct serow_channel_item *item);

static inline const char *serow_channel_item_id(const struct serow_channel_item *item)
{
    return item->bytes + item->id_off;
}
static inline const char *serow_channel_item_stream(const struct serow_channel_item *item)
{
    return item->bytes + item->stream_off;
}

#endif
