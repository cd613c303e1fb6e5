/*
 * websocket_deflate.h - permessage-deflate (RFC 7692) without context
 * takeover: no I/O, no server state, so that it can be fuzzed and tested on
 * its own (docs/websocket.md says why no context is kept).
 *
 *   serow_wsd_negotiate()  a Sec-WebSocket-Extensions field's offers, read
 *                          strictly (sections 5 and 7): the first
 *                          permessage-deflate offer this side can accept.
 *   serow_wsd_response()   the extension the 101 names for it.
 *   serow_wsd_deflate(),
 *   serow_wsd_inflate()    one message's payload, each a fresh DEFLATE
 *                          context: both sides answered *_no_context_takeover,
 *                          so one compressor and one decompressor serve
 *                          every connection of a process, and a publish is
 *                          compressed once for all its subscribers.
 */
#ifndef SEROW_WEBSOCKET_DEFLATE_H
#define SEROW_WEBSOCKET_DEFLATE_H

#include <stddef.h>
#include <stdint.h>

/* zlib's level: bench/websocket-deflate's figures (docs/websocket.md). */
#define SEROW_WSD_LEVEL 1
/* Payloads shorter than this go uncompressed (a message's own RSV1 says
 * which): under it DEFLATE saves a few bytes at best, for the CPU of a
 * compression. */
#define SEROW_WSD_MIN_SIZE 64
/* The response's extension, at most. */
#define SEROW_WSD_MAX_RESPONSE 128

/* What one connection agreed on. */
struct serow_wsd_params {
    uint8_t server_max_window_bits; /* 9-15: this side's DEFLATE window (15
                                     * unless the client asked for less) */
    uint8_t server_max_window_bits_asked; /* the offer named it: the response does too */
};

/*
 * Reads one Sec-WebSocket-Extensions field's value (RFC 6455 section 9.1,
 * quoted-string values as RFC 7692 section 7.1 allows).  Returns 1 and
 * fills *p with the first permessage-deflate offer that can be accepted, 0
 * when none can (an offer with a parameter it does not know, one given
 * twice, or a window size not in 8-15 is declined, and the next one
 * tried), -1 when the field does not follow the grammar: then the caller
 * declines every extension, and the handshake goes on without one.
 */
int serow_wsd_negotiate(const char *value, size_t len, struct serow_wsd_params *p);

/* The response's Sec-WebSocket-Extensions value for p into out; its length. */
size_t serow_wsd_response(const struct serow_wsd_params *p, char out[SEROW_WSD_MAX_RESPONSE]);

/* A process's compressor and decompressor, and their output buffers. */
struct serow_wsd;
struct serow_wsd *serow_wsd_new(void);
void serow_wsd_free(struct serow_wsd *d);

/*
 * Compresses one message's payload p[0..len) with a window of window_bits
 * (9-15), its last four bytes (00 00 ff ff) taken off (section 7.2.1).
 * Returns the compressed length with *out pointing at it (in d's buffer:
 * valid until d's next call), or -1 when memory ran out.
 */
long serow_wsd_deflate(struct serow_wsd *d, unsigned window_bits, const uint8_t *p, size_t len,
                       const uint8_t **out);

/* Results of serow_wsd_inflate() besides a length. */
#define SEROW_WSD_TOO_BIG (-1) /* more than max bytes: close with 1009 */
#define SEROW_WSD_BAD     (-2) /* not DEFLATE data: close with 1007 */
#define SEROW_WSD_NO_MEMORY (-3)

/*
 * Decompresses one message's payload p[0..len) (the four bytes section
 * 7.2.2 takes off put back here).  Never writes more than max + 1 bytes, so
 * a small message that inflates to gigabytes costs no more than max.
 * Returns the length with *out pointing at it (valid until d's next call),
 * or one of the results above.
 */
long serow_wsd_inflate(struct serow_wsd *d, const uint8_t *p, size_t len, size_t max, const uint8_t **out);

#endif
