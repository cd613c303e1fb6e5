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
                         uint64_t max_body, struct outcome *out)
{
    struct chunked_decoder d;
    serow_chunked_decoder_init(&d);
    d.max_body = max_body;
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

/* Decodes data whole and in many splits with the given limit; all agree.
 * Returns the outcome of the whole, in *whole. */
static void decode_every_way(const uint8_t *data, size_t size, uint64_t max_body,
                             size_t *cuts, struct outcome *whole, struct outcome *split)
{
    decode_split(data, size, NULL, 0, max_body, whole);
    CHECK(whole->decoded_len <= whole->consumed && whole->consumed <= size);
    if (whole->result == CHUNKED_NEED_MORE)
        CHECK(whole->consumed == size);
    if (max_body > 0)
        CHECK(whole->decoded_len <= max_body);

    /* one byte at a time */
    for (size_t i = 0; i < size; i++)
        cuts[i] = i + 1;
    decode_split(data, size, cuts, size, max_body, split);
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
        decode_split(data, size, cuts, ncuts, max_body, split);
        same_outcome(whole, split);
    }

    /* every split into two pieces, while that stays cheap */
    if (size <= 256) {
        for (size_t c = 0; c <= size; c++) {
            cuts[0] = c;
            decode_split(data, size, cuts, 1, max_body, split);
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

    decode_every_way(data, size, 0, cuts, &whole, &split);

    /* a limit from 1 to size: sometimes below what the body announces */
    uint64_t max_body = 1 + hash_input(data, size) % (size + 1);
    decode_every_way(data, size, max_body, cuts, &limited, &split);
    if (limited.result == CHUNKED_TOO_LARGE) {
        CHECK(limited.decoded_len <= whole.decoded_len);
        CHECK(memcmp(limited.decoded, whole.decoded, limited.decoded_len) == 0);
    } else {
        same_outcome(&whole, &limited);
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
