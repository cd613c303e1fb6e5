/*
 * websocket_events_target.c - fuzz target for src/http/websocket_events.c.
 *
 * The input is read three ways.  As an app's answer: event after event,
 * each from a buffer of exactly the bytes left (so that ASan sees a read
 * past it); an event's length stays within them and its content inside it;
 * every shorter prefix of an event (up to 256 bytes) only wants more or is
 * refused, never read as another event; what was read, encoded again, reads
 * back as the same event; an OTHER event is never one of the seven types;
 * a TEXT that is a control message once GRIP is on goes to the control
 * parser.  As a control message's JSON: what it reads has a known type, and
 * a subscribe's channel passes grip_instruct.h's rule.  As a
 * Sec-WebSocket-Extensions value: a prefix that fits.
 */
#include "targets.h"
#include "http/websocket_events.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

static void control(const uint8_t *json, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    CHECK(copy != NULL);
    if (len)
        memcpy(copy, json, len);
    struct serow_wse_control c;
    if (serow_wse_parse_control(copy, len, &c)) {
        CHECK(c.type >= SEROW_WSC_SUBSCRIBE && c.type <= SEROW_WSC_FLUSH_DELAYED);
        if (c.type == SEROW_WSC_SUBSCRIBE || c.type == SEROW_WSC_UNSUBSCRIBE)
            CHECK(c.channel_len > 0 && serow_grip_channel_name_ok(c.channel, c.channel_len));
        if (c.type == SEROW_WSC_SET_META)
            CHECK(c.name.p != NULL);
        CHECK(c.message_type >= SEROW_WSE_TEXT && c.message_type <= SEROW_WSE_PONG);
        /* the kept strings lie inside the JSON, and decode no longer than they stand */
        const struct serow_wse_json_string *kept[] = {&c.name, &c.value, &c.content};
        for (size_t i = 0; i < 3; i++) {
            if (kept[i]->p == NULL)
                continue;
            CHECK(kept[i]->p >= copy && kept[i]->p + kept[i]->len <= copy + len && kept[i]->len >= 2);
            char out[64];
            size_t n = serow_wse_control_string(kept[i], out, sizeof out);
            CHECK(n <= kept[i]->len - 2);
        }
    } else {
        CHECK(c.fail_why != NULL);
    }
    free(copy);
}

static void events(const uint8_t *data, size_t size)
{
    size_t at = 0;
    while (at < size) {
        size_t left = size - at;
        uint8_t *buf = malloc(left);
        CHECK(buf != NULL);
        memcpy(buf, data + at, left);
        struct serow_wse_event ev;
        long r = serow_wse_parse(buf, left, &ev);
        CHECK(r == SEROW_WSE_MORE || r == SEROW_WSE_FAIL || (r > 0 && (size_t)r <= left));
        if (r == SEROW_WSE_FAIL)
            CHECK(ev.fail_why != NULL);
        if (r <= 0) {
            free(buf);
            return;
        }
        CHECK(ev.type >= SEROW_WSE_OPEN && ev.type <= SEROW_WSE_OTHER);
        CHECK(ev.content >= buf && ev.content + ev.content_len <= buf + r);
        CHECK(ev.has_content || ev.content_len == 0);
        if (ev.type == SEROW_WSE_CLOSE && ev.close_code)
            CHECK(ev.reason == ev.content + 2 && ev.reason_len == ev.content_len - 2);
        for (long k = 0; k < r && k <= 256; k++) {
            struct serow_wse_event e2;
            long r2 = serow_wse_parse(buf, (size_t)k, &e2);
            CHECK(r2 == SEROW_WSE_MORE || r2 == SEROW_WSE_FAIL);
        }
        if (ev.type != SEROW_WSE_OTHER) {
            size_t n = serow_wse_encode(NULL, ev.type, ev.content, ev.content_len, ev.has_content);
            uint8_t *again = malloc(n);
            CHECK(again != NULL);
            CHECK(serow_wse_encode(again, ev.type, ev.content, ev.content_len, ev.has_content) == n);
            struct serow_wse_event e3;
            CHECK(serow_wse_parse(again, n, &e3) == (long)n);
            CHECK(e3.type == ev.type && e3.has_content == ev.has_content && e3.content_len == ev.content_len);
            CHECK(ev.content_len == 0 || memcmp(e3.content, ev.content, ev.content_len) == 0);
            CHECK(e3.close_code == ev.close_code);
            free(again);
        }
        const uint8_t *body;
        size_t body_len;
        if (ev.type == SEROW_WSE_TEXT &&
            serow_wse_app_message(&ev, 1, (const uint8_t *)"m:", 2, &body, &body_len) == SEROW_WSE_CONTROL)
            control(body, body_len);
        free(buf);
        at += (size_t)r;
    }
}

int fuzz_websocket_events_input(const uint8_t *data, size_t size)
{
    events(data, size);
    control(data, size);
    char prefix[SEROW_WSE_MAX_PREFIX];
    size_t plen;
    char *value = malloc(size ? size : 1);
    CHECK(value != NULL);
    if (size)
        memcpy(value, data, size);
    int r = serow_wse_grip_extension(value, size, prefix, &plen);
    CHECK(r == -1 || r == 0 || r == 1);
    if (r == 1)
        CHECK(plen <= SEROW_WSE_MAX_PREFIX);
    free(value);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_websocket_events_input(data, size);
}
#endif
