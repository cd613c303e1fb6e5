/*
 * request_target.c - fuzz target for serow_parse_request_head() and serow_find_header().
 *
 * Besides "no crash, no over-read" (ASan, and the input is copied into a
 * buffer of exactly its size so that the byte after it is a redzone), it
 * checks what the worker relies on:
 *   - a complete head is no longer than the input, and every pointer the
 *     parser returns lies inside it;
 *   - the head does not depend on what follows it: parsing exactly the
 *     returned length gives the same head;
 *   - a prefix of a complete head is INCOMPLETE, never an error: the worker
 *     parses whatever has arrived, so a valid request split by the network
 *     must not be refused;
 *   - a prefix of an input that is still INCOMPLETE is INCOMPLETE too;
 *   - serow_find_header() finds every parsed field by its own name.
 * Each input runs with the default limits and with tiny ones, so that the
 * limit paths are reached by short inputs.
 */
#include "targets.h"
#include "http/http_parser.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

#define MAX_FIELDS 100

struct parse_result {
    int r;
    struct http_request_head head;
    struct http_header fields[MAX_FIELDS];
};

static void parse(const char *buf, size_t len, const struct http_limits *limits,
                  struct parse_result *out)
{
    memset(out, 0, sizeof(*out));
    out->head.headers = out->fields;
    out->head.headers_capacity = limits->max_headers;
    out->r = serow_parse_request_head(buf, len, &out->head, limits);
}

static int inside(const char *p, size_t n, const char *buf, size_t len)
{
    return p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

static void check_complete(const char *buf, size_t len, const struct parse_result *res)
{
    const struct http_request_head *h = &res->head;

    CHECK((size_t)res->r <= len);
    CHECK(h->method != NULL && h->method_len > 0 && inside(h->method, h->method_len, buf, len));
    CHECK(h->target_len > 0 && inside(h->target, h->target_len, buf, len));
    CHECK(inside(h->path, h->path_len, buf, len));
    CHECK(memchr(h->path, '#', h->path_len) == NULL); /* a fragment never reaches the app */
    CHECK(h->authority == NULL || inside(h->authority, h->authority_len, buf, len));
    CHECK(h->minor_version == 0 || h->minor_version == 1);
    CHECK(h->num_headers <= h->headers_capacity);
    for (size_t i = 0; i < h->num_headers; i++) {
        const struct http_header *f = &h->headers[i];
        CHECK(f->name_len > 0 && inside(f->name, f->name_len, buf, (size_t)res->r));
        CHECK(inside(f->value, f->value_len, buf, (size_t)res->r));
        CHECK(memchr(f->value, '\r', f->value_len) == NULL);
        CHECK(memchr(f->value, '\n', f->value_len) == NULL);
        /* the first field of that name, compared without case */
        const struct http_header *found = serow_find_header(h, f->name, f->name_len);
        CHECK(found != NULL && found <= f && found->name_len == f->name_len);
    }
    CHECK(h->framing != HTTP_BODY_CHUNKED || h->minor_version == 1);
    if (h->framing == HTTP_BODY_CHUNKED) {
        CHECK(serow_find_header(h, "content-length", 14) == NULL);
        CHECK(serow_find_header(h, "Transfer-Encoding", 17) != NULL);
    }
    if (h->framing == HTTP_BODY_LENGTH)
        CHECK(serow_find_header(h, "Content-Length", 14) != NULL);
    if (h->minor_version == 1)
        CHECK(serow_find_header(h, "HOST", 4) != NULL);
    (void)serow_find_header(h, "", 0);
}

static void same_head(const struct parse_result *a, const struct parse_result *b)
{
    CHECK(a->r == b->r);
    CHECK(a->head.method == b->head.method && a->head.method_len == b->head.method_len);
    CHECK(a->head.target == b->head.target && a->head.target_len == b->head.target_len);
    CHECK(a->head.num_headers == b->head.num_headers);
    CHECK(a->head.framing == b->head.framing);
    CHECK(a->head.content_length == b->head.content_length);
    CHECK(a->head.keep_alive == b->head.keep_alive);
    CHECK(a->head.expect_continue == b->head.expect_continue);
    for (size_t i = 0; i < a->head.num_headers; i++) {
        CHECK(a->fields[i].name == b->fields[i].name);
        CHECK(a->fields[i].value == b->fields[i].value);
        CHECK(a->fields[i].value_len == b->fields[i].value_len);
    }
}

static void run_with_limits(const char *buf, size_t len, const struct http_limits *limits)
{
    static struct parse_result full, part;

    parse(buf, len, limits, &full);
    CHECK(full.r > 0 || full.r == HTTP_PARSE_INCOMPLETE || full.r == HTTP_PARSE_ERROR);
    if (full.r == HTTP_PARSE_ERROR) {
        int s = full.head.error_status;
        CHECK(s == 400 || s == 414 || s == 417 || s == 431 || s == 501 || s == 505);
        return;
    }
    if (full.r > 0) {
        check_complete(buf, len, &full);
        parse(buf, (size_t)full.r, limits, &part);
        same_head(&full, &part);
    }
    /* prefixes: the last byte missing, and half of it */
    size_t end = full.r > 0 ? (size_t)full.r : len;
    size_t cuts[2] = { end > 0 ? end - 1 : 0, end / 2 };
    for (int k = 0; k < 2; k++) {
        parse(buf, cuts[k], limits, &part);
        CHECK(part.r == HTTP_PARSE_INCOMPLETE);
    }
}

int fuzz_request_input(const uint8_t *data, size_t size)
{
    /* exactly the input's size: the byte after it is ASan's redzone */
    char *buf = malloc(size ? size : 1);
    CHECK(buf != NULL);
    if (size)
        memcpy(buf, data, size);

    static const struct http_limits defaults = { 8192, 65536, MAX_FIELDS };
    static const struct http_limits tiny = { 24, 48, 3 };
    run_with_limits(buf, size, &defaults);
    run_with_limits(buf, size, &tiny);

    free(buf);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_request_input(data, size);
}
#endif
