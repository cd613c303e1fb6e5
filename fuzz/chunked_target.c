/*
 * chunked_target.c - fuzz target for serow_decode_chunked().
 *
 * The worker feeds the decoder whatever each read() returned, so the input
 * is decoded in one piece (the reference) and then again in pieces: one byte
 * at a time, at split points drawn from the input's own hash, and (for short
 * inputs) at every single split point.  Every way must agree with the
 * reference: the same result, the same decoded bytes and the same number of
 * bytes consumed.  Each call must also keep its contract: consumed <= the
 * piece's length, decoded <= consumed, and NEED_MORE only when the whole
 * piece was used.  Each piece is copied into a buffer of exactly its size,
 * so that ASan sees a read past it.
 *
 * All of it runs twice: without a limit, and with a max_body hashed from the
 * input.  With the limit the decoder never decodes more than it, and unless
 * it answers CHUNKED_TOO_LARGE it agrees with the decoder without a limit;
 * when it does, what it decoded is the start of what that one decodes.
 *
 * A body the decoder accepts must match the grammar (RFC 9112 7.1), read
 * here again by a second, deliberately plain reader written from the ABNF
 * (matches_chunked_grammar): the bytes it consumed are one whole chunked
 * body, its chunk extensions are what chunk-ext allows, and what it decoded
 * is the chunks' data.  A decoder limited to a number of extension bytes
 * hashed from the input never accepts a body with more.
 */
#include "targets.h"
#include "http/http_parser.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

struct outcome {
    int result;
    size_t consumed; /* input bytes used in total */
    char *decoded;
    size_t decoded_len;
};

/* One call on a private copy of the piece; appends to *out. */
static int feed(struct chunked_decoder *d, const uint8_t *piece, size_t len, struct outcome *out)
{
    char *buf = malloc(len ? len : 1);
    CHECK(buf != NULL);
    if (len)
        memcpy(buf, piece, len);
    size_t n = len, consumed = (size_t)-1;
    int r = serow_decode_chunked(d, buf, &n, &consumed);
    CHECK(r == CHUNKED_DONE || r == CHUNKED_NEED_MORE || r == CHUNKED_ERROR ||
          (r == CHUNKED_TOO_LARGE && d->max_body > 0));
    CHECK(consumed <= len);
    CHECK(n <= consumed);
    if (r == CHUNKED_NEED_MORE)
        CHECK(consumed == len);
    memcpy(out->decoded + out->decoded_len, buf, n);
    out->decoded_len += n;
    out->consumed += consumed;
    out->result = r;
    free(buf);
    return r;
}

/* Decodes data in pieces that end at the given cut points (ascending). */
static void decode_split(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts,
                         uint64_t max_body, uint64_t max_ext, struct outcome *out)
{
    struct chunked_decoder d;
    serow_chunked_decoder_init(&d);
    d.max_body = max_body;
    d.max_extension_bytes = max_ext;
    out->result = CHUNKED_NEED_MORE;
    out->consumed = 0;
    out->decoded_len = 0;

    size_t start = 0;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts[k] : size;
        if (end < start)
            end = start;
        int r = feed(&d, data + start, end - start, out);
        if (r != CHUNKED_NEED_MORE)
            return;
        start = end;
    }
    /* all input used without an end: an empty read changes nothing */
    size_t before = out->decoded_len;
    CHECK(feed(&d, data, 0, out) == CHUNKED_NEED_MORE && out->decoded_len == before);
}

static void same_outcome(const struct outcome *a, const struct outcome *b)
{
    CHECK(a->result == b->result);
    CHECK(a->consumed == b->consumed);
    CHECK(a->decoded_len == b->decoded_len);
    CHECK(memcmp(a->decoded, b->decoded, a->decoded_len) == 0);
}

static uint64_t hash_input(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    return h;
}

/* ---- the grammar, read plainly (RFC 9112 7.1, RFC 9110 5.6) ------------ */

static int is_tchar(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int is_hexdig(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
static int is_qdtext(uint8_t c)
{
    return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) ||
           (c >= 0x5d && c <= 0x7e) || c >= 0x80;
}

/* quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ) */
static int is_quoted_pair_char(uint8_t c)
{
    return c == '\t' || c == ' ' || (c >= 0x21 && c <= 0x7e) || c >= 0x80;
}

/* field-vchar / SP / HTAB: what a trailer's value may hold */
static int is_field_char(uint8_t c)
{
    return c == '\t' || c == ' ' || (c >= 0x21 && c <= 0x7e) || c >= 0x80;
}

struct reader {
    const uint8_t *p;
    size_t len, at;
};

static int peek(const struct reader *r, uint8_t c)
{
    return r->at < r->len && r->p[r->at] == c;
}

static void skip_bws(struct reader *r)
{
    while (peek(r, ' ') || peek(r, '\t'))
        r->at++;
}

static int read_token(struct reader *r)
{
    size_t start = r->at;
    while (r->at < r->len && is_tchar(r->p[r->at]))
        r->at++;
    return r->at > start;
}

static int read_quoted_string(struct reader *r)
{
    if (!peek(r, '"'))
        return 0;
    r->at++;
    while (r->at < r->len) {
        uint8_t c = r->p[r->at++];
        if (c == '"')
            return 1;
        if (c == '\\') {
            if (r->at >= r->len || !is_quoted_pair_char(r->p[r->at]))
                return 0;
            r->at++;
        } else if (!is_qdtext(c)) {
            return 0;
        }
    }
    return 0;
}

static int read_crlf(struct reader *r)
{
    if (r->at + 2 > r->len || r->p[r->at] != '\r' || r->p[r->at + 1] != '\n')
        return 0;
    r->at += 2;
    return 1;
}

/* chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ),
 * then CRLF.  BWS may come only before a ";" or around a "=", so a
 * backtrack over it is needed where the line may end instead. */
static int read_chunk_ext_and_crlf(struct reader *r, uint64_t *ext_bytes)
{
    size_t start = r->at;
    for (;;) {
        size_t before_bws = r->at;
        skip_bws(r);
        if (!peek(r, ';')) {
            r->at = before_bws;
            break;
        }
        r->at++;
        skip_bws(r);
        if (!read_token(r))
            return 0;
        size_t after_name = r->at;
        skip_bws(r);
        if (peek(r, '=')) {
            r->at++;
            skip_bws(r);
            if (peek(r, '"')) {
                if (!read_quoted_string(r))
                    return 0;
            } else if (!read_token(r)) {
                return 0;
            }
        } else {
            r->at = after_name;
        }
    }
    *ext_bytes += r->at - start;
    return read_crlf(r);
}

/*
 * Whether data[0..size) is exactly one chunked body whose chunks' data is
 * decoded[0..decoded_len), with ext_bytes of chunk extensions in it:
 *   chunked-body = *chunk last-chunk trailer-section CRLF
 *   chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
 *   last-chunk = 1*("0") [ chunk-ext ] CRLF
 *   trailer-section = *( field-line CRLF ),  field-line = token ":" *field-char
 */
static int matches_chunked_grammar(const uint8_t *data, size_t size, const char *decoded,
                                   size_t decoded_len, uint64_t *ext_bytes)
{
    struct reader r = {data, size, 0};
    size_t data_seen = 0;
    *ext_bytes = 0;
    for (;;) {
        uint64_t chunk = 0;
        size_t digits_start = r.at;
        while (r.at < r.len && is_hexdig(r.p[r.at])) {
            uint8_t c = r.p[r.at++];
            int v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
            if (chunk > (UINT64_MAX >> 4))
                return 0;
            chunk = chunk * 16 + (uint64_t)v;
        }
        if (r.at == digits_start || !read_chunk_ext_and_crlf(&r, ext_bytes))
            return 0;
        if (chunk == 0)
            break;
        if (chunk > r.len - r.at || chunk > decoded_len - data_seen ||
            memcmp(r.p + r.at, decoded + data_seen, (size_t)chunk) != 0)
            return 0;
        r.at += (size_t)chunk;
        data_seen += (size_t)chunk;
        if (!read_crlf(&r))
            return 0;
    }
    while (!peek(&r, '\r')) {
        if (!read_token(&r) || !peek(&r, ':'))
            return 0;
        r.at++;
        while (r.at < r.len && is_field_char(r.p[r.at]))
            r.at++;
        if (!read_crlf(&r))
            return 0;
    }
    return read_crlf(&r) && r.at == size && data_seen == decoded_len;
}

/* Decodes data whole and in many splits with the given limit; all agree.
 * Returns the outcome of the whole, in *whole. */
static void decode_every_way(const uint8_t *data, size_t size, uint64_t max_body,
                             uint64_t max_ext, size_t *cuts, struct outcome *whole,
                             struct outcome *split)
{
    decode_split(data, size, NULL, 0, max_body, max_ext, whole);
    CHECK(whole->decoded_len <= whole->consumed && whole->consumed <= size);
    if (whole->result == CHUNKED_NEED_MORE)
        CHECK(whole->consumed == size);
    if (max_body > 0)
        CHECK(whole->decoded_len <= max_body);

    /* one byte at a time */
    for (size_t i = 0; i < size; i++)
        cuts[i] = i + 1;
    decode_split(data, size, cuts, size, max_body, max_ext, split);
    same_outcome(whole, split);

    /* a few random splittings */
    uint64_t x = hash_input(data, size) | 1;
    for (int round = 0; round < 4; round++) {
        size_t ncuts = 0, pos = 0;
        while (ncuts < size) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17; /* xorshift64 */
            pos += 1 + (size_t)(x % 32);
            if (pos >= size)
                break;
            cuts[ncuts++] = pos;
        }
        decode_split(data, size, cuts, ncuts, max_body, max_ext, split);
        same_outcome(whole, split);
    }

    /* every split into two pieces, while that stays cheap */
    if (size <= 256) {
        for (size_t c = 0; c <= size; c++) {
            cuts[0] = c;
            decode_split(data, size, cuts, 1, max_body, max_ext, split);
            same_outcome(whole, split);
        }
    }
}

int fuzz_chunked_input(const uint8_t *data, size_t size)
{
    struct outcome whole, split, limited;
    whole.decoded = malloc(size + 1);
    split.decoded = malloc(size + 1);
    limited.decoded = malloc(size + 1);
    size_t *cuts = calloc(size + 1, sizeof(size_t));
    CHECK(whole.decoded && split.decoded && limited.decoded && cuts);

    decode_every_way(data, size, 0, 0, cuts, &whole, &split);

    /* what it accepted is the grammar's */
    uint64_t ext_bytes = 0;
    if (whole.result == CHUNKED_DONE)
        CHECK(matches_chunked_grammar(data, whole.consumed, whole.decoded, whole.decoded_len,
                                      &ext_bytes));

    /* a limit from 1 to size: sometimes below what the body announces */
    uint64_t max_body = 1 + hash_input(data, size) % (size + 1);
    decode_every_way(data, size, max_body, 0, cuts, &limited, &split);
    if (limited.result == CHUNKED_TOO_LARGE) {
        CHECK(limited.decoded_len <= whole.decoded_len);
        CHECK(memcmp(limited.decoded, whole.decoded, limited.decoded_len) == 0);
    } else {
        same_outcome(&whole, &limited);
    }

    /* a bound on the extensions' bytes, sometimes below what the body has:
     * a body with more is refused, one within it decoded as without it */
    uint64_t max_ext = 1 + (hash_input(data, size) >> 20) % (size + 1);
    decode_every_way(data, size, 0, max_ext, cuts, &limited, &split);
    if (whole.result == CHUNKED_DONE && ext_bytes > max_ext)
        CHECK(limited.result == CHUNKED_ERROR);
    else if (whole.result == CHUNKED_DONE || limited.result != CHUNKED_ERROR)
        same_outcome(&whole, &limited); /* (an unfinished body may pass the bound first) */
    if (limited.result == CHUNKED_DONE) {
        uint64_t limited_ext = 0;
        CHECK(matches_chunked_grammar(data, limited.consumed, limited.decoded,
                                      limited.decoded_len, &limited_ext));
        CHECK(limited_ext <= max_ext);
    }

    free(cuts);
    free(limited.decoded);
    free(split.decoded);
    free(whole.decoded);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_chunked_input(data, size);
}
#endif
