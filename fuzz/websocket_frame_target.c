/*
 * websocket_frame_target.c - fuzz target for src/http/websocket_frame.c.
 *
 * The input's first byte picks a message limit and whether RSV1 was
 * negotiated; the rest is what a client sent.  It is read by a server's
 * reader whole, a byte at a time and at split points hashed from the input,
 * the caller's part played as a socket loop plays it (what a call did not
 * consume is offered again with more), each offer copied into a buffer of
 * exactly its size so that ASan sees a read past it.  Every way must read
 * the same messages and end the same way (a failure with the same code, or
 * wanting more).  Each call keeps its contract: consumed <= offered, a
 * piece inside the offer, a control frame's piece whole and <= 125 bytes, a
 * failure's code one of 1002, 1007, 1009.  What it reads must obey the
 * rules it enforces, checked again here by plain code: a text message (not
 * compressed) and a close reason are UTF-8 by a plain decoder written from
 * RFC 3629, a close code is one section 7.4 allows, no data message passes
 * the limit.  The messages read are then sent back as a server's frames and
 * read by a client's reader: the same messages.
 *
 * The input itself goes through serow_utf8_check(), whole and split, against
 * the plain decoder; and through serow_ws_unmask() at a hashed key and
 * offset, against XOR byte by byte.
 */
#include "targets.h"
#include "http/websocket_frame.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

/* RFC 3629's UTF8-octets, decoded plainly: code points, their shortest
 * form, no surrogates, nothing above U+10FFFF. */
static int plain_utf8(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

#define MAX_MESSAGES 512

struct message {
    uint8_t opcode, rsv, complete;
    uint16_t close_code;
    size_t len;
    uint8_t *data; /* malloc()ed, grown as pieces come */
};

struct outcome {
    int result;   /* SEROW_WS_MORE or SEROW_WS_FAIL */
    uint16_t fail_code;
    size_t count;
    struct message m[MAX_MESSAGES];
};

static void append(struct message *m, const uint8_t *p, size_t n)
{
    m->data = realloc(m->data, m->len + n + 1);
    CHECK(m->data != NULL);
    memcpy(m->data + m->len, p, n);
    m->len += n;
}

static void forget(struct outcome *o)
{
    for (size_t i = 0; i < o->count; i++)
        free(o->m[i].data);
    o->count = 0;
}

static uint64_t hash_input(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    return h;
}

/* The stream read in pieces that end at cuts[] (ascending). */
static void read_split(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts,
                       int from_client, uint64_t max_message, uint8_t rsv_allowed,
                       struct outcome *out)
{
    struct serow_ws_reader r;
    serow_ws_reader_init(&r, from_client, max_message);
    r.rsv_allowed = rsv_allowed;
    forget(out);
    out->fail_code = 0;
    out->result = SEROW_WS_MORE;
    uint8_t *pending = malloc(size + 1);
    CHECK(pending != NULL);
    size_t pending_len = 0, at = 0;
    struct message *open = NULL;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts[k] : size;
        if (end < at)
            end = at;
        memcpy(pending + pending_len, data + at, end - at);
        pending_len += end - at;
        at = end;
        for (;;) {
            uint8_t *offer = malloc(pending_len ? pending_len : 1); /* exactly its size */
            CHECK(offer != NULL);
            memcpy(offer, pending, pending_len);
            size_t consumed = (size_t)-1;
            struct serow_ws_piece p;
            int res = serow_ws_read(&r, offer, pending_len, &consumed, &p);
            CHECK(res == SEROW_WS_MORE || res == SEROW_WS_PIECE || res == SEROW_WS_FAIL);
            if (res == SEROW_WS_FAIL) {
                CHECK(r.fail_code == 1002 || r.fail_code == 1007 || r.fail_code == 1009);
                out->result = SEROW_WS_FAIL;
                out->fail_code = r.fail_code;
                free(offer);
                free(pending);
                return;
            }
            CHECK(consumed <= pending_len);
            if (res == SEROW_WS_PIECE) {
                CHECK(p.data >= offer && p.len <= pending_len && p.data + p.len <= offer + pending_len);
                CHECK(p.data + p.len <= offer + consumed);
                struct message *m;
                if (p.opcode & 0x8) {
                    CHECK(p.opcode == SEROW_WS_OP_CLOSE || p.opcode == SEROW_WS_OP_PING || p.opcode == SEROW_WS_OP_PONG);
                    CHECK(p.first && p.last && p.len <= SEROW_WS_MAX_CONTROL_PAYLOAD);
                    CHECK(out->count < MAX_MESSAGES);
                    m = &out->m[out->count++];
                    m->opcode = p.opcode;
                    m->rsv = 0;
                    m->close_code = p.close_code;
                    m->len = 0;
                    m->data = NULL;
                } else {
                    CHECK(p.opcode == SEROW_WS_OP_TEXT || p.opcode == SEROW_WS_OP_BINARY);
                    CHECK(p.first == (open == NULL));
                    if (p.first) {
                        CHECK(out->count < MAX_MESSAGES);
                        open = &out->m[out->count++];
                        open->opcode = p.opcode;
                        open->rsv = p.rsv;
                        open->close_code = 0;
                        open->len = 0;
                        open->data = NULL;
                    }
                    CHECK(p.opcode == open->opcode);
                    m = open;
                    if (p.last)
                        open = NULL;
                }
                append(m, p.data, p.len);
                m->complete = p.last;
                if (p.opcode == SEROW_WS_OP_CLOSE) {
                    CHECK(p.close_code == SEROW_WS_NO_STATUS || serow_ws_close_code_valid(p.close_code));
                    CHECK(plain_utf8(p.data, p.len));
                    CHECK(p.close_code != SEROW_WS_NO_STATUS || p.len == 0);
                }
            }
            memmove(pending, pending + consumed, pending_len - consumed);
            pending_len -= consumed;
            free(offer);
            if (res == SEROW_WS_MORE)
                break;
        }
    }
    free(pending);
}

static void same_message(const struct message *a, const struct message *b)
{
    CHECK(a->opcode == b->opcode && a->rsv == b->rsv && a->complete == b->complete);
    CHECK(a->close_code == b->close_code && a->len == b->len);
    CHECK(a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* Wanting more, the same messages, the unfinished one too.  After a
 * failure, the same code and the same complete messages: how much of the
 * message being read when it failed came out depends on how the bytes
 * arrived, but of it, one way's pieces are the start of the other's. */
static void same_outcome(const struct outcome *a, const struct outcome *b)
{
    CHECK(a->result == b->result && a->fail_code == b->fail_code);
    if (a->result != SEROW_WS_FAIL) {
        CHECK(a->count == b->count);
        for (size_t i = 0; i < a->count; i++)
            same_message(&a->m[i], &b->m[i]);
        return;
    }
    size_t i = 0, j = 0;
    for (;;) {
        while (i < a->count && !a->m[i].complete)
            i++;
        while (j < b->count && !b->m[j].complete)
            j++;
        if (i == a->count || j == b->count)
            break;
        same_message(&a->m[i++], &b->m[j++]);
    }
    CHECK(i == a->count && j == b->count);
    const struct message *ua = NULL, *ub = NULL;
    for (i = 0; i < a->count; i++)
        if (!a->m[i].complete)
            ua = &a->m[i];
    for (j = 0; j < b->count; j++)
        if (!b->m[j].complete)
            ub = &b->m[j];
    if (ua && ub) {
        size_t n = ua->len < ub->len ? ua->len : ub->len;
        CHECK(ua->opcode == ub->opcode && (n == 0 || memcmp(ua->data, ub->data, n) == 0));
    }
}

int fuzz_websocket_frame_input(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    uint64_t max_message = (mode & 3) == 0 ? 0 : (mode & 3) == 1 ? 1 : (mode & 3) == 2 ? 64 : 300;
    uint8_t rsv_allowed = (mode & 4) ? SEROW_WS_RSV1 : 0;

    static struct outcome whole, split, again;
    size_t *cuts = calloc(size + 1, sizeof(size_t));
    CHECK(cuts != NULL);

    read_split(data, size, NULL, 0, 1, max_message, rsv_allowed, &whole);
    for (size_t i = 0; i < whole.count; i++) {
        const struct message *m = &whole.m[i];
        if (m->opcode == SEROW_WS_OP_TEXT && !(m->rsv & SEROW_WS_RSV1) && m->complete)
            CHECK(plain_utf8(m->data, m->len));
        if (!(m->opcode & 0x8) && max_message)
            CHECK(m->len <= max_message);
    }

    for (size_t i = 0; i < size; i++)
        cuts[i] = i + 1;
    read_split(data, size, cuts, size, 1, max_message, rsv_allowed, &split);
    same_outcome(&whole, &split);

    uint64_t x = hash_input(data, size) | 1;
    for (int round = 0; round < 4; round++) {
        size_t ncuts = 0, pos = 0;
        while (ncuts < size) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            pos += 1 + (size_t)(x % 24);
            if (pos >= size)
                break;
            cuts[ncuts++] = pos;
        }
        read_split(data, size, cuts, ncuts, 1, max_message, rsv_allowed, &split);
        same_outcome(&whole, &split);
    }

    /* What was read, sent back as a server's frames (data messages in two
     * fragments), reads back the same by a client; a message the input left
     * unfinished is not sent. */
    size_t cap = size + whole.count * 2 * SEROW_WS_MAX_SERVER_HEAD + 16;
    uint8_t *back = malloc(cap);
    CHECK(back != NULL);
    size_t blen = 0;
    for (size_t i = 0; i < whole.count; i++) {
        const struct message *m = &whole.m[i];
        if (!m->complete)
            continue;
        if (m->opcode == SEROW_WS_OP_CLOSE) {
            uint8_t frame[SEROW_WS_MAX_CONTROL_FRAME];
            size_t n = serow_ws_close_frame(frame, m->close_code == SEROW_WS_NO_STATUS ? 0 : m->close_code,
                                            m->data, m->len);
            memcpy(back + blen, frame, n);
            blen += n;
        } else if (m->opcode & 0x8) {
            blen += serow_ws_frame_head(back + blen, 1, m->opcode, m->len);
            memcpy(back + blen, m->data, m->len);
            blen += m->len;
        } else {
            size_t half = m->len / 2;
            blen += serow_ws_frame_head(back + blen, 0, m->opcode | m->rsv, half);
            memcpy(back + blen, m->data, half);
            blen += half;
            blen += serow_ws_frame_head(back + blen, 1, SEROW_WS_OP_CONTINUATION, m->len - half);
            memcpy(back + blen, m->data + half, m->len - half);
            blen += m->len - half;
        }
        CHECK(blen <= cap);
    }
    read_split(back, blen, NULL, 0, 0, max_message, rsv_allowed, &again);
    CHECK(again.result == SEROW_WS_MORE);
    size_t j = 0;
    for (size_t i = 0; i < whole.count; i++) {
        if (!whole.m[i].complete)
            continue;
        CHECK(j < again.count);
        CHECK(again.m[j].opcode == whole.m[i].opcode && again.m[j].len == whole.m[i].len);
        CHECK(whole.m[i].len == 0 || memcmp(again.m[j].data, whole.m[i].data, whole.m[i].len) == 0);
        j++;
    }
    CHECK(j == again.count);
    forget(&again);
    free(back);

    /* the UTF-8 check against the plain decoder, whole and split */
    struct serow_utf8_state u = {0};
    int fast = serow_utf8_check(&u, data, size) && serow_utf8_complete(&u);
    CHECK(fast == plain_utf8(data, size));
    size_t cut = (size_t)(hash_input(data, size) % (size + 1));
    memset(&u, 0, sizeof u);
    CHECK((serow_utf8_check(&u, data, cut) && serow_utf8_check(&u, data + cut, size - cut) &&
           serow_utf8_complete(&u)) == fast);

    /* unmasking against XOR byte by byte */
    uint8_t *a = malloc(size + 1), *b = malloc(size + 1);
    CHECK(a && b);
    memcpy(a, data, size);
    memcpy(b, data, size);
    uint8_t key[4] = {mode, (uint8_t)(mode * 7), (uint8_t)(mode ^ 0x5A), (uint8_t)(mode + 3)};
    size_t offset = mode >> 6, start = size ? (size_t)(hash_input(data, size) % 8) % (size + 1) : 0;
    serow_ws_unmask(a + start, size - start, key, offset);
    for (size_t i = start; i < size; i++)
        b[i] ^= key[(offset + i - start) & 3];
    CHECK(memcmp(a, b, size) == 0);
    free(a);
    free(b);

    free(cuts);
    forget(&split);
    forget(&whole);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_websocket_frame_input(data, size);
}
#endif
