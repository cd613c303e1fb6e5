/*
 * websocket_frame.h - WebSocket frames (RFC 6455 section 5) as bytes: no I/O,
 * no Perl, no server state, so that it can be fuzzed and tested on its own.
 *
 *   serow_ws_parse_frame_head()  one frame's head, from as many bytes as have
 *                                arrived: complete, incomplete, or refused as
 *                                soon as the bytes seen break a rule.
 *   serow_ws_read()              a stream of frames read into pieces of
 *                                messages: unmasked in place, fragments and
 *                                interleaved control frames checked against
 *                                each other, text checked as UTF-8 across
 *                                pieces, a close frame's code and reason
 *                                checked, a message's size bounded.
 *   serow_ws_frame_head(),
 *   serow_ws_close_frame()       a server's frames (never masked).
 *
 * A failure names the close code to send (1002, 1007 or 1009; section 7.4.1),
 * so the caller has one thing to do with it: close with that code.
 */
#ifndef SEROW_WEBSOCKET_FRAME_H
#define SEROW_WEBSOCKET_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* Opcodes (section 5.2); 3-7 and 0xB-0xF are reserved, and refused. */
#define SEROW_WS_OP_CONTINUATION 0x0
#define SEROW_WS_OP_TEXT         0x1
#define SEROW_WS_OP_BINARY       0x2
#define SEROW_WS_OP_CLOSE        0x8
#define SEROW_WS_OP_PING         0x9
#define SEROW_WS_OP_PONG         0xA

/* The close codes a failure asks for (section 7.4.1). */
#define SEROW_WS_PROTOCOL_ERROR  1002
#define SEROW_WS_INVALID_PAYLOAD 1007 /* text or a close reason that is not UTF-8 */
#define SEROW_WS_MESSAGE_TOO_BIG 1009
#define SEROW_WS_NO_STATUS       1005 /* a close frame without a code: never sent */

/* RSV bits as they sit in a frame's first byte; an extension negotiated at
 * the upgrade (permessage-deflate: RSV1) allows its own. */
#define SEROW_WS_RSV1 0x40
#define SEROW_WS_RSV2 0x20
#define SEROW_WS_RSV3 0x10

#define SEROW_WS_MAX_CONTROL_PAYLOAD 125
#define SEROW_WS_MAX_HEAD            14 /* 2 + 8 (64-bit length) + 4 (mask) */
#define SEROW_WS_MAX_SERVER_HEAD     10 /* a server's frames carry no mask */
#define SEROW_WS_MAX_CONTROL_FRAME   (2 + SEROW_WS_MAX_CONTROL_PAYLOAD)

/* Results of serow_ws_parse_frame_head() besides a head's length (> 0) and of
 * serow_ws_read(). */
#define SEROW_WS_MORE   0    /* more bytes are needed */
#define SEROW_WS_FAIL   (-1) /* see fail_code */
#define SEROW_WS_PIECE  1    /* serow_ws_read(): *piece is filled */

struct serow_ws_frame_head {
    uint8_t fin;
    uint8_t rsv;        /* the RSV bits, in place (SEROW_WS_RSV1...) */
    uint8_t opcode;
    uint8_t masked;
    uint8_t mask[4];
    uint64_t payload_len;
    uint16_t fail_code; /* on SEROW_WS_FAIL: SEROW_WS_PROTOCOL_ERROR */
    const char *fail_why; /* on SEROW_WS_FAIL: which rule, for logs */
};

/*
 * Parses a frame head from buf[0..len).  Returns the head's length (2 to 14)
 * when it is complete, SEROW_WS_MORE when more bytes are needed, or
 * SEROW_WS_FAIL as soon as the bytes at hand break a rule, however few:
 * an RSV bit not in rsv_allowed, a reserved opcode, a control frame that is
 * fragmented or longer than 125 bytes, a mask that is missing (from_client)
 * or present (from a server), an extended length that a shorter encoding
 * could carry, or a 64-bit length with its top bit set.
 */
int serow_ws_parse_frame_head(const uint8_t *buf, size_t len, int from_client,
                              uint8_t rsv_allowed, struct serow_ws_frame_head *head);

/*
 * XORs p[0..len) with key, starting at byte key_offset of it (0-3): a
 * payload unmasked in pieces goes on where the last piece stopped.  Works a
 * machine word at a time.
 */
void serow_ws_unmask(uint8_t *p, size_t len, const uint8_t key[4], size_t key_offset);

/*
 * UTF-8 checked a piece at a time (RFC 3629; the table in Unicode's
 * section 3.9): overlong forms, surrogates and code points above U+10FFFF are
 * refused at the first byte that makes them so, even when a character is
 * split between pieces.  Start from {0}.
 */
struct serow_utf8_state {
    uint8_t need;   /* continuation bytes still due */
    uint8_t lo, hi; /* the range the next one must be in */
};
/* 1 when p[0..len) goes on validly from *s (updated), 0 when it cannot. */
int serow_utf8_check(struct serow_utf8_state *s, const uint8_t *p, size_t len);
/* 1 when *s ends a character: the text so far is complete. */
static inline int serow_utf8_complete(const struct serow_utf8_state *s) { return s->need == 0; }

/*
 * A close code a peer may send, and so that this side may send (section
 * 7.4): 1000-1003, 1007-1014 (1012-1014 registered with IANA after the RFC),
 * 3000-4999.  1005, 1006 and 1015 are never sent; 1004 and the rest of
 * 0-2999 are reserved.
 */
int serow_ws_close_code_valid(unsigned code);

/*
 * The reader of one connection's frames, in one direction.  Bytes come in
 * whatever pieces the socket gave: the caller keeps what a call did not
 * consume and offers it again with what follows.  Everything the reader
 * keeps between calls is here, so a connection moved to another process
 * can take it along by copying the struct.
 */
struct serow_ws_reader {
    /* set by the caller, after serow_ws_reader_init() */
    uint64_t max_message;  /* bytes of one data message, all its frames; 0: none */
    uint8_t from_client;   /* 1: a server's reader (frames must be masked) */
    uint8_t rsv_allowed;   /* RSV bits an extension negotiated */

    /* the reader's own */
    uint8_t in_payload;      /* a data frame's head is read, its payload is not */
    uint8_t message_opcode;  /* TEXT or BINARY while a message's frames come; else 0 */
    uint8_t message_started; /* a piece of the open message was delivered */
    uint8_t message_rsv;     /* the RSV bits of its first frame */
    uint8_t check_utf8;      /* the open message is text to check */
    uint8_t closed;          /* a close frame was read: nothing after it counts */
    struct serow_ws_frame_head frame;
    uint64_t frame_left;     /* payload bytes of the frame still to come */
    uint64_t frame_done;     /* payload bytes of it already delivered */
    uint64_t message_len;    /* data bytes of the open message so far */
    struct serow_utf8_state utf8;
    uint16_t fail_code;      /* on SEROW_WS_FAIL: 1002, 1007 or 1009 */
    const char *fail_why;
};

/* One piece of what serow_ws_read() read: data in the caller's buffer,
 * unmasked. */
struct serow_ws_piece {
    uint8_t *data;
    size_t len;
    uint8_t opcode;        /* TEXT or BINARY (also for a continuation frame's
                            * piece: the message's), or CLOSE, PING, PONG */
    uint8_t first;         /* the message's first piece */
    uint8_t last;          /* its last: a control frame is one piece, first and last */
    uint8_t rsv;           /* data: the RSV bits of the message's first frame */
    uint16_t close_code;   /* CLOSE: the code, or SEROW_WS_NO_STATUS; data is the reason */
};

void serow_ws_reader_init(struct serow_ws_reader *r, int from_client, uint64_t max_message);

/*
 * Reads from buf[0..len): returns SEROW_WS_PIECE with *piece filled (its
 * data inside buf, unmasked in place), SEROW_WS_MORE when what is left is
 * not enough for one, or SEROW_WS_FAIL with r->fail_code.  *consumed says how
 * many bytes of buf are done with; the caller offers the rest again, after
 * more have arrived when the result was SEROW_WS_MORE.
 *
 * A data frame's payload comes as it arrives, in as many pieces as reads
 * (a frame with none as one empty piece); a control frame comes whole, once
 * all of it (at most 2 + 4 + 125 bytes) is in buf, so the caller's buffer
 * holds at least SEROW_WS_MAX_HEAD + 125 bytes.  After a close frame all
 * input is consumed and ignored (section 5.5.1).
 */
int serow_ws_read(struct serow_ws_reader *r, uint8_t *buf, size_t len, size_t *consumed,
                  struct serow_ws_piece *piece);

/*
 * A server's frame head for a payload of payload_len bytes, into out;
 * returns its length (2, 4 or 10).  opcode may carry RSV bits (| RSV1).
 */
size_t serow_ws_frame_head(uint8_t out[SEROW_WS_MAX_SERVER_HEAD], int fin, unsigned opcode,
                           uint64_t payload_len);

/*
 * A whole close frame into out; returns its length.  code 0 sends none
 * (then no reason either); otherwise it must be one serow_ws_close_code_valid()
 * accepts.  The reason is cut to the 123 bytes that fit, at a character's
 * boundary so that it stays UTF-8.
 */
size_t serow_ws_close_frame(uint8_t out[SEROW_WS_MAX_CONTROL_FRAME], unsigned code,
                            const uint8_t *reason, size_t reason_len);

#endif
