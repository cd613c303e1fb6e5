/*
 * holder_message.h - the binary messages the connection holder is sent
 * about held connections (docs/holding.md): a publish (one item for one
 * channel, from a worker, the publish endpoint or Redis) and a hold (a held
 * connection's Grip-* instructions, sent with its descriptor).  Encoded and
 * decoded here, with no I/O; a worker and the holder both include it.
 *
 *   serow_holder_frame()      finds one whole message at the start of a
 *                             buffer: its type and body.
 *   serow_publish_encode(), serow_publish_decode()
 *   serow_hold_encode(),    serow_hold_decode()
 *
 * A message is an 8-byte frame head (the byte 'S', the version, the type,
 * a zero byte, the body's length as 32 bits big-endian) and its body.  In
 * the body numbers are big-endian and each byte string is its length (16 or
 * 32 bits) then its bytes, so that a message means the same on every host
 * (Redis carries publishes between hosts).  The decoders take any bytes:
 * every length is checked against what is left, every name and id against
 * the rules of grip_instruct.h, every header of a published response against
 * HTTP's (nothing read can split a response the holder writes), and a body
 * with bytes left over is refused.  A decoded publish points into the
 * buffer it was decoded from.
 */
#ifndef SEROW_HOLDER_MESSAGE_H
#define SEROW_HOLDER_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

#include "http/grip_instruct.h"

#define SEROW_HOLDER_FRAME_HEAD   8
#define SEROW_HOLDER_VERSION      1
#define SEROW_HOLDER_MAX_BODY     (16u << 20) /* a message's body, whatever the configured item limit */

enum serow_holder_message_type {
    SEROW_HOLDER_PUBLISH = 1,
    SEROW_HOLDER_HOLD = 2
};

/* The formats of a published item (GRIP's), as bits of `formats`. */
#define SEROW_FORMAT_HTTP_STREAM   0x01
#define SEROW_FORMAT_HTTP_RESPONSE 0x02
#define SEROW_FORMAT_WS_MESSAGE    0x04

enum serow_format_action {
    SEROW_ACTION_SEND = 0,
    SEROW_ACTION_CLOSE = 1  /* http-stream: end the response; ws-message: close the socket */
};

enum serow_ws_type { SEROW_WS_TEXT = 0, SEROW_WS_BINARY, SEROW_WS_PING, SEROW_WS_PONG };

#define SEROW_PUBLISH_MAX_HEADERS 32 /* headers of a published http-response */

struct serow_bytes {
    const char *p;
    uint32_t len;
};

struct serow_publish_item {
    struct serow_bytes channel;
    struct serow_bytes id;      /* len 0: none */
    struct serow_bytes prev_id; /* len 0: none */
    unsigned formats;           /* SEROW_FORMAT_*, at least one */
    struct {
        uint8_t action;         /* send or close */
        struct serow_bytes content;
    } stream;
    struct {
        uint16_t code;          /* 100-999 */
        struct serow_bytes reason; /* len 0: the server's phrase for the code */
        uint16_t num_headers;
        struct serow_bytes header_names[SEROW_PUBLISH_MAX_HEADERS];
        struct serow_bytes header_values[SEROW_PUBLISH_MAX_HEADERS];
        struct serow_bytes body;
    } response;
    struct {
        uint8_t action;         /* send or close */
        uint8_t type;           /* enum serow_ws_type */
        uint16_t close_code;    /* with close; 0: none */
        struct serow_bytes content;
    } ws;
};

/* What a hold carries beside its instruction. */
struct serow_hold_extra {
    uint8_t chunked;                     /* the response head promised chunked framing: frame each publish */
    struct serow_bytes timeout_response; /* a response hold's answer at its timeout, a whole HTTP response */
};

/* One message at the start of buf: its length in all (> 0), 0 when more
 * bytes are needed, -1 when it cannot be one (bad head, body too large). */
long serow_holder_frame(const char *buf, size_t len, enum serow_holder_message_type *type,
                        const char **body, size_t *body_len);

/* Encoders: the whole message (frame head included) into out, its length;
 * 0 when it needs more than cap bytes or the item breaks a rule the
 * decoder checks.  With out NULL and cap 0, the length it needs. */
size_t serow_publish_encode(const struct serow_publish_item *item, char *out, size_t cap);
size_t serow_hold_encode(const struct serow_grip_instruct *instruct, const struct serow_hold_extra *extra,
                         char *out, size_t cap);

/* An item's size, as --publish-max-item and the channel store's limit count
 * it (the one home of that rule): the bytes it carries (its channel, ids,
 * contents, reason, header names and values, bodies), not the numbers and
 * lengths its message adds to them, which are at most
 * SEROW_PUBLISH_MAX_OVERHEAD bytes, frame head included. */
size_t serow_publish_item_bytes(const struct serow_publish_item *item);
#define SEROW_PUBLISH_MAX_OVERHEAD \
    (SEROW_HOLDER_FRAME_HEAD + 3 * 2 + 1 + (1 + 4) + (2 + 2 + 1 + SEROW_PUBLISH_MAX_HEADERS * 4 + 4) + (1 + 1 + 2 + 4))

/* Decoders of a message's body (serow_holder_frame's).  0, or -1 with
 * *error set to a constant string. */
int serow_publish_decode(const char *body, size_t len, struct serow_publish_item *item, const char **error);
int serow_hold_decode(const char *body, size_t len, struct serow_grip_instruct *instruct,
                      struct serow_hold_extra *extra, const char **error);

/* The rules the decoder holds a published response's header to, for
 * whoever builds one (the publish endpoint's JSON reader). */
int serow_publish_header_name_ok(const char *p, size_t len);
int serow_publish_header_value_ok(const char *p, size_t len);

#endif
