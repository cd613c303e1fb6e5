/*
 * The holder's channel store (src/holder/channel_store.c): publishes delivered
 * to each subscriber of their channel once, the last N items kept and
 * replayed after a prev-id (all of them, flagged, when the prev-id is not
 * kept), duplicates dropped, limits held, and what it costs: 10,000
 * subscribers well under 10 MB.  A random run is checked against a plain
 * model of who subscribes to what.
 * Prints "ok - NAME" / "not ok - NAME" per check (t/holding/channel_store.t).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "holder/channel_store.h"
#include "serow_unit.h"

static char message[1 << 17];

/* A publish message of an http-stream item; id NULL for none. */
static size_t item(const char *channel, const char *id, const char *content, size_t pad)
{
    static char body[1 << 16];
    struct serow_publish_item p;
    memset(&p, 0, sizeof p);
    p.channel = (struct serow_bytes){ channel, (uint32_t)strlen(channel) };
    if (id)
        p.id = (struct serow_bytes){ id, (uint32_t)strlen(id) };
    p.formats = SEROW_FORMAT_HTTP_STREAM;
    size_t n = strlen(content);
    memcpy(body, content, n);
    memset(body + n, '.', pad);
    p.stream.content = (struct serow_bytes){ body, (uint32_t)(n + pad) };
    size_t len = serow_publish_encode(&p, message, sizeof message);
    if (len == 0)
        abort();
    return len;
}

static const struct serow_delivery *d;
static size_t count;

static int publish(struct serow_channels *s, const char *channel, const char *id, const char *content)
{
    return serow_channels_publish(s, message, item(channel, id, content, 0), &d, &count);
}

static int subscribe(struct serow_channels *s, uint32_t who, const char *channel, const char *prev_id)
{
    return serow_channels_subscribe(s, who, channel, strlen(channel), prev_id, prev_id ? strlen(prev_id) : 0, &d, &count);
}

/* The deliveries' contents, in order, joined by spaces. */
static const char *contents(void)
{
    static char out[4096];
    out[0] = 0;
    for (size_t i = 0; i < count; i++) {
        if (i)
            strcat(out, " ");
        strncat(out, serow_channel_item_stream(d[i].item), d[i].item->stream_len);
    }
    return out;
}

static int delivered_to(uint32_t who)
{
    int n = 0;
    for (size_t i = 0; i < count; i++)
        n += d[i].subscriber == who;
    return n;
}

int main(void)
{
    struct serow_channels_limits limits = { .items_per_channel = 3, .max_subscriptions = 4, .max_channels = 50,
                                            .max_item_bytes = 4096, .max_subscribers = 100000 };
    struct serow_channels *s = serow_channels_new(&limits);
    struct serow_channels_stats st;

    check(publish(s, "news", "1", "a") == SEROW_CHANNELS_OK && count == 0, "a publish to a channel nobody subscribes to");
    serow_channels_stats(s, &st);
    check(st.channels == 1 && st.items == 1, "is kept");

    check(subscribe(s, 7, "news", NULL) == SEROW_CHANNELS_OK && count == 0, "a subscription without a prev-id: no replay");
    check(subscribe(s, 9, "news", NULL) == SEROW_CHANNELS_OK && subscribe(s, 9, "sport", NULL) == SEROW_CHANNELS_OK,
          "a second subscriber, on two channels");
    check(publish(s, "news", "2", "b") == SEROW_CHANNELS_OK && count == 2 && delivered_to(7) == 1 && delivered_to(9) == 1,
          "a publish reaches each subscriber of its channel once");
    check(strcmp(contents(), "b b") == 0 && d[0].item == d[1].item, "one item, shared by the deliveries");
    check(publish(s, "sport", "x", "s") == SEROW_CHANNELS_OK && count == 1 && delivered_to(9) == 1,
          "and not the subscribers of another channel");
    check(subscribe(s, 7, "news", "1") == SEROW_CHANNELS_OK && count == 0,
          "subscribing again to a channel: no change, no replay");
    check(serow_channels_subscribers(s, "news", 4) == 2, "two subscribers on news");

    /* Replay */
    check(subscribe(s, 11, "news", "1") == SEROW_CHANNELS_OK && strcmp(contents(), "b") == 0 && delivered_to(11) == 1,
          "a prev-id kept: the items after it");
    check(subscribe(s, 12, "news", "2") == SEROW_CHANNELS_OK && count == 0, "the newest id: nothing to replay");
    publish(s, "news", "3", "c");
    publish(s, "news", "4", "d");
    check(subscribe(s, 13, "news", "2") == SEROW_CHANNELS_OK && strcmp(contents(), "c d") == 0,
          "items replayed in the order published");
    check(subscribe(s, 14, "news", "1") == SEROW_CHANNELS_REPLAY_GAP && strcmp(contents(), "b c d") == 0,
          "a prev-id older than the ring (N = 3): every kept item, and a gap said");
    check(subscribe(s, 15, "news", "nope") == SEROW_CHANNELS_REPLAY_GAP && count == 3, "an unknown prev-id: the same");
    check(subscribe(s, 16, "empty", "1") == SEROW_CHANNELS_REPLAY_GAP && count == 0,
          "a prev-id on a channel with no item: a gap, nothing replayed");
    check(publish(s, "news", "4", "again") == SEROW_CHANNELS_DUPLICATE && count == 0,
          "an id already kept: a duplicate, not delivered");
    check(publish(s, "news", NULL, "e") == SEROW_CHANNELS_OK && publish(s, "news", NULL, "f") == SEROW_CHANNELS_OK,
          "items without ids are never duplicates");
    serow_channels_stats(s, &st);
    check(st.duplicates == 1 && st.replay_gaps == 3, "duplicates and gaps counted");

    /* An item outliving the ring while referenced. */
    publish(s, "kept", "k1", "held");
    const struct serow_channel_item *held = NULL;
    subscribe(s, 20, "kept", "nothing");
    held = d[0].item;
    serow_channel_item_ref(held);
    publish(s, "kept", "k2", "x");
    publish(s, "kept", "k3", "y");
    publish(s, "kept", "k4", "z");
    check(held->stream_len == 4 && memcmp(serow_channel_item_stream(held), "held", 4) == 0,
          "an item referenced by the caller outlives its ring");
    serow_channels_stats(s, &st);
    size_t items_before = st.items;
    serow_channels_unref(s, held);
    serow_channels_stats(s, &st);
    check(st.items == items_before - 1, "and is freed when given back");

    /* Limits */
    check(subscribe(s, 100000, "news", NULL) == SEROW_CHANNELS_BAD_SUBSCRIBER, "a subscriber number past the limit");
    check(subscribe(s, 1, "bad name", NULL) == SEROW_CHANNELS_BAD_NAME, "an invalid channel name");
    subscribe(s, 30, "a", NULL);
    subscribe(s, 30, "b", NULL);
    subscribe(s, 30, "c", NULL);
    check(subscribe(s, 30, "d", NULL) == SEROW_CHANNELS_OK && subscribe(s, 30, "e", NULL) == SEROW_CHANNELS_TOO_MANY_SUBSCRIPTIONS,
          "subscriptions per subscriber bounded (4 here)");
    check(serow_channels_publish(s, message, item("news", "big", "x", 4096), &d, &count) == SEROW_CHANNELS_TOO_LARGE,
          "an item over the byte limit");
    size_t len = item("news", "5", "g", 0);
    message[len - 1] ^= 1; /* still well-formed: content changed */
    check(serow_channels_publish(s, message, len - 1, &d, &count) == SEROW_CHANNELS_BAD_MESSAGE,
          "a message cut short");
    serow_channels_stats(s, &st);
    int refused_all = 1;
    char name[16];
    for (size_t i = st.channels; i < limits.max_channels; i++) {
        snprintf(name, sizeof name, "fill%zu", i);
        refused_all &= publish(s, name, NULL, "f") == SEROW_CHANNELS_OK;
    }
    check(refused_all && publish(s, "one-too-many", NULL, "f") == SEROW_CHANNELS_TOO_MANY_CHANNELS
          && subscribe(s, 31, "one-too-many", NULL) == SEROW_CHANNELS_TOO_MANY_CHANNELS, "channels bounded (50 here)");
    check(publish(s, "news", "6", "still") == SEROW_CHANNELS_OK, "an existing channel still takes publishes");

    /* Unsubscribing */
    check(serow_channels_unsubscribe(s, 9, "news", 4) == 1 && serow_channels_unsubscribe(s, 9, "news", 4) == 0,
          "unsubscribe once");
    publish(s, "news", "7", "h");
    check(delivered_to(9) == 0 && delivered_to(7) == 1, "no delivery after");
    check(serow_channels_unsubscribe_all(s, 30) == 4 && serow_channels_subscriber_bytes(s, 30) == 4,
          "a connection's end ends all its subscriptions; 4 bytes of table remain");
    check(serow_channels_subscribers(s, "a", 1) == 0 && serow_channels_channel_bytes(s, "a", 1) == 0,
          "a channel with neither subscribers nor items is forgotten");
    serow_channels_free(s);

    /* Channels made and forgotten many times over: the freed slots and hash
     * chains are reused, nothing grows. */
    s = serow_channels_new(NULL);
    size_t first_bytes = 0;
    int all_gone = 1;
    for (int round = 0; round < 20; round++) {
        for (uint32_t i = 0; i < 1000; i++) {
            snprintf(name, sizeof name, "r%d-%u", round, i);
            subscribe(s, i, name, NULL);
        }
        for (uint32_t i = 0; i < 1000; i += 2)
            serow_channels_unsubscribe_all(s, i);
        for (uint32_t i = 1; i < 1000; i += 2)
            serow_channels_unsubscribe_all(s, i);
        serow_channels_stats(s, &st);
        all_gone &= st.channels == 0 && st.subscriptions == 0;
        if (round == 0)
            first_bytes = st.bytes;
    }
    check(all_gone && st.bytes == first_bytes, "20 rounds of 1,000 channels made and forgotten: the store does not grow");
    serow_channels_free(s);

    /* What it costs: 10,000 subscribers on one channel, then each on its own. */
    s = serow_channels_new(NULL);
    for (uint32_t i = 0; i < 10000; i++)
        subscribe(s, i, "all", NULL);
    check(publish(s, "all", "1", "tick") == SEROW_CHANNELS_OK && count == 10000, "one publish, 10,000 deliveries");
    serow_channels_stats(s, &st);
    printf("# 10,000 subscribers on one channel: %zu bytes in all, %zu for subscriptions\n", st.bytes, st.bytes_subscriptions);
    check(st.bytes < 1000000, "10,000 subscribers on one channel: under 1 MB in all, deliveries list included");
    check(serow_channels_subscriber_bytes(s, 1) <= 24, "24 bytes a subscriber with one subscription");
    for (uint32_t i = 0; i < 10000; i++) {
        snprintf(name, sizeof name, "user-%u", i);
        subscribe(s, i, name, NULL);
        publish(s, name, "1", "a welcome message of some forty bytes....");
    }
    serow_channels_stats(s, &st);
    printf("# and each on a channel of its own with one kept item: %zu bytes in all (%zu a subscriber)\n",
           st.bytes, st.bytes / 10000);
    check(st.bytes < 3 * 1000 * 1000 && st.channels == 10001, "10,000 more channels, each with an item: under 3 MB");
    size_t ch = serow_channels_channel_bytes(s, "user-5", 6);
    check(ch > 0 && ch < 400, "a channel with one small item: under 400 bytes");
    for (uint32_t i = 0; i < 10000; i++)
        serow_channels_unsubscribe_all(s, i);
    serow_channels_stats(s, &st);
    check(st.subscriptions == 0 && st.channels == 10001, "all unsubscribed: the channels with items stay");
    serow_channels_free(s);

    /* A random run against a model: who subscribes to what. */
    enum { SUBS = 40, CHANS = 8 };
    static char model[SUBS][CHANS];
    memset(model, 0, sizeof model);
    struct serow_channels_limits big = { .items_per_channel = 4, .max_subscriptions = CHANS };
    s = serow_channels_new(&big);
    srand(29);
    int agree = 1;
    char id[32];
    for (int step = 0; step < 50000 && agree; step++) {
        uint32_t who = (uint32_t)(rand() % SUBS);
        int c = rand() % CHANS;
        snprintf(name, sizeof name, "ch%d", c);
        int what = rand() % 10;
        if (what < 4) {
            subscribe(s, who, name, NULL);
            model[who][c] = 1;
        } else if (what < 6) {
            agree &= serow_channels_unsubscribe(s, who, name, strlen(name)) == model[who][c];
            model[who][c] = 0;
        } else if (what < 7) {
            serow_channels_unsubscribe_all(s, who);
            memset(model[who], 0, CHANS);
        } else {
            snprintf(id, sizeof id, "%d", step);
            publish(s, name, id, "m");
            for (uint32_t w = 0; w < SUBS; w++)
                agree &= delivered_to(w) == model[w][c];
        }
    }
    serow_channels_stats(s, &st);
    size_t want = 0;
    for (int w = 0; w < SUBS; w++)
        for (int c = 0; c < CHANS; c++)
            want += (size_t)model[w][c];
    check(agree && st.subscriptions == want, "50,000 random steps: every publish reaches exactly the model's subscribers");
    serow_channels_free(s);

    /* Each channel's counts, and the busiest channels. */
    s = serow_channels_new(NULL);
    struct serow_channel_figures top[4];
    check(serow_channels_busiest(s, top, 4) == 0, "no channel: none busiest");
    for (uint32_t who = 0; who < 5; who++) /* quiet: 5 subscribers; loud: 2; solo: 1; unheard: 0 */
        subscribe(s, who, "quiet", NULL);
    subscribe(s, 10, "loud", NULL);
    subscribe(s, 11, "loud", NULL);
    subscribe(s, 12, "solo", NULL);
    for (int i = 0; i < 3; i++) {
        publish(s, "loud", NULL, "x");
        for (size_t k = 0; k < count; k++)
            if (d[k].subscriber == 10)
                serow_channels_delivered(s, &d[k]); /* (11 took another format: not delivered) */
    }
    publish(s, "unheard", "1", "x");
    publish(s, "unheard", "1", "x"); /* a duplicate: a publish, not kept */
    subscribe(s, 13, "loud", "nothing"); /* a replay: 3 deliveries listed */
    for (size_t k = 0; k < count; k++)
        serow_channels_delivered(s, &d[k]);
    serow_channels_dropped(s, 13);
    serow_channels_unsubscribe_all(s, 13);
    size_t n = serow_channels_busiest(s, top, 3);
    check(n == 3 && top[0].name_len == 5 && memcmp(top[0].name, "quiet", 5) == 0 && top[0].subscribers == 5
              && memcmp(top[1].name, "loud", 4) == 0 && top[2].name_len == 4 && memcmp(top[2].name, "solo", 4) == 0,
          "the busiest: by subscribers, at most n");
    check(top[1].subscribers == 2 && top[1].publishes == 3 && top[1].deliveries == 6 && top[1].drops == 1,
          "a channel's subscribers, publishes, deliveries said delivered (replays included), drops");
    serow_channels_unsubscribe_all(s, 12);
    n = serow_channels_busiest(s, top, 4);
    check(n == 3 && memcmp(top[2].name, "unheard", 7) == 0 && top[2].publishes == 2 && top[2].subscribers == 0,
          "among equals, the most published to first; a duplicate counts as a publish; a forgotten channel is gone");
    serow_channels_free(s);

    return checks_done();
}
