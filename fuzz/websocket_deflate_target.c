/*
 * websocket_deflate_target.c - fuzz target for src/http/websocket_deflate.c.
 *
 * The input is read three ways.  As a Sec-WebSocket-Extensions value (from
 * a buffer of exactly its size, so that ASan sees a read past it): the
 * result is one of three, an accepted offer has a window of 9 to 15 bits,
 * and the response made for it, read as an offer, is accepted the same.
 * As a compressed message, inflated with a limit its first byte chooses:
 * too big exactly when a plain zlib inflate of it (without a limit) gives
 * more, else the same bytes; what it gave, deflated again, inflates back to
 * them.  As a message to send: deflated with a window its first byte
 * chooses, it inflates back to itself.
 */
#include "targets.h"
#include "http/websocket_deflate.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

static struct serow_wsd *wsd;

static void offers(const uint8_t *data, size_t size)
{
    char *value = malloc(size ? size : 1);
    CHECK(value != NULL);
    if (size)
        memcpy(value, data, size);
    struct serow_wsd_params p;
    int r = serow_wsd_negotiate(value, size, &p);
    free(value);
    CHECK(r == -1 || r == 0 || r == 1);
    if (r != 1)
        return;
    CHECK(p.server_max_window_bits >= 9 && p.server_max_window_bits <= 15);
    char response[SEROW_WSD_MAX_RESPONSE];
    size_t n = serow_wsd_response(&p, response);
    CHECK(n > 0 && n < SEROW_WSD_MAX_RESPONSE);
    struct serow_wsd_params again;
    CHECK(serow_wsd_negotiate(response, n, &again) == 1);
    CHECK(again.server_max_window_bits == p.server_max_window_bits);
}

/* zlib alone, with the four bytes of section 7.2.2 put back: up to cap
 * bytes into out; -1 when the data is refused. */
static long plain_inflate(const uint8_t *p, size_t len, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    CHECK(inflateInit2(&z, -15) == Z_OK);
    uint8_t *in = malloc(len + 4);
    CHECK(in != NULL);
    memcpy(in, p, len);
    memcpy(in + len, "\x00\x00\xff\xff", 4);
    z.next_in = in;
    z.avail_in = (uInt)(len + 4);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r;
    do
        r = inflate(&z, Z_SYNC_FLUSH);
    while (r == Z_OK && z.avail_in && z.avail_out);
    long got = r == Z_OK || r == Z_BUF_ERROR || r == Z_STREAM_END ? (long)(cap - z.avail_out) : -1;
    inflateEnd(&z);
    free(in);
    return got;
}

static void round_trip(const uint8_t *p, size_t len, unsigned bits)
{
    const uint8_t *z;
    long n = serow_wsd_deflate(wsd, bits, p, len, &z);
    CHECK(n >= 0);
    uint8_t *copy = malloc(n ? (size_t)n : 1);
    CHECK(copy != NULL);
    memcpy(copy, z, (size_t)n);
    const uint8_t *back;
    long m = serow_wsd_inflate(wsd, copy, (size_t)n, len, &back);
    CHECK(m == (long)len);
    CHECK(len == 0 || memcmp(back, p, len) == 0);
    free(copy);
}

int fuzz_websocket_deflate_input(const uint8_t *data, size_t size)
{
    if (wsd == NULL)
        CHECK((wsd = serow_wsd_new()) != NULL);
    offers(data, size);

    size_t max = size ? (size_t)data[0] * 64 : 0;
    uint8_t *in = malloc(size ? size : 1);
    CHECK(in != NULL);
    if (size)
        memcpy(in, data, size);
    const uint8_t *out;
    long n = serow_wsd_inflate(wsd, in, size, max, &out);
    CHECK(n == SEROW_WSD_TOO_BIG || n == SEROW_WSD_BAD || (n >= 0 && (size_t)n <= max));
    static uint8_t plain[1 << 16]; /* (more than 255 * 64 + 1) */
    long want = plain_inflate(in, size, plain, max + 1);
    if (n >= 0) {
        CHECK(want == n && (n == 0 || memcmp(out, plain, (size_t)n) == 0));
        uint8_t *inflated = malloc(n ? (size_t)n : 1);
        CHECK(inflated != NULL);
        memcpy(inflated, out, (size_t)n);
        round_trip(inflated, (size_t)n, 15);
        free(inflated);
    } else if (n == SEROW_WSD_TOO_BIG) {
        CHECK(want == (long)max + 1);
    } else {
        CHECK(want == -1);
    }
    free(in);

    round_trip(data, size, size ? 9 + data[0] % 7 : 15);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_websocket_deflate_input(data, size);
}
#endif
