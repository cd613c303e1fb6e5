/*
 * holding_channel.h - what a worker sends the connection holder about held
 * connections (docs/holding.md), on the hand-back channel (fd_passing.h),
 * beside the batches of idle connections a stopping worker hands back:
 *
 *   a hold:    a connection whose response holds (GRIP), its descriptor, and
 *              the hold message (holder_message.h) that says how;
 *   a publish: a publish message, with no descriptor (Serow::Holding::publish).
 *
 * Either starts with struct serow_holding_head, whose first word
 * (SEROW_HOLDING_TAG) no batch of passed connections starts with (it would
 * be a connection's requests_served).  Its message follows it whole, then
 * (a hold) the request line, for the access log line written when the hold
 * ends.
 */
#ifndef SEROW_HOLDING_CHANNEL_H
#define SEROW_HOLDING_CHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "connection/fd_passing.h"
#include "shared/holder_message.h"

#define SEROW_HOLDING_TAG 0xFFFFFFFFu
#define SEROW_HOLDING_WEBSOCKET 2 /* has_connection: a WebSocket (worker_websocket.c) */
/* A message in all: what one datagram of the channel takes with the
 * kernel's default socket buffer (a larger one is refused, EMSGSIZE). */
#define SEROW_HOLDING_MAX_MESSAGE (160 * 1024)

struct serow_holding_head {
    uint32_t tag;            /* SEROW_HOLDING_TAG */
    uint8_t has_connection;  /* a hold (with its descriptor), else a publish; or
                              * SEROW_HOLDING_WEBSOCKET: an upgrade, its message the request head */
    uint8_t keep_alive;      /* a response hold once answered may serve the next request */
    uint8_t head_request;    /* the request was HEAD: an answer has no body */
    uint8_t minor_version;   /* of the request: the answer's HTTP version */
    uint16_t status;         /* a hold's status so far: the stream's, or the answer's at the timeout */
    uint16_t request_line_len; /* a hold's request line, for the access log, after the message */
    struct passed_connection conn; /* a hold's connection */
};

/* --publish-max-item's largest value: an item that large, encoded, still
 * fits one datagram (the option is refused above it). */
#define SEROW_HOLDING_MAX_ITEM (128 * 1024)
_Static_assert(SEROW_HOLDING_MAX_ITEM + SEROW_PUBLISH_MAX_OVERHEAD + sizeof(struct serow_holding_head)
                   <= SEROW_HOLDING_MAX_MESSAGE,
               "the largest item fits a message");

/* Whether a message received on the hand-back channel is one of these. */
static inline int serow_holding_message(const void *data, size_t len)
{
    uint32_t tag;
    if (len < sizeof(struct serow_holding_head))
        return 0;
    memcpy(&tag, data, sizeof(tag));
    return tag == SEROW_HOLDING_TAG;
}

/* Sends head, message (len bytes) and head->request_line_len bytes of
 * request_line, with fd when fd >= 0.  Waits up to wait_ms for room when
 * the channel is full.  0, or -1 with errno. */
int serow_holding_send(int channel, const struct serow_holding_head *head, int fd,
                       const char *message, size_t len, const char *request_line, int wait_ms);

#endif
