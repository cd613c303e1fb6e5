/*
 * channel_store.c - the holder's channel store (channel_store.h): channels by name,
 * their rings of kept items, who subscribes to what, and what it all costs.
 * Owns that state alone; knows nothing of connections, sockets or time.
 *
 * Compact by construction, for tens of thousands of subscribers: everything
 * refers to everything else by 32-bit index, not pointer.  A subscription is
 * one 20-byte link, in its channel's doubly linked list (unsubscribing is
 * O(1) there) and in its subscriber's singly linked one (a subscriber has at
 * most max_subscriptions, walked).  A subscriber is an index into a table
 * of 4-byte heads.  A channel is one allocation (head, then name), found
 * through a chained hash table of indexes; its ring of item pointers is
 * allocated with its first item.
 */
#include "holder/channel_store.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct link {
    uint32_t subscriber;
    uint32_t channel;
    uint32_t next_in_channel, prev_in_channel;
    uint32_t next_of_subscriber; /* also the free list's */
};

struct channel {
    uint32_t hash;
    uint32_t hash_next;       /* next channel index in the bucket */
    uint32_t first_link;      /* its subscribers */
    uint32_t subscribers;
    uint32_t ring_start, ring_count, ring_cap;
    uint32_t drops;           /* serow_channel_figures (a rare event: 32 bits, in what was padding) */
    struct serow_channel_item **ring; /* grows to limits.items_per_channel slots; wraps only then */
    uint64_t publishes, deliveries; /* serow_channel_figures */
    uint16_t name_len;
    char name[];
};
/* A channel's allocation: its head up to its name, and the name (not
 * sizeof, which pads the name's start to 8). */
#define CHANNEL_HEAD offsetof(struct channel, name)

struct serow_channels {
    struct serow_channels_limits limits;

    struct channel **channels; /* by index; NULL when free */
    uint32_t channels_cap, channels_used;
    uint32_t *free_channels;   /* indexes of freed slots, a stack */
    uint32_t free_count;

    uint32_t *buckets;         /* channel indexes, NIL-terminated chains through hash_next */
    uint32_t buckets_mask;

    struct link *links;
    uint32_t links_cap, free_link;

    uint32_t *first_link;      /* by subscriber: the head of its links */
    uint32_t subscribers_cap;

    struct serow_delivery *deliveries;
    size_t deliveries_cap;

    size_t channel_count, subscriptions, items, item_bytes, channel_bytes;
    uint64_t published, delivered, duplicates, replay_gaps, refused;
};

static uint32_t hash_name(const char *p, size_t len)
{
    /* FNV-1a: names are short and the chains are short. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* Grows *array of *cap elements of size to at least want (doubling). */
static int grow(void *array, uint32_t *cap, size_t size, size_t want, size_t limit)
{
    if (want <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < want)
        n *= 2;
    if (n > limit)
        n = limit;
    if (n < want)
        return -1;
    void *p = realloc(*(void **)array, n * size);
    if (p == NULL)
        return -1;
    *(void **)array = p;
    *cap = (uint32_t)n;
    return 0;
}

struct serow_channels *serow_channels_new(const struct serow_channels_limits *limits)
{
    struct serow_channels *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    if (limits)
        s->limits = *limits;
    if (!s->limits.max_channels)
        s->limits.max_channels = SEROW_CHANNELS_DEFAULT_MAX_CHANNELS;
    if (!s->limits.max_item_bytes)
        s->limits.max_item_bytes = SEROW_CHANNELS_DEFAULT_MAX_ITEM_BYTES;
    if (!s->limits.max_subscriptions)
        s->limits.max_subscriptions = SEROW_CHANNELS_DEFAULT_MAX_SUBSCRIPTIONS;
    if (!s->limits.max_subscribers || s->limits.max_subscribers > NIL)
        s->limits.max_subscribers = SEROW_CHANNELS_DEFAULT_MAX_SUBSCRIBERS;
    if (!s->limits.items_per_channel)
        s->limits.items_per_channel = SEROW_CHANNELS_DEFAULT_ITEMS;
    s->buckets_mask = 63;
    s->buckets = malloc(64 * sizeof *s->buckets);
    if (s->buckets == NULL) {
        free(s);
        return NULL;
    }
    memset(s->buckets, 0xff, 64 * sizeof *s->buckets);
    s->free_link = NIL;
    return s;
}

static struct serow_channel_item *ring_at(const struct serow_channels *s, const struct channel *c, uint32_t k)
{
    (void)s;
    return c->ring[(c->ring_start + k) % c->ring_cap];
}

static void item_free(struct serow_channels *s, struct serow_channel_item *item)
{
    s->item_bytes -= sizeof *item + item->len;
    s->items--;
    free(item);
}

void serow_channels_unref(struct serow_channels *s, const struct serow_channel_item *item)
{
    struct serow_channel_item *it = (struct serow_channel_item *)item;
    if (--it->refs == 0)
        item_free(s, it);
}

static size_t channel_head_bytes(const struct serow_channels *s, const struct channel *c)
{
    (void)s;
    return CHANNEL_HEAD + c->name_len + c->ring_cap * sizeof *c->ring;
}

void serow_channels_free(struct serow_channels *s)
{
    if (s == NULL)
        return;
    for (uint32_t i = 0; i < s->channels_used; i++) {
        struct channel *c = s->channels[i];
        if (c == NULL)
            continue;
        for (uint32_t k = 0; k < c->ring_count; k++)
            serow_channels_unref(s, ring_at(s, c, k));
        free(c->ring);
        free(c);
    }
    free(s->channels);
    free(s->free_channels);
    free(s->buckets);
    free(s->links);
    free(s->first_link);
    free(s->deliveries);
    free(s);
}

static uint32_t find_channel(const struct serow_channels *s, const char *name, size_t len, uint32_t hash)
{
    for (uint32_t i = s->buckets[hash & s->buckets_mask]; i != NIL; i = s->channels[i]->hash_next) {
        const struct channel *c = s->channels[i];
        if (c->hash == hash && c->name_len == len && memcmp(c->name, name, len) == 0)
            return i;
    }
    return NIL;
}

/* The table doubles when it has more channels than buckets. */
static int rehash(struct serow_channels *s)
{
    uint32_t n = (s->buckets_mask + 1) * 2;
    uint32_t *b = malloc(n * sizeof *b);
    if (b == NULL)
        return -1;
    memset(b, 0xff, n * sizeof *b);
    for (uint32_t i = 0; i < s->channels_used; i++) {
        struct channel *c = s->channels[i];
        if (c == NULL)
            continue;
        c->hash_next = b[c->hash & (n - 1)];
        b[c->hash & (n - 1)] = i;
    }
    free(s->buckets);
    s->buckets = b;
    s->buckets_mask = n - 1;
    return 0;
}

/* Index of the channel, made if need be; NIL with *why set. */
static uint32_t open_channel(struct serow_channels *s, const char *name, size_t len, int *why)
{
    uint32_t hash = hash_name(name, len);
    uint32_t i = find_channel(s, name, len, hash);
    if (i != NIL)
        return i;
    if (s->channel_count >= s->limits.max_channels) {
        *why = SEROW_CHANNELS_TOO_MANY_CHANNELS;
        return NIL;
    }
    *why = SEROW_CHANNELS_NO_MEMORY;
    if (s->channel_count >= s->buckets_mask + 1 && rehash(s) < 0)
        return NIL;
    if (s->free_count == 0 && s->channels_used == s->channels_cap) {
        uint32_t cap = s->channels_cap;
        if (grow(&s->channels, &s->channels_cap, sizeof *s->channels, (size_t)cap + 1, NIL) < 0)
            return NIL;
        uint32_t *f = realloc(s->free_channels, (size_t)s->channels_cap * sizeof *f);
        if (f == NULL) {
            s->channels_cap = cap; /* the larger block is kept, its end unused */
            return NIL;
        }
        s->free_channels = f;
    }
    struct channel *c = malloc(CHANNEL_HEAD + len);
    if (c == NULL)
        return NIL;
    memset(c, 0, CHANNEL_HEAD);
    memcpy(c->name, name, len);
    c->name_len = (uint16_t)len;
    c->hash = hash;
    c->first_link = NIL;
    i = s->free_count ? s->free_channels[--s->free_count] : s->channels_used++;
    s->channels[i] = c;
    c->hash_next = s->buckets[hash & s->buckets_mask];
    s->buckets[hash & s->buckets_mask] = i;
    s->channel_count++;
    s->channel_bytes += channel_head_bytes(s, c);
    return i;
}

/* A channel with neither subscribers nor items is forgotten. */
static void maybe_close_channel(struct serow_channels *s, uint32_t i)
{
    struct channel *c = s->channels[i];
    if (c->subscribers || c->ring_count)
        return;
    uint32_t *at = &s->buckets[c->hash & s->buckets_mask];
    while (*at != i)
        at = &s->channels[*at]->hash_next;
    *at = c->hash_next;
    /* The free stack has room: it is as long as the channel table. */
    s->channel_bytes -= channel_head_bytes(s, c);
    free(c->ring);
    free(c);
    s->channels[i] = NULL;
    s->free_channels[s->free_count++] = i;
    s->channel_count--;
}

static int deliveries_room(struct serow_channels *s, size_t want)
{
    if (want <= s->deliveries_cap)
        return 0;
    size_t n = s->deliveries_cap ? s->deliveries_cap : 64;
    while (n < want)
        n *= 2;
    void *p = realloc(s->deliveries, n * sizeof *s->deliveries);
    if (p == NULL)
        return -1;
    s->deliveries = p;
    s->deliveries_cap = n;
    return 0;
}


int serow_channels_publish(struct serow_channels *s, const char *message, size_t len,
                           const struct serow_delivery **deliveries, size_t *count)
{
    *deliveries = s->deliveries;
    *count = 0;
    enum serow_holder_message_type type;
    const char *body, *error;
    size_t body_len;
    struct serow_publish_item p;
    if (serow_holder_frame(message, len, &type, &body, &body_len) != (long)len || type != SEROW_HOLDER_PUBLISH
        || serow_publish_decode(body, body_len, &p, &error) < 0) {
        s->refused++;
        return SEROW_CHANNELS_BAD_MESSAGE;
    }
    if (serow_publish_item_bytes(&p) > s->limits.max_item_bytes) {
        s->refused++;
        return SEROW_CHANNELS_TOO_LARGE;
    }
    int why;
    uint32_t ci = open_channel(s, p.channel.p, p.channel.len, &why);
    if (ci == NIL) {
        s->refused++;
        return why;
    }
    struct channel *c = s->channels[ci];
    uint32_t n = s->limits.items_per_channel;

    if (p.id.len) {
        for (uint32_t k = 0; k < c->ring_count; k++) {
            const struct serow_channel_item *old = ring_at(s, c, k);
            if (old->id_len == p.id.len && memcmp(serow_channel_item_id(old), p.id.p, p.id.len) == 0) {
                s->duplicates++;
                c->publishes++;
                return SEROW_CHANNELS_DUPLICATE;
            }
        }
    }
    if (deliveries_room(s, c->subscribers) < 0)
        goto no_memory;
    if (c->ring_count == c->ring_cap && c->ring_cap < n) {
        /* Most channels keep few items: the ring doubles up to N.  It has
         * not wrapped yet (ring_start moves only once it is full at N). */
        uint32_t cap = c->ring_cap ? c->ring_cap * 2 : 1;
        if (cap > n)
            cap = n;
        void *ring = realloc(c->ring, cap * sizeof *c->ring);
        if (ring == NULL)
            goto no_memory;
        c->ring = ring;
        s->channel_bytes += (cap - c->ring_cap) * sizeof *c->ring;
        c->ring_cap = cap;
    }
    struct serow_channel_item *item = malloc(sizeof *item + len);
    if (item == NULL)
        goto no_memory;
    memcpy(item->bytes, message, len);
    item->refs = 1; /* the ring's */
    item->len = (uint32_t)len;
    item->id_off = p.id.len ? (uint16_t)(p.id.p - message) : 0;
    item->id_len = (uint16_t)p.id.len;
    item->formats = (uint8_t)p.formats;
    item->stream_action = p.stream.action;
    item->stream_off = p.stream.content.len ? (uint32_t)(p.stream.content.p - message) : 0;
    item->stream_len = p.stream.content.len;
    s->items++;
    s->item_bytes += sizeof *item + len;
    s->published++;
    c->publishes++;

    if (c->ring_count == n) {
        serow_channels_unref(s, c->ring[c->ring_start]);
        c->ring_start = (c->ring_start + 1) % c->ring_cap;
        c->ring_count--;
    }
    c->ring[(c->ring_start + c->ring_count) % c->ring_cap] = item;
    c->ring_count++;
    size_t k = 0;
    for (uint32_t l = c->first_link; l != NIL; l = s->links[l].next_in_channel)
        s->deliveries[k++] = (struct serow_delivery){ s->links[l].subscriber, ci, item };
    s->delivered += k;
    *deliveries = s->deliveries;
    *count = k;
    return SEROW_CHANNELS_OK;

no_memory:
    s->refused++;
    maybe_close_channel(s, ci);
    return SEROW_CHANNELS_NO_MEMORY;
}

int serow_channels_subscribe(struct serow_channels *s, uint32_t subscriber, const char *name, size_t name_len,
                             const char *prev_id, size_t prev_id_len,
                             const struct serow_delivery **deliveries, size_t *count)
{
    *deliveries = s->deliveries;
    *count = 0;
    if (subscriber >= s->limits.max_subscribers)
        return SEROW_CHANNELS_BAD_SUBSCRIBER;
    if (!serow_grip_channel_name_ok(name, name_len))
        return SEROW_CHANNELS_BAD_NAME;
    if (subscriber >= s->subscribers_cap) {
        uint32_t old = s->subscribers_cap;
        if (grow(&s->first_link, &s->subscribers_cap, sizeof *s->first_link, (size_t)subscriber + 1,
                 s->limits.max_subscribers) < 0)
            return SEROW_CHANNELS_NO_MEMORY;
        memset(s->first_link + old, 0xff, (s->subscribers_cap - old) * sizeof *s->first_link);
    }
    uint32_t hash = hash_name(name, name_len);
    uint32_t existing = find_channel(s, name, name_len, hash);
    uint32_t subs = 0;
    for (uint32_t l = s->first_link[subscriber]; l != NIL; l = s->links[l].next_of_subscriber, subs++)
        if (s->links[l].channel == existing)
            return SEROW_CHANNELS_OK;
    if (subs >= s->limits.max_subscriptions)
        return SEROW_CHANNELS_TOO_MANY_SUBSCRIPTIONS;
    if (s->free_link == NIL) {
        uint32_t old = s->links_cap;
        if (grow(&s->links, &s->links_cap, sizeof *s->links, (size_t)old + 1, NIL - 1) < 0)
            return SEROW_CHANNELS_NO_MEMORY;
        for (uint32_t l = s->links_cap; l-- > old;) {
            s->links[l].next_of_subscriber = s->free_link;
            s->free_link = l;
        }
    }
    if (deliveries_room(s, s->limits.items_per_channel) < 0)
        return SEROW_CHANNELS_NO_MEMORY;
    int why;
    uint32_t ci = open_channel(s, name, name_len, &why);
    if (ci == NIL)
        return why;
    struct channel *c = s->channels[ci];

    uint32_t l = s->free_link;
    s->free_link = s->links[l].next_of_subscriber;
    struct link *link = &s->links[l];
    link->subscriber = subscriber;
    link->channel = ci;
    link->prev_in_channel = NIL;
    link->next_in_channel = c->first_link;
    if (c->first_link != NIL)
        s->links[c->first_link].prev_in_channel = l;
    c->first_link = l;
    c->subscribers++;
    link->next_of_subscriber = s->first_link[subscriber];
    s->first_link[subscriber] = l;
    s->subscriptions++;

    *deliveries = s->deliveries; /* deliveries_room may have moved them */
    if (prev_id == NULL)
        return SEROW_CHANNELS_OK;
    /* From the newest back: a subscriber that reconnects is usually close
     * behind. */
    uint32_t from = 0;
    int found = 0;
    for (uint32_t k = c->ring_count; k-- > 0;) {
        const struct serow_channel_item *it = ring_at(s, c, k);
        if (it->id_len == prev_id_len && memcmp(serow_channel_item_id(it), prev_id, prev_id_len) == 0) {
            from = k + 1;
            found = 1;
            break;
        }
    }
    size_t n = 0;
    for (uint32_t k = from; k < c->ring_count; k++)
        s->deliveries[n++] = (struct serow_delivery){ subscriber, ci, ring_at(s, c, k) };
    s->delivered += n;
    *count = n;
    if (!found) {
        s->replay_gaps++;
        return SEROW_CHANNELS_REPLAY_GAP;
    }
    return SEROW_CHANNELS_OK;
}

static void unlink_from_channel(struct serow_channels *s, uint32_t l)
{
    struct link *link = &s->links[l];
    struct channel *c = s->channels[link->channel];
    if (link->prev_in_channel != NIL)
        s->links[link->prev_in_channel].next_in_channel = link->next_in_channel;
    else
        c->first_link = link->next_in_channel;
    if (link->next_in_channel != NIL)
        s->links[link->next_in_channel].prev_in_channel = link->prev_in_channel;
    c->subscribers--;
    s->subscriptions--;
    uint32_t ci = link->channel;
    link->next_of_subscriber = s->free_link;
    s->free_link = l;
    maybe_close_channel(s, ci);
}

int serow_channels_unsubscribe(struct serow_channels *s, uint32_t subscriber, const char *name, size_t name_len)
{
    if (subscriber >= s->subscribers_cap)
        return 0;
    uint32_t ci = find_channel(s, name, name_len, hash_name(name, name_len));
    if (ci == NIL)
        return 0;
    for (uint32_t *at = &s->first_link[subscriber]; *at != NIL; at = &s->links[*at].next_of_subscriber) {
        uint32_t l = *at;
        if (s->links[l].channel == ci) {
            *at = s->links[l].next_of_subscriber;
            unlink_from_channel(s, l);
            return 1;
        }
    }
    return 0;
}

size_t serow_channels_unsubscribe_all(struct serow_channels *s, uint32_t subscriber)
{
    if (subscriber >= s->subscribers_cap)
        return 0;
    size_t n = 0;
    uint32_t l = s->first_link[subscriber];
    s->first_link[subscriber] = NIL;
    while (l != NIL) {
        uint32_t next = s->links[l].next_of_subscriber;
        unlink_from_channel(s, l);
        l = next;
        n++;
    }
    return n;
}

void serow_channels_stats(const struct serow_channels *s, struct serow_channels_stats *st)
{
    memset(st, 0, sizeof *st);
    st->channels = s->channel_count;
    st->subscriptions = s->subscriptions;
    st->items = s->items;
    st->published = s->published;
    st->deliveries = s->delivered;
    st->duplicates = s->duplicates;
    st->replay_gaps = s->replay_gaps;
    st->refused = s->refused;
    st->bytes_items = s->item_bytes;
    st->bytes_subscriptions = (size_t)s->links_cap * sizeof *s->links
                              + (size_t)s->subscribers_cap * sizeof *s->first_link;
    st->bytes = sizeof *s + st->bytes_items + st->bytes_subscriptions + s->channel_bytes
                + (size_t)s->channels_cap * (sizeof *s->channels + sizeof *s->free_channels)
                + (size_t)(s->buckets_mask + 1) * sizeof *s->buckets
                + s->deliveries_cap * sizeof *s->deliveries;
}

size_t serow_channels_subscriber_bytes(const struct serow_channels *s, uint32_t subscriber)
{
    if (subscriber >= s->subscribers_cap)
        return 0;
    size_t n = sizeof *s->first_link;
    for (uint32_t l = s->first_link[subscriber]; l != NIL; l = s->links[l].next_of_subscriber)
        n += sizeof *s->links;
    return n;
}

size_t serow_channels_channel_bytes(const struct serow_channels *s, const char *name, size_t name_len)
{
    uint32_t ci = find_channel(s, name, name_len, hash_name(name, name_len));
    if (ci == NIL)
        return 0;
    const struct channel *c = s->channels[ci];
    size_t n = channel_head_bytes(s, c);
    for (uint32_t k = 0; k < c->ring_count; k++)
        n += sizeof(struct serow_channel_item) + ring_at(s, c, k)->len;
    return n;
}

size_t serow_channels_subscribers(const struct serow_channels *s, const char *name, size_t name_len)
{
    uint32_t ci = find_channel(s, name, name_len, hash_name(name, name_len));
    return ci == NIL ? 0 : s->channels[ci]->subscribers;
}

void serow_channels_delivered(struct serow_channels *s, const struct serow_delivery *d)
{
    /* (a channel with items is never forgotten: it is the one listed) */
    if (d->channel < s->channels_used && s->channels[d->channel] != NULL)
        s->channels[d->channel]->deliveries++;
}

void serow_channels_dropped(struct serow_channels *s, uint32_t subscriber)
{
    if (subscriber >= s->subscribers_cap)
        return;
    for (uint32_t l = s->first_link[subscriber]; l != NIL; l = s->links[l].next_of_subscriber)
        s->channels[s->links[l].channel]->drops++;
}

static int busier(const struct channel *a, const struct channel *b)
{
    return a->subscribers != b->subscribers ? a->subscribers > b->subscribers : a->publishes > b->publishes;
}

/* One walk over the channels, keeping the n busiest in order (n is small:
 * an insertion into it costs at most n moves). */
size_t serow_channels_busiest(const struct serow_channels *s, struct serow_channel_figures *out, size_t n)
{
    const struct channel *top[64];
    if (n > sizeof top / sizeof top[0])
        n = sizeof top / sizeof top[0];
    size_t count = 0;
    for (uint32_t i = 0; i < s->channels_used && n; i++) {
        const struct channel *c = s->channels[i];
        if (c == NULL || (count == n && !busier(c, top[n - 1])))
            continue;
        size_t at = count < n ? count++ : n - 1;
        while (at > 0 && busier(c, top[at - 1])) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = c;
    }
    for (size_t k = 0; k < count; k++)
        out[k] = (struct serow_channel_figures){ top[k]->name, top[k]->name_len, top[k]->subscribers,
                                                 top[k]->publishes, top[k]->deliveries, top[k]->drops };
    return count;
}
