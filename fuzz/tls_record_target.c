/*
 * tls_record_target.c - fuzz target for opening TLS records
 * (src/connection/tls_record.c, serow_tls_open).
 *
 * Random bytes almost never pass a record's tag, so the input is a script
 * that writes the bytes a client sends: its first byte picks the version
 * and cipher; then each step either appends raw bytes, or has a mirror of
 * the state (the client's side: its write keys are our read keys) seal
 * application data, an alert or a KeyUpdate with this layer's own sealing,
 * or flips a byte of what was written so far.  The whole is then opened
 * record by record from a buffer of exactly its size (ASan sees a read past
 * it), each record first offered one byte short (it must wait, or refuse a
 * length no record may have).  Every answer must keep the promises of
 * tls_record.h; and while no raw or flipped byte went in, every record must
 * open, to the very bytes that were sealed.
 */
#include "targets.h"
#include "connection/tls_record.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)
#define MAX_WIRE (1 << 17)

static const struct {
    uint16_t version;
    uint8_t cipher;
} suites[] = {
    {SEROW_TLS_1_3, SEROW_TLS_AES_128_GCM}, {SEROW_TLS_1_3, SEROW_TLS_AES_256_GCM},
    {SEROW_TLS_1_3, SEROW_TLS_CHACHA20_POLY1305}, {SEROW_TLS_1_2, SEROW_TLS_AES_128_GCM},
    {SEROW_TLS_1_2, SEROW_TLS_AES_256_GCM}, {SEROW_TLS_1_2, SEROW_TLS_CHACHA20_POLY1305},
};

static uint8_t wire[MAX_WIRE], sent[MAX_WIRE];

/* Whether a failed open named an alert this layer sends. */
static int known_alert(uint8_t alert)
{
    switch (alert) {
    case SEROW_TLS_CLOSE_NOTIFY: case SEROW_TLS_UNEXPECTED_MESSAGE: case SEROW_TLS_BAD_RECORD_MAC:
    case SEROW_TLS_RECORD_OVERFLOW: case SEROW_TLS_ILLEGAL_PARAMETER: case SEROW_TLS_DECODE_ERROR:
    case SEROW_TLS_PROTOCOL_VERSION: case SEROW_TLS_INTERNAL_ERROR:
        return 1;
    default:
        return 0;
    }
}

int fuzz_tls_record_input(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    struct serow_tls_state st, client;
    memset(&st, 0, sizeof st);
    st.version = suites[data[0] % 6].version;
    st.cipher = suites[data[0] % 6].cipher;
    for (size_t i = 0; i < sizeof st.read.key; i++) {
        st.read.key[i] = (uint8_t)i;
        st.write.key[i] = (uint8_t)(i + 100);
    }
    for (size_t i = 0; i < sizeof st.read.secret; i++) {
        st.read.secret[i] = (uint8_t)(i * 3);
        st.write.secret[i] = (uint8_t)(i * 5);
    }
    memcpy(st.read.salt, "salt", 4);
    memcpy(st.read.iv, "readiv..", 8);
    client = st;
    client.read = st.write;
    client.write = st.read;

    /* the script: what the client sends */
    size_t wire_len = 0, sent_len = 0;
    int clean = 1;
    for (size_t at = 1; at < size;) {
        uint8_t op = data[at++] % 5;
        size_t len = at < size ? data[at++] : 0;
        long n = -1;
        switch (op) {
        case 0: /* raw bytes */
            if (len > size - at)
                len = size - at;
            if (wire_len + len <= MAX_WIRE) {
                memcpy(wire + wire_len, data + at, len);
                n = (long)len;
                clean = 0;
            }
            at += len;
            break;
        case 1: /* application data: len bytes, or len * 256 of a pattern */
            if (at < size && data[at] == 0xff) {
                at++;
                len *= 256;
                if (sent_len + len <= MAX_WIRE)
                    memset(sent + sent_len, 'x', len);
            } else {
                if (len > size - at)
                    len = size - at;
                if (sent_len + len <= MAX_WIRE)
                    memcpy(sent + sent_len, data + at, len);
                at += len;
            }
            if (sent_len + len <= MAX_WIRE &&
                serow_tls_seal_room(&client, len) <= MAX_WIRE - wire_len) {
                n = serow_tls_seal(&client, sent + sent_len, len, wire + wire_len,
                                   MAX_WIRE - wire_len);
                if (n >= 0)
                    sent_len += len;
            }
            break;
        case 2: /* an alert */
            n = serow_tls_seal_alert(&client, (uint8_t)len, wire + wire_len, MAX_WIRE - wire_len);
            break;
        case 3: /* a KeyUpdate */
            n = serow_tls_seal_key_update(&client, len & 1, wire + wire_len, MAX_WIRE - wire_len);
            break;
        default: /* one byte flipped */
            if (wire_len > 0 && at < size) {
                wire[(len << 8 | data[at]) % wire_len] ^= (uint8_t)(data[at] | 1);
                clean = 0;
            }
            at++;
            break;
        }
        if (n > 0)
            wire_len += (size_t)n;
    }

    /* what the server opens */
    uint8_t *in = malloc(wire_len ? wire_len : 1);
    memcpy(in, wire, wire_len);
    size_t done = 0, received = 0;
    int failed = 0;
    while (done < wire_len) {
        struct serow_tls_record rec;
        size_t left = wire_len - done;
        /* the record one byte short, as a read cut it: wait, or refuse now */
        struct serow_tls_state before = st;
        size_t record = left >= 5 ? 5 + ((size_t)in[done + 3] << 8 | in[done + 4]) : left + 1;
        if (record <= left) {
            long n = serow_tls_open(&st, in + done, record - 1, &rec);
            CHECK(n == 0 || (n < 0 && st.alert == SEROW_TLS_RECORD_OVERFLOW));
            CHECK(n < 0 || memcmp(&before, &st, sizeof st) == 0);
            st = before;
        }
        long n = serow_tls_open(&st, in + done, left, &rec);
        if (n == 0) {
            CHECK(left < record);
            break;
        }
        if (n < 0) {
            CHECK((st.flags & SEROW_TLS_FAILED) && known_alert(st.alert));
            CHECK(serow_tls_open(&st, in + done, left, &rec) < 0); /* and it stays over */
            failed = 1;
            break;
        }
        CHECK((size_t)n == record && (size_t)n <= left);
        if (rec.type == SEROW_TLS_APPLICATION_DATA) {
            CHECK(rec.len <= SEROW_TLS_MAX_PLAINTEXT);
            CHECK(rec.data >= in + done + 5 && rec.data + rec.len <= in + done + n);
            if (clean) {
                CHECK(received + rec.len <= sent_len);
                CHECK(memcmp(rec.data, sent + received, rec.len) == 0);
            }
            received += rec.len;
        } else {
            CHECK(rec.type == SEROW_TLS_ALERT || rec.type == SEROW_TLS_HANDSHAKE);
            CHECK(rec.len == 0);
        }
        done += (size_t)n;
    }
    /* a clean script opens whole, but where the client's own alert ended it */
    if (clean && !failed)
        CHECK(done == wire_len && received == sent_len);
    if (clean && failed)
        CHECK(st.alert == SEROW_TLS_CLOSE_NOTIFY || st.alert == SEROW_TLS_UNEXPECTED_MESSAGE);
    free(in);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_tls_record_input(data, size);
}
#endif
