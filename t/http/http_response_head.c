/*
 * t/http/http_response_head.c - a response's head (src/http/http_response_head.c),
 * as the holder reads a worker's answer to a WebSocket's events: a head read
 * whole, every prefix of it only ever wanting more, the heads refused.
 * Prints "ok - NAME" / "not ok - NAME" (t/http/http_response_head.t).
 */
#include "http/http_response_head.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serow_unit.h"

/* Parses s from a copy of exactly its bytes (ASan sees any read past them). */
static long parse(const char *s, size_t len, struct serow_response_head *h)
{
    char *copy = malloc(len ? len : 1);
    memcpy(copy, s, len);
    long r = serow_parse_response_head(copy, len, h);
    /* (the fields point into the copy: checked by the caller on s's parse) */
    free(copy);
    return r;
}

int main(void)
{
    static const char ok_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/websocket-events\r\n"
                                  "Sec-WebSocket-Extensions:  grip; message-prefix=\"\" \r\n"
                                  "Content-Length: 6\r\n\r\nOPEN\r\n";
    struct serow_response_head h;
    size_t head_len = strlen(ok_head) - 6;
    long r = serow_parse_response_head(ok_head, strlen(ok_head), &h);
    check(r == (long)head_len, "a whole head: its length, the body left");
    check(h.status == 200 && h.minor_version == 1 && h.num_headers == 3, "its status, version, fields");
    const struct http_header *ext = serow_response_header(&h, "sec-websocket-extensions");
    check(ext && ext->value_len == strlen("grip; message-prefix=\"\"") &&
              memcmp(ext->value, "grip; message-prefix=\"\"", ext->value_len) == 0,
          "a field found by any case, its value without the white space around it");
    check(serow_response_header(&h, "Upgrade") == NULL, "a field not there: NULL");

    int prefixes_wait = 1;
    for (size_t n = 0; n < head_len; n++)
        prefixes_wait &= parse(ok_head, n, &h) == 0;
    check(prefixes_wait, "every prefix of a head wants more");

    static const char no_reason[] = "HTTP/1.0 404\r\n\r\n";
    check(parse(no_reason, strlen(no_reason), &h) == (long)strlen(no_reason) && h.status == 404 &&
              h.minor_version == 0,
          "a status line without a reason");

    static const char *const bad[] = {
        "HTTP/2.0 200 OK\r\n\r\n",          "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 099 OK\r\n\r\n",          "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.1 200 OK\n\r\n",            "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: empty\r\n\r\n", "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", "HTTP/1.1 200 OK\r\nA b: c\r\n\r\n",
    };
    int refused = 1;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long b = parse(bad[i], strlen(bad[i]), &h);
        if (b != -1)
            printf("# not refused: %s\n", bad[i]);
        refused &= b == -1;
    }
    check(refused, "malformed heads refused");

    char many[8192];
    size_t len = (size_t)sprintf(many, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i <= SEROW_RESPONSE_MAX_HEADERS; i++)
        len += (size_t)sprintf(many + len, "X-%d: y\r\n", i);
    len += (size_t)sprintf(many + len, "\r\n");
    check(parse(many, len, &h) == -1, "more fields than SEROW_RESPONSE_MAX_HEADERS refused");

    return checks_done();
}
