/*
 * The messages the connection holder is sent about held connections
 * (src/shared/holder_message.c): publishes and holds survive a round trip
 * byte for byte; any truncation, a flipped byte or a broken rule is refused
 * without reading past the buffer (each input is copied into a buffer of
 * exactly its size, for ASan), and whatever the decoder accepts encodes
 * back to the very bytes it came from.
 * Prints "ok - NAME" / "not ok - NAME" per check (t/holding/holder_message.t).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/holder_message.h"
#include "serow_unit.h"

static struct serow_bytes B(const char *s)
{
    return (struct serow_bytes){ s, (uint32_t)strlen(s) };
}

static int same(struct serow_bytes a, struct serow_bytes b)
{
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

/* Decodes a whole message (frame and body) from a copy of exactly its size.
 * 1 accepted, 0 refused. */
static int decode_copy(const char *msg, size_t len, int want_type)
{
    char *copy = malloc(len ? len : 1);
    memcpy(copy, msg, len);
    enum serow_holder_message_type type;
    const char *body, *error = NULL;
    size_t body_len;
    int ok = 0;
    long n = serow_holder_frame(copy, len, &type, &body, &body_len);
    if (n > 0 && (size_t)n == len && (int)type == want_type) {
        if (type == SEROW_HOLDER_PUBLISH) {
            struct serow_publish_item item;
            ok = serow_publish_decode(body, body_len, &item, &error) == 0;
            if (ok) {
                /* canonical: it encodes back to the same bytes */
                static char again[1 << 16];
                size_t m = serow_publish_encode(&item, again, sizeof again);
                if (m != len || memcmp(again, copy, len) != 0)
                    abort();
            }
        } else {
            static struct serow_grip_instruct in;
            struct serow_hold_extra extra;
            ok = serow_hold_decode(body, body_len, &in, &extra, &error) == 0;
            if (ok) {
                static char again[1 << 16];
                size_t m = serow_hold_encode(&in, &extra, again, sizeof again);
                if (m != len || memcmp(again, copy, len) != 0)
                    abort();
            }
        }
        if (!ok && error == NULL)
            abort();
    }
    free(copy);
    return ok;
}

/* Every truncation refused; every single-byte change refused or canonical. */
static void mutate(const char *msg, size_t len, int type, const char *what)
{
    int all_refused = 1;
    for (size_t cut = 0; cut < len; cut++) {
        enum serow_holder_message_type t;
        const char *body;
        size_t body_len;
        if (serow_holder_frame(msg, cut, &t, &body, &body_len) != 0)
            all_refused = 0; /* a prefix is "need more", never a message */
        /* the body cut short, with a frame head that says so */
        if (cut >= SEROW_HOLDER_FRAME_HEAD) {
            char *copy = malloc(cut);
            memcpy(copy, msg, cut);
            size_t n = cut - SEROW_HOLDER_FRAME_HEAD;
            copy[4] = (char)(n >> 24), copy[5] = (char)(n >> 16), copy[6] = (char)(n >> 8), copy[7] = (char)n;
            if (decode_copy(copy, cut, type))
                all_refused = 0;
            free(copy);
        }
    }
    check(all_refused, "%s: every truncation refused", what);

    char *copy = malloc(len);
    for (size_t i = SEROW_HOLDER_FRAME_HEAD; i < len; i++) {
        for (int v = 0; v < 256; v += 17) {
            memcpy(copy, msg, len);
            copy[i] = (char)(copy[i] ^ (v | 1));
            decode_copy(copy, len, type); /* aborts if it reads wrong or accepts a non-canonical form */
        }
    }
    free(copy);
    check(1, "%s: every flipped byte refused, or decoded to a message that encodes back to it", what);
}

int main(void)
{
    static char buf[1 << 16];

    /* A publish with all three formats. */
    struct serow_publish_item item;
    memset(&item, 0, sizeof item);
    item.channel = B("news");
    item.id = B("42");
    item.prev_id = B("41");
    item.formats = SEROW_FORMAT_HTTP_STREAM | SEROW_FORMAT_HTTP_RESPONSE | SEROW_FORMAT_WS_MESSAGE;
    item.stream.content = B("id: 42\ndata: hello\n\n");
    item.response.code = 200;
    item.response.reason = B("OK");
    item.response.num_headers = 2;
    item.response.header_names[0] = B("Content-Type");
    item.response.header_values[0] = B("text/plain");
    item.response.header_names[1] = B("X-Id");
    item.response.header_values[1] = B("42");
    item.response.body = B("hello\n");
    item.ws.type = SEROW_WS_TEXT;
    item.ws.content = B("hello");

    size_t need = serow_publish_encode(&item, NULL, 0);
    size_t len = serow_publish_encode(&item, buf, sizeof buf);
    check(len > SEROW_HOLDER_FRAME_HEAD && len == need, "a publish encodes; its length can be asked first");
    check(serow_publish_encode(&item, buf, len - 1) == 0, "not into a buffer one byte short");
    len = serow_publish_encode(&item, buf, sizeof buf);

    enum serow_holder_message_type type;
    const char *body, *error = NULL;
    size_t body_len;
    check(serow_holder_frame(buf, len, &type, &body, &body_len) == (long)len && type == SEROW_HOLDER_PUBLISH
          && body_len == len - SEROW_HOLDER_FRAME_HEAD, "its frame");
    struct serow_publish_item out;
    check(serow_publish_decode(body, body_len, &out, &error) == 0, "it decodes");
    check(same(out.channel, item.channel) && same(out.id, item.id) && same(out.prev_id, item.prev_id)
          && out.formats == item.formats, "channel, id, prev-id, formats");
    check(same(out.stream.content, item.stream.content) && out.stream.action == SEROW_ACTION_SEND, "http-stream");
    check(out.response.code == 200 && same(out.response.reason, item.response.reason) && out.response.num_headers == 2
          && same(out.response.header_names[1], item.response.header_names[1])
          && same(out.response.header_values[0], item.response.header_values[0])
          && same(out.response.body, item.response.body), "http-response");
    check(out.ws.type == SEROW_WS_TEXT && same(out.ws.content, item.ws.content), "ws-message");
    check(out.channel.p >= buf && out.channel.p < buf + len, "what it decodes points into the message");
    mutate(buf, len, SEROW_HOLDER_PUBLISH, "a publish");

    /* Two messages back to back, as a stream carries them. */
    {
        static char two[1 << 17];
        memcpy(two, buf, len);
        memcpy(two + len, buf, len);
        long n = serow_holder_frame(two, 2 * len, &type, &body, &body_len);
        check(n == (long)len && serow_holder_frame(two + n, 2 * len - (size_t)n, &type, &body, &body_len) == (long)len,
              "two messages in one buffer: one frame at a time");
    }

    /* A close with no content, no id. */
    memset(&item, 0, sizeof item);
    item.channel = B("c");
    item.formats = SEROW_FORMAT_HTTP_STREAM;
    item.stream.action = SEROW_ACTION_CLOSE;
    len = serow_publish_encode(&item, buf, sizeof buf);
    check(len > 0 && serow_holder_frame(buf, len, &type, &body, &body_len) > 0
          && serow_publish_decode(body, body_len, &out, &error) == 0 && out.id.len == 0
          && out.stream.action == SEROW_ACTION_CLOSE && out.stream.content.len == 0, "an http-stream close, no id");

    /* Rules the encoder keeps too. */
    item.channel = B("a b");
    check(serow_publish_encode(&item, buf, sizeof buf) == 0, "no publish to an invalid channel name");
    item.channel = B("c");
    item.formats = 0;
    check(serow_publish_encode(&item, buf, sizeof buf) == 0, "nor with no format");
    item.formats = SEROW_FORMAT_HTTP_RESPONSE;
    item.response.code = 200;
    item.response.num_headers = 1;
    item.response.header_names[0] = B("X-A");
    item.response.header_values[0] = B("1\r\nSet-Cookie: x=1");
    check(serow_publish_encode(&item, buf, sizeof buf) == 0, "nor with a header value that would split the response");
    item.response.header_values[0] = B("1");
    item.response.header_names[0] = B("X A");
    check(serow_publish_encode(&item, buf, sizeof buf) == 0, "nor with a header name that is not a token");
    item.response.header_names[0] = B("X-A");
    item.response.code = 99;
    check(serow_publish_encode(&item, buf, sizeof buf) == 0, "nor with a status code under 100");

    /* A frame head that cannot start a message. */
    check(serow_holder_frame("X", 1, &type, &body, &body_len) == -1, "a frame that does not start with S");
    check(serow_holder_frame("S\x02", 2, &type, &body, &body_len) == -1, "another version");
    check(serow_holder_frame("S\x01\x09", 3, &type, &body, &body_len) == -1, "an unknown type");
    check(serow_holder_frame("S\x01\x01\x00\x7f\xff\xff\xff", 8, &type, &body, &body_len) == -1, "a body over the limit");
    check(serow_holder_frame("S\x01\x01\x00\x00\x00\x00\x05" "abc", 11, &type, &body, &body_len) == 0,
          "a body not all there yet: need more");

    /* A hold from the Grip-* headers an app sent. */
    static struct serow_grip_instruct in, back;
    struct http_header headers[] = {
        { "Grip-Hold", 9, "stream", 6 },
        { "Grip-Channel", 12, "news; prev-id=41, sport; filter=skip-self", 41 },
        { "Grip-Keep-Alive", 15, ":\\n\\n; format=cstring; timeout=20; mode=interval", 48 },
    };
    check(serow_grip_parse(headers, 3, &in) == SEROW_GRIP_OK, "(the headers parse)");
    struct serow_hold_extra extra = { 1, B("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") }, extra_back;
    len = serow_hold_encode(&in, &extra, buf, sizeof buf);
    check(len > 0 && len == serow_hold_encode(&in, &extra, NULL, 0), "a hold encodes");
    check(serow_holder_frame(buf, len, &type, &body, &body_len) == (long)len && type == SEROW_HOLDER_HOLD, "its frame");
    check(serow_hold_decode(body, body_len, &back, &extra_back, &error) == 0, "it decodes");
    check(back.hold == SEROW_GRIP_HOLD_STREAM && back.num_channels == 2 && back.timeout == in.timeout
          && back.keep_alive_mode == SEROW_GRIP_KEEP_ALIVE_INTERVAL && back.keep_alive_timeout == 20
          && back.keep_alive_data.len == 3 && memcmp(serow_grip_str_ptr(&back, back.keep_alive_data), ":\n\n", 3) == 0,
          "mode, timeout, keep-alive");
    check(back.channels[0].has_prev_id && back.channels[0].prev_id.len == 2
          && memcmp(serow_grip_str_ptr(&back, back.channels[0].prev_id), "41", 2) == 0
          && back.channels[1].num_filters == 1 && back.channels[1].filters[0].len == 9, "channels, prev-id, filters");
    check(extra_back.chunked == 1 && same(extra_back.timeout_response, extra.timeout_response),
          "framing and the timeout response");
    mutate(buf, len, SEROW_HOLDER_HOLD, "a hold");

    in.hold = SEROW_GRIP_NO_HOLD;
    check(serow_hold_encode(&in, &extra, buf, sizeof buf) == 0, "no hold message without a hold");

    /* Random bytes behind valid frame heads: nothing read out of bounds. */
    srand(29);
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        size_t n = SEROW_HOLDER_FRAME_HEAD + (size_t)(rand() % 64);
        char *msg = malloc(n);
        for (size_t j = SEROW_HOLDER_FRAME_HEAD; j < n; j++)
            msg[j] = (char)(rand() % 4 == 0 ? rand() % 4 : rand());
        size_t b = n - SEROW_HOLDER_FRAME_HEAD;
        int t = 1 + i % 2;
        memcpy(msg, (char[]){ 'S', 1, (char)t, 0, (char)(b >> 24), (char)(b >> 16), (char)(b >> 8), (char)b }, 8);
        accepted += decode_copy(msg, n, t);
        free(msg);
    }
    printf("# %d of 20000 random bodies accepted (each canonical)\n", accepted);
    check(1, "random bodies: refused or canonical, none read out of bounds");

    return checks_done();
}
