/*
 * guard_page.c - src/http/http_parser.c on input that ends at an unmapped page.
 *
 * ASan catches reads past a heap buffer only when it is built in; a guard
 * page catches them in any build: each input is copied so that its last byte
 * is the last byte of a mapped page and the next page is PROT_NONE, so a
 * one-byte over-read faults.  Every case runs at every truncation length
 * (a shorter input ends at the guard too), because a parser reads past the
 * end most easily on an input cut in the middle of a token.
 *
 *   guard_page               the table below; prints "ok - ..." / "not ok - ..."
 *   guard_page replay KIND PATH...   the fuzz targets on the regression corpus
 *
 * Run by t/parser/guard_page.t.
 */
#include "http/http_parser.h"
#include "replay.h"
#include "targets.h"
#include "serow_unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPECT_COMPLETE 0 /* a request: the whole input is the head */
#define EXPECT_INCOMPLETE 1

struct request_case {
    const char *name;
    const char *bytes;
    int expect;                        /* EXPECT_* or an error status */
    const struct http_limits *limits; /* NULL: the defaults */
};

struct chunked_case {
    const char *name;
    const char *bytes;
    int result;          /* CHUNKED_DONE, CHUNKED_NEED_MORE, CHUNKED_ERROR or _TOO_LARGE */
    const char *decoded; /* when DONE */
    size_t consumed;     /* when DONE: 0 means the whole input */
    size_t size;         /* of bytes, when it holds a NUL; else 0 */
    uint64_t max_body;   /* the decoder's limit; 0: none */
};

static const struct http_limits defaults = { 8192, 65536, 100 };
static const struct http_limits tiny = { 16, 32, 2 };

static const struct request_case requests[] = {
    { "a simple GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", EXPECT_COMPLETE, NULL },
    { "HTTP/1.0 without Host", "GET /x HTTP/1.0\r\n\r\n", EXPECT_COMPLETE, NULL },
    { "leading empty lines", "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", EXPECT_COMPLETE, NULL },
    { "fields with OWS and empty values",
      "POST /p?q HTTP/1.1\r\nHost: a:80\r\nX:\r\nY: \t v \t\r\nContent-Length: 3\r\n\r\n",
      EXPECT_COMPLETE, NULL },
    { "chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
      EXPECT_COMPLETE, NULL },
    { "absolute-form", "GET http://h:1/p HTTP/1.1\r\nHost: h:1\r\n\r\n", EXPECT_COMPLETE, NULL },
    { "absolute-form without a path", "GET https://h HTTP/1.1\r\nHost: h\r\n\r\n",
      EXPECT_COMPLETE, NULL },
    { "asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", EXPECT_COMPLETE, NULL },
    { "Expect and Connection", "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
      "Connection: keep-alive, close\r\nContent-Length: 0\r\n\r\n", EXPECT_COMPLETE, NULL },
    { "obs-text in a value", "GET / HTTP/1.1\r\nHost: a\r\nX: \xc3\xa9\xff\r\n\r\n",
      EXPECT_COMPLETE, NULL },
    { "request line exactly at the limit", "GET /01 HTTP/1.1\r\nHost: a\r\n\r\n",
      EXPECT_COMPLETE, &tiny },
    { "a head that is not over yet", "GET / HTTP/1.1\r\nHost: a\r\n", EXPECT_INCOMPLETE, NULL },
    { "a request line that is not over yet", "GET /index.html HTT", EXPECT_INCOMPLETE, NULL },
    { "only empty lines", "\r\n\r\n\r", EXPECT_INCOMPLETE, NULL },
    { "request line over the limit", "GET /012 HTTP/1.1\r\nHost: a\r\n\r\n", 414, &tiny },
    { "too many fields", "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", 431, &tiny },
    { "header section over the limit",
      "GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789012345678901234\r\n\r\n", 431, &tiny },
    { "bare LF", "GET / HTTP/1.1\nHost: a\n\n", 400, NULL },
    { "bare LF in a field", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 400, NULL },
    { "CR in a value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400, NULL },
    { "obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400, NULL },
    { "whitespace before a colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, NULL },
    { "no colon", "GET / HTTP/1.1\r\nHost\r\n\r\n", 400, NULL },
    { "a lowercase version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400, NULL },
    { "HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, NULL },
    { "no Host", "GET / HTTP/1.1\r\n\r\n", 400, NULL },
    { "two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, NULL },
    { "userinfo", "GET http://u@h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, NULL },
    { "CONNECT", "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 501, NULL },
    { "Content-Length and Transfer-Encoding", "POST / HTTP/1.1\r\nHost: a\r\n"
      "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", 400, NULL },
    { "two Content-Lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n"
      "Content-Length: 4\r\n\r\n", 400, NULL },
    { "a Content-Length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4,4\r\n\r\n",
      400, NULL },
    { "chunked not last", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
      400, NULL },
    { "gzip, chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      501, NULL },
    { "Transfer-Encoding in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
      400, NULL },
    { "Expect: something else", "GET / HTTP/1.1\r\nHost: a\r\nExpect: x\r\n\r\n", 417, NULL },
};

static const struct chunked_case chunkeds[] = {
    { "one chunk", "5\r\nhello\r\n0\r\n\r\n", CHUNKED_DONE, "hello", 0, 0 },
    { "two chunks, hex", "5\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n", CHUNKED_DONE,
      "hello0123456789", 0, 0 },
    { "extensions", "5;a=b;c\r\nhello\r\n0;last=\"y\"\r\n\r\n", CHUNKED_DONE, "hello", 0, 0 },
    { "whitespace before an extension", "5 \t;a\r\nhello\r\n0\r\n\r\n", CHUNKED_DONE, "hello", 0, 0 },
    { "trailers", "3\r\nabc\r\n0\r\nX-A: 1\r\nX-B:\r\n\r\n", CHUNKED_DONE, "abc", 0, 0 },
    { "the next request follows", "1\r\nz\r\n0\r\n\r\nGET /", CHUNKED_DONE, "z", 11, 0 },
    { "not over yet", "8\r\nabc", CHUNKED_NEED_MORE, NULL, 0, 0 },
    { "a size that is not hex", "g\r\nhello\r\n0\r\n\r\n", CHUNKED_ERROR, NULL, 0, 0 },
    { "whitespace after the size", "5 \r\nhello\r\n0\r\n\r\n", CHUNKED_ERROR, NULL, 0, 0 },
    { "a bare LF after the size", "5\nhello\r\n0\r\n\r\n", CHUNKED_ERROR, NULL, 0, 0 },
    { "data not followed by CRLF", "5\r\nhelloXX0\r\n\r\n", CHUNKED_ERROR, NULL, 0, 0 },
    { "a size beyond 60 bits", "1000000000000000\r\nx\r\n", CHUNKED_ERROR, NULL, 0, 0 },
    { "a request line as a trailer", "0\r\nGET / HTTP/1.1\r\n\r\n", CHUNKED_ERROR, NULL, 0, 0 },
    { "obs-fold in a trailer", "0\r\nA: b\r\n c\r\n\r\n", CHUNKED_ERROR, NULL, 0, 0 },
    { "a NUL in an extension", "1;a\0\r\nx\r\n0\r\n\r\n", CHUNKED_ERROR, NULL, 0, 14 },
    { "leading zeros are no significant digits", "00000000000000000005\r\nhello\r\n0000\r\n\r\n",
      CHUNKED_DONE, "hello", 0, 0 },
    { "leading zeros, then a size beyond 60 bits", "0001000000000000000\r\nx\r\n", CHUNKED_ERROR,
      NULL, 0, 0 },
    { "a body of exactly the limit", "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", CHUNKED_DONE,
      "helloworld", 0, 0, 10 },
    { "a chunk over the limit", "b\r\nhello world\r\n0\r\n\r\n", CHUNKED_TOO_LARGE, NULL, 0, 0,
      10 },
    { "chunks adding up to more than the limit", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
      CHUNKED_TOO_LARGE, NULL, 0, 0, 10 },
    { "a limit far below a 60-bit size", "fffffffffffffff\r\n", CHUNKED_TOO_LARGE, NULL, 0, 0, 1 },
};

/* Inputs longer than this are not in the table. */
#define MAX_INPUT 4096

static size_t page_size;
static char *region; /* data pages, then the guard page */
static size_t data_size;

static void map_guarded(void)
{
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    data_size = (MAX_INPUT + page_size - 1) / page_size * page_size;
    region = mmap(NULL, data_size + page_size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region + data_size, page_size, PROT_NONE) != 0) {
        perror("mmap/mprotect");
        exit(2);
    }
}

/* Copies bytes[0..len) so that it ends exactly where the guard page starts. */
static char *against_guard(const char *bytes, size_t len)
{
    char *p = region + data_size - len;
    memcpy(p, bytes, len);
    return p;
}

static void report(int ok, const char *kind, const char *name, const char *detail, size_t at)
{
    if (ok)
        check(1, "%s: %s", kind, name);
    else
        check(0, "%s: %s: %s (at length %zu)", kind, name, detail, at);
}

static int parse_at(const char *bytes, size_t len, const struct http_limits *limits,
                    struct http_request_head *head, struct http_header *fields)
{
    memset(head, 0, sizeof(*head));
    head->headers = fields;
    head->headers_capacity = limits->max_headers;
    return serow_parse_request_head(against_guard(bytes, len), len, head, limits);
}

static void run_request(const struct request_case *c)
{
    const struct http_limits *limits = c->limits ? c->limits : &defaults;
    size_t len = strlen(c->bytes);
    struct http_request_head head;
    struct http_header fields[100];

    /* every proper prefix: incomplete, or (for a bad input) already an error */
    for (size_t k = 0; k < len; k++) {
        int r = parse_at(c->bytes, k, limits, &head, fields);
        int want_incomplete = c->expect == EXPECT_COMPLETE || c->expect == EXPECT_INCOMPLETE;
        if (want_incomplete ? r != HTTP_PARSE_INCOMPLETE
                            : !(r == HTTP_PARSE_INCOMPLETE ||
                                (r == HTTP_PARSE_ERROR && head.error_status == c->expect))) {
            report(0, "request", c->name, "a prefix was not incomplete", k);
            return;
        }
    }
    int r = parse_at(c->bytes, len, limits, &head, fields);
    int ok;
    if (c->expect == EXPECT_COMPLETE) {
        ok = r == (int)len;
        /* serow_find_header() on what the parser returned, against the guard too */
        for (size_t i = 0; ok && i < head.num_headers; i++)
            ok = serow_find_header(&head, fields[i].name, fields[i].name_len) != NULL;
    } else if (c->expect == EXPECT_INCOMPLETE) {
        ok = r == HTTP_PARSE_INCOMPLETE;
    } else {
        ok = r == HTTP_PARSE_ERROR && head.error_status == c->expect;
    }
    report(ok, "request", c->name, "wrong result for the whole input", len);
}

/* Decodes bytes[0..len) in two pieces split at cut, each against the guard. */
static int decode_in_two(const char *bytes, size_t len, size_t cut, uint64_t max_body,
                         char *decoded, size_t *decoded_len, size_t *consumed)
{
    struct chunked_decoder d;
    serow_chunked_decoder_init(&d);
    d.max_body = max_body;
    size_t starts[2] = { 0, cut }, ends[2] = { cut, len };
    int r = CHUNKED_NEED_MORE;
    *decoded_len = 0;
    *consumed = 0;
    for (int piece = 0; piece < 2 && r == CHUNKED_NEED_MORE; piece++) {
        size_t n = ends[piece] - starts[piece], used = 0;
        char *p = against_guard(bytes + starts[piece], n);
        r = serow_decode_chunked(&d, p, &n, &used);
        memcpy(decoded + *decoded_len, p, n);
        *decoded_len += n;
        *consumed += used;
    }
    return r;
}

static void run_chunked(const struct chunked_case *c)
{
    size_t len = c->size ? c->size : strlen(c->bytes);
    char decoded[MAX_INPUT];
    size_t decoded_len, consumed;

    for (size_t k = 0; k <= len; k++) {
        /* the prefix alone: the body cannot be over before its end */
        int r = decode_in_two(c->bytes, k, k, c->max_body, decoded, &decoded_len, &consumed);
        if (k < len && r == CHUNKED_DONE && c->result == CHUNKED_DONE &&
            consumed != (c->consumed ? c->consumed : len)) {
            report(0, "chunked", c->name, "a prefix ended the body early", k);
            return;
        }
        if (k < len && r < 0 && r != c->result) {
            report(0, "chunked", c->name, "a prefix was an error", k);
            return;
        }
        /* the whole input, split at k: the same as in one piece */
        r = decode_in_two(c->bytes, len, k, c->max_body, decoded, &decoded_len, &consumed);
        int ok = r == c->result;
        if (ok && r == CHUNKED_DONE)
            ok = decoded_len == strlen(c->decoded) &&
                 memcmp(decoded, c->decoded, decoded_len) == 0 &&
                 consumed == (c->consumed ? c->consumed : len);
        if (!ok) {
            report(0, "chunked", c->name, "wrong result for the input split", k);
            return;
        }
    }
    report(1, "chunked", c->name, "", len);
}

/* guard_page replay KIND PATH...: the fuzz target of that kind on the inputs
 * (the exit status 0 when all were read and none failed). */
static int replay(const char *kind, int count, char **paths)
{
    static const struct {
        const char *kind;
        int (*target)(const uint8_t *, size_t);
    } targets[] = {
        { "request", fuzz_request_input },
        { "chunked", fuzz_chunked_input },
        { "grip", fuzz_grip_input },
        { "holder_message", fuzz_holder_message_input },
        { "tls_record", fuzz_tls_record_input },
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (strcmp(kind, targets[i].kind) == 0)
            return replay_paths(kind, targets[i].target, count, paths) < 0;
    return 2;
}

int main(int argc, char **argv)
{
    map_guarded();
    if (argc >= 4 && strcmp(argv[1], "replay") == 0)
        return replay(argv[2], argc - 3, argv + 3);

    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++)
        run_request(&requests[i]);
    for (size_t i = 0; i < sizeof chunkeds / sizeof chunkeds[0]; i++)
        run_chunked(&chunkeds[i]);
    return checks_done();
}
