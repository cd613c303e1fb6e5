/*
 * worker_websocket.c - a WebSocket upgrade, with holding on, goes to the
 * connection holder instead of the app (docs/websocket.md): the worker
 * checks the opening handshake (RFC 6455 section 4.2.1) and hands the
 * connection over with its request head; the holder then speaks to the app
 * in WebSocket-over-HTTP events, each served by any free worker.
 *
 * Owns: the handshake's rules on the worker's side and --grip's switch for
 * upgrades (serow_websocket_to_holder).  The hand-over is the hold's
 * (holding_channel.h); what the holder does is websocket_holds.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log/log.h"
#include "request/request_accounting.h"
#include "shared/holding_channel.h"

int serow_websocket_to_holder;

/* --websocket-psgix-io's path prefixes */
static struct {
    char *p;
    size_t len;
} psgix_io[SEROW_WEBSOCKET_MAX_PSGIX_IO];
static size_t psgix_io_count;

int serow_websocket_psgix_io_add(const char *prefix, size_t len)
{
    if (psgix_io_count == SEROW_WEBSOCKET_MAX_PSGIX_IO)
        return -1;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, prefix, len);
    psgix_io[psgix_io_count].p = copy;
    psgix_io[psgix_io_count++].len = len;
    return 0;
}

static int left_to_app(const struct http_request_head *head)
{
    for (size_t i = 0; i < psgix_io_count; i++)
        if (head->path_len >= psgix_io[i].len && memcmp(head->path, psgix_io[i].p, psgix_io[i].len) == 0)
            return 1;
    return 0;
}

/* Whether a comma-separated list of tokens (Upgrade, Connection) has token. */
static int list_has(const struct http_header *h, const char *token)
{
    size_t n = strlen(token);
    const char *p = h->value, *end = h->value + h->value_len;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const char *start = p;
        while (p < end && *p != ',')
            p++;
        const char *stop = p;
        while (stop > start && (stop[-1] == ' ' || stop[-1] == '\t'))
            stop--;
        if ((size_t)(stop - start) == n && strncasecmp(start, token, n) == 0)
            return 1;
    }
    return 0;
}

/* Any field line named name has token. */
static int any_has(const struct http_request_head *head, const char *name, const char *token)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < head->num_headers; i++) {
        const struct http_header *h = &head->headers[i];
        if (h->name_len == n && strncasecmp(h->name, name, n) == 0 && list_has(h, token))
            return 1;
    }
    return 0;
}

/* Section 4.1: the key is 16 bytes in base64, so 24 characters, the last
 * two "=". */
static int key_ok(const struct http_header *h)
{
    if (h == NULL || h->value_len != 24 || h->value[22] != '=' || h->value[23] != '=')
        return 0;
    for (int i = 0; i < 22; i++) {
        char c = h->value[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return 0;
    }
    /* (the 16th byte's last 4 bits are padding: zero) */
    return strchr("AQgw", h->value[21]) != NULL;
}

static void refuse(struct worker_loop *loop, struct connection *conn, int status,
                   const struct http_request_head *head)
{
    if (status != 426) {
        serow_reject_connection(loop, conn, status, head);
        return;
    }
    /* 426 names the version this side speaks (section 4.4) where the
     * request id header would go. */
    static const struct response_header version = {"Sec-WebSocket-Version", 21, "13", 2};
    size_t body = serow_send_error_response(conn, 426, head, &version);
    serow_request_accounting_rejected(loop, conn, 426, body, NULL, 0);
    serow_close_lingering(loop, conn);
}

int serow_websocket_upgrade(struct worker_loop *loop, struct connection *conn,
                            const struct http_request_head *head, size_t head_len)
{
    if (!any_has(head, "Upgrade", "websocket") || loop->handback_channel < 0 || left_to_app(head))
        return 0; /* not a WebSocket, or --websocket-psgix-io: the app's */
    const struct http_header *version = serow_find_header(head, "Sec-WebSocket-Version", 21);
    if (head->method_len != 3 || memcmp(head->method, "GET", 3) != 0 ||
        !any_has(head, "Connection", "upgrade") || serow_find_header(head, "Host", 4) == NULL ||
        !key_ok(serow_find_header(head, "Sec-WebSocket-Key", 17)) || version == NULL ||
        head->framing != HTTP_BODY_NONE || conn->buffer_len != head_len ||
        serow_transport_buffered(&conn->carried, conn->fd)) {
        /* (bytes after the head: frames a client may not send before the
         * 101; with TLS also those the transport keeps, opened or a record
         * begun, which would not move with the connection) */
        refuse(loop, conn, 400, head);
        return 1;
    }
    if (version->value_len != 2 || memcmp(version->value, "13", 2) != 0) {
        refuse(loop, conn, 426, head);
        return 1;
    }
    serow_timer_remove(loop, conn);
    conn->requests_served++;
    struct serow_holding_head h;
    memset(&h, 0, sizeof(h));
    h.tag = SEROW_HOLDING_TAG;
    h.has_connection = SEROW_HOLDING_WEBSOCKET;
    h.minor_version = (uint8_t)head->minor_version;
    h.conn.requests_served = (uint32_t)conn->requests_served;
    h.conn.listener_index = (uint32_t)conn->listener_index;
    h.conn.carried = conn->carried; /* (TLS: its record state; the holder seals and opens from here on) */
    h.conn.idle_since_ms = serow_shared_clock_ms();
    if (serow_holding_send(loop->handback_channel, &h, conn->fd, conn->buffer, head_len, NULL,
                           1000) != 0) {
        serow_log_warn("worker %d: the connection holder did not take a WebSocket: closed",
                       (int)getpid());
        serow_close_connection(loop, conn);
        return 1;
    }
    serow_forget_connection(loop, conn); /* the holder's now: still open */
    return 1;
}
