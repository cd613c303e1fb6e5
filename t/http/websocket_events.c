/*
 * t/http/websocket_events.c - GRIP's WebSocket-over-HTTP (src/http/websocket_events.c):
 * events encoded as Pushpin encodes them and read back, an app's answer read
 * event by event (every prefix of it only ever wanting more), the events
 * refused, what an app's TEXT and BINARY mean with GRIP on and off, control
 * messages, and the grip extension's parameters.  Then the fuzz target's
 * seeds (fuzz/corpus/websocket_events) run through it.
 * Prints "ok - NAME" / "not ok - NAME" (t/http/websocket_events.t).
 */
#include "http/websocket_events.h"
#include "replay.h"
#include "targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serow_unit.h"

#define B(s) (const uint8_t *)(s), sizeof(s) - 1

static int encoded_as(size_t n, const uint8_t *got, const uint8_t *want, size_t want_len)
{
    return n == want_len && memcmp(got, want, n) == 0;
}

static void test_encode(void)
{
    uint8_t out[1024];
    size_t n = serow_wse_encode(out, SEROW_WSE_OPEN, NULL, 0, 0);
    check(encoded_as(n, out, B("OPEN\r\n")) && serow_wse_encode(NULL, SEROW_WSE_OPEN, NULL, 0, 0) == n,
          "encode: OPEN, and the length asked with no buffer");
    n = serow_wse_encode(out, SEROW_WSE_TEXT, B("hello"), 1);
    check(encoded_as(n, out, B("TEXT 5\r\nhello\r\n")), "encode: TEXT 5");
    n = serow_wse_encode(out, SEROW_WSE_TEXT, (const uint8_t *)"", 0, 1);
    check(encoded_as(n, out, B("TEXT 0\r\n\r\n")), "encode: an empty TEXT keeps its length");
    uint8_t big[300];
    memset(big, 'x', sizeof big);
    n = serow_wse_encode(out, SEROW_WSE_BINARY, big, sizeof big, 1);
    check(n == 12 + 300 + 2 && memcmp(out, "BINARY 12c\r\n", 12) == 0 &&
          serow_wse_encode(NULL, SEROW_WSE_BINARY, big, sizeof big, 1) == n,
          "encode: BINARY, its length in lower-case hex");
    n = serow_wse_encode_close(out, 1000, B("bye"));
    check(encoded_as(n, out, B("CLOSE 5\r\n\x03\xE8" "bye\r\n")), "encode: CLOSE with a code and a reason");
    n = serow_wse_encode_close(out, 1005, NULL, 0);
    check(encoded_as(n, out, B("CLOSE\r\n")), "encode: a close without a code is CLOSE alone");
    n = serow_wse_encode(out, SEROW_WSE_DISCONNECT, NULL, 0, 0);
    check(encoded_as(n, out, B("DISCONNECT\r\n")), "encode: DISCONNECT");
    n = serow_wse_encode(out, SEROW_WSE_PING, B("p"), 1);
    check(encoded_as(n, out, B("PING 1\r\np\r\n")), "encode: PING with its payload");
}

/* Reads a whole body event by event; checks every prefix only wants more. */
static int read_body(const uint8_t *body, size_t len, struct serow_wse_event *evs, size_t cap,
                     size_t *count, const char **why)
{
    size_t at = 0;
    *count = 0;
    while (at < len) {
        if (*count == cap)
            return -2;
        long r = serow_wse_parse(body + at, len - at, &evs[*count]);
        /* each shorter prefix wants more, or is refused as the whole is */
        size_t upto = r > 0 ? (size_t)r : len - at;
        for (size_t k = 0; k < upto; k++) {
            struct serow_wse_event e;
            long rk = serow_wse_parse(body + at, k, &e);
            if (rk != SEROW_WSE_MORE && !(rk == SEROW_WSE_FAIL && r == SEROW_WSE_FAIL))
                return -2;
        }
        if (r == SEROW_WSE_FAIL) {
            *why = evs[*count].fail_why;
            return -1;
        }
        if (r == SEROW_WSE_MORE)
            return 0;
        (*count)++;
        at += (size_t)r;
    }
    return 1;
}

static void parse_fails(const char *name, const uint8_t *body, size_t len)
{
    struct serow_wse_event evs[8];
    size_t count;
    const char *why = NULL;
    int r = read_body(body, len, evs, 8, &count, &why);
    check(r == -1 && why != NULL, "parse: %s refused (%s)", name, why ? why : "-");
}

static void test_parse(void)
{
    static const char body[] =
        "OPEN\r\n"
        "TEXT 5\r\nhello\r\n"
        "BINARY 3\r\n\x00\r\n\r\n"
        "TEXT 0\r\n\r\n"
        "PING 2\r\nhi\r\n"
        "PONG\r\n"
        "KEEP-ALIVE\r\n"
        "TEXT A\r\n0123456789\r\n"
        "TEXT 0002\r\n\xC3\xA9\r\n"
        "CLOSE 5\r\n\x03\xE8" "bye\r\n"
        "CLOSE\r\n"
        "DISCONNECT\r\n";
    struct serow_wse_event evs[16];
    size_t count;
    const char *why = NULL;
    int r = read_body((const uint8_t *)body, sizeof body - 1, evs, 16, &count, &why);
    check(r == 1 && count == 12, "parse: twelve events, each prefix only wanting more");
    if (r != 1 || count != 12)
        return;
    check(evs[0].type == SEROW_WSE_OPEN && !evs[0].has_content, "parse: OPEN");
    check(evs[1].type == SEROW_WSE_TEXT && evs[1].has_content && evs[1].content_len == 5 &&
          memcmp(evs[1].content, "hello", 5) == 0, "parse: TEXT 5");
    check(evs[2].type == SEROW_WSE_BINARY && evs[2].content_len == 3 &&
          memcmp(evs[2].content, "\x00\r\n", 3) == 0, "parse: BINARY with a NUL and a CRLF inside");
    check(evs[3].type == SEROW_WSE_TEXT && evs[3].has_content && evs[3].content_len == 0, "parse: TEXT 0");
    check(evs[4].type == SEROW_WSE_PING && evs[5].type == SEROW_WSE_PONG && !evs[5].has_content,
          "parse: PING with content, PONG without");
    check(evs[6].type == SEROW_WSE_OTHER, "parse: a TYPE not known is read, to be skipped");
    check(evs[7].content_len == 10, "parse: an upper-case hex length");
    check(evs[8].content_len == 2, "parse: a hex length with leading zeros");
    check(evs[9].type == SEROW_WSE_CLOSE && evs[9].close_code == 1000 && evs[9].reason_len == 3 &&
          memcmp(evs[9].reason, "bye", 3) == 0, "parse: CLOSE with its code and reason");
    check(evs[10].type == SEROW_WSE_CLOSE && evs[10].close_code == 0, "parse: CLOSE without a code");
    check(evs[11].type == SEROW_WSE_DISCONNECT, "parse: DISCONNECT");

    /* what the encoder writes, the parser reads */
    uint8_t out[64];
    size_t n = serow_wse_encode_close(out, 4001, B("\xCE\xBA"));
    struct serow_wse_event e;
    check(serow_wse_parse(out, n, &e) == (long)n && e.close_code == 4001 && e.reason_len == 2,
          "parse: the encoder's CLOSE reads back");

    parse_fails("a lower-case TYPE", B("text 1\r\nx\r\n"));
    parse_fails("no TYPE", B("\r\n"));
    parse_fails("a TYPE of 33 bytes", B("ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG\r\n"));
    parse_fails("a tab after TYPE", B("TEXT\t1\r\nx\r\n"));
    parse_fails("a bare LF after TYPE", B("OPEN\n"));
    parse_fails("no length after the space", B("TEXT \r\nx\r\n"));
    parse_fails("a length that is not hex", B("TEXT 1g\r\nx\r\n"));
    parse_fails("a length of 17 hex digits", B("TEXT 00000000000000001\r\nx\r\n"));
    parse_fails("a bare LF after the length", B("TEXT 1\nx\r\n"));
    parse_fails("content longer than its length", B("TEXT 1\r\nxy\r\n"));
    parse_fails("content then a bare LF", B("TEXT 1\r\nx\n"));
    parse_fails("TEXT that is not UTF-8", B("TEXT 2\r\n\xC0\x80\r\n"));
    parse_fails("TEXT ending inside a character", B("TEXT 1\r\n\xC3\r\n"));
    parse_fails("CLOSE with one byte", B("CLOSE 1\r\n\x03\r\n"));
    parse_fails("CLOSE with code 1005", B("CLOSE 2\r\n\x03\xED\r\n"));
    parse_fails("CLOSE with code 999", B("CLOSE 2\r\n\x03\xE7\r\n"));
    parse_fails("CLOSE with a reason not UTF-8", B("CLOSE 3\r\n\x03\xE8\xFF\r\n"));
    {
        uint8_t ping[200];
        size_t m = serow_wse_encode(ping, SEROW_WSE_PING, (const uint8_t *)
            "0123456789012345678901234567890123456789012345678901234567890123456789"
            "012345678901234567890123456789012345678901234567890123456", 126, 1);
        parse_fails("PING of 126 bytes", ping, m);
    }
    long r2 = serow_wse_parse(B("TEXT 7fffffffffffffff\r\n"), &e);
    check(r2 == SEROW_WSE_MORE, "parse: a huge length waits (the caller bounds the body)");
}

static void test_app_message(void)
{
    struct serow_wse_event e;
    const uint8_t *body;
    size_t len;
    serow_wse_parse(B("TEXT 9\r\nc:{\"a\":1}\r\n"), &e);
    check(serow_wse_app_message(&e, 0, NULL, 0, &body, &len) == SEROW_WSE_MESSAGE && len == 9,
          "app message: without GRIP, \"c:\" is a message like any other");
    check(serow_wse_app_message(&e, 1, B("m:"), &body, &len) == SEROW_WSE_CONTROL && len == 7 &&
          memcmp(body, "{\"a\":1}", 7) == 0, "app message: with GRIP, TEXT \"c:...\" is a control message");
    serow_wse_parse(B("TEXT 7\r\nm:hello\r\n"), &e);
    check(serow_wse_app_message(&e, 1, B("m:"), &body, &len) == SEROW_WSE_MESSAGE && len == 5 &&
          memcmp(body, "hello", 5) == 0, "app message: with GRIP, the prefix is taken off");
    serow_wse_parse(B("TEXT 5\r\nhello\r\n"), &e);
    check(serow_wse_app_message(&e, 1, B("m:"), &body, &len) == SEROW_WSE_DROPPED,
          "app message: with GRIP, a message without the prefix is dropped");
    check(serow_wse_app_message(&e, 1, (const uint8_t *)"", 0, &body, &len) == SEROW_WSE_MESSAGE && len == 5,
          "app message: with an empty prefix, every message passes");
    serow_wse_parse(B("BINARY 3\r\nc:x\r\n"), &e);
    check(serow_wse_app_message(&e, 1, B("m:"), &body, &len) == SEROW_WSE_DROPPED,
          "app message: BINARY is never a control message");
    serow_wse_parse(B("BINARY 3\r\nm:\xFF\r\n"), &e);
    check(serow_wse_app_message(&e, 1, B("m:"), &body, &len) == SEROW_WSE_MESSAGE && len == 1 && body[0] == 0xFF,
          "app message: BINARY with the prefix");
}

static void control_case(const char *json, int ok_wanted, int type, const char *channel)
{
    struct serow_wse_control c;
    int ok = serow_wse_parse_control((const uint8_t *)json, strlen(json), &c);
    int right = ok == ok_wanted && (!ok || c.type == type) &&
                (!ok || channel == NULL ||
                 (c.channel_len == strlen(channel) && memcmp(c.channel, channel, c.channel_len) == 0));
    check(right, "control: %s %s%s%s", json, ok_wanted ? "read" : "refused",
          ok ? "" : " - ", ok ? "" : (c.fail_why ? c.fail_why : "?"));
}

static void test_control(void)
{
    control_case("{\"type\":\"subscribe\",\"channel\":\"room-1\"}", 1, SEROW_WSC_SUBSCRIBE, "room-1");
    control_case(" { \"channel\" : \"a\" , \"type\" : \"unsubscribe\" } ", 1, SEROW_WSC_UNSUBSCRIBE, "a");
    control_case("{\"type\":\"detach\"}", 1, SEROW_WSC_DETACH, NULL);
    control_case("{\"type\":\"session\",\"id\":\"s1\"}", 1, SEROW_WSC_SESSION, NULL);
    control_case("{\"type\":\"set-meta\",\"name\":\"user\",\"value\":\"x\"}", 1, SEROW_WSC_SET_META, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"{}\",\"timeout\":30}", 1, SEROW_WSC_KEEP_ALIVE, NULL);
    control_case("{\"type\":\"send-delayed\"}", 1, SEROW_WSC_SEND_DELAYED, NULL);
    control_case("{\"type\":\"flush-delayed\"}", 1, SEROW_WSC_FLUSH_DELAYED, NULL);
    control_case("{\"type\":\"subscribe\",\"channel\":\"\\u0041\\/b\",\"filters\":[\"skip-self\"],"
                 "\"n\":-1.5e+3,\"z\":0,\"o\":{\"a\":[true,false,null,{}],\"b\":[]}}",
                 1, SEROW_WSC_SUBSCRIBE, "A/b");
    control_case("{\"t\\u00e9\":\"\\ud83d\\ude00\",\"type\":\"detach\"}", 1, SEROW_WSC_DETACH, NULL);

    {
        /* the members set-meta and keep-alive carry */
        struct serow_wse_control c;
        const char *json = "{\"type\":\"keep-alive\",\"content\":\"a\\n\\u00e9\",\"message-type\":\"binary\","
                           "\"timeout\":45,\"mode\":\"interval\"}";
        char out[16];
        int ok = serow_wse_parse_control((const uint8_t *)json, strlen(json), &c);
        size_t n = ok ? serow_wse_control_string(&c.content, out, sizeof out) : 0;
        check(ok && n == 4 && memcmp(out, "a\n\xc3\xa9", 4) == 0 && c.message_type == SEROW_WSE_BINARY && c.timeout_s == 45 &&
                  c.mode == SEROW_WSE_KEEP_ALIVE_INTERVAL,
              "control: keep-alive's content decoded, message-type, timeout, mode");
        json = "{\"type\":\"keep-alive\"}";
        ok = serow_wse_parse_control((const uint8_t *)json, strlen(json), &c);
        check(ok && c.content.p == NULL && c.message_type == SEROW_WSE_TEXT && c.timeout_s == 0 && c.mode == SEROW_WSE_KEEP_ALIVE_IDLE,
              "control: keep-alive without content (off), text and idle by default");
        json = "{\"value\":\"x y\",\"type\":\"set-meta\",\"name\":\"User\"}";
        ok = serow_wse_parse_control((const uint8_t *)json, strlen(json), &c);
        check(ok && serow_wse_control_string(&c.name, out, sizeof out) == 4 && memcmp(out, "User", 4) == 0 &&
                  serow_wse_control_string(&c.value, out, sizeof out) == 3 && memcmp(out, "x y", 3) == 0,
              "control: set-meta's name and value");
    }
    control_case("{\"type\":\"set-meta\",\"value\":\"x\"}", 0, 0, NULL);
    control_case("{\"type\":\"set-meta\",\"name\":1}", 0, 0, NULL);
    control_case("{\"type\":\"set-meta\",\"name\":\"a\",\"name\":\"b\"}", 0, 0, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"x\",\"timeout\":0,\"message-type\":\"ping\"}", 1,
                 SEROW_WSC_KEEP_ALIVE, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"x\",\"timeout\":-1}", 0, 0, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"x\",\"timeout\":1.5}", 0, 0, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"x\",\"timeout\":2147483648}", 0, 0, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"x\",\"timeout\":\"30\"}", 0, 0, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"x\",\"mode\":\"often\"}", 0, 0, NULL);
    control_case("{\"type\":\"keep-alive\",\"content\":\"x\",\"message-type\":\"json\"}", 0, 0, NULL);
    control_case("", 0, 0, NULL);
    control_case("[]", 0, 0, NULL);
    control_case("{}", 0, 0, NULL);
    control_case("{\"type\":\"publish\"}", 0, 0, NULL);
    control_case("{\"type\":\"Subscribe\",\"channel\":\"a\"}", 0, 0, NULL);
    control_case("{\"type\":7}", 0, 0, NULL);
    control_case("{\"type\":\"subscribe\"}", 0, 0, NULL);
    control_case("{\"type\":\"subscribe\",\"channel\":\"\"}", 0, 0, NULL);
    control_case("{\"type\":\"subscribe\",\"channel\":[\"a\"]}", 0, 0, NULL);
    control_case("{\"type\":\"subscribe\",\"channel\":\"a b\"}", 0, 0, NULL);
    control_case("{\"type\":\"subscribe\",\"channel\":\"a,b\"}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"type\":\"detach\"}", 0, 0, NULL);
    control_case("{\"type\":\"detach\"} x", 0, 0, NULL);
    control_case("{\"type\":\"detach\",}", 0, 0, NULL);
    control_case("{\"type\":\"detach\" \"x\":1}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":01}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":1.}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":tru}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":\"\\ud800\"}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":\"\\udc00\"}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":\"\\q\"}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":\"a\tb\"}", 0, 0, NULL);
    control_case("{\"type\":\"detach\",\"x\":\"open", 0, 0, NULL);
    {
        char deep[200] = "{\"type\":\"detach\",\"x\":";
        size_t n = strlen(deep);
        for (int i = 0; i < 40; i++)
            deep[n++] = '[';
        for (int i = 0; i < 40; i++)
            deep[n++] = ']';
        deep[n++] = '}';
        deep[n] = 0;
        control_case(deep, 0, 0, NULL);
    }
    {
        char name[300];
        int n = snprintf(name, sizeof name, "{\"type\":\"subscribe\",\"channel\":\"");
        for (int i = 0; i < 129; i++)
            name[n++] = 'c';
        snprintf(name + n, sizeof name - (size_t)n, "\"}");
        control_case(name, 0, 0, NULL);
    }
}

static void grip_case(const char *value, int want, const char *want_prefix)
{
    char prefix[SEROW_WSE_MAX_PREFIX];
    size_t plen = 99;
    int r = serow_wse_grip_extension(value, strlen(value), prefix, &plen);
    int ok = r == want && (want != 1 || (plen == strlen(want_prefix) && memcmp(prefix, want_prefix, plen) == 0));
    check(ok, "grip extension: [%s] is %s", value, want == 1 ? "GRIP" : want == 0 ? "not GRIP" : "refused");
}

static void test_grip_extension(void)
{
    grip_case("grip", 1, "m:");
    grip_case("GRIP", 1, "m:");
    grip_case("grip; message-prefix=\"\"", 1, "");
    grip_case("grip;message-prefix=x_", 1, "x_");
    grip_case("grip; message-prefix=x:", -1, NULL); /* ':' is no token character: quote it */
    grip_case("permessage-deflate; client_max_window_bits, grip ; message-prefix=\"a\\\"b\"", 1, "a\"b");
    grip_case("grip; other=1", 1, "m:");
    grip_case("permessage-deflate", 0, NULL);
    grip_case("gripper", 0, NULL);
    grip_case("", -1, NULL);
    grip_case("grip;", -1, NULL);
    grip_case("grip,", -1, NULL);
    grip_case("grip; message-prefix=\"open", -1, NULL);
    grip_case("grip; message-prefix=\"01234567890123456789012345678901234567890123456789012345678901234\"",
              -1, NULL);
}

int main(int argc, char **argv)
{
    test_encode();
    test_parse();
    test_app_message();
    test_control();
    test_grip_extension();
    int replayed = replay_paths("websocket_events", fuzz_websocket_events_input, argc - 1, argv + 1);
    check(argc < 2 || replayed > 0, "the fuzz target on %d seeds and regression inputs", replayed);
    return checks_done();
}
