/*
 * t/http/websocket_deflate.c - permessage-deflate (src/http/websocket_deflate.c):
 * offers read as RFC 7692 sections 5 and 7 say (a bad offer declined and
 * the next tried, a field off the grammar declining all), the response,
 * and messages: RFC 7692's examples, round trips at every window with the
 * window kept (what a 9-bit window compressed inflates with a 9-bit
 * window), each message standing alone (no context taken over), the limit
 * on what a message inflates to.  Then the fuzz target's seeds and
 * regression inputs (fuzz/corpus/websocket_deflate,
 * fuzz/regression/websocket_deflate) run through the target.
 * Prints "ok - NAME" / "not ok - NAME" (t/http/websocket_deflate.t).
 */
#include "http/websocket_deflate.h"
#include "targets.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int failures;

static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", ok ? "ok" : "not ok");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    failures += !ok;
}

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* ---- offers --------------------------------------------------------------------- */

static void offer(const char *field, int want, unsigned bits, unsigned asked)
{
    struct serow_wsd_params p = {0, 0};
    int r = serow_wsd_negotiate(field, strlen(field), &p);
    check(r == want && (r != 1 || (p.server_max_window_bits == bits && p.server_max_window_bits_asked == asked)),
          "offer '%s': %d (bits %u%s)", field, r, (unsigned)p.server_max_window_bits,
          p.server_max_window_bits_asked ? ", asked" : "");
}

static void test_offers(void)
{
    offer("permessage-deflate", 1, 15, 0);
    offer("permessage-deflate; client_max_window_bits", 1, 15, 0); /* Chromium's */
    offer("permessage-deflate; client_max_window_bits=12", 1, 15, 0);
    offer("permessage-deflate; server_no_context_takeover; client_no_context_takeover", 1, 15, 0);
    offer("permessage-deflate; server_max_window_bits=10", 1, 10, 1);
    offer("permessage-deflate; server_max_window_bits=\"10\"", 1, 10, 1);
    offer("permessage-deflate ; server_max_window_bits = 9", 1, 9, 1);
    offer("permessage-deflate; server_max_window_bits=15", 1, 15, 1);
    /* declined: the next offer is tried */
    offer("permessage-deflate; server_max_window_bits=8", 0, 0, 0);
    offer("permessage-deflate; server_max_window_bits=8, permessage-deflate", 1, 15, 0);
    offer("permessage-deflate; server_max_window_bits=010", 0, 0, 0);
    offer("permessage-deflate; server_max_window_bits=16", 0, 0, 0);
    offer("permessage-deflate; server_max_window_bits", 0, 0, 0);
    offer("permessage-deflate; client_max_window_bits=7", 0, 0, 0);
    offer("permessage-deflate; client_max_window_bits=\"\"", 0, 0, 0);
    offer("permessage-deflate; server_no_context_takeover=1", 0, 0, 0);
    offer("permessage-deflate; server_no_context_takeover; server_no_context_takeover", 0, 0, 0);
    offer("permessage-deflate; client_max_window_bits; client_max_window_bits=10", 0, 0, 0);
    offer("permessage-deflate; Server_No_Context_Takeover", 0, 0, 0);
    offer("permessage-deflate; x-foo, permessage-deflate; client_no_context_takeover", 1, 15, 0);
    offer("x-webkit-deflate-frame", 0, 0, 0);
    offer("Permessage-Deflate", 0, 0, 0);
    offer("x-other; a=\"b, c\", permessage-deflate", 1, 15, 0);
    offer("", 0, 0, 0);
    offer(" , ,permessage-deflate,", 1, 15, 0);
    /* the first acceptable wins */
    offer("permessage-deflate; server_max_window_bits=11, permessage-deflate", 1, 11, 1);
    /* off the grammar: no extension at all, even after one was acceptable */
    offer("permessage-deflate;", -1, 0, 0);
    offer("permessage-deflate; =1", -1, 0, 0);
    offer("permessage-deflate; client_max_window_bits=", -1, 0, 0);
    offer("permessage-deflate; client_max_window_bits=\"10", -1, 0, 0);
    offer("permessage-deflate client_max_window_bits", -1, 0, 0);
    offer("permessage-deflate, (bad)", -1, 0, 0);
    offer("permessage-deflate; a=b=c", -1, 0, 0);

    char out[SEROW_WSD_MAX_RESPONSE];
    struct serow_wsd_params p = {15, 0};
    size_t n = serow_wsd_response(&p, out);
    const char *want = "permessage-deflate; server_no_context_takeover; client_no_context_takeover";
    check(n == strlen(want) && memcmp(out, want, n) == 0, "the response: %.*s", (int)n, out);
    p = (struct serow_wsd_params){10, 1};
    n = serow_wsd_response(&p, out);
    check(n > 0 && strstr(out, "; server_max_window_bits=10") != NULL,
          "the response names the window the client asked for: %.*s", (int)n, out);
    struct serow_wsd_params again;
    check(serow_wsd_negotiate(out, n, &again) == 1 && again.server_max_window_bits == 10,
          "the response reads as an acceptable offer");
}

/* ---- messages ---------------------------------------------------------------------- */

static struct serow_wsd *wsd;

/* zlib alone with a window of bits: what a client with that window reads. */
static long client_inflate(const uint8_t *p, size_t len, int bits, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, -bits) != Z_OK)
        return -1;
    uint8_t *in = malloc(len + 4);
    memcpy(in, p, len);
    memcpy(in + len, "\x00\x00\xff\xff", 4);
    z.next_in = in;
    z.avail_in = (uInt)(len + 4);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = inflate(&z, Z_SYNC_FLUSH);
    long got = (r == Z_OK || r == Z_BUF_ERROR) && z.avail_in == 0 ? (long)(cap - z.avail_out) : -1;
    inflateEnd(&z);
    free(in);
    return got;
}

static void test_examples(void)
{
    /* RFC 7692 section 7.2.3.1 and 7.2.3.3 */
    static const uint8_t hello[] = {0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00};
    static const uint8_t stored[] = {0x00, 0x05, 0x00, 0xfa, 0xff, 'H', 'e', 'l', 'l', 'o'};
    const uint8_t *out;
    long n = serow_wsd_inflate(wsd, hello, sizeof(hello), 100, &out);
    check(n == 5 && memcmp(out, "Hello", 5) == 0, "RFC 7692 7.2.3.1: Hello, compressed");
    n = serow_wsd_inflate(wsd, stored, sizeof(stored), 100, &out);
    check(n == 5 && memcmp(out, "Hello", 5) == 0, "RFC 7692 7.2.3.3: Hello, stored");
    n = serow_wsd_inflate(wsd, (const uint8_t *)"\x00", 1, 100, &out);
    check(n == 0, "RFC 7692 7.2.3.6: an empty message");
    n = serow_wsd_inflate(wsd, (const uint8_t *)"", 0, 100, &out);
    check(n == 0, "no bytes at all: an empty message");
    n = serow_wsd_deflate(wsd, 15, (const uint8_t *)"Hello", 5, &out);
    check(n == sizeof(hello) && memcmp(out, hello, sizeof(hello)) == 0,
          "Hello deflates as RFC 7692 shows, the last four bytes taken off");
    n = serow_wsd_deflate(wsd, 15, (const uint8_t *)"", 0, &out);
    check(n == 1 && out[0] == 0, "an empty message deflates to 00");
    n = serow_wsd_inflate(wsd, (const uint8_t *)"\xff\xff\xff\xff", 4, 100, &out);
    check(n == SEROW_WSD_BAD, "not DEFLATE data: refused (1007)");
}

static void test_round_trips(void)
{
    static uint8_t msg[1 << 17], copy[1 << 18], back[1 << 17];
    static const size_t sizes[] = {0, 1, 5, 63, 64, 200, 4096, 65536, 1 << 17};
    int ok = 1, window_kept = 1;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (int kind = 0; kind < 2; kind++) {
            size_t len = sizes[s];
            for (size_t i = 0; i < len; i++) /* JSON-like text, or random bytes */
                msg[i] = kind ? (uint8_t)rnd() : (uint8_t)"{\"user\":\"ana\",\"text\":\"hi there\"},"[i % 33];
            for (unsigned bits = 9; bits <= 15; bits++) {
                const uint8_t *out;
                long n = serow_wsd_deflate(wsd, bits, msg, len, &out);
                if (n < 0) {
                    ok = 0;
                    continue;
                }
                memcpy(copy, out, (size_t)n);
                long m = serow_wsd_inflate(wsd, copy, (size_t)n, len, &out);
                if (m != (long)len || (len && memcmp(out, msg, len) != 0))
                    ok = 0;
                if (client_inflate(copy, (size_t)n, (int)bits, back, sizeof(back)) != (long)len ||
                    (len && memcmp(back, msg, len) != 0))
                    window_kept = 0;
            }
        }
    }
    check(ok, "round trips: 0 bytes to 128 KiB, text and random, windows of 9 to 15 bits");
    check(window_kept, "a client with the window asked for (9 to 15 bits) reads each message alone");

    /* no context taken over: the second of two like messages does not lean on the first */
    const uint8_t *out;
    memset(msg, 'a', 1000);
    long first = serow_wsd_deflate(wsd, 15, msg, 1000, &out);
    long second = serow_wsd_deflate(wsd, 15, msg, 1000, &out);
    memcpy(copy, out, (size_t)second);
    check(first == second && client_inflate(copy, (size_t)second, 15, back, sizeof(back)) == 1000,
          "the same message twice compresses the same, each alone");
}

static void test_limit(void)
{
    static uint8_t zeros[1 << 20], bomb[1 << 16];
    const uint8_t *out;
    long n = serow_wsd_deflate(wsd, 15, zeros, sizeof(zeros), &out);
    check(n > 0 && n < 16384, "1 MiB of zeros deflates to %ld bytes", n);
    memcpy(bomb, out, (size_t)n);
    long m = serow_wsd_inflate(wsd, bomb, (size_t)n, sizeof(zeros) - 1, &out);
    check(m == SEROW_WSD_TOO_BIG, "inflating to one byte past the limit: too big (1009)");
    m = serow_wsd_inflate(wsd, bomb, (size_t)n, 1000, &out);
    check(m == SEROW_WSD_TOO_BIG, "a small limit: too big");
    m = serow_wsd_inflate(wsd, bomb, (size_t)n, sizeof(zeros), &out);
    check(m == (long)sizeof(zeros), "inflating to the limit exactly: read");
    m = serow_wsd_inflate(wsd, bomb, (size_t)n, 0, &out);
    check(m == SEROW_WSD_TOO_BIG, "a limit of 0: too big");
}

/* ---- the fuzz target on its seeds and regression inputs ------------------------ */

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue;
        static uint8_t data[1 << 16];
        size_t n = fread(data, 1, sizeof data, f);
        fclose(f);
        fprintf(stderr, "replaying %s\n", path);
        fuzz_websocket_deflate_input(data, n);
        count++;
    }
    closedir(d);
    return count;
}

int main(int argc, char **argv)
{
    wsd = serow_wsd_new();
    check(wsd != NULL, "a compressor");
    test_offers();
    test_examples();
    test_round_trips();
    test_limit();
    serow_wsd_free(wsd);
    int replayed = 0;
    for (int i = 1; i < argc; i++)
        replayed += replay_dir(argv[i]);
    check(argc < 2 || replayed > 0, "the fuzz target on %d seeds and regression inputs", replayed);
    return failures ? 1 : 0;
}
