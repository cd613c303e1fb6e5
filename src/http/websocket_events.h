/*
 * websocket_events.h - GRIP's WebSocket-over-HTTP (Pushpin's protocol) as
 * bytes: no I/O, no server state.
 *
 * A WebSocket connection's events go to the app as the body of a POST with
 * Content-Type: application/websocket-events, and the app's answer carries
 * the events to send back, in the same format: each event is
 *
 *     TYPE\r\n                           (no content: OPEN, DISCONNECT, CLOSE)
 *     TYPE <content length in hex>\r\n<content>\r\n
 *
 * TYPE one of OPEN, TEXT, BINARY, PING, PONG, CLOSE, DISCONNECT; a CLOSE's
 * content is the close code in two bytes, big-endian, then the reason.
 *
 *   serow_wse_encode(), serow_wse_encode_close()   a client's events, into
 *                                           the request's body;
 *   serow_wse_parse()                       one event of an app's answer;
 *   serow_wse_app_message()                 what a TEXT or BINARY event of
 *                                           the app's means once the app
 *                                           enabled GRIP: a message, a
 *                                           control message ("c:" then
 *                                           JSON), or nothing;
 *   serow_wse_parse_control()               a control message's JSON
 *                                           (subscribe, unsubscribe, detach...);
 *   serow_wse_grip_extension()              whether a Sec-WebSocket-Extensions
 *                                           value enables GRIP, and its
 *                                           message-prefix.
 *
 * Stricter than Pushpin where an app's bug would otherwise half-work: an
 * event that breaks the format, a TEXT that is not UTF-8, a CLOSE with a code
 * a WebSocket may not carry, a PING or PONG longer than a control frame may
 * be are refused, not passed to a client that would close on them.
 */
#ifndef SEROW_WEBSOCKET_EVENTS_H
#define SEROW_WEBSOCKET_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "http/grip_instruct.h"

#define SEROW_WSE_CONTENT_TYPE "application/websocket-events"

enum serow_wse_type {
    SEROW_WSE_OPEN = 1,
    SEROW_WSE_TEXT,
    SEROW_WSE_BINARY,
    SEROW_WSE_PING,
    SEROW_WSE_PONG,
    SEROW_WSE_CLOSE,
    SEROW_WSE_DISCONNECT,
    SEROW_WSE_OTHER     /* a TYPE this side does not know: skipped, as Pushpin does */
};

#define SEROW_WSE_MAX_TYPE 32 /* bytes of a TYPE */

struct serow_wse_event {
    uint8_t type;            /* enum serow_wse_type */
    uint8_t has_content;     /* a length was given (0 included) */
    const uint8_t *content;  /* inside the parsed buffer */
    size_t content_len;
    uint16_t close_code;     /* CLOSE: the code, 0 without one */
    const uint8_t *reason;   /* CLOSE: the reason after the code */
    size_t reason_len;
    const char *fail_why;    /* on a refusal: which rule, for the log */
};

/* Return values of serow_wse_parse() besides an event's length (> 0). */
#define SEROW_WSE_MORE 0
#define SEROW_WSE_FAIL (-1)

/*
 * One event at the start of buf[0..len): its length in all, SEROW_WSE_MORE
 * when buf ends inside it (and has broken no rule so far), or SEROW_WSE_FAIL
 * with ev->fail_why.  A TYPE is 1 to 32 of A-Z, 0-9, '-' and '_'; a length
 * 1 to 16 hex digits; the content must be followed by CRLF.
 */
long serow_wse_parse(const uint8_t *buf, size_t len, struct serow_wse_event *ev);

/* The name of a type as written ("TEXT"); NULL for SEROW_WSE_OTHER. */
const char *serow_wse_type_name(unsigned type);

/*
 * One event into out (when out is not NULL); returns its length either way.
 * with_content 0 writes TYPE\r\n alone.
 */
size_t serow_wse_encode(uint8_t *out, unsigned type, const uint8_t *content, size_t len,
                        int with_content);

/* A CLOSE event for a close frame's code and reason: code 0 (none) or 1005
 * (what the reader reports for none) write CLOSE\r\n alone. */
size_t serow_wse_encode_close(uint8_t *out, unsigned code, const uint8_t *reason, size_t len);

/*
 * What a TEXT or BINARY event of the app's carries, once the app enabled
 * GRIP (grip = 1, with its message prefix): a TEXT starting "c:" is a control
 * message (the JSON after "c:" in *body); any other event starting with the
 * prefix is a message (what follows the prefix in *body); one without it is
 * dropped, as Pushpin drops it.  Without GRIP every event is a message as is.
 */
enum serow_wse_meaning { SEROW_WSE_MESSAGE = 1, SEROW_WSE_CONTROL, SEROW_WSE_DROPPED };
int serow_wse_app_message(const struct serow_wse_event *ev, int grip, const uint8_t *prefix,
                          size_t prefix_len, const uint8_t **body, size_t *body_len);

/* Control messages (Pushpin's names for their "type"). */
enum serow_wse_control_type {
    SEROW_WSC_SUBSCRIBE = 1,
    SEROW_WSC_UNSUBSCRIBE,
    SEROW_WSC_DETACH,
    SEROW_WSC_SESSION,
    SEROW_WSC_SET_META,
    SEROW_WSC_KEEP_ALIVE,
    SEROW_WSC_SEND_DELAYED,
    SEROW_WSC_FLUSH_DELAYED
};

/* A string member of a control message, as it stands in the JSON (its
 * quotes included), decoded by serow_wse_control_string(); p NULL: absent. */
struct serow_wse_json_string {
    const uint8_t *p;
    size_t len;
};

/* keep-alive's "mode": after the connection was idle that long, or every
 * "timeout" whatever it sent meanwhile. */
enum serow_wse_keep_alive_mode { SEROW_WSE_KEEP_ALIVE_IDLE = 0, SEROW_WSE_KEEP_ALIVE_INTERVAL };

struct serow_wse_control {
    uint8_t type;                              /* enum serow_wse_control_type */
    char channel[SEROW_GRIP_MAX_NAME];         /* subscribe, unsubscribe: decoded */
    size_t channel_len;
    struct serow_wse_json_string name, value;  /* set-meta */
    struct serow_wse_json_string content;      /* keep-alive: none turns it off */
    uint8_t message_type;                      /* keep-alive: SEROW_WSE_TEXT (absent), _BINARY, _PING, _PONG */
    uint8_t mode;                              /* keep-alive: enum serow_wse_keep_alive_mode */
    uint32_t timeout_s;                        /* keep-alive: "timeout", whole seconds; 0: absent */
    const char *fail_why;
};

/*
 * A control message's JSON (what follows "c:"): one object with a string
 * "type" Pushpin knows; subscribe and unsubscribe need a "channel" that
 * grip_instruct.h's rule accepts; set-meta a string "name" (and "value");
 * keep-alive's "content" and "message-type" ("text", "binary", "ping" or
 * "pong", as Pushpin) are strings, "timeout" a whole number of seconds (0:
 * the default), "mode" "idle" or "interval".  Other members are checked as JSON and otherwise ignored.
 * 1 when read, 0 when refused (c->fail_why).
 */
int serow_wse_parse_control(const uint8_t *json, size_t len, struct serow_wse_control *c);
/* A string member decoded into out (UTF-8, at most cap bytes written); its
 * decoded length, which may exceed cap (then out holds the first cap). */
size_t serow_wse_control_string(const struct serow_wse_json_string *s, char *out, size_t cap);

#define SEROW_WSE_MAX_PREFIX 64
#define SEROW_WSE_DEFAULT_PREFIX "m:"

/*
 * Whether a Sec-WebSocket-Extensions value (a list of extensions, each with
 * ;-parameters) names "grip": 1 when it does, with its message-prefix
 * parameter (decoded from a token or a quoted string; "m:" when absent) in
 * prefix; 0 when it does not; -1 when the value cannot be read or the prefix
 * is longer than SEROW_WSE_MAX_PREFIX.
 */
int serow_wse_grip_extension(const char *value, size_t len, char prefix[SEROW_WSE_MAX_PREFIX],
                             size_t *prefix_len);

#endif
