/*
 * The Grip-* headers of a response read into one struct
 * (src/http/grip_instruct.c): what Pushpin reads, the defaults it applies,
 * the bounds Serow adds, and a reason for every refusal.
 * Prints "ok - NAME" / "not ok - NAME" per check (t/holding/grip_instruct.t).
 */
#include <stdio.h>
#include <string.h>

#include "http/grip_instruct.h"
#include "serow_unit.h"

static struct serow_grip_instruct in;

/* Parses "Name: value" lines (NULL-terminated list). */
static int parse(const char *const *lines)
{
    static struct http_header headers[64];
    size_t n = 0;
    for (; lines[n]; n++) {
        const char *colon = strchr(lines[n], ':');
        headers[n].name = lines[n];
        headers[n].name_len = (size_t)(colon - lines[n]);
        headers[n].value = colon + 2;
        headers[n].value_len = strlen(colon + 2);
    }
    return serow_grip_parse(headers, n, &in);
}

#define PARSE(...) parse((const char *const[]){ __VA_ARGS__, NULL })

static int str_is(struct serow_grip_str s, const char *want)
{
    return s.len == strlen(want) && memcmp(serow_grip_str_ptr(&in, s), want, s.len) == 0;
}

static void refused(int r, const char *want, const char *name)
{
    int ok = r == SEROW_GRIP_ERROR && in.error && strstr(in.error, want);
    check(ok, "%s", name);
    if (!ok)
        printf("# got %d: %s\n", r, in.error ? in.error : "(no error)");
}

int main(void)
{
    check(PARSE("Content-Type: text/plain") == SEROW_GRIP_NONE, "no Grip-* header: an ordinary response");

    check(PARSE("Grip-Hold: stream", "Grip-Channel: news") == SEROW_GRIP_OK, "a stream hold on one channel");
    check(in.hold == SEROW_GRIP_HOLD_STREAM && in.num_channels == 1 && str_is(in.channels[0].name, "news")
          && !in.channels[0].has_prev_id, "its mode and channel");
    check(in.timeout == SEROW_GRIP_DEFAULT_TIMEOUT && !in.timeout_given, "Pushpin's default timeout, 55 s");
    check(in.keep_alive_mode == SEROW_GRIP_KEEP_ALIVE_NONE, "no keep-alive unless asked");

    check(PARSE("grip-hold: response", "GRIP-CHANNEL: apple", "Grip-Channel: banana, cherry",
                "Grip-Timeout: 120") == SEROW_GRIP_OK, "header names in any case; lists and repeats");
    check(in.hold == SEROW_GRIP_HOLD_RESPONSE && in.num_channels == 3 && str_is(in.channels[0].name, "apple")
          && str_is(in.channels[1].name, "banana") && str_is(in.channels[2].name, "cherry"),
          "three channels in order");
    check(in.timeout == 120 && in.timeout_given, "Grip-Timeout");

    check(PARSE("Grip-Hold: response", "Grip-Channel: apple; prev-id=item1; filter=f1",
                "Grip-Channel: banana; filter=f2, cherry; filter=f1; filter=f2") == SEROW_GRIP_OK,
          "prev-id and filters");
    check(str_is(in.channels[0].prev_id, "item1") && in.channels[0].has_prev_id
          && in.channels[0].num_filters == 1 && str_is(in.channels[0].filters[0], "f1"), "apple's");
    check(in.channels[2].num_filters == 2 && str_is(in.channels[2].filters[1], "f2")
          && !in.channels[1].has_prev_id, "cherry's");
    check(in.saw & SEROW_GRIP_SAW_FILTERS, "filters are noted as read, not acted on");

    check(PARSE("Grip-Hold: stream", "Grip-Channel: a; prev-id=\"x,\\\"y\"; other=1, b") == SEROW_GRIP_OK,
          "a quoted prev-id with a comma and an escape; an unknown parameter ignored");
    check(in.num_channels == 2 && str_is(in.channels[0].prev_id, "x,\"y") && str_is(in.channels[1].name, "b"),
          "the quoted string unescaped, the comma inside it not a separator");

    check(PARSE("Grip-Timeout: 1", "Grip-Hold: response", "Grip-Channel: c") == SEROW_GRIP_OK
          && in.timeout == SEROW_GRIP_MIN_TIMEOUT, "a timeout under 5 s raised to 5, as Pushpin does");
    check(PARSE("Grip-Timeout: 0", "Grip-Hold: response", "Grip-Channel: c") == SEROW_GRIP_OK
          && in.timeout == SEROW_GRIP_MIN_TIMEOUT, "also 0");

    /* Grip-Keep-Alive, as in Pushpin's own tests. */
    check(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: ping1\\n; timeout=10") == SEROW_GRIP_OK
          && str_is(in.keep_alive_data, "ping1\\n") && in.keep_alive_timeout == 10
          && in.keep_alive_mode == SEROW_GRIP_KEEP_ALIVE_IDLE, "keep-alive raw by default, idle mode, timeout");
    check(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: ping2\\n; format=cstring") == SEROW_GRIP_OK
          && str_is(in.keep_alive_data, "ping2\n") && in.keep_alive_timeout == SEROW_GRIP_DEFAULT_KEEP_ALIVE_TIMEOUT,
          "keep-alive cstring; default timeout 55");
    check(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: cGluZzMK; format=base64") == SEROW_GRIP_OK
          && str_is(in.keep_alive_data, "ping3\n"), "keep-alive base64");
    check(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: cGluZzMK==; format=base64") == SEROW_GRIP_OK
          && str_is(in.keep_alive_data, "ping3\n"), "base64 with padding");
    check(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: ping4\\n; mode=interval") == SEROW_GRIP_OK
          && in.keep_alive_mode == SEROW_GRIP_KEEP_ALIVE_INTERVAL, "keep-alive interval mode");
    check(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: :\\x0a\\t; format=cstring; timeout=0")
          == SEROW_GRIP_OK && str_is(in.keep_alive_data, ":\n") && in.keep_alive_timeout == 1,
          "cstring \\xHH; an unknown escape dropped as Pushpin drops it; timeout at least 1");
    check(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: a, b; format=raw") == SEROW_GRIP_OK
          && str_is(in.keep_alive_data, "a, b"), "a comma is keep-alive data, not a separator");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: x; format=hex"), "unknown format",
            "an unknown keep-alive format");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: x; mode=sometimes"), "unknown mode",
            "an unknown keep-alive mode");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: ; timeout=5"), "empty",
            "empty keep-alive data");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: a\\x4; format=cstring"), "cstring",
            "a short \\x escape");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: a\\; format=cstring"), "cstring",
            "a trailing backslash");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: a*b; format=base64"), "base64",
            "a byte outside base64");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: t", "Grip-Keep-Alive: x; timeout=-1"), "timeout",
            "a negative keep-alive timeout");

    /* Grip-Status */
    check(PARSE("Grip-Status: 404") == SEROW_GRIP_OK && in.status == 404 && in.reason.len == 0,
          "Grip-Status without a reason");
    check(PARSE("Grip-Status: 404 Nothing To See Here") == SEROW_GRIP_OK && in.status == 404
          && str_is(in.reason, "Nothing To See Here") && in.hold == SEROW_GRIP_NO_HOLD, "Grip-Status with a reason");
    refused(PARSE("Grip-Status: 4x4"), "status code", "a status code that is not three digits");
    refused(PARSE("Grip-Status: 99"), "status code", "a short status code");
    refused(PARSE("Grip-Status: 2000"), "status code", "a long one");

    /* Read, not acted on yet. */
    check(PARSE("Grip-Set-Meta: foo=bar, bar=\"b;az\"") == SEROW_GRIP_OK && in.num_meta == 2
          && str_is(in.meta_keys[1], "bar") && str_is(in.meta_values[1], "b;az")
          && (in.saw & SEROW_GRIP_SAW_SET_META), "Grip-Set-Meta read");
    check(PARSE("Grip-Expose-Headers: ETag, Link") == SEROW_GRIP_OK && in.num_expose == 2
          && str_is(in.expose[1], "Link"), "Grip-Expose-Headers read");
    check(PARSE("Grip-Link: </stream/?after=1>; rel=next; timeout=30, </gone>; rel=gone") == SEROW_GRIP_OK
          && str_is(in.next_link, "/stream/?after=1") && in.next_link_timeout == 30 && str_is(in.gone_link, "/gone")
          && (in.saw & SEROW_GRIP_SAW_LINK), "Grip-Link next and gone");
    check(PARSE("Grip-Link: </a>; rel=next") == SEROW_GRIP_OK && in.next_link_timeout == SEROW_GRIP_DEFAULT_LINK_TIMEOUT,
          "Grip-Link next's default timeout, 120 s");
    refused(PARSE("Grip-Link: /a; rel=next"), "Grip-Link", "a Grip-Link without <>");
    check(PARSE("Grip-Sig: x", "Grip-Whatever: y") == SEROW_GRIP_OK && in.hold == SEROW_GRIP_NO_HOLD,
          "another Grip-* header: stripped, otherwise ignored");

    /* Refusals */
    refused(PARSE("Grip-Hold: forever", "Grip-Channel: c"), "Grip-Hold", "an unknown hold mode");
    refused(PARSE("Grip-Hold: stream"), "at least one", "a hold with no channel");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: a\"b"), "unterminated", "an open quote");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: a b"), "invalid name", "a space in a channel name");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: caf\xc3\xa9"), "invalid name", "a byte past ASCII");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: a; prev-id"), "prev-id", "prev-id without a value");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: a; prev-id=\"\""), "prev-id", "an empty prev-id");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: a; prev-id=1; prev-id=2"), "prev-id", "two prev-ids");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: a; prev-id=\"x\" y"), "malformed", "bytes after a quoted value");
    refused(PARSE("Grip-Hold: stream", "Grip-Channel: a; filter=1; filter=2; filter=3; filter=4; filter=5; filter=6"),
            "filters", "six filters");
    refused(PARSE("Grip-Hold: stream", "Grip-Timeout: 1e3", "Grip-Channel: a"), "Grip-Timeout", "a timeout that is not digits");
    refused(PARSE("Grip-Hold: stream", "Grip-Timeout: -1", "Grip-Channel: a"), "Grip-Timeout", "a negative timeout");
    refused(PARSE("Grip-Hold: stream", "Grip-Timeout: 99999999999", "Grip-Channel: a"), "Grip-Timeout", "a huge timeout");
    {
        char name[SEROW_GRIP_MAX_NAME + 2 + 16];
        strcpy(name, "Grip-Channel: ");
        memset(name + 14, 'n', SEROW_GRIP_MAX_NAME);
        name[14 + SEROW_GRIP_MAX_NAME] = 0;
        check(PARSE("Grip-Hold: stream", name) == SEROW_GRIP_OK && in.channels[0].name.len == SEROW_GRIP_MAX_NAME,
              "a channel name of the longest length");
        name[14 + SEROW_GRIP_MAX_NAME] = 'n';
        name[15 + SEROW_GRIP_MAX_NAME] = 0;
        refused(PARSE("Grip-Hold: stream", name), "invalid name", "one byte longer");
    }
    {
        char list[512] = "Grip-Channel: ";
        for (int i = 0; i < SEROW_GRIP_MAX_CHANNELS; i++)
            sprintf(list + strlen(list), "c%d,", i);
        check(PARSE("Grip-Hold: stream", list) == SEROW_GRIP_OK && in.num_channels == SEROW_GRIP_MAX_CHANNELS,
              "as many channels as allowed (an empty last element skipped)");
        strcat(list, "one-more");
        refused(PARSE("Grip-Hold: stream", list), "too many channels", "one more");
    }
    {
        /* The instruction's bytes are bounded: many long quoted prev-ids. */
        static char big[SEROW_GRIP_BYTES * 2];
        strcpy(big, "Grip-Channel: ");
        for (int i = 0; i < SEROW_GRIP_MAX_CHANNELS; i++) {
            sprintf(big + strlen(big), "c%d; prev-id=", i);
            size_t at = strlen(big);
            memset(big + at, 'i', SEROW_GRIP_MAX_ID);
            strcpy(big + at + SEROW_GRIP_MAX_ID, ",");
        }
        check(PARSE("Grip-Hold: stream", big) == SEROW_GRIP_OK && in.bytes_used <= SEROW_GRIP_BYTES,
              "twenty channels with the longest prev-ids fit in the instruction's bytes");
    }

    check(serow_grip_is_header("Grip-Hold", 9) && serow_grip_is_header("gRIP-x", 6), "Grip-* headers in any case");
    check(!serow_grip_is_header("Grip-", 5) && !serow_grip_is_header("Gripe", 5) && !serow_grip_is_header("X-Grip-Hold", 11),
          "and only those");
    check(serow_grip_id_ok("abc 1", 5) && !serow_grip_id_ok("a\nb", 3) && !serow_grip_id_ok("", 0), "the rule for an id");

    return checks_done();
}
