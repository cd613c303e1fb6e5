/*
 * websocket_deflate.c - permessage-deflate (RFC 7692) without context
 * takeover (websocket_deflate.h, docs/websocket.md).
 *
 * Owns: the rules on a permessage-deflate offer, the response that accepts
 * one, and a message's compression both ways.  Which connection negotiated
 * it, and the RSV1 bit on its frames, are the caller's (websocket_frame.c
 * allows the bit once told).
 */
#include "http/websocket_deflate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- the offer -------------------------------------------------------------- */

/* tchar (RFC 7230 section 3.2.6) */
static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

struct cursor {
    const char *p, *end;
};

static void skip_ows(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static size_t token(struct cursor *c)
{
    const char *start = c->p;
    while (c->p < c->end && is_tchar((unsigned char)*c->p))
        c->p++;
    return (size_t)(c->p - start);
}

/* A parameter's value, a token or a quoted-string, unquoted into out (what
 * does not fit is counted, not kept: no value this side accepts is long).
 * -1 when it is neither. */
static long value(struct cursor *c, char *out, size_t cap)
{
    size_t n = 0;
    if (c->p < c->end && *c->p == '"') {
        c->p++;
        for (;;) {
            if (c->p == c->end)
                return -1; /* (no closing quote) */
            unsigned char ch = (unsigned char)*c->p++;
            if (ch == '"')
                break;
            if (ch == '\\') {
                if (c->p == c->end)
                    return -1;
                ch = (unsigned char)*c->p++;
            }
            if (ch < 0x20 && ch != '\t')
                return -1;
            if (ch == 0x7f)
                return -1;
            if (n < cap)
                out[n] = (char)ch;
            n++;
        }
        return (long)n;
    }
    const char *start = c->p;
    n = token(c);
    if (n == 0)
        return -1;
    memcpy(out, start, n < cap ? n : cap);
    return (long)n;
}

/* Section 7.1.2's window size: "8" to "15", no leading zero. */
static int window_bits(const char *v, long n)
{
    if (n == 1 && (v[0] == '8' || v[0] == '9'))
        return v[0] - '0';
    if (n == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5')
        return 10 + v[1] - '0';
    return -1;
}

enum { SERVER_NO_TAKEOVER, CLIENT_NO_TAKEOVER, SERVER_BITS, CLIENT_BITS, PARAMS };
static const char *const param_names[PARAMS] = {"server_no_context_takeover", "client_no_context_takeover",
                                                "server_max_window_bits", "client_max_window_bits"};

int serow_wsd_negotiate(const char *field, size_t len, struct serow_wsd_params *p)
{
    struct cursor c = {field, field + len};
    int accepted = 0;
    for (;;) {
        /* (empty list elements are allowed: RFC 7230 section 7) */
        while (c.p < c.end && (*c.p == ',' || *c.p == ' ' || *c.p == '\t'))
            c.p++;
        if (c.p == c.end)
            return accepted;
        const char *name = c.p;
        size_t name_len = token(&c);
        if (name_len == 0)
            return -1;
        int deflate = name_len == 18 && memcmp(name, "permessage-deflate", 18) == 0;
        int ok = 1; /* the offer can be accepted so far */
        unsigned seen = 0;
        struct serow_wsd_params offer = {15, 0};
        for (;;) {
            skip_ows(&c);
            if (c.p == c.end || *c.p == ',')
                break;
            if (*c.p != ';')
                return -1;
            c.p++;
            skip_ows(&c);
            const char *param = c.p;
            size_t param_len = token(&c);
            if (param_len == 0)
                return -1;
            skip_ows(&c);
            char v[8];
            long v_len = -2; /* -2: no value */
            if (c.p < c.end && *c.p == '=') {
                c.p++;
                skip_ows(&c);
                if ((v_len = value(&c, v, sizeof(v))) < 0)
                    return -1;
            }
            if (!deflate || !ok)
                continue; /* (only the grammar matters) */
            int i = 0;
            while (i < PARAMS && !(strlen(param_names[i]) == param_len &&
                                   memcmp(param_names[i], param, param_len) == 0))
                i++;
            if (i == PARAMS || (seen & 1u << i)) {
                ok = 0; /* a parameter this side does not know, or one given twice */
                continue;
            }
            seen |= 1u << i;
            int bits = v_len >= 0 ? window_bits(v, v_len) : -1;
            if (i == SERVER_BITS) {
                /* 8 is declined: zlib's raw DEFLATE has no 256-byte window
                 * (it would use 512), and the client could not read it */
                if (bits < 9)
                    ok = 0;
                offer.server_max_window_bits = (uint8_t)bits;
                offer.server_max_window_bits_asked = 1;
            } else if (i == CLIENT_BITS) {
                /* (a hint that the client can be told a window; this side
                 * inflates with any, so it tells none) */
                if (v_len != -2 && bits < 0)
                    ok = 0;
            } else if (v_len != -2) {
                ok = 0; /* the *_no_context_takeover parameters take no value */
            }
        }
        if (deflate && ok && !accepted) {
            *p = offer;
            accepted = 1;
        }
    }
}

size_t serow_wsd_response(const struct serow_wsd_params *p, char out[SEROW_WSD_MAX_RESPONSE])
{
    /* Both no_context_takeover: section 7.1.1.2 lets a server name
     * client_no_context_takeover though the client did not offer it. */
    int n = snprintf(out, SEROW_WSD_MAX_RESPONSE,
                     "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
    if (p->server_max_window_bits_asked)
        n += snprintf(out + n, SEROW_WSD_MAX_RESPONSE - (size_t)n, "; server_max_window_bits=%u",
                      (unsigned)p->server_max_window_bits);
    return (size_t)n;
}

/* ---- messages ----------------------------------------------------------------- */

struct serow_wsd {
    z_stream deflaters[16]; /* by window bits, made when first needed */
    uint8_t deflater_ready[16];
    z_stream inflater;
    uint8_t inflater_ready;
    uint8_t *out;
    size_t out_cap;
};

struct serow_wsd *serow_wsd_new(void)
{
    return calloc(1, sizeof(struct serow_wsd));
}

void serow_wsd_free(struct serow_wsd *d)
{
    if (d == NULL)
        return;
    for (int i = 0; i < 16; i++)
        if (d->deflater_ready[i])
            deflateEnd(&d->deflaters[i]);
    if (d->inflater_ready)
        inflateEnd(&d->inflater);
    free(d->out);
    free(d);
}

static int room(struct serow_wsd *d, size_t cap)
{
    if (cap <= d->out_cap)
        return 0;
    uint8_t *grown = realloc(d->out, cap);
    if (grown == NULL)
        return -1;
    d->out = grown;
    d->out_cap = cap;
    return 0;
}

long serow_wsd_deflate(struct serow_wsd *d, unsigned window_bits, const uint8_t *p, size_t len,
                       const uint8_t **out)
{
    if (window_bits < 9 || window_bits > 15)
        window_bits = 15;
    z_stream *z = &d->deflaters[window_bits];
    if (!d->deflater_ready[window_bits]) {
        /* raw DEFLATE (negative bits): the message carries no zlib header */
        if (deflateInit2(z, SEROW_WSD_LEVEL, Z_DEFLATED, -(int)window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return -1;
        d->deflater_ready[window_bits] = 1;
    } else if (deflateReset(z) != Z_OK) {
        return -1;
    }
    /* (the bound leaves room for the flush's empty block too) */
    size_t cap = deflateBound(z, (uLong)len) + 16;
    if (room(d, cap) != 0)
        return -1;
    z->next_in = (Bytef *)p;
    z->avail_in = (uInt)len;
    size_t used = 0;
    for (;;) {
        z->next_out = d->out + used;
        z->avail_out = (uInt)(d->out_cap - used);
        if (deflate(z, Z_SYNC_FLUSH) == Z_STREAM_ERROR)
            return -1;
        used = d->out_cap - z->avail_out;
        if (z->avail_out != 0)
            break;
        if (room(d, d->out_cap * 2) != 0)
            return -1;
    }
    /* A sync flush ends with an empty stored block, 00 00 ff ff: section
     * 7.2.1 takes it off, the reader puts it back. */
    if (used >= 4 && memcmp(d->out + used - 4, "\x00\x00\xff\xff", 4) == 0)
        used -= 4;
    *out = d->out;
    return (long)used;
}

long serow_wsd_inflate(struct serow_wsd *d, const uint8_t *p, size_t len, size_t max, const uint8_t **out)
{
    static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};
    z_stream *z = &d->inflater;
    if (!d->inflater_ready) {
        /* the largest window: a client may use less, never more */
        if (inflateInit2(z, -15) != Z_OK)
            return SEROW_WSD_NO_MEMORY;
        d->inflater_ready = 1;
    } else if (inflateReset(z) != Z_OK) {
        return SEROW_WSD_NO_MEMORY;
    }
    size_t cap = len * 4 > 4096 ? len * 4 : 4096;
    if (cap > max + 1)
        cap = max + 1;
    if (room(d, cap) != 0)
        return SEROW_WSD_NO_MEMORY;
    cap = d->out_cap < max + 1 ? d->out_cap : max + 1;
    z->next_in = (Bytef *)p;
    z->avail_in = (uInt)len;
    int tail_given = 0;
    size_t used = 0;
    for (;;) {
        if (z->avail_in == 0 && !tail_given) {
            z->next_in = (Bytef *)tail;
            z->avail_in = sizeof(tail);
            tail_given = 1;
        }
        if (used == cap) {
            if (cap == max + 1)
                return SEROW_WSD_TOO_BIG; /* (and not a byte more inflated) */
            size_t grown = cap * 2 < max + 1 ? cap * 2 : max + 1;
            if (room(d, grown) != 0)
                return SEROW_WSD_NO_MEMORY;
            cap = grown;
        }
        z->next_out = d->out + used;
        z->avail_out = (uInt)(cap - used);
        int r = inflate(z, Z_SYNC_FLUSH);
        used = cap - z->avail_out;
        if (r == Z_STREAM_END)
            break; /* (a final block: what follows it is ignored) */
        if (r == Z_MEM_ERROR)
            return SEROW_WSD_NO_MEMORY;
        if (r != Z_OK && r != Z_BUF_ERROR)
            return SEROW_WSD_BAD; /* Z_DATA_ERROR, Z_NEED_DICT */
        if (tail_given && z->avail_in == 0 && z->avail_out != 0)
            break; /* all read, and all it gave is out */
    }
    if (used > max)
        return SEROW_WSD_TOO_BIG;
    *out = d->out;
    return (long)used;
}
