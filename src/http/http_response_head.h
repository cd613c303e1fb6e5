/*
 * http_response_head.h - an HTTP/1.x response's head, as bytes: no I/O.
 *
 * The holder reads the app's answers to a WebSocket's events (a worker's
 * response, websocket_holds.c) with it.  It is strict, since the bytes come
 * from this server's own workers: a status line "HTTP/1.x NNN reason", field
 * lines "name: value" each ended by CRLF (no obs-fold), an empty line.
 */
#ifndef SEROW_HTTP_RESPONSE_HEAD_H
#define SEROW_HTTP_RESPONSE_HEAD_H

#include <stddef.h>

#include "http/http_parser.h"

#define SEROW_RESPONSE_MAX_HEADERS 64

struct serow_response_head {
    int minor_version;
    int status;                 /* 100-999 */
    size_t num_headers;
    struct http_header headers[SEROW_RESPONSE_MAX_HEADERS]; /* inside the parsed buffer */
};

/* The head at the start of buf[0..len): its length (> 0), 0 when buf ends
 * inside it, -1 when it is not one (or has more than
 * SEROW_RESPONSE_MAX_HEADERS fields). */
long serow_parse_response_head(const char *buf, size_t len, struct serow_response_head *head);

/* The first field named name (case-insensitive), or NULL. */
const struct http_header *serow_response_header(const struct serow_response_head *head,
                                                const char *name);

#endif
