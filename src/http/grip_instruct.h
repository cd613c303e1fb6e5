/*
 * grip_instruct.h - the Grip-* headers of an app's response (GRIP, the
 * protocol of Pushpin and Fastly Fanout) read into one struct, with no I/O
 * and no server state.  docs/holding.md says what Serow does with it.
 *
 *   serow_grip_parse()        reads every Grip-* header of a response into a
 *                             struct serow_grip_instruct: the hold mode, the
 *                             channels (prev-id, filters), the timeout, the
 *                             keep-alive, Grip-Status, and the headers Serow
 *                             reads but does not act on yet.  It copies what
 *                             it keeps into the struct's own bytes, so the
 *                             result outlives the headers.
 *   serow_grip_is_header()    whether a response header is a Grip-* header,
 *                             which is never sent to the client.
 *   serow_grip_channel_name_ok(), serow_grip_id_ok()
 *                             the one rule for a channel name and an item id,
 *                             also for names and ids that come with a publish.
 *
 * Header values are read as Pushpin reads them: Grip-Channel,
 * Grip-Set-Meta, Grip-Expose-Headers and Grip-Link are comma-separated
 * lists (a comma inside a quoted string does not split) and may repeat;
 * each element is a first token then `; name=value` parameters, a value
 * possibly a quoted string with backslash escapes.  Grip-Hold, Grip-Timeout,
 * Grip-Keep-Alive and Grip-Status are read from their first occurrence.
 * Where Pushpin would silently skip a malformed element, this parser refuses
 * the whole instruction with a reason (the app's bug shows at once).
 */
#ifndef SEROW_GRIP_INSTRUCT_H
#define SEROW_GRIP_INSTRUCT_H

#include <stddef.h>
#include <stdint.h>

#include "http/http_parser.h"

/* Bounds.  Pushpin's own: 5 filters a channel (its filter stack).  Channels
 * a connection: the most --hold-max-channels may allow (its default is 20,
 * Pushpin's connection_subscription_max default: Pushpin drops the channels
 * past it, Serow refuses them); room for their names and prev-ids is in
 * SEROW_GRIP_BYTES. */
#define SEROW_GRIP_MAX_CHANNELS      64
#define SEROW_GRIP_MAX_FILTERS       5
#define SEROW_GRIP_MAX_NAME          128  /* a channel name, bytes */
#define SEROW_GRIP_MAX_ID            128  /* an item id (prev-id), bytes */
#define SEROW_GRIP_MAX_KEEP_ALIVE    1024 /* keep-alive data once decoded */
#define SEROW_GRIP_MAX_META          8    /* Grip-Set-Meta pairs */
#define SEROW_GRIP_MAX_EXPOSE        16   /* Grip-Expose-Headers names */
#define SEROW_GRIP_BYTES             20480 /* everything copied, in all */

/* Pushpin's defaults, in seconds. */
#define SEROW_GRIP_DEFAULT_TIMEOUT            55
#define SEROW_GRIP_MIN_TIMEOUT                5
#define SEROW_GRIP_DEFAULT_KEEP_ALIVE_TIMEOUT 55
#define SEROW_GRIP_MIN_KEEP_ALIVE_TIMEOUT     1
#define SEROW_GRIP_DEFAULT_LINK_TIMEOUT       120
#define SEROW_GRIP_MAX_SECONDS                (24 * 3600 * 365) /* a larger number is refused */

enum serow_grip_hold {
    SEROW_GRIP_NO_HOLD = 0,
    SEROW_GRIP_HOLD_RESPONSE, /* long poll: answered by one publish, or at the timeout */
    SEROW_GRIP_HOLD_STREAM    /* the response body stays open; publishes append */
};

enum serow_grip_keep_alive_mode {
    SEROW_GRIP_KEEP_ALIVE_NONE = 0,
    SEROW_GRIP_KEEP_ALIVE_IDLE,    /* sent after `timeout` seconds with nothing sent */
    SEROW_GRIP_KEEP_ALIVE_INTERVAL /* sent every `timeout` seconds */
};

/* Headers read but not acted on (docs/holding.md, "GRIP compatibility"):
 * the caller decides whether to log them. */
#define SEROW_GRIP_SAW_FILTERS   0x01 /* a channel's filter= */
#define SEROW_GRIP_SAW_SET_META  0x02
#define SEROW_GRIP_SAW_EXPOSE    0x04 /* Grip-Expose-Headers */
#define SEROW_GRIP_SAW_LINK      0x08 /* Grip-Link */

/* A piece of the instruction's own bytes (struct serow_grip_instruct.bytes). */
struct serow_grip_str {
    uint16_t off;
    uint16_t len;
};

struct serow_grip_channel {
    struct serow_grip_str name;
    struct serow_grip_str prev_id; /* len 0: none given */
    uint8_t has_prev_id;
    uint8_t num_filters;
    struct serow_grip_str filters[SEROW_GRIP_MAX_FILTERS];
};

struct serow_grip_instruct {
    enum serow_grip_hold hold;
    uint32_t timeout;           /* seconds, for a response hold (Pushpin's default and minimum applied) */
    uint8_t timeout_given;      /* Grip-Timeout was there */
    uint8_t num_channels;
    struct serow_grip_channel channels[SEROW_GRIP_MAX_CHANNELS];

    enum serow_grip_keep_alive_mode keep_alive_mode;
    uint32_t keep_alive_timeout; /* seconds; 0 when no keep-alive */
    struct serow_grip_str keep_alive_data; /* decoded (raw, cstring or base64) */

    uint16_t status;            /* Grip-Status code; 0 when absent */
    struct serow_grip_str reason; /* Grip-Status reason; may be empty */

    /* Read, not acted on yet (SEROW_GRIP_SAW_*). */
    unsigned saw;
    uint8_t num_meta, num_expose;
    struct serow_grip_str meta_keys[SEROW_GRIP_MAX_META], meta_values[SEROW_GRIP_MAX_META];
    struct serow_grip_str expose[SEROW_GRIP_MAX_EXPOSE];
    struct serow_grip_str next_link, gone_link; /* Grip-Link rel=next, rel=gone (without <>) */
    uint32_t next_link_timeout;

    const char *error;          /* why serow_grip_parse() refused, a constant string */
    uint16_t bytes_used;
    char bytes[SEROW_GRIP_BYTES];
};

/* Return values of serow_grip_parse(). */
#define SEROW_GRIP_NONE   0  /* no Grip-* header: an ordinary response */
#define SEROW_GRIP_OK     1  /* at least one Grip-* header, all of them valid */
#define SEROW_GRIP_ERROR (-1) /* instruct->error says why; the caller answers 502 as Pushpin does */

int serow_grip_parse(const struct http_header *headers, size_t num_headers,
                     struct serow_grip_instruct *instruct);

/* A pointer to a piece of instruct's bytes (not NUL-terminated). */
static inline const char *serow_grip_str_ptr(const struct serow_grip_instruct *instruct,
                                             struct serow_grip_str s)
{
    return instruct->bytes + s.off;
}

/* "Grip-" in any case, followed by at least one byte. */
int serow_grip_is_header(const char *name, size_t len);

/* A channel name: 1 to SEROW_GRIP_MAX_NAME bytes of printable ASCII
 * (0x21-0x7E) other than `"`, `,`, `;`, `=` and `\`: what can stand
 * unquoted in Grip-Channel, and in a Redis channel name and a log line
 * without escaping. */
int serow_grip_channel_name_ok(const char *name, size_t len);

/* An item id: 1 to SEROW_GRIP_MAX_ID bytes, none of them a control
 * character (it becomes an SSE `id:` line and an HTTP header value). */
int serow_grip_id_ok(const char *id, size_t len);

#endif
