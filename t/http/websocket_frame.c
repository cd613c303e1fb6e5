/*
 * t/http/websocket_frame.c - the WebSocket frame codec (src/http/websocket_frame.c)
 * against every rule of RFC 6455 section 5 and 7.4 it keeps: frame heads
 * (refused at the first byte that breaks a rule), unmasking at every offset
 * and alignment, UTF-8 across pieces, close codes, and the reader on
 * streams fed whole, a byte at a time and in random pieces, which must all
 * read the same messages or fail with the same close code.  Then the fuzz
 * target's seeds and regression inputs (fuzz/corpus/websocket_frame,
 * fuzz/regression/websocket_frame) run through the target.
 * Prints "ok - NAME" / "not ok - NAME" (t/http/websocket_frame.t).
 */
#include "http/websocket_frame.h"
#include "replay.h"
#include "targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serow_unit.h"

/* ---- building a client's frames (masked), as a test peer ----------------- */

struct stream {
    uint8_t buf[1 << 20];
    size_t len;
};

static void put_raw(struct stream *s, const void *p, size_t n)
{
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

/* A frame from a client: b0 as given (FIN, RSV, opcode), masked with a
 * random key. */
static void put_frame(struct stream *s, uint8_t b0, const void *payload, size_t n)
{
    uint8_t head[SEROW_WS_MAX_HEAD];
    size_t h = serow_ws_frame_head(head, 0, 0, n); /* the length encoding */
    head[0] = b0;
    head[1] |= 0x80;
    uint8_t key[4];
    for (int i = 0; i < 4; i++)
        key[i] = (uint8_t)rnd();
    memcpy(head + h, key, 4);
    put_raw(s, head, h + 4);
    uint8_t *at = s->buf + s->len;
    put_raw(s, payload, n);
    for (size_t i = 0; i < n; i++)
        at[i] ^= key[i & 3];
}

#define FIN 0x80

/* ---- reading a stream, cut as asked ---------------------------------------- */

struct message {
    uint8_t opcode;
    uint8_t complete;
    uint16_t close_code;
    size_t len;
    uint8_t data[4096];
};

struct outcome {
    int failed;
    uint16_t fail_code;
    size_t count;
    struct message m[64];
};

/*
 * Feeds the stream to a reader in pieces that end at cuts[] (as a socket's
 * reads would), keeping what a call left unconsumed as a caller does.  The
 * bytes handed over are copied, so the reader never sees the original.
 */
static void read_stream(const struct stream *s, const size_t *cuts, size_t ncuts,
                        int from_client, uint64_t max_message, uint8_t rsv_allowed,
                        struct outcome *out)
{
    static uint8_t pending[1 << 20];
    size_t pending_len = 0, at = 0;
    struct serow_ws_reader r;
    serow_ws_reader_init(&r, from_client, max_message);
    r.rsv_allowed = rsv_allowed;
    memset(out, 0, sizeof *out);
    struct message *open = NULL;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts[k] : s->len;
        if (end < at)
            end = at;
        memcpy(pending + pending_len, s->buf + at, end - at);
        pending_len += end - at;
        at = end;
        for (;;) {
            size_t consumed;
            struct serow_ws_piece p;
            int res = serow_ws_read(&r, pending, pending_len, &consumed, &p);
            if (res == SEROW_WS_FAIL) {
                out->failed = 1;
                out->fail_code = r.fail_code;
                return;
            }
            if (consumed > pending_len)
                abort();
            if (res == SEROW_WS_PIECE) {
                struct message *m;
                if (p.opcode & 0x8) {
                    m = &out->m[out->count++];
                    m->opcode = p.opcode;
                    m->close_code = p.close_code;
                    m->len = 0;
                } else {
                    if (p.first) {
                        open = &out->m[out->count++];
                        open->opcode = p.opcode;
                        open->close_code = 0;
                        open->len = 0;
                    }
                    m = open;
                }
                if (m->len + p.len > sizeof m->data)
                    abort();
                memcpy(m->data + m->len, p.data, p.len);
                m->len += p.len;
                m->complete = p.last;
            }
            memmove(pending, pending + consumed, pending_len - consumed);
            pending_len -= consumed;
            if (res == SEROW_WS_MORE)
                break;
        }
    }
}

static int same_message(const struct message *a, const struct message *b)
{
    return a->opcode == b->opcode && a->close_code == b->close_code && a->complete == b->complete &&
           a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

/* Without a failure, the same messages.  With one, the same code and the
 * same complete messages: how much of the message being read when it
 * failed came out first depends on how the bytes arrived. */
static int same_outcome(const struct outcome *a, const struct outcome *b)
{
    if (a->failed != b->failed || a->fail_code != b->fail_code)
        return 0;
    size_t i = 0, j = 0;
    for (;;) {
        if (a->failed) {
            while (i < a->count && !a->m[i].complete)
                i++;
            while (j < b->count && !b->m[j].complete)
                j++;
        }
        if (i == a->count || j == b->count)
            return i == a->count && j == b->count;
        if (!same_message(&a->m[i++], &b->m[j++]))
            return 0;
    }
}

static size_t complete_messages(const struct outcome *o)
{
    size_t n = 0;
    for (size_t i = 0; i < o->count; i++)
        n += o->m[i].complete;
    return n;
}

/* Reads whole, a byte at a time and in random pieces; all must agree.
 * Returns the whole's outcome in *out. */
static int read_every_way(const struct stream *s, uint64_t max_message, uint8_t rsv_allowed,
                          struct outcome *out)
{
    static size_t cuts[1 << 20];
    static struct outcome other;
    read_stream(s, NULL, 0, 1, max_message, rsv_allowed, out);
    for (size_t i = 0; i < s->len; i++)
        cuts[i] = i + 1;
    read_stream(s, cuts, s->len, 1, max_message, rsv_allowed, &other);
    if (!same_outcome(out, &other))
        return 0;
    for (int round = 0; round < 8; round++) {
        size_t n = 0, pos = 0;
        for (;;) {
            pos += 1 + rnd() % 40;
            if (pos >= s->len)
                break;
            cuts[n++] = pos;
        }
        read_stream(s, cuts, n, 1, max_message, rsv_allowed, &other);
        if (!same_outcome(out, &other))
            return 0;
    }
    return 1;
}

/* ---- frame heads ------------------------------------------------------------ */

/* The head's outcome on each prefix of bytes: MORE until the last, where it
 * is want (a length, or FAIL). */
static void head_case(const char *name, const uint8_t *bytes, size_t n, int from_client,
                      uint8_t rsv_allowed, int want)
{
    struct serow_ws_frame_head h;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        int r = serow_ws_parse_frame_head(bytes, i, from_client, rsv_allowed, &h);
        if (r != SEROW_WS_MORE)
            ok = 0;
    }
    int r = serow_ws_parse_frame_head(bytes, n, from_client, rsv_allowed, &h);
    if (r != want)
        ok = 0;
    if (want == SEROW_WS_FAIL && h.fail_code != SEROW_WS_PROTOCOL_ERROR)
        ok = 0;
    check(ok, "head: %s (%s after %zu bytes)", name, want == SEROW_WS_FAIL ? "refused" : "read", n);
}

static void test_heads(void)
{
    /* valid: lengths in each encoding, masked */
    head_case("text, 5 bytes", (const uint8_t[]){0x81, 0x85, 1, 2, 3, 4}, 6, 1, 0, 6);
    head_case("binary, 126 in 16 bits", (const uint8_t[]){0x82, 0xFE, 0, 126, 1, 2, 3, 4}, 8, 1, 0, 8);
    head_case("binary, 65535 in 16 bits", (const uint8_t[]){0x82, 0xFE, 0xFF, 0xFF, 1, 2, 3, 4}, 8, 1, 0, 8);
    head_case("binary, 65536 in 64 bits",
              (const uint8_t[]){0x02, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4}, 14, 1, 0, 14);
    head_case("ping, 125 bytes", (const uint8_t[]){0x89, 0xFD, 1, 2, 3, 4}, 6, 1, 0, 6);
    head_case("a server's frame, unmasked", (const uint8_t[]){0x81, 0x05}, 2, 0, 0, 2);
    head_case("RSV1 on text with an extension", (const uint8_t[]){0xC1, 0x80, 1, 2, 3, 4}, 6, 1,
              SEROW_WS_RSV1, 6);

    /* refused at the byte that breaks the rule */
    head_case("RSV1 without an extension", (const uint8_t[]){0xC1}, 1, 1, 0, SEROW_WS_FAIL);
    head_case("RSV2 without an extension", (const uint8_t[]){0xA1}, 1, 1, 0, SEROW_WS_FAIL);
    head_case("RSV3 without an extension", (const uint8_t[]){0x91}, 1, 1, 0, SEROW_WS_FAIL);
    head_case("RSV2 with only RSV1 negotiated", (const uint8_t[]){0xA1}, 1, 1, SEROW_WS_RSV1, SEROW_WS_FAIL);
    head_case("RSV1 on a control frame, even negotiated", (const uint8_t[]){0xC9}, 1, 1,
              SEROW_WS_RSV1, SEROW_WS_FAIL);
    for (uint8_t op = 3; op <= 0xF; op++) {
        if (op >= 8 && op <= 0xA)
            continue;
        char name[40];
        snprintf(name, sizeof name, "reserved opcode 0x%X", op);
        uint8_t b[1] = {(uint8_t)(0x80 | op)};
        head_case(name, b, 1, 1, 0, SEROW_WS_FAIL);
    }
    head_case("fragmented ping", (const uint8_t[]){0x09}, 1, 1, 0, SEROW_WS_FAIL);
    head_case("fragmented close", (const uint8_t[]){0x08}, 1, 1, 0, SEROW_WS_FAIL);
    head_case("unmasked frame from a client", (const uint8_t[]){0x81, 0x05}, 2, 1, 0, SEROW_WS_FAIL);
    head_case("masked frame from a server", (const uint8_t[]){0x81, 0x85}, 2, 0, 0, SEROW_WS_FAIL);
    head_case("ping of 126 bytes", (const uint8_t[]){0x89, 0xFE}, 2, 1, 0, SEROW_WS_FAIL);
    head_case("close of 127 (64-bit) bytes", (const uint8_t[]){0x88, 0xFF}, 2, 1, 0, SEROW_WS_FAIL);
    head_case("16-bit length of 125", (const uint8_t[]){0x82, 0xFE, 0, 125}, 4, 1, 0, SEROW_WS_FAIL);
    head_case("16-bit length of 0", (const uint8_t[]){0x82, 0xFE, 0, 0}, 4, 1, 0, SEROW_WS_FAIL);
    head_case("64-bit length of 65535",
              (const uint8_t[]){0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF}, 10, 1, 0, SEROW_WS_FAIL);
    head_case("64-bit length of 1", (const uint8_t[]){0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0, 1}, 10, 1, 0,
              SEROW_WS_FAIL);
    head_case("64-bit length, top bit set", (const uint8_t[]){0x82, 0xFF, 0x80}, 3, 1, 0, SEROW_WS_FAIL);

    struct serow_ws_frame_head h;
    const uint8_t big[] = {0x02, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 9, 8, 7, 6};
    int n = serow_ws_parse_frame_head(big, sizeof big, 1, 0, &h);
    check(n == 14 && h.payload_len == 0x7FFFFFFFFFFFFFFFULL && !h.fin && h.opcode == 2 &&
          memcmp(h.mask, (const uint8_t[]){9, 8, 7, 6}, 4) == 0,
          "head: the largest length, its mask and FIN read back");
}

/* ---- unmasking ----------------------------------------------------------------- */

static void test_unmask(void)
{
    uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
    static uint8_t a[300], b[300];
    int ok = 1;
    for (size_t align = 0; align < 8; align++)
        for (size_t off = 0; off < 4; off++)
            for (size_t len = 0; len < 200; len++) {
                for (size_t i = 0; i < len; i++)
                    a[align + i] = b[align + i] = (uint8_t)rnd();
                serow_ws_unmask(a + align, len, key, off);
                for (size_t i = 0; i < len; i++)
                    b[align + i] ^= key[(off + i) & 3];
                if (memcmp(a + align, b + align, len) != 0)
                    ok = 0;
            }
    check(ok, "unmask: a word at a time equals byte by byte, at every alignment, key offset and length");

    /* in pieces: each piece goes on at the key offset where the last stopped */
    for (size_t i = 0; i < 300; i++)
        a[i] = b[i] = (uint8_t)rnd();
    size_t at = 0;
    while (at < 300) {
        size_t n = 1 + rnd() % 23;
        if (n > 300 - at)
            n = 300 - at;
        serow_ws_unmask(a + at, n, key, at & 3);
        at += n;
    }
    for (size_t i = 0; i < 300; i++)
        b[i] ^= key[i & 3];
    check(memcmp(a, b, 300) == 0, "unmask: in random pieces equals whole");
}

/* ---- UTF-8 ---------------------------------------------------------------------- */

/* Checked whole, and split in two at every point: all agree with valid. */
static void utf8_case(const char *name, const char *bytes, size_t n, int valid)
{
    int ok = 1;
    for (size_t cut = 0; cut <= n; cut++) {
        struct serow_utf8_state s = {0};
        int r = serow_utf8_check(&s, (const uint8_t *)bytes, cut) &&
                serow_utf8_check(&s, (const uint8_t *)bytes + cut, n - cut) && serow_utf8_complete(&s);
        if (r != valid)
            ok = 0;
    }
    check(ok, "UTF-8: %s is %s, split anywhere", name, valid ? "valid" : "refused");
}

#define U8(name, lit, valid) utf8_case(name, lit, sizeof(lit) - 1, valid)

static void test_utf8(void)
{
    U8("empty", "", 1);
    U8("ASCII", "Hello, world: the quick brown fox jumps", 1);
    U8("two-byte", "\xC3\xA9t\xC3\xA9", 1);
    U8("three-byte", "\xE2\x82\xAC and \xEF\xBF\xBF", 1);
    U8("four-byte", "\xF0\x9F\x98\x80", 1);
    U8("U+10FFFF", "\xF4\x8F\xBF\xBF", 1);
    U8("U+D7FF", "\xED\x9F\xBF", 1);
    U8("U+E000", "\xEE\x80\x80", 1);
    U8("U+0800", "\xE0\xA0\x80", 1);
    U8("U+10000", "\xF0\x90\x80\x80", 1);
    U8("Autobahn's hello in Greek", "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5", 1);
    U8("overlong NUL C0 80", "\xC0\x80", 0);
    U8("overlong C1 BF", "\xC1\xBF", 0);
    U8("overlong E0 9F BF", "\xE0\x9F\xBF", 0);
    U8("overlong F0 8F BF BF", "\xF0\x8F\xBF\xBF", 0);
    U8("surrogate U+D800", "\xED\xA0\x80", 0);
    U8("surrogate U+DFFF", "\xED\xBF\xBF", 0);
    U8("U+110000", "\xF4\x90\x80\x80", 0);
    U8("F5", "\xF5\x80\x80\x80", 0);
    U8("FF", "\xFF", 0);
    U8("a lone continuation byte", "a\x80" "b", 0);
    U8("a lead byte and ASCII", "\xC3(", 0);
    U8("ends in the middle of a character", "abc\xE2\x82", 0);
    U8("five-byte form", "\xF8\x88\x80\x80\x80", 0);
    U8("long ASCII then a bad byte", "abcdefghijklmnopqrstuvwxyz0123456789\xFE", 0);

    /* a failure is seen at its byte, not at the end */
    struct serow_utf8_state s = {0};
    int early = !serow_utf8_check(&s, (const uint8_t *)"\xED\xA0", 2);
    check(early, "UTF-8: a surrogate refused at its second byte");
}

static void test_close_codes(void)
{
    int ok = 1;
    for (unsigned c = 0; c < 70000; c++) {
        int want = (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
        if (serow_ws_close_code_valid(c) != want)
            ok = 0;
    }
    check(ok && !serow_ws_close_code_valid(1004) && !serow_ws_close_code_valid(1005) &&
          !serow_ws_close_code_valid(1006) && !serow_ws_close_code_valid(1015) &&
          serow_ws_close_code_valid(1000) && serow_ws_close_code_valid(4999),
          "close codes: 1000-1003, 1007-1014 and 3000-4999 only");
}

/* ---- the reader ------------------------------------------------------------------- */

static struct stream s;
static struct outcome out;

static void reader_fails(const char *name, uint64_t max_message, uint8_t rsv_allowed, uint16_t code,
                         size_t messages_before)
{
    int agree = read_every_way(&s, max_message, rsv_allowed, &out);
    check(agree && out.failed && out.fail_code == code && complete_messages(&out) == messages_before,
          "reader: %s closes with %u (after %zu messages), however the bytes arrive", name,
          (unsigned)code, messages_before);
}

static void test_reader(void)
{
    /* a conversation: a fragmented text message with a ping and a pong
     * between its frames, a character split across two frames, an empty
     * binary message, a large one, and a close with a reason */
    s.len = 0;
    put_frame(&s, SEROW_WS_OP_TEXT, "Hello, \xE2\x82", 9);
    put_frame(&s, FIN | SEROW_WS_OP_PING, "are you there", 13);
    put_frame(&s, SEROW_WS_OP_CONTINUATION, "\xAC", 1);
    put_frame(&s, FIN | SEROW_WS_OP_PONG, "", 0);
    put_frame(&s, SEROW_WS_OP_CONTINUATION, "", 0);
    put_frame(&s, FIN | SEROW_WS_OP_CONTINUATION, " world", 6);
    put_frame(&s, FIN | SEROW_WS_OP_BINARY, "", 0);
    static uint8_t big[3000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)rnd();
    put_frame(&s, FIN | SEROW_WS_OP_BINARY, big, sizeof big);
    put_frame(&s, FIN | SEROW_WS_OP_CLOSE, "\x03\xE8" "bye", 5);
    put_frame(&s, FIN | SEROW_WS_OP_TEXT, "after the close", 15);
    int agree = read_every_way(&s, 0, 0, &out);
    check(agree, "reader: whole, a byte at a time and in random pieces read the same");
    check(!out.failed && out.count == 6, "reader: six messages, no failure");
    check(out.m[0].opcode == SEROW_WS_OP_TEXT && out.m[0].len == 16 &&
          memcmp(out.m[0].data, "Hello, \xE2\x82\xAC world", 16) == 0,
          "reader: the fragmented text, its euro sign split between frames");
    check(out.m[1].opcode == SEROW_WS_OP_PING && out.m[1].len == 13 &&
          memcmp(out.m[1].data, "are you there", 13) == 0, "reader: the ping, between its fragments");
    check(out.m[2].opcode == SEROW_WS_OP_PONG && out.m[2].len == 0, "reader: the empty pong");
    check(out.m[3].opcode == SEROW_WS_OP_BINARY && out.m[3].len == 0, "reader: the empty binary message");
    check(out.m[4].opcode == SEROW_WS_OP_BINARY && out.m[4].len == sizeof big &&
          memcmp(out.m[4].data, big, sizeof big) == 0, "reader: 3000 bytes, 16-bit length, unmasked");
    check(out.m[5].opcode == SEROW_WS_OP_CLOSE && out.m[5].close_code == 1000 && out.m[5].len == 3 &&
          memcmp(out.m[5].data, "bye", 3) == 0, "reader: the close, its code and reason; nothing after it");

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_CLOSE, "", 0);
    agree = read_every_way(&s, 0, 0, &out);
    check(agree && !out.failed && out.count == 1 && out.m[0].close_code == SEROW_WS_NO_STATUS,
          "reader: a close without a code reads as 1005");

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_CONTINUATION, "x", 1);
    reader_fails("a continuation frame without a message", 0, 0, 1002, 0);

    s.len = 0;
    put_frame(&s, SEROW_WS_OP_TEXT, "a", 1);
    put_frame(&s, FIN | SEROW_WS_OP_TEXT, "b", 1);
    reader_fails("a text frame inside a fragmented message", 0, 0, 1002, 0);

    s.len = 0;
    put_frame(&s, SEROW_WS_OP_BINARY, "a", 1);
    put_frame(&s, FIN | SEROW_WS_OP_PING, "p", 1);
    put_frame(&s, FIN | SEROW_WS_OP_BINARY, "b", 1);
    reader_fails("a binary frame inside a fragmented message, after a ping", 0, 0, 1002, 1);

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_TEXT, "ok", 2);
    put_frame(&s, SEROW_WS_OP_TEXT, "\xED", 1);
    put_frame(&s, FIN | SEROW_WS_OP_CONTINUATION, "\xA0\x80", 2);
    reader_fails("a surrogate split between frames", 0, 0, 1007, 1);

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_TEXT, "\xC3", 1);
    reader_fails("text that ends inside a character", 0, 0, 1007, 0);

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_TEXT, "ab\xC0\x80", 4);
    reader_fails("an overlong NUL", 0, 0, 1007, 0);

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_BINARY, "\xC0\x80\xFF", 3);
    agree = read_every_way(&s, 0, 0, &out);
    check(agree && !out.failed && out.count == 1, "reader: binary is not checked as UTF-8");

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_BINARY, big, 100);
    agree = read_every_way(&s, 100, 0, &out);
    check(agree && !out.failed && out.count == 1, "reader: a message of exactly the limit");
    reader_fails("a frame of 100 bytes over a limit of 99", 99, 0, 1009, 0);

    s.len = 0;
    put_frame(&s, SEROW_WS_OP_TEXT, "aaaaa", 5);
    put_frame(&s, FIN | SEROW_WS_OP_PING, "", 0);
    put_frame(&s, SEROW_WS_OP_CONTINUATION, "aaaaa", 5);
    put_frame(&s, FIN | SEROW_WS_OP_CONTINUATION, "a", 1);
    reader_fails("fragments adding up over the limit", 10, 0, 1009, 1);

    /* the limit is decided on the head: a huge length is refused before its bytes */
    {
        struct serow_ws_reader r;
        serow_ws_reader_init(&r, 1, 1 << 20);
        uint8_t h[] = {0x82, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4};
        size_t consumed;
        struct serow_ws_piece p;
        int res = serow_ws_read(&r, h, sizeof h, &consumed, &p);
        check(res == SEROW_WS_FAIL && r.fail_code == 1009, "reader: a 4 GiB frame refused on its head");
        res = serow_ws_read(&r, h, sizeof h, &consumed, &p);
        check(res == SEROW_WS_FAIL && r.fail_code == 1009, "reader: a failure lasts");
    }

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_CLOSE, "\x03", 1);
    reader_fails("a close frame of one byte", 0, 0, 1002, 0);

    static const unsigned bad_codes[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535};
    for (size_t i = 0; i < sizeof bad_codes / sizeof bad_codes[0]; i++) {
        uint8_t c[2] = {(uint8_t)(bad_codes[i] >> 8), (uint8_t)bad_codes[i]};
        s.len = 0;
        put_frame(&s, FIN | SEROW_WS_OP_CLOSE, c, 2);
        char name[40];
        snprintf(name, sizeof name, "close code %u", bad_codes[i]);
        reader_fails(name, 0, 0, 1002, 0);
    }
    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_CLOSE, "\x03\xE8\xCE\xBA\xE1\xBD", 6);
    reader_fails("a close reason cut inside a character", 0, 0, 1007, 0);

    s.len = 0;
    put_frame(&s, FIN | SEROW_WS_OP_TEXT | SEROW_WS_RSV1, "zz", 2);
    reader_fails("RSV1 without permessage-deflate", 0, 0, 1002, 0);
    agree = read_every_way(&s, 0, SEROW_WS_RSV1, &out);
    check(agree && !out.failed && out.count == 1,
          "reader: RSV1 with it, the compressed text left to the extension to check");
    s.len = 0;
    put_frame(&s, SEROW_WS_OP_TEXT | SEROW_WS_RSV1, "z", 1);
    put_frame(&s, FIN | SEROW_WS_OP_CONTINUATION | SEROW_WS_RSV1, "z", 1);
    reader_fails("RSV1 on a continuation frame", 0, SEROW_WS_RSV1, 1002, 0);

    s.len = 0;
    uint8_t unmasked[] = {0x81, 0x01, 'x'};
    put_raw(&s, unmasked, sizeof unmasked);
    reader_fails("a client's unmasked frame", 0, 0, 1002, 0);
}

/* ---- a server's frames, read back by a client's reader ---------------------- */

static void test_builders(void)
{
    static const uint64_t lens[] = {0, 1, 125, 126, 65535, 65536, 1ULL << 32, 0x7FFFFFFFFFFFFFFFULL};
    static const size_t head_lens[] = {2, 2, 2, 4, 4, 10, 10, 10};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t h[SEROW_WS_MAX_SERVER_HEAD];
        size_t n = serow_ws_frame_head(h, 1, SEROW_WS_OP_BINARY, lens[i]);
        struct serow_ws_frame_head back;
        int r = serow_ws_parse_frame_head(h, n, 0, 0, &back);
        check(n == head_lens[i] && r == (int)n && back.payload_len == lens[i] && back.fin &&
              back.opcode == SEROW_WS_OP_BINARY && !back.masked,
              "builder: a head for %llu bytes is %zu bytes, and reads back", (unsigned long long)lens[i],
              head_lens[i]);
    }

    /* a server's conversation read by a client's reader */
    struct serow_ws_reader r;
    serow_ws_reader_init(&r, 0, 0);
    static uint8_t buf[1000];
    size_t len = serow_ws_frame_head(buf, 0, SEROW_WS_OP_TEXT, 3);
    memcpy(buf + len, "abc", 3);
    len += 3;
    len += serow_ws_frame_head(buf + len, 1, SEROW_WS_OP_CONTINUATION, 0);
    len += serow_ws_close_frame(buf + len, 1001, (const uint8_t *)"going", 5);
    size_t at = 0, consumed;
    struct serow_ws_piece p;
    int ok = serow_ws_read(&r, buf, len, &consumed, &p) == SEROW_WS_PIECE && p.len == 3 && p.first && !p.last;
    at += consumed;
    ok = ok && serow_ws_read(&r, buf + at, len - at, &consumed, &p) == SEROW_WS_PIECE && p.len == 0 && p.last;
    at += consumed;
    ok = ok && serow_ws_read(&r, buf + at, len - at, &consumed, &p) == SEROW_WS_PIECE &&
         p.opcode == SEROW_WS_OP_CLOSE && p.close_code == 1001 && p.len == 5 && memcmp(p.data, "going", 5) == 0;
    at += consumed;
    check(ok && at == len, "builder: a server's fragments and close read back by a client's reader");

    /* a long reason is cut to fit, at a character's boundary */
    uint8_t reason[300];
    for (size_t i = 0; i < 150; i++) {
        reason[2 * i] = 0xC3;
        reason[2 * i + 1] = 0xA9; /* é */
    }
    uint8_t frame[SEROW_WS_MAX_CONTROL_FRAME];
    size_t n = serow_ws_close_frame(frame, 1008, reason, 2 * 100);
    struct serow_utf8_state u = {0};
    check(n == 2 + 2 + 122 && frame[1] == 124 && frame[2] == 0x03 && frame[3] == 0xF0 &&
          serow_utf8_check(&u, frame + 4, n - 4) && serow_utf8_complete(&u),
          "builder: a close reason of 200 bytes cut to 122, whole characters");
    memset(reason, 'r', 123);
    n = serow_ws_close_frame(frame, 1000, reason, 123);
    check(n == 127 && frame[1] == 125, "builder: a reason of 123 bytes fits whole");
    n = serow_ws_close_frame(frame, 0, NULL, 0);
    check(n == 2 && frame[0] == 0x88 && frame[1] == 0, "builder: a close without a code");
}

int main(int argc, char **argv)
{
    test_heads();
    test_unmask();
    test_utf8();
    test_close_codes();
    test_reader();
    test_builders();
    int replayed = replay_paths("websocket_frame", fuzz_websocket_frame_input, argc - 1, argv + 1);
    check(argc < 2 || replayed > 0, "the fuzz target on %d seeds and regression inputs", replayed);
    return checks_done();
}
