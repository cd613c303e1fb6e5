/*
 * redis_link.c - the holder's link to Redis (redis_link.h): two hiredis
 * connections, non-blocking, driven by the holder's loop.  Owns the link's
 * state alone: its connections, their backoff, its counters.  Knows nothing
 * of the channel store or of held connections: what it receives goes to the
 * callback, checked (holder_message.h); what it publishes comes encoded.
 *
 * hiredis's plain context is used in non-blocking mode rather than its async
 * API: the holder's loop is its own epoll, and the plain context lets it
 * read, parse and write exactly when that loop says (redisBufferRead,
 * redisGetReply from what is buffered, redisBufferWrite), with no adapter.
 */
#include "holder/redis_link.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "http/grip_instruct.h"
#include "log/log.h"
#include "shared/holder_message.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   5000

enum side_state { SIDE_DOWN, SIDE_CONNECTING, SIDE_UP };

struct side {
    redisContext *c;
    enum side_state state;
};

struct serow_redis_link {
    char *host;
    int port;
    char prefix[SEROW_REDIS_MAX_PREFIX + 1];
    size_t prefix_len;
    serow_redis_on_publish on_publish;
    serow_redis_on_refused on_refused;
    void *ctx;
    struct side sides[2];
    int subscribed;         /* PSUBSCRIBE confirmed on this connection */
    int ever_subscribed;    /* a later subscription is a reconnect */
    int down_logged;        /* the loss is logged once, not at every attempt */
    uint64_t retry_at;      /* 0: no reconnect due */
    uint64_t backoff_ms;
    uint64_t answers;       /* PUBLISH answers on this publishing connection */
    struct serow_redis_stats stats;
};

static const char *const SIDE_NAME[2] = { "subscriber", "publisher" };

/* The prefix stands before ':' in every channel and before ":*" in the
 * PSUBSCRIBE pattern: a channel name's bytes, less the pattern's own
 * (* ? [ ]), which would make the pattern match other channels. */
int serow_redis_prefix_ok(const char *prefix, size_t len)
{
    if (len > SEROW_REDIS_MAX_PREFIX || !serow_grip_channel_name_ok(prefix, len))
        return 0;
    return memchr(prefix, '*', len) == NULL && memchr(prefix, '?', len) == NULL
           && memchr(prefix, '[', len) == NULL && memchr(prefix, ']', len) == NULL;
}

static void close_side(struct side *s)
{
    if (s->c != NULL)
        redisFree(s->c);
    s->c = NULL;
    s->state = SIDE_DOWN;
}

/* Both sides closed, a reconnect scheduled; what the subscription would
 * have received meanwhile is a gap. */
static void link_down(struct serow_redis_link *link, enum serow_redis_side side, const char *why,
                      uint64_t now_ms)
{
    if (!link->down_logged)
        serow_log_error("redis %s:%d: %s connection: %s; connecting again, first in %llu ms",
                        link->host, link->port, SIDE_NAME[side], why,
                        (unsigned long long)link->backoff_ms);
    link->down_logged = 1;
    if (link->subscribed)
        link->stats.gaps++;
    link->subscribed = 0;
    close_side(&link->sides[SEROW_REDIS_SUB]);
    close_side(&link->sides[SEROW_REDIS_PUB]);
    link->retry_at = now_ms + link->backoff_ms;
    link->backoff_ms = link->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : link->backoff_ms * 2;
}

static void connect_side(struct serow_redis_link *link, enum serow_redis_side side, uint64_t now_ms)
{
    struct side *s = &link->sides[side];
    s->c = redisConnectNonBlock(link->host, link->port);
    if (s->c == NULL) {
        link_down(link, side, "no memory", now_ms);
        return;
    }
    if (s->c->err) {
        link_down(link, side, s->c->errstr, now_ms);
        return;
    }
    s->state = SIDE_CONNECTING;
}

static void connect_both(struct serow_redis_link *link, uint64_t now_ms)
{
    link->retry_at = 0;
    link->answers = 0;
    connect_side(link, SEROW_REDIS_SUB, now_ms);
    if (link->sides[SEROW_REDIS_SUB].state != SIDE_DOWN)
        connect_side(link, SEROW_REDIS_PUB, now_ms);
}

struct serow_redis_link *serow_redis_link_open(const char *host, int port, const char *prefix,
                                               serow_redis_on_publish on_publish, void *ctx,
                                               uint64_t now_ms)
{
    size_t prefix_len = strlen(prefix);
    if (host == NULL || port <= 0 || port > 65535 || on_publish == NULL || !serow_redis_prefix_ok(prefix, prefix_len))
        return NULL;
    struct serow_redis_link *link = calloc(1, sizeof *link);
    if (link == NULL)
        return NULL;
    link->host = strdup(host);
    if (link->host == NULL) {
        free(link);
        return NULL;
    }
    link->port = port;
    memcpy(link->prefix, prefix, prefix_len + 1);
    link->prefix_len = prefix_len;
    link->on_publish = on_publish;
    link->ctx = ctx;
    link->backoff_ms = BACKOFF_FIRST_MS;
    connect_both(link, now_ms);
    return link;
}

void serow_redis_link_on_refused(struct serow_redis_link *link, serow_redis_on_refused on_refused)
{
    link->on_refused = on_refused;
}

void serow_redis_link_close(struct serow_redis_link *link)
{
    if (link == NULL)
        return;
    close_side(&link->sides[SEROW_REDIS_SUB]);
    close_side(&link->sides[SEROW_REDIS_PUB]);
    free(link->host);
    free(link);
}

int serow_redis_link_fd(const struct serow_redis_link *link, enum serow_redis_side side)
{
    const struct side *s = &link->sides[side];
    return s->c != NULL ? s->c->fd : -1;
}

int serow_redis_link_wants_write(const struct serow_redis_link *link, enum serow_redis_side side)
{
    const struct side *s = &link->sides[side];
    if (s->state == SIDE_CONNECTING)
        return 1;
    return s->state == SIDE_UP && sdslen(s->c->obuf) > 0;
}

uint64_t serow_redis_link_due(const struct serow_redis_link *link)
{
    return link->retry_at;
}

void serow_redis_link_tick(struct serow_redis_link *link, uint64_t now_ms)
{
    if (link->retry_at != 0 && now_ms >= link->retry_at)
        connect_both(link, now_ms);
}

int serow_redis_link_ready(const struct serow_redis_link *link)
{
    return link->subscribed && link->sides[SEROW_REDIS_PUB].state == SIDE_UP;
}

const struct serow_redis_stats *serow_redis_link_stats(const struct serow_redis_link *link)
{
    return &link->stats;
}

/* A connecting side's socket is ready: connected (0), still connecting (1),
 * or failed (-1, *why set). */
static int finish_connect(struct side *s, const char **why)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    if (getpeername(s->c->fd, (struct sockaddr *)&peer, &len) == 0)
        return 0;
    int error = 0;
    socklen_t elen = sizeof error;
    if (getsockopt(s->c->fd, SOL_SOCKET, SO_ERROR, &error, &elen) != 0)
        error = errno;
    if (error == 0 || error == EINPROGRESS)
        return 1;
    *why = strerror(error);
    return -1;
}

/* A "pmessage" from the subscription: [pmessage, pattern, channel, payload].
 * The payload must be one whole publish message for the channel it came on
 * (a bad one is another program's, or another version's: counted, logged,
 * never delivered). */
static void received(struct serow_redis_link *link, const redisReply *r)
{
    const redisReply *channel = r->element[2], *payload = r->element[3];
    const char *error = "not a publish message";
    enum serow_holder_message_type type;
    const char *body;
    size_t body_len;
    struct serow_publish_item item;
    if (channel->type != REDIS_REPLY_STRING || payload->type != REDIS_REPLY_STRING
        || channel->len <= link->prefix_len || memcmp(channel->str, link->prefix, link->prefix_len) != 0
        || channel->str[link->prefix_len] != ':')
        goto reject;
    long whole = serow_holder_frame(payload->str, payload->len, &type, &body, &body_len);
    if (whole != (long)payload->len || type != SEROW_HOLDER_PUBLISH)
        goto reject;
    if (serow_publish_decode(body, body_len, &item, &error) != 0)
        goto reject;
    size_t name_len = channel->len - link->prefix_len - 1;
    if (item.channel.len != name_len || memcmp(item.channel.p, channel->str + link->prefix_len + 1, name_len) != 0) {
        error = "its item is for another channel";
        goto reject;
    }
    link->stats.received++;
    link->on_publish(link->ctx, payload->str, payload->len);
    return;
reject:
    link->stats.rejected++;
    serow_log_warn("redis %s:%d: a message on %.*s refused: %s", link->host, link->port,
                   channel->type == REDIS_REPLY_STRING ? (int)(channel->len > 200 ? 200 : channel->len) : 0,
                   channel->type == REDIS_REPLY_STRING ? channel->str : "", error);
}

/* One reply on the subscribed side: the confirmation, or a message.
 * -1 when it is neither (the connection is not what we think). */
static int sub_reply(struct serow_redis_link *link, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->type != REDIS_REPLY_STRING)
        return -1;
    const char *kind = r->element[0]->str;
    if (strcmp(kind, "pmessage") == 0 && r->elements == 4) {
        received(link, r);
        return 0;
    }
    if (strcmp(kind, "psubscribe") == 0) {
        if (link->ever_subscribed) {
            link->stats.reconnects++;
            serow_log_info("redis %s:%d: connected again", link->host, link->port);
        }
        link->subscribed = link->ever_subscribed = 1;
        link->down_logged = 0;
        link->backoff_ms = BACKOFF_FIRST_MS;
        return 0;
    }
    return -1;
}

void serow_redis_link_handle(struct serow_redis_link *link, enum serow_redis_side side, uint64_t now_ms)
{
    struct side *s = &link->sides[side];
    const char *why = NULL;
    if (s->state == SIDE_DOWN)
        return;
    if (s->state == SIDE_CONNECTING) {
        int r = finish_connect(s, &why);
        if (r > 0)
            return;
        if (r < 0) {
            link_down(link, side, why, now_ms);
            return;
        }
        s->state = SIDE_UP;
        s->c->flags |= REDIS_CONNECTED;
        /* A Redis whose host vanished without a word (no FIN, no RST) is
         * found by the kernel's probes, rather than never. */
        (void)redisEnableKeepAlive(s->c);
        if (side == SEROW_REDIS_SUB) {
            const char *argv[2] = { "PSUBSCRIBE", NULL };
            char pattern[SEROW_REDIS_MAX_PREFIX + 3];
            size_t argvlen[2] = { 10, link->prefix_len + 2 };
            memcpy(pattern, link->prefix, link->prefix_len);
            memcpy(pattern + link->prefix_len, ":*", 3);
            argv[1] = pattern;
            if (redisAppendCommandArgv(s->c, 2, argv, argvlen) != REDIS_OK) {
                link_down(link, side, "no memory", now_ms);
                return;
            }
        }
    }
    int done = 0;
    if (sdslen(s->c->obuf) > 0 && redisBufferWrite(s->c, &done) != REDIS_OK) {
        link_down(link, side, s->c->errstr, now_ms);
        return;
    }
    if (redisBufferRead(s->c) != REDIS_OK) {
        link_down(link, side, s->c->errstr[0] ? s->c->errstr : "closed by Redis", now_ms);
        return;
    }
    for (;;) {
        void *reply = NULL;
        if (redisGetReply(s->c, &reply) != REDIS_OK) {
            link_down(link, side, s->c->errstr, now_ms);
            return;
        }
        if (reply == NULL)
            return;
        const redisReply *r = reply;
        int bad = 0;
        if (side == SEROW_REDIS_SUB) {
            bad = sub_reply(link, r) != 0;
        } else {
            link->answers++;
            if (r->type == REDIS_REPLY_ERROR) {
                /* PUBLISH answers with its number of receivers; an error
                 * is Redis refusing (an ACL on the channel): logged,
                 * counted as lost, the link kept. */
                serow_log_error("redis %s:%d: PUBLISH refused: %.*s", link->host, link->port,
                                (int)(r->len > 200 ? 200 : r->len), r->str);
                link->stats.lost++;
                if (link->on_refused != NULL)
                    link->on_refused(link->ctx, link->answers);
            }
        }
        freeReplyObject(reply);
        if (bad) {
            link_down(link, side, "an unexpected reply on the subscription", now_ms);
            return;
        }
    }
}

int serow_redis_link_publish(struct serow_redis_link *link, const char *channel, size_t channel_len,
                             const char *message, size_t len)
{
    struct side *s = &link->sides[SEROW_REDIS_PUB];
    if (!serow_redis_link_ready(link) || sdslen(s->c->obuf) + len > SEROW_REDIS_MAX_PENDING
        || !serow_grip_channel_name_ok(channel, channel_len)) {
        link->stats.lost++;
        return -1;
    }
    char name[SEROW_REDIS_MAX_PREFIX + 1 + SEROW_GRIP_MAX_NAME];
    memcpy(name, link->prefix, link->prefix_len);
    name[link->prefix_len] = ':';
    memcpy(name + link->prefix_len + 1, channel, channel_len);
    const char *argv[3] = { "PUBLISH", name, message };
    size_t argvlen[3] = { 7, link->prefix_len + 1 + channel_len, len };
    if (redisAppendCommandArgv(s->c, 3, argv, argvlen) != REDIS_OK) {
        link->stats.lost++;
        return -1;
    }
    link->stats.published++;
    /* Written now when the socket takes it; what it does not take waits
     * for the loop (serow_redis_link_wants_write).  A failed write shows
     * on the next handle, as a read would. */
    int done = 0;
    (void)redisBufferWrite(s->c, &done);
    return 0;
}
