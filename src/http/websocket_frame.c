/*
 * websocket_frame.c - WebSocket frames (RFC 6455 section 5): see
 * websocket_frame.h.  Every rule a peer's frames must keep is checked here,
 * once, and refused with the close code the RFC names for it; the caller
 * only closes.
 */
#include "http/websocket_frame.h"

#include <string.h>

#define CONTROL_BIT 0x8 /* opcodes 0x8-0xF are control frames (section 5.5) */

static int head_fail(struct serow_ws_frame_head *h, const char *why)
{
    h->fail_code = SEROW_WS_PROTOCOL_ERROR;
    h->fail_why = why;
    return SEROW_WS_FAIL;
}

int serow_ws_parse_frame_head(const uint8_t *buf, size_t len, int from_client,
                              uint8_t rsv_allowed, struct serow_ws_frame_head *h)
{
    if (len < 1)
        return SEROW_WS_MORE;
    /* Each rule is checked as soon as the byte it is about has arrived, so a
     * peer learns nothing by sending the rest slowly. */
    uint8_t b0 = buf[0];
    h->fin = b0 >> 7;
    h->rsv = b0 & (SEROW_WS_RSV1 | SEROW_WS_RSV2 | SEROW_WS_RSV3);
    h->opcode = b0 & 0x0F;
    int control = (h->opcode & CONTROL_BIT) != 0;
    if (h->opcode > SEROW_WS_OP_PONG || (h->opcode > SEROW_WS_OP_BINARY && h->opcode < SEROW_WS_OP_CLOSE))
        return head_fail(h, "reserved opcode");
    /* An RSV bit means what a negotiated extension says; none says anything
     * for a control frame (permessage-deflate forbids it there). */
    if (h->rsv & ~(control ? 0 : rsv_allowed))
        return head_fail(h, "RSV bit that no extension gave a meaning");
    if (control && !h->fin)
        return head_fail(h, "fragmented control frame");
    if (len < 2)
        return SEROW_WS_MORE;

    uint8_t b1 = buf[1];
    h->masked = b1 >> 7;
    /* A client masks every frame, a server none (section 5.1): a client's
     * unmasked frame could be crafted to look like something else to an
     * intermediary. */
    if (h->masked != (from_client ? 1 : 0))
        return head_fail(h, from_client ? "unmasked frame from a client" : "masked frame from a server");
    uint8_t len7 = b1 & 0x7F;
    if (control && len7 > SEROW_WS_MAX_CONTROL_PAYLOAD)
        return head_fail(h, "control frame over 125 bytes");

    size_t at = 2;
    if (len7 == 126) {
        if (len < 4)
            return SEROW_WS_MORE;
        h->payload_len = (uint64_t)buf[2] << 8 | buf[3];
        /* The minimal encoding only (section 5.2): one length, one way to say it. */
        if (h->payload_len < 126)
            return head_fail(h, "16-bit length under 126");
        at = 4;
    } else if (len7 == 127) {
        if (len < 3)
            return SEROW_WS_MORE;
        if (buf[2] & 0x80)
            return head_fail(h, "64-bit length with its top bit set");
        if (len < 10)
            return SEROW_WS_MORE;
        uint64_t n = 0;
        for (int i = 2; i < 10; i++)
            n = n << 8 | buf[i];
        if (n <= 0xFFFF)
            return head_fail(h, "64-bit length under 65536");
        h->payload_len = n;
        at = 10;
    } else {
        h->payload_len = len7;
    }
    if (h->masked) {
        if (len < at + 4)
            return SEROW_WS_MORE;
        memcpy(h->mask, buf + at, 4);
        at += 4;
    } else {
        memset(h->mask, 0, 4);
    }
    return (int)at;
}

void serow_ws_unmask(uint8_t *p, size_t len, const uint8_t key[4], size_t key_offset)
{
    size_t i = 0;
    key_offset &= 3;
    /* Byte by byte up to an 8-byte boundary, then a word at a time: the key
     * repeats every 4 bytes, so a word's key is the key from where it starts,
     * twice, and 8-byte steps keep that phase. */
    while (i < len && ((uintptr_t)(p + i) & 7) != 0) {
        p[i] ^= key[(key_offset + i) & 3];
        i++;
    }
    if (len - i >= 8) {
        uint8_t k8[8];
        for (int j = 0; j < 8; j++)
            k8[j] = key[(key_offset + i + (size_t)j) & 3];
        uint64_t k;
        memcpy(&k, k8, 8);
        for (; len - i >= 8; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8); /* one load: p + i is aligned */
            w ^= k;
            memcpy(p + i, &w, 8);
        }
    }
    for (; i < len; i++)
        p[i] ^= key[(key_offset + i) & 3];
}

int serow_utf8_check(struct serow_utf8_state *s, const uint8_t *p, size_t len)
{
    /* The state in locals: stores through s could alias p (both are bytes),
     * which would make the compiler store and reload them at every byte. */
    unsigned need = s->need, lo = s->lo, hi = s->hi;
    size_t i = 0;
    while (i < len) {
        if (need > 0) {
            uint8_t c = p[i++];
            if (c < lo || c > hi)
                return 0;
            need--;
            lo = 0x80;
            hi = 0xBF;
            continue;
        }
        uint8_t c = p[i];
        if (c < 0x80) {
            /* Most text is ASCII: skip it 8 bytes at a time. */
            while (len - i >= 8) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ULL)
                    break;
                i += 8;
            }
            while (i < len && p[i] < 0x80)
                i++;
            continue;
        }
        i++;
        /* The lead byte decides how many bytes follow and, for the second,
         * a narrower range where the wider one would allow an overlong form
         * (E0, F0), a surrogate (ED) or more than U+10FFFF (F4). */
        if (c < 0xC2) {
            return 0; /* a continuation byte, or C0/C1: overlong */
        } else if (c < 0xE0) {
            need = 1;
            lo = 0x80;
            hi = 0xBF;
        } else if (c < 0xF0) {
            need = 2;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c < 0xF5) {
            need = 3;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return 0;
        }
    }
    s->need = (uint8_t)need;
    s->lo = (uint8_t)lo;
    s->hi = (uint8_t)hi;
    return 1;
}

int serow_ws_close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

void serow_ws_reader_init(struct serow_ws_reader *r, int from_client, uint64_t max_message)
{
    memset(r, 0, sizeof *r);
    r->from_client = from_client ? 1 : 0;
    r->max_message = max_message;
}

static int reader_fail(struct serow_ws_reader *r, uint16_t code, const char *why)
{
    r->fail_code = code;
    r->fail_why = why;
    return SEROW_WS_FAIL;
}

/* A control frame, whole in buf[0..len) after its head of head_len bytes. */
static int read_control(struct serow_ws_reader *r, uint8_t *buf, size_t len, size_t head_len,
                        size_t *consumed, struct serow_ws_piece *piece)
{
    const struct serow_ws_frame_head *f = &r->frame;
    size_t plen = (size_t)f->payload_len; /* <= 125: checked with the head */
    if (len - head_len < plen)
        return SEROW_WS_MORE; /* it comes whole, so that its payload can be checked whole */
    uint8_t *data = buf + head_len;
    if (f->masked)
        serow_ws_unmask(data, plen, f->mask, 0);
    piece->data = data;
    piece->len = plen;
    piece->opcode = f->opcode;
    piece->first = piece->last = 1;
    piece->rsv = 0;
    piece->close_code = 0;
    if (f->opcode == SEROW_WS_OP_CLOSE) {
        /* Section 5.5.1: no payload, or a code of two bytes and then a reason in UTF-8. */
        if (plen == 1)
            return reader_fail(r, SEROW_WS_PROTOCOL_ERROR, "close frame of one byte");
        piece->close_code = SEROW_WS_NO_STATUS;
        if (plen >= 2) {
            unsigned code = (unsigned)data[0] << 8 | data[1];
            if (!serow_ws_close_code_valid(code))
                return reader_fail(r, SEROW_WS_PROTOCOL_ERROR, "close code not allowed");
            struct serow_utf8_state u = {0};
            if (!serow_utf8_check(&u, data + 2, plen - 2) || !serow_utf8_complete(&u))
                return reader_fail(r, SEROW_WS_INVALID_PAYLOAD, "close reason not UTF-8");
            piece->close_code = (uint16_t)code;
            piece->data = data + 2;
            piece->len = plen - 2;
        }
        r->closed = 1;
    }
    *consumed = head_len + plen;
    return SEROW_WS_PIECE;
}

/* A data frame's head was read: check it against the message it belongs to. */
static int start_data_frame(struct serow_ws_reader *r)
{
    const struct serow_ws_frame_head *f = &r->frame;
    if (f->opcode == SEROW_WS_OP_CONTINUATION) {
        if (r->message_opcode == 0)
            return reader_fail(r, SEROW_WS_PROTOCOL_ERROR, "continuation frame without a message");
        /* An extension's RSV bit marks a message, on its first frame (RFC 7692 6.1). */
        if (f->rsv)
            return reader_fail(r, SEROW_WS_PROTOCOL_ERROR, "RSV bit on a continuation frame");
    } else {
        if (r->message_opcode != 0)
            return reader_fail(r, SEROW_WS_PROTOCOL_ERROR, "new message inside a fragmented one");
        r->message_opcode = f->opcode;
        r->message_rsv = f->rsv;
        r->message_len = 0;
        r->message_started = 0;
        /* Compressed text is UTF-8 only once inflated: the extension checks it. */
        r->check_utf8 = f->opcode == SEROW_WS_OP_TEXT && !(f->rsv & SEROW_WS_RSV1);
        memset(&r->utf8, 0, sizeof r->utf8);
    }
    /* Refused on the head, before any of the payload is read or kept. */
    if (r->max_message && f->payload_len > r->max_message - r->message_len)
        return reader_fail(r, SEROW_WS_MESSAGE_TOO_BIG, "message over the limit");
    r->message_len += f->payload_len;
    r->frame_left = f->payload_len;
    r->frame_done = 0;
    r->in_payload = 1;
    return SEROW_WS_MORE;
}

int serow_ws_read(struct serow_ws_reader *r, uint8_t *buf, size_t len, size_t *consumed,
                  struct serow_ws_piece *piece)
{
    *consumed = 0;
    if (r->fail_code)
        return SEROW_WS_FAIL;
    if (r->closed) {
        *consumed = len;
        return SEROW_WS_MORE;
    }
    if (!r->in_payload) {
        int n = serow_ws_parse_frame_head(buf, len, r->from_client, r->rsv_allowed, &r->frame);
        if (n == SEROW_WS_FAIL)
            return reader_fail(r, r->frame.fail_code, r->frame.fail_why);
        if (n == SEROW_WS_MORE)
            return SEROW_WS_MORE;
        if (r->frame.opcode & CONTROL_BIT)
            return read_control(r, buf, len, (size_t)n, consumed, piece);
        if (start_data_frame(r) == SEROW_WS_FAIL)
            return SEROW_WS_FAIL;
        *consumed = (size_t)n;
        buf += n;
        len -= (size_t)n;
    }

    size_t take = r->frame_left < len ? (size_t)r->frame_left : len;
    if (take == 0 && r->frame_left > 0)
        return SEROW_WS_MORE;
    if (r->frame.masked)
        serow_ws_unmask(buf, take, r->frame.mask, (size_t)(r->frame_done & 3));
    if (r->check_utf8 && !serow_utf8_check(&r->utf8, buf, take))
        return reader_fail(r, SEROW_WS_INVALID_PAYLOAD, "text not UTF-8");
    r->frame_done += take;
    r->frame_left -= take;

    piece->data = buf;
    piece->len = take;
    piece->opcode = r->message_opcode;
    piece->first = !r->message_started;
    piece->rsv = r->message_rsv;
    piece->close_code = 0;
    piece->last = 0;
    r->message_started = 1;
    if (r->frame_left == 0) {
        r->in_payload = 0;
        if (r->frame.fin) {
            if (r->check_utf8 && !serow_utf8_complete(&r->utf8))
                return reader_fail(r, SEROW_WS_INVALID_PAYLOAD, "text ends inside a character");
            piece->last = 1;
            r->message_opcode = 0;
        }
    }
    *consumed += take;
    return SEROW_WS_PIECE;
}

size_t serow_ws_frame_head(uint8_t out[SEROW_WS_MAX_SERVER_HEAD], int fin, unsigned opcode,
                           uint64_t payload_len)
{
    out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x7F));
    if (payload_len < 126) {
        out[1] = (uint8_t)payload_len;
        return 2;
    }
    if (payload_len <= 0xFFFF) {
        out[1] = 126;
        out[2] = (uint8_t)(payload_len >> 8);
        out[3] = (uint8_t)payload_len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(payload_len >> (56 - 8 * i));
    return 10;
}

size_t serow_ws_close_frame(uint8_t out[SEROW_WS_MAX_CONTROL_FRAME], unsigned code,
                            const uint8_t *reason, size_t reason_len)
{
    if (code == 0)
        return serow_ws_frame_head(out, 1, SEROW_WS_OP_CLOSE, 0);
    size_t keep = reason_len;
    if (keep > SEROW_WS_MAX_CONTROL_PAYLOAD - 2) {
        /* Back to the start of the character that would be cut. */
        keep = SEROW_WS_MAX_CONTROL_PAYLOAD - 2;
        while (keep > 0 && (reason[keep] & 0xC0) == 0x80)
            keep--;
    }
    size_t n = serow_ws_frame_head(out, 1, SEROW_WS_OP_CLOSE, 2 + keep);
    out[n] = (uint8_t)(code >> 8);
    out[n + 1] = (uint8_t)code;
    if (keep)
        memcpy(out + n + 2, reason, keep);
    return n + 2 + keep;
}
