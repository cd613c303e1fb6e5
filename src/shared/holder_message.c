/*
 * holder_message.c - the messages sent to the connection holder about held
 * connections, encoded and decoded (holder_message.h).  Owns their byte
 * layout and its checks; no I/O, no allocation.
 */
#include "shared/holder_message.h"

#include <string.h>

/* A writer that counts when it has nowhere to write. */
struct writer {
    unsigned char *p;
    size_t used, cap;
    int counting;
};

static void put(struct writer *w, const void *bytes, size_t len)
{
    if (len && !w->counting && w->used <= w->cap && len <= w->cap - w->used)
        memcpy(w->p + w->used, bytes, len);
    w->used += len;
}

static void put_u8(struct writer *w, unsigned v)
{
    unsigned char b = (unsigned char)v;
    put(w, &b, 1);
}

static void put_u16(struct writer *w, unsigned v)
{
    unsigned char b[2] = { (unsigned char)(v >> 8), (unsigned char)v };
    put(w, b, 2);
}

static void put_u32(struct writer *w, uint32_t v)
{
    unsigned char b[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                           (unsigned char)v };
    put(w, b, 4);
}

static void put_str16(struct writer *w, const char *p, size_t len)
{
    put_u16(w, (unsigned)len);
    put(w, p, len);
}

static void put_str32(struct writer *w, const char *p, size_t len)
{
    put_u32(w, (uint32_t)len);
    put(w, p, len);
}

/* The frame head, its length filled in by finish(). */
static void start(struct writer *w, char *out, size_t cap, enum serow_holder_message_type type)
{
    w->p = (unsigned char *)out;
    w->used = 0;
    w->cap = cap;
    w->counting = out == NULL;
    unsigned char head[SEROW_HOLDER_FRAME_HEAD] = { 'S', SEROW_HOLDER_VERSION, (unsigned char)type, 0, 0, 0, 0, 0 };
    put(w, head, sizeof head);
}

static size_t finish(struct writer *w)
{
    size_t body = w->used - SEROW_HOLDER_FRAME_HEAD;
    if (body > SEROW_HOLDER_MAX_BODY)
        return 0;
    if (w->counting)
        return w->used;
    if (w->used > w->cap)
        return 0;
    w->p[4] = (unsigned char)(body >> 24);
    w->p[5] = (unsigned char)(body >> 16);
    w->p[6] = (unsigned char)(body >> 8);
    w->p[7] = (unsigned char)body;
    return w->used;
}

/* A reader that stops at the first byte it lacks: every get after that
 * returns zeros and the decode is refused at its end. */
struct reader {
    const unsigned char *p, *end;
    int short_read;
};

static int take(struct reader *r, size_t len, const unsigned char **at)
{
    if (r->short_read || len > (size_t)(r->end - r->p)) {
        r->short_read = 1;
        return 0;
    }
    *at = r->p;
    r->p += len;
    return 1;
}

static unsigned get_u8(struct reader *r)
{
    const unsigned char *b;
    return take(r, 1, &b) ? b[0] : 0;
}

static unsigned get_u16(struct reader *r)
{
    const unsigned char *b;
    return take(r, 2, &b) ? (unsigned)b[0] << 8 | b[1] : 0;
}

static uint32_t get_u32(struct reader *r)
{
    const unsigned char *b;
    return take(r, 4, &b) ? (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3] : 0;
}

static struct serow_bytes get_bytes(struct reader *r, uint32_t len)
{
    const unsigned char *b;
    struct serow_bytes s = { "", 0 };
    if (take(r, len, &b)) {
        s.p = (const char *)b;
        s.len = len;
    }
    return s;
}

static struct serow_bytes get_str16(struct reader *r)
{
    return get_bytes(r, get_u16(r));
}

static struct serow_bytes get_str32(struct reader *r)
{
    return get_bytes(r, get_u32(r));
}

long serow_holder_frame(const char *buf, size_t len, enum serow_holder_message_type *type,
                        const char **body, size_t *body_len)
{
    const unsigned char *b = (const unsigned char *)buf;
    if (len >= 1 && b[0] != 'S')
        return -1;
    if (len >= 2 && b[1] != SEROW_HOLDER_VERSION)
        return -1;
    if (len >= 3 && b[2] != SEROW_HOLDER_PUBLISH && b[2] != SEROW_HOLDER_HOLD)
        return -1;
    if (len >= 4 && b[3] != 0)
        return -1;
    if (len < SEROW_HOLDER_FRAME_HEAD)
        return 0;
    uint32_t n = (uint32_t)b[4] << 24 | (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
    if (n > SEROW_HOLDER_MAX_BODY)
        return -1;
    if (len - SEROW_HOLDER_FRAME_HEAD < n)
        return 0;
    *type = (enum serow_holder_message_type)b[2];
    *body = buf + SEROW_HOLDER_FRAME_HEAD;
    *body_len = n;
    return (long)(SEROW_HOLDER_FRAME_HEAD + n);
}

/* A header name: an RFC 9110 token. */
int serow_publish_header_name_ok(const char *p, size_t len)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    if (len == 0 || len > 256)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c && strchr(extra, c))))
            return 0;
    }
    return 1;
}

/* A header value, or a reason phrase: no control byte but the tab. */
int serow_publish_header_value_ok(const char *p, size_t len)
{
    if (len > 8192)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

/* The checks both sides hold a publish to.  NULL, or why not. */
static const char *publish_fault(const struct serow_publish_item *item)
{
    if (!serow_grip_channel_name_ok(item->channel.p, item->channel.len))
        return "invalid channel name";
    if (item->id.len && !serow_grip_id_ok(item->id.p, item->id.len))
        return "invalid id";
    if (item->prev_id.len && !serow_grip_id_ok(item->prev_id.p, item->prev_id.len))
        return "invalid prev-id";
    if (item->formats == 0 || (item->formats & ~(unsigned)(SEROW_FORMAT_HTTP_STREAM | SEROW_FORMAT_HTTP_RESPONSE
                                                            | SEROW_FORMAT_WS_MESSAGE)))
        return "no formats, or an unknown one";
    if ((item->formats & SEROW_FORMAT_HTTP_STREAM) && item->stream.action > SEROW_ACTION_CLOSE)
        return "invalid http-stream action";
    if (item->formats & SEROW_FORMAT_HTTP_RESPONSE) {
        if (item->response.code < 100 || item->response.code > 999)
            return "invalid http-response code";
        if (!serow_publish_header_value_ok(item->response.reason.p, item->response.reason.len))
            return "invalid http-response reason";
        if (item->response.num_headers > SEROW_PUBLISH_MAX_HEADERS)
            return "too many http-response headers";
        for (unsigned i = 0; i < item->response.num_headers; i++)
            if (!serow_publish_header_name_ok(item->response.header_names[i].p, item->response.header_names[i].len)
                || !serow_publish_header_value_ok(item->response.header_values[i].p,
                                                  item->response.header_values[i].len))
                return "invalid http-response header";
    }
    if ((item->formats & SEROW_FORMAT_WS_MESSAGE)
        && (item->ws.action > SEROW_ACTION_CLOSE || item->ws.type > SEROW_WS_PONG))
        return "invalid ws-message";
    return NULL;
}

size_t serow_publish_encode(const struct serow_publish_item *item, char *out, size_t cap)
{
    if (publish_fault(item))
        return 0;
    struct writer w;
    start(&w, out, cap, SEROW_HOLDER_PUBLISH);
    put_str16(&w, item->channel.p, item->channel.len);
    put_str16(&w, item->id.p, item->id.len);
    put_str16(&w, item->prev_id.p, item->prev_id.len);
    put_u8(&w, item->formats);
    if (item->formats & SEROW_FORMAT_HTTP_STREAM) {
        put_u8(&w, item->stream.action);
        put_str32(&w, item->stream.content.p, item->stream.content.len);
    }
    if (item->formats & SEROW_FORMAT_HTTP_RESPONSE) {
        put_u16(&w, item->response.code);
        put_str16(&w, item->response.reason.p, item->response.reason.len);
        put_u8(&w, item->response.num_headers);
        for (unsigned i = 0; i < item->response.num_headers; i++) {
            put_str16(&w, item->response.header_names[i].p, item->response.header_names[i].len);
            put_str16(&w, item->response.header_values[i].p, item->response.header_values[i].len);
        }
        put_str32(&w, item->response.body.p, item->response.body.len);
    }
    if (item->formats & SEROW_FORMAT_WS_MESSAGE) {
        put_u8(&w, item->ws.action);
        put_u8(&w, item->ws.type);
        put_u16(&w, item->ws.close_code);
        put_str32(&w, item->ws.content.p, item->ws.content.len);
    }
    return finish(&w);
}

size_t serow_publish_item_bytes(const struct serow_publish_item *item)
{
    size_t n = (size_t)item->channel.len + item->id.len + item->prev_id.len;
    if (item->formats & SEROW_FORMAT_HTTP_STREAM)
        n += item->stream.content.len;
    if (item->formats & SEROW_FORMAT_HTTP_RESPONSE) {
        n += (size_t)item->response.reason.len + item->response.body.len;
        for (unsigned i = 0; i < item->response.num_headers && i < SEROW_PUBLISH_MAX_HEADERS; i++)
            n += (size_t)item->response.header_names[i].len + item->response.header_values[i].len;
    }
    if (item->formats & SEROW_FORMAT_WS_MESSAGE)
        n += item->ws.content.len;
    return n;
}

int serow_publish_decode(const char *body, size_t len, struct serow_publish_item *item, const char **error)
{
    struct reader r = { (const unsigned char *)body, (const unsigned char *)body + len, 0 };
    memset(item, 0, sizeof *item);
    item->channel = get_str16(&r);
    item->id = get_str16(&r);
    item->prev_id = get_str16(&r);
    item->formats = get_u8(&r);
    if (item->formats & SEROW_FORMAT_HTTP_STREAM) {
        item->stream.action = (uint8_t)get_u8(&r);
        item->stream.content = get_str32(&r);
    }
    if (item->formats & SEROW_FORMAT_HTTP_RESPONSE) {
        item->response.code = (uint16_t)get_u16(&r);
        item->response.reason = get_str16(&r);
        unsigned n = get_u8(&r);
        if (n > SEROW_PUBLISH_MAX_HEADERS) {
            *error = "too many http-response headers";
            return -1;
        }
        for (unsigned i = 0; i < n; i++) {
            item->response.header_names[i] = get_str16(&r);
            item->response.header_values[i] = get_str16(&r);
        }
        item->response.num_headers = (uint16_t)n;
        item->response.body = get_str32(&r);
    }
    if (item->formats & SEROW_FORMAT_WS_MESSAGE) {
        item->ws.action = (uint8_t)get_u8(&r);
        item->ws.type = (uint8_t)get_u8(&r);
        item->ws.close_code = (uint16_t)get_u16(&r);
        item->ws.content = get_str32(&r);
    }
    if (r.short_read) {
        *error = "truncated publish";
        return -1;
    }
    if (r.p != r.end) {
        *error = "bytes after the publish";
        return -1;
    }
    const char *fault = publish_fault(item);
    if (fault) {
        *error = fault;
        return -1;
    }
    return 0;
}

static void put_grip_str(struct writer *w, const struct serow_grip_instruct *in, struct serow_grip_str s)
{
    put_str16(w, serow_grip_str_ptr(in, s), s.len);
}

/* Only what the holder acts on travels: the hold, its channels, timeout and
 * keep-alive.  The rest of the instruction was the worker's to apply. */
size_t serow_hold_encode(const struct serow_grip_instruct *in, const struct serow_hold_extra *extra,
                         char *out, size_t cap)
{
    if (in->hold == SEROW_GRIP_NO_HOLD || in->num_channels == 0 || in->num_channels > SEROW_GRIP_MAX_CHANNELS)
        return 0;
    struct writer w;
    start(&w, out, cap, SEROW_HOLDER_HOLD);
    put_u8(&w, in->hold);
    put_u32(&w, in->timeout);
    put_u8(&w, in->keep_alive_mode);
    put_u32(&w, in->keep_alive_timeout);
    put_grip_str(&w, in, in->keep_alive_data);
    put_u8(&w, in->num_channels);
    for (unsigned i = 0; i < in->num_channels; i++) {
        const struct serow_grip_channel *c = &in->channels[i];
        put_grip_str(&w, in, c->name);
        put_u8(&w, c->has_prev_id);
        put_grip_str(&w, in, c->prev_id);
        put_u8(&w, c->num_filters);
        for (unsigned f = 0; f < c->num_filters; f++)
            put_grip_str(&w, in, c->filters[f]);
    }
    put_u8(&w, extra->chunked);
    put_str32(&w, extra->timeout_response.p, extra->timeout_response.len);
    return finish(&w);
}

/* A string of the message copied into the instruction's bytes. */
static int copy_in(struct serow_grip_instruct *in, struct serow_bytes b, struct serow_grip_str *s)
{
    if (b.len > (size_t)(SEROW_GRIP_BYTES - in->bytes_used))
        return -1;
    if (b.len)
        memcpy(in->bytes + in->bytes_used, b.p, b.len);
    s->off = in->bytes_used;
    s->len = (uint16_t)b.len;
    in->bytes_used += (uint16_t)b.len;
    return 0;
}

static int refuse(const char **error, const char *why)
{
    *error = why;
    return -1;
}

int serow_hold_decode(const char *body, size_t len, struct serow_grip_instruct *in,
                      struct serow_hold_extra *extra, const char **error)
{
    struct reader r = { (const unsigned char *)body, (const unsigned char *)body + len, 0 };
    memset(in, 0, offsetof(struct serow_grip_instruct, bytes));
    memset(extra, 0, sizeof *extra);
    unsigned hold = get_u8(&r);
    if (hold != SEROW_GRIP_HOLD_RESPONSE && hold != SEROW_GRIP_HOLD_STREAM)
        return refuse(error, r.short_read ? "truncated hold" : "invalid hold mode");
    in->hold = (enum serow_grip_hold)hold;
    in->timeout = get_u32(&r);
    in->timeout_given = 1;
    unsigned mode = get_u8(&r);
    if (mode > SEROW_GRIP_KEEP_ALIVE_INTERVAL)
        return refuse(error, "invalid keep-alive mode");
    in->keep_alive_mode = (enum serow_grip_keep_alive_mode)mode;
    in->keep_alive_timeout = get_u32(&r);
    struct serow_bytes ka = get_str16(&r);
    if (ka.len > SEROW_GRIP_MAX_KEEP_ALIVE || copy_in(in, ka, &in->keep_alive_data) < 0)
        return refuse(error, "keep-alive data too large");
    if (in->timeout > SEROW_GRIP_MAX_SECONDS || in->keep_alive_timeout > SEROW_GRIP_MAX_SECONDS)
        return refuse(error, "invalid timeout");
    if ((mode == SEROW_GRIP_KEEP_ALIVE_NONE) != (ka.len == 0) && !r.short_read)
        return refuse(error, "keep-alive data without a mode, or a mode without data");
    unsigned n = get_u8(&r);
    if (!r.short_read && (n == 0 || n > SEROW_GRIP_MAX_CHANNELS))
        return refuse(error, "invalid number of channels");
    for (unsigned i = 0; i < n && !r.short_read; i++) {
        struct serow_grip_channel *c = &in->channels[i];
        struct serow_bytes name = get_str16(&r);
        unsigned has_prev_id = get_u8(&r);
        struct serow_bytes prev_id = get_str16(&r);
        unsigned filters = get_u8(&r);
        if (r.short_read)
            break;
        if (!serow_grip_channel_name_ok(name.p, name.len))
            return refuse(error, "invalid channel name");
        if (has_prev_id > 1 || (has_prev_id ? !serow_grip_id_ok(prev_id.p, prev_id.len) : prev_id.len != 0))
            return refuse(error, "invalid prev-id");
        if (filters > SEROW_GRIP_MAX_FILTERS)
            return refuse(error, "too many filters");
        if (copy_in(in, name, &c->name) < 0 || copy_in(in, prev_id, &c->prev_id) < 0)
            return refuse(error, "hold too large");
        c->has_prev_id = (uint8_t)has_prev_id;
        for (unsigned f = 0; f < filters; f++) {
            struct serow_bytes filter = get_str16(&r);
            if (r.short_read)
                break;
            if (filter.len == 0 || copy_in(in, filter, &c->filters[f]) < 0)
                return refuse(error, "invalid filter");
        }
        c->num_filters = (uint8_t)filters;
        in->num_channels = (uint8_t)(i + 1);
    }
    unsigned chunked = get_u8(&r);
    extra->timeout_response = get_str32(&r);
    if (r.short_read)
        return refuse(error, "truncated hold");
    if (chunked > 1)
        return refuse(error, "invalid framing flag");
    extra->chunked = (uint8_t)chunked;
    if (r.p != r.end)
        return refuse(error, "bytes after the hold");
    return 0;
}
