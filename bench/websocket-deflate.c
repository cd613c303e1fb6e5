/*
 * bench/websocket-deflate.c - what permessage-deflate (RFC 7692) saves and
 * costs, to decide what Serow negotiates (docs/websocket.md): for each kind
 * of message, the bytes on the wire and the CPU per message to deflate and
 * inflate it with zlib at levels 1, 6 and 9, with a fresh context per
 * message (no context takeover) and with one context kept across a
 * connection's messages (takeover); then the memory zlib holds for a
 * context kept per connection, for window bits 8 to 15.  Run by
 * bench/websocket-deflate; prints Markdown tables.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static const char *const words[] = {"hello", "the", "meeting", "is", "at", "noon", "can", "you", "send",
                                    "me", "report", "thanks", "great", "see", "later", "ok", "deploy",
                                    "done", "why", "not", "coffee", "tomorrow", "build", "green"};
static const char *const users[] = {"ana", "bruno", "chen", "dagny", "emeka", "farah", "goran"};
#define NWORDS (sizeof(words) / sizeof(words[0]))

/* A chat message as a chat app sends it: JSON of 100 to 300 bytes. */
static size_t chat(char *out, unsigned i)
{
    char text[256];
    size_t t = 0, want = 40 + rnd() % 180;
    while (t < want) {
        const char *w = words[rnd() % NWORDS];
        t += (size_t)sprintf(text + t, "%s%s", t ? " " : "", w);
    }
    return (size_t)sprintf(out, "{\"type\":\"message\",\"room\":\"general\",\"id\":%u,\"user\":\"%s\","
                                "\"ts\":%u,\"text\":\"%s\"}",
                           i, users[rnd() % 7], 1764262800u + i * 7, text);
}

/* A JSON document of about size bytes: a list of records. */
static size_t document(char *out, size_t size, unsigned seed)
{
    size_t n = (size_t)sprintf(out, "[");
    for (unsigned i = 0; n + 200 < size; i++)
        n += (size_t)sprintf(out + n, "%s{\"id\":%u,\"name\":\"%s %s\",\"price\":%u.%02u,\"stock\":%u,"
                                      "\"tags\":[\"%s\",\"%s\"],\"active\":%s}",
                             i ? "," : "", seed * 1000 + i, users[rnd() % 7], words[rnd() % NWORDS],
                             (unsigned)(rnd() % 500), (unsigned)(rnd() % 100), (unsigned)(rnd() % 10000),
                             words[rnd() % NWORDS], words[rnd() % NWORDS], rnd() % 2 ? "true" : "false");
    n += (size_t)sprintf(out + n, "]");
    return n;
}

#define MESSAGES 64

struct kind {
    const char *name;
    char *msg[MESSAGES];
    size_t len[MESSAGES];
};

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint8_t out[1 << 18], back[1 << 18];

/* One connection's messages: deflated (a fresh context for each unless
 * takeover) and inflated by the peer, rounds times; the bytes of one
 * round, and the CPU of each side per message. */
static void measure(const struct kind *k, int level, int takeover, size_t *wire, double *def_ns, double *inf_ns)
{
    int rounds = 0;
    double def = 0, inf = 0;
    *wire = 0;
    do {
        z_stream d, i;
        memset(&d, 0, sizeof(d));
        memset(&i, 0, sizeof(i));
        deflateInit2(&d, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        inflateInit2(&i, -15);
        for (int m = 0; m < MESSAGES; m++) {
            double t0 = cpu_ns();
            if (!takeover)
                deflateReset(&d);
            d.next_in = (Bytef *)k->msg[m];
            d.avail_in = (uInt)k->len[m];
            d.next_out = out;
            d.avail_out = sizeof(out);
            deflate(&d, Z_SYNC_FLUSH);
            size_t n = sizeof(out) - d.avail_out - 4; /* (00 00 ff ff off) */
            double t1 = cpu_ns();
            if (!takeover)
                inflateReset(&i);
            memcpy(out + n, "\x00\x00\xff\xff", 4);
            i.next_in = out;
            i.avail_in = (uInt)(n + 4);
            i.next_out = back;
            i.avail_out = sizeof(back);
            inflate(&i, Z_SYNC_FLUSH);
            double t2 = cpu_ns();
            if (sizeof(back) - i.avail_out != k->len[m] || memcmp(back, k->msg[m], k->len[m]) != 0) {
                fprintf(stderr, "websocket-deflate: a round trip failed\n");
                exit(1);
            }
            def += t1 - t0;
            inf += t2 - t1;
            if (rounds == 0)
                *wire += n;
        }
        deflateEnd(&d);
        inflateEnd(&i);
        rounds++;
    } while (def + inf < 2e8 || rounds < 3); /* at least 0.2 s of CPU */
    *def_ns = def / rounds / MESSAGES;
    *inf_ns = inf / rounds / MESSAGES;
}

/* ---- memory: zlib's allocations, counted ------------------------------------- */

static size_t allocated;

static voidpf counting_alloc(voidpf opaque, uInt items, uInt size)
{
    allocated += (size_t)items * size;
    return calloc(items, size);
}

static void counting_free(voidpf opaque, voidpf p)
{
    free(p);
}

static void memory(void)
{
    printf("\n| window bits | deflate context (memLevel 8) | deflate (memLevel 1) | inflate context |\n"
           "| --- | --- | --- | --- |\n");
    for (int bits = 8; bits <= 15; bits++) {
        size_t mem[3];
        for (int which = 0; which < 3; which++) {
            z_stream z;
            memset(&z, 0, sizeof(z));
            z.zalloc = counting_alloc;
            z.zfree = counting_free;
            allocated = 0;
            if (which < 2) {
                deflateInit2(&z, 6, Z_DEFLATED, -bits, which == 0 ? 8 : 1, Z_DEFAULT_STRATEGY);
                deflateEnd(&z);
            } else {
                /* the window is allocated at the first inflate that writes */
                static const uint8_t hello[] = {0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00, 0x00, 0xff, 0xff};
                inflateInit2(&z, -bits);
                z.next_in = (Bytef *)hello;
                z.avail_in = sizeof(hello);
                z.next_out = back;
                z.avail_out = sizeof(back);
                inflate(&z, Z_SYNC_FLUSH);
                inflateEnd(&z);
            }
            mem[which] = allocated;
        }
        printf("| %d%s | %.1f KiB | %.1f KiB | %.1f KiB |\n", bits, bits == 8 ? " (zlib: 9)" : "",
               mem[0] / 1024.0, mem[1] / 1024.0, mem[2] / 1024.0);
    }
}

int main(void)
{
    static struct kind kinds[4] = {{"chat JSON, 100-300 B"}, {"JSON document, 4 KiB"},
                                   {"JSON document, 64 KiB"}, {"random bytes, 4 KiB"}};
    for (int m = 0; m < MESSAGES; m++) {
        kinds[0].msg[m] = malloc(512);
        kinds[0].len[m] = chat(kinds[0].msg[m], (unsigned)m);
        kinds[1].msg[m] = malloc(4096);
        kinds[1].len[m] = document(kinds[1].msg[m], 4096, (unsigned)m);
        kinds[2].msg[m] = malloc(65536);
        kinds[2].len[m] = document(kinds[2].msg[m], 65536, (unsigned)m);
        kinds[3].msg[m] = malloc(4096);
        kinds[3].len[m] = 4096;
        for (int b = 0; b < 4096; b++)
            kinds[3].msg[m][b] = (char)rnd();
    }
    printf("zlib %s; %d messages of each kind; CPU per message (deflate / inflate)\n\n", zlibVersion(),
           MESSAGES);
    printf("| message | level | bytes | no context takeover: on the wire | CPU | takeover: on the wire | CPU |\n"
           "| --- | --- | --- | --- | --- | --- | --- |\n");
    for (int k = 0; k < 4; k++) {
        size_t total = 0;
        for (int m = 0; m < MESSAGES; m++)
            total += kinds[k].len[m];
        for (int level = 1; level <= 9; level += level == 1 ? 5 : 3) {
            size_t wire[2];
            double def[2], inf[2];
            for (int t = 0; t < 2; t++)
                measure(&kinds[k], level, t, &wire[t], &def[t], &inf[t]);
            printf("| %s | %d | %zu | %zu (%.0f%%) | %.1f / %.1f us | %zu (%.0f%%) | %.1f / %.1f us |\n",
                   kinds[k].name, level, total / MESSAGES, wire[0] / MESSAGES, 100.0 * wire[0] / total,
                   def[0] / 1000, inf[0] / 1000, wire[1] / MESSAGES, 100.0 * wire[1] / total, def[1] / 1000,
                   inf[1] / 1000);
        }
    }
    memory();
    return 0;
}
