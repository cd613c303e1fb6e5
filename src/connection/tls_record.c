/*
 * tls_record.c - the TLS record layer around GnuTLS's AEAD ciphers
 * (tls_record.h): records sealed and opened, alerts, close_notify,
 * KeyUpdate, and a finished server session's state exported.
 *
 * Owns: the rules of a record after the handshake.  It calls GnuTLS for
 * every cryptographic operation (gnutls_aead_cipher_*, gnutls_hkdf_expand)
 * and for nothing else but the export; no I/O, no loop, no connection.
 */
#include "connection/tls_record.h"

#include <gnutls/crypto.h>
#include <string.h>

_Static_assert(sizeof(struct serow_tls_state) == 208, "the state moves as plain bytes");

#define TAG 16

/* ---- the cipher -------------------------------------------------------- */

static size_t key_len(const struct serow_tls_state *st)
{
    return st->cipher == SEROW_TLS_AES_128_GCM ? 16 : 32;
}

/* The hash of the suite: TLS_AES_256_GCM_SHA384, the others SHA-256. */
static gnutls_mac_algorithm_t suite_hash(const struct serow_tls_state *st, size_t *len)
{
    *len = st->cipher == SEROW_TLS_AES_256_GCM ? 48 : 32;
    return st->cipher == SEROW_TLS_AES_256_GCM ? GNUTLS_MAC_SHA384 : GNUTLS_MAC_SHA256;
}

static gnutls_cipher_algorithm_t library_cipher(const struct serow_tls_state *st)
{
    switch (st->cipher) {
    case SEROW_TLS_AES_128_GCM: return GNUTLS_CIPHER_AES_128_GCM;
    case SEROW_TLS_AES_256_GCM: return GNUTLS_CIPHER_AES_256_GCM;
    default: return GNUTLS_CIPHER_CHACHA20_POLY1305;
    }
}

/* The cipher handles of the keys this process used last, found by their
 * key.  A handle is the library's memory (a key schedule), which cannot
 * move with the state: each process keeps its own, so that a connection it
 * owns pays the key schedule once, not once per call.  A handle goes when
 * its connection leaves the process (serow_tls_forget_keys), when its key
 * is replaced (KeyUpdate), or when newer ones push it out. */
#define HANDLE_CACHE 16
static struct kept_handle {
    gnutls_aead_cipher_hd_t h; /* NULL: a free place */
    uint8_t cipher;
    uint8_t key[32];
} kept_handles[HANDLE_CACHE];
static unsigned kept_next;

static void drop_handle(struct kept_handle *k)
{
    if (k->h)
        gnutls_aead_cipher_deinit(k->h);
    explicit_bzero(k, sizeof *k);
}

static struct kept_handle *handle_of(const struct serow_tls_state *st, const uint8_t *key)
{
    for (int i = 0; i < HANDLE_CACHE; i++)
        if (kept_handles[i].h && kept_handles[i].cipher == st->cipher &&
            memcmp(kept_handles[i].key, key, key_len(st)) == 0)
            return &kept_handles[i];
    return NULL;
}

/* A cipher handle for d's key: the kept one, or a new one kept. */
static int cipher_open(const struct serow_tls_state *st, const struct serow_tls_direction *d,
                       gnutls_aead_cipher_hd_t *h)
{
    struct kept_handle *k = handle_of(st, d->key);
    if (k) {
        *h = k->h;
        return 0;
    }
    gnutls_datum_t key = {(unsigned char *)d->key, (unsigned)key_len(st)};
    if (gnutls_aead_cipher_init(h, library_cipher(st), &key) != 0)
        return -1;
    k = &kept_handles[kept_next++ % HANDLE_CACHE];
    drop_handle(k);
    k->h = *h;
    k->cipher = st->cipher;
    memcpy(k->key, d->key, key_len(st));
    return 0;
}

void serow_tls_forget_keys(const struct serow_tls_state *st)
{
    struct kept_handle *k;
    if ((k = handle_of(st, st->read.key)))
        drop_handle(k);
    if ((k = handle_of(st, st->write.key)))
        drop_handle(k);
}

/* Whether the nonce's last eight bytes travel in the record (AES-GCM in TLS
 * 1.2, RFC 5288) rather than come from the sequence number alone. */
static int explicit_nonce(const struct serow_tls_state *st)
{
    return st->version == SEROW_TLS_1_2 && st->cipher != SEROW_TLS_CHACHA20_POLY1305;
}

/* The per-record nonce where it is the static IV XORed with the sequence
 * number (RFC 8446 5.3, RFC 7905 2). */
static void xor_nonce(const struct serow_tls_direction *d, uint8_t nonce[12])
{
    memcpy(nonce, d->salt, 4);
    for (int i = 0; i < 8; i++)
        nonce[4 + i] = d->iv[i] ^ d->rec_seq[i];
}

/* The sequence number is 64 bits and must not wrap (RFC 8446 5.3): the
 * last one is never used. */
static int seq_spent(const struct serow_tls_direction *d)
{
    for (int i = 0; i < 8; i++)
        if (d->rec_seq[i] != 0xff)
            return 0;
    return 1;
}

static void seq_next(struct serow_tls_direction *d)
{
    for (int i = 7; i >= 0 && ++d->rec_seq[i] == 0; i--)
        ;
}

/* TLS 1.2's additional data: seq_num, type, version, plaintext length. */
static void tls12_aad(const struct serow_tls_direction *d, uint8_t type, size_t len,
                      uint8_t aad[13])
{
    memcpy(aad, d->rec_seq, 8);
    aad[8] = type;
    aad[9] = 3;
    aad[10] = 3;
    aad[11] = (uint8_t)(len >> 8);
    aad[12] = (uint8_t)len;
}

/* ---- TLS 1.3's key schedule after the handshake ------------------------- */

/* HKDF-Expand-Label(secret, label, "", len) (RFC 8446 7.1). */
static int expand_label(const struct serow_tls_state *st, const uint8_t *secret,
                        const char *label, uint8_t *out, size_t len)
{
    size_t hash_len, label_len = strlen(label);
    gnutls_mac_algorithm_t hash = suite_hash(st, &hash_len);
    uint8_t info[2 + 1 + 6 + 16 + 1];
    info[0] = (uint8_t)(len >> 8);
    info[1] = (uint8_t)len;
    info[2] = (uint8_t)(6 + label_len);
    memcpy(info + 3, "tls13 ", 6);
    memcpy(info + 9, label, label_len);
    info[9 + label_len] = 0; /* no context */
    gnutls_datum_t key = {(unsigned char *)secret, (unsigned)hash_len};
    gnutls_datum_t in = {info, (unsigned)(10 + label_len)};
    return gnutls_hkdf_expand(hash, &key, &in, out, len) == 0 ? 0 : -1;
}

/* A direction's key and IV from its traffic secret (RFC 8446 7.3). */
static int keys_from_secret(const struct serow_tls_state *st, struct serow_tls_direction *d)
{
    uint8_t iv[12];
    if (expand_label(st, d->secret, "key", d->key, key_len(st)) < 0 ||
        expand_label(st, d->secret, "iv", iv, sizeof iv) < 0)
        return -1;
    memcpy(d->salt, iv, 4);
    memcpy(d->iv, iv + 4, 8);
    memset(d->rec_seq, 0, 8);
    explicit_bzero(iv, sizeof iv);
    return 0;
}

/* KeyUpdate: the next traffic secret, then its key and IV (RFC 8446 7.2). */
static int key_update(const struct serow_tls_state *st, struct serow_tls_direction *d)
{
    size_t hash_len;
    uint8_t next[48];
    suite_hash(st, &hash_len);
    if (expand_label(st, d->secret, "traffic upd", next, hash_len) < 0)
        return -1;
    struct kept_handle *k = handle_of(st, d->key);
    if (k)
        drop_handle(k);
    memcpy(d->secret, next, hash_len);
    explicit_bzero(next, sizeof next); /* the old keys leave no copy behind */
    return keys_from_secret(st, d);
}

/* ---- export from a GnuTLS server session -------------------------------- */

int serow_tls_keylog(gnutls_session_t session, const char *label, const gnutls_datum_t *secret)
{
    struct serow_tls_state *st = gnutls_session_get_ptr(session);
    struct serow_tls_direction *d = NULL;
    if (strcmp(label, "CLIENT_TRAFFIC_SECRET_0") == 0)
        d = &st->read;
    else if (strcmp(label, "SERVER_TRAFFIC_SECRET_0") == 0)
        d = &st->write;
    if (d != NULL && secret->size <= sizeof d->secret)
        memcpy(d->secret, secret->data, secret->size);
    return 0;
}

static int record_size_limit(void *ctx, unsigned tls_id, const unsigned char *data,
                             unsigned size)
{
    struct serow_tls_state *st = ctx;
    if (tls_id == 28 && size == 2)
        st->write_limit = (uint16_t)(data[0] << 8 | data[1]);
    return 0;
}

int serow_tls_client_hello(gnutls_session_t session, unsigned int htype, unsigned when,
                           unsigned int incoming, const gnutls_datum_t *msg)
{
    struct serow_tls_state *st = gnutls_session_get_ptr(session);
    (void)htype, (void)when, (void)incoming;
    st->write_limit = 0;
    gnutls_ext_raw_parse(st, record_size_limit, msg, GNUTLS_EXT_RAW_FLAG_TLS_CLIENT_HELLO);
    return 0;
}

static int export_direction(gnutls_session_t session, const struct serow_tls_state *st,
                            int read, struct serow_tls_direction *d)
{
    gnutls_datum_t mac, iv, key;
    if (gnutls_record_get_state(session, read, &mac, &iv, &key, d->rec_seq) < 0 ||
        key.size != key_len(st))
        return -1;
    memcpy(d->key, key.data, key.size);
    if (explicit_nonce(st) ? iv.size != 4 : iv.size != 12)
        return -1;
    memcpy(d->salt, iv.data, 4);
    memset(d->iv, 0, 8);
    if (iv.size == 12)
        memcpy(d->iv, iv.data + 4, 8);
    return 0;
}

int serow_tls_export(gnutls_session_t session, struct serow_tls_state *st)
{
    switch (gnutls_protocol_get_version(session)) {
    case GNUTLS_TLS1_2: st->version = SEROW_TLS_1_2; break;
    case GNUTLS_TLS1_3: st->version = SEROW_TLS_1_3; break;
    default: return -1;
    }
    switch (gnutls_cipher_get(session)) {
    case GNUTLS_CIPHER_AES_128_GCM: st->cipher = SEROW_TLS_AES_128_GCM; break;
    case GNUTLS_CIPHER_AES_256_GCM: st->cipher = SEROW_TLS_AES_256_GCM; break;
    case GNUTLS_CIPHER_CHACHA20_POLY1305: st->cipher = SEROW_TLS_CHACHA20_POLY1305; break;
    default: return -1;
    }
    if (gnutls_record_check_pending(session) > 0)
        return -1;
    st->flags = 0;
    st->alert = st->peer_alert = 0;
    /* A client may ask for smaller records than the protocol's (an embedded
     * one with little memory): with max_fragment_length, which the library
     * agreed to and says, or with record_size_limit, kept by
     * serow_tls_client_hello, which counts TLS 1.3's content type and
     * below 64 is no limit the library accepts. */
    size_t limit = gnutls_record_get_max_size(session);
    size_t rsl = st->write_limit;
    if (rsl >= 64 && rsl - (st->version == SEROW_TLS_1_3) < limit)
        limit = rsl - (st->version == SEROW_TLS_1_3);
    st->write_limit = limit < SEROW_TLS_MAX_PLAINTEXT ? (uint16_t)limit : 0;
    if (export_direction(session, st, 1, &st->read) < 0 ||
        export_direction(session, st, 0, &st->write) < 0)
        return -1;
    if (st->version == SEROW_TLS_1_2) {
        memset(st->read.secret, 0, sizeof st->read.secret);
        memset(st->write.secret, 0, sizeof st->write.secret);
    }
    return 0;
}

/* ---- sealing ------------------------------------------------------------ */

/* One record of type holding data[0..len) (len at most
 * SEROW_TLS_MAX_PLAINTEXT) into out, which has room for it.  Returns its
 * length or -1. */
static long seal_record(struct serow_tls_state *st, gnutls_aead_cipher_hd_t h, uint8_t type,
                        const void *data, size_t len, uint8_t *out)
{
    struct serow_tls_direction *d = &st->write;
    if (seq_spent(d))
        return -1;
    uint8_t nonce[12], aad[13];
    uint8_t *body = out + 5, *plain = body;
    size_t plain_len = len, aad_len;
    if (explicit_nonce(st)) {
        memcpy(nonce, d->salt, 4);
        memcpy(nonce + 4, d->rec_seq, 8);
        memcpy(body, d->rec_seq, 8);
        plain = body + 8;
    } else {
        xor_nonce(d, nonce);
    }
    memcpy(plain, data, len);
    if (st->version == SEROW_TLS_1_3) {
        plain[len] = type; /* the inner content type; no padding sent */
        plain_len = len + 1;
        type = SEROW_TLS_APPLICATION_DATA;
    }
    size_t body_len = (size_t)(plain - body) + plain_len + TAG;
    out[0] = type;
    out[1] = 3;
    out[2] = 3;
    out[3] = (uint8_t)(body_len >> 8);
    out[4] = (uint8_t)body_len;
    if (st->version == SEROW_TLS_1_3) {
        memcpy(aad, out, 5);
        aad_len = 5;
    } else {
        tls12_aad(d, type, len, aad);
        aad_len = 13;
    }
    size_t sealed = plain_len + TAG;
    if (gnutls_aead_cipher_encrypt(h, nonce, 12, aad, aad_len, TAG, plain, plain_len, plain,
                                   &sealed) < 0 ||
        sealed != plain_len + TAG)
        return -1;
    seq_next(d);
    return (long)(5 + body_len);
}

/* One record of type alone (an alert, a KeyUpdate): its own handle. */
static long seal_one(struct serow_tls_state *st, uint8_t type, const void *data, size_t len,
                     uint8_t *out, size_t room)
{
    gnutls_aead_cipher_hd_t h;
    if (room < SEROW_TLS_RECORD_OVERHEAD + len || cipher_open(st, &st->write, &h) < 0)
        return -1;
    return seal_record(st, h, type, data, len, out);
}

long serow_tls_seal_key_update(struct serow_tls_state *st, int request_update, uint8_t *out,
                               size_t room)
{
    if (st->version != SEROW_TLS_1_3 || (st->flags & (SEROW_TLS_CLOSED | SEROW_TLS_FAILED)))
        return -1;
    const uint8_t message[5] = {24, 0, 0, 1, request_update ? 1 : 0}; /* key_update */
    long n = seal_one(st, SEROW_TLS_HANDSHAKE, message, sizeof message, out, room);
    if (n < 0 || key_update(st, &st->write) < 0)
        return -1;
    st->flags &= ~SEROW_TLS_KEY_UPDATE_DUE;
    return n;
}

static size_t record_plaintext(const struct serow_tls_state *st)
{
    return st->write_limit ? st->write_limit : SEROW_TLS_MAX_PLAINTEXT;
}

static size_t key_update_room(const struct serow_tls_state *st)
{
    return (st->flags & SEROW_TLS_KEY_UPDATE_DUE) ? SEROW_TLS_RECORD_OVERHEAD + 5 : 0;
}

size_t serow_tls_seal_room(const struct serow_tls_state *st, size_t len)
{
    size_t most = record_plaintext(st);
    size_t records = len / most + (len % most != 0);
    return len + records * SEROW_TLS_RECORD_OVERHEAD + key_update_room(st);
}

size_t serow_tls_seal_fits(const struct serow_tls_state *st, size_t room)
{
    size_t most = record_plaintext(st), extra = key_update_room(st);
    if (room <= extra)
        return 0;
    room -= extra;
    size_t whole = room / (most + SEROW_TLS_RECORD_OVERHEAD);
    size_t rest = room % (most + SEROW_TLS_RECORD_OVERHEAD);
    return whole * most + (rest > SEROW_TLS_RECORD_OVERHEAD ? rest - SEROW_TLS_RECORD_OVERHEAD : 0);
}

long serow_tls_seal(struct serow_tls_state *st, const void *data, size_t len, uint8_t *out,
                    size_t room)
{
    if ((st->flags & (SEROW_TLS_CLOSED | SEROW_TLS_FAILED)) || room < serow_tls_seal_room(st, len))
        return -1;
    size_t done = 0;
    if (st->flags & SEROW_TLS_KEY_UPDATE_DUE) {
        /* RFC 8446 4.6.3: the answer to update_requested goes before our
         * next application data */
        long n = serow_tls_seal_key_update(st, 0, out, room);
        if (n < 0)
            return -1;
        done = (size_t)n;
    }
    gnutls_aead_cipher_hd_t h;
    if (cipher_open(st, &st->write, &h) < 0)
        return -1;
    const uint8_t *p = data;
    size_t most = record_plaintext(st);
    for (size_t left = len; left > 0;) {
        size_t part = left < most ? left : most;
        long n = seal_record(st, h, SEROW_TLS_APPLICATION_DATA, p, part, out + done);
        if (n < 0)
            return -1;
        done += (size_t)n;
        p += part;
        left -= part;
    }
    return (long)done;
}

long serow_tls_seal_alert(struct serow_tls_state *st, uint8_t description, uint8_t *out,
                          size_t room)
{
    if (st->flags & (SEROW_TLS_CLOSED | SEROW_TLS_ALERT_SENT))
        return -1;
    const uint8_t alert[2] = {description == SEROW_TLS_CLOSE_NOTIFY ? 1 : 2, description};
    long n = seal_one(st, SEROW_TLS_ALERT, alert, sizeof alert, out, room);
    if (n >= 0)
        st->flags |= description == SEROW_TLS_CLOSE_NOTIFY
                          ? SEROW_TLS_CLOSED
                          : SEROW_TLS_FAILED | SEROW_TLS_ALERT_SENT;
    return n;
}

/* ---- opening ------------------------------------------------------------ */

/* The connection ends: alert is what to send (SEROW_TLS_CLOSE_NOTIFY for
 * nothing). */
static long fail(struct serow_tls_state *st, uint8_t alert)
{
    st->alert = alert;
    st->flags |= SEROW_TLS_FAILED;
    return -1;
}

/* A received alert (RFC 8446 6, RFC 5246 7.2): close_notify ends the
 * reading; TLS 1.3 has no other warning but user_canceled, TLS 1.2's
 * warnings are read past; every other alert ends the connection, with
 * nothing sent back. */
static long alert_received(struct serow_tls_state *st, const uint8_t *p, size_t len)
{
    if (len != 2)
        return fail(st, SEROW_TLS_DECODE_ERROR);
    st->peer_alert = p[1];
    if (p[1] == SEROW_TLS_CLOSE_NOTIFY) {
        st->flags |= SEROW_TLS_PEER_CLOSED;
        return 0;
    }
    if (st->version == SEROW_TLS_1_3 ? p[1] == SEROW_TLS_USER_CANCELED : p[0] == 1)
        return 0;
    return fail(st, SEROW_TLS_CLOSE_NOTIFY);
}

/* A handshake record after the handshake: TLS 1.3's KeyUpdate alone (RFC
 * 8446 4.6.3; it must end its record, since the key changes after it; a
 * client sends no other post-handshake message to a server that asks for
 * no certificate after the handshake).  TLS 1.2 would be renegotiation,
 * which is refused. */
static long handshake_received(struct serow_tls_state *st, const uint8_t *p, size_t len)
{
    if (st->version != SEROW_TLS_1_3 || len < 4 || p[0] != 24)
        return fail(st, SEROW_TLS_UNEXPECTED_MESSAGE);
    size_t body = (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    if (body != 1 || len != 5)
        return fail(st, len < 4 + body ? SEROW_TLS_UNEXPECTED_MESSAGE : SEROW_TLS_DECODE_ERROR);
    if (p[4] > 1)
        return fail(st, SEROW_TLS_ILLEGAL_PARAMETER);
    if (key_update(st, &st->read) < 0)
        return fail(st, SEROW_TLS_INTERNAL_ERROR);
    if (p[4] == 1)
        st->flags |= SEROW_TLS_KEY_UPDATE_DUE;
    return 0;
}

long serow_tls_open(struct serow_tls_state *st, uint8_t *in, size_t len,
                    struct serow_tls_record *rec)
{
    struct serow_tls_direction *d = &st->read;
    if (st->flags & SEROW_TLS_FAILED)
        return -1;
    if (len < 5)
        return 0;
    uint8_t type = in[0];
    size_t body_len = (size_t)in[3] << 8 | in[4];
    /* the longest ciphertext each version allows (RFC 8446 5.2, RFC 5246 6.2.3) */
    if (body_len > SEROW_TLS_MAX_PLAINTEXT + (st->version == SEROW_TLS_1_3 ? 256 : 2048))
        return fail(st, SEROW_TLS_RECORD_OVERFLOW);
    if (len < 5 + body_len)
        return 0;
    if (st->flags & SEROW_TLS_PEER_CLOSED)
        return fail(st, SEROW_TLS_UNEXPECTED_MESSAGE); /* nothing comes after close_notify */
    if (st->version == SEROW_TLS_1_3) {
        /* the record version is ignored in TLS 1.3; every protected record is
         * application_data outside (a change_cipher_spec is only for the
         * handshake) */
        if (type != SEROW_TLS_APPLICATION_DATA)
            return fail(st, SEROW_TLS_UNEXPECTED_MESSAGE);
    } else {
        if (in[1] != 3 || in[2] != 3)
            return fail(st, SEROW_TLS_PROTOCOL_VERSION);
        if (type != SEROW_TLS_ALERT && type != SEROW_TLS_HANDSHAKE &&
            type != SEROW_TLS_APPLICATION_DATA)
            return fail(st, SEROW_TLS_UNEXPECTED_MESSAGE);
    }
    if (seq_spent(d))
        return fail(st, SEROW_TLS_INTERNAL_ERROR);

    uint8_t nonce[12], aad[13];
    uint8_t *sealed = in + 5;
    size_t sealed_len = body_len, aad_len;
    if (explicit_nonce(st)) {
        if (body_len < 8 + TAG)
            return fail(st, SEROW_TLS_BAD_RECORD_MAC);
        memcpy(nonce, d->salt, 4);
        memcpy(nonce + 4, sealed, 8);
        sealed += 8;
        sealed_len -= 8;
    } else {
        if (body_len < TAG)
            return fail(st, SEROW_TLS_BAD_RECORD_MAC);
        xor_nonce(d, nonce);
    }
    if (st->version == SEROW_TLS_1_3) {
        memcpy(aad, in, 5);
        aad_len = 5;
    } else {
        tls12_aad(d, type, sealed_len - TAG, aad);
        aad_len = 13;
    }
    gnutls_aead_cipher_hd_t h;
    if (cipher_open(st, d, &h) < 0)
        return fail(st, SEROW_TLS_INTERNAL_ERROR);
    size_t plain_len = sealed_len - TAG;
    int rc = gnutls_aead_cipher_decrypt(h, nonce, 12, aad, aad_len, TAG, sealed, sealed_len,
                                        sealed, &plain_len);
    /* a wrong tag, a wrong sequence number (the nonce and the additional
     * data would differ): one answer, as RFC 8446 5.2 asks */
    if (rc < 0 || plain_len != sealed_len - TAG)
        return fail(st, SEROW_TLS_BAD_RECORD_MAC);
    seq_next(d);

    if (st->version == SEROW_TLS_1_3) {
        /* TLSInnerPlaintext: content, type, zeros (RFC 8446 5.4) */
        while (plain_len > 0 && sealed[plain_len - 1] == 0)
            plain_len--;
        if (plain_len == 0)
            return fail(st, SEROW_TLS_UNEXPECTED_MESSAGE);
        type = sealed[--plain_len];
    }
    if (plain_len > SEROW_TLS_MAX_PLAINTEXT)
        return fail(st, SEROW_TLS_RECORD_OVERFLOW);

    rec->type = type;
    rec->data = sealed;
    rec->len = plain_len;
    long taken = (long)(5 + body_len);
    switch (type) {
    case SEROW_TLS_APPLICATION_DATA:
        return taken;
    case SEROW_TLS_ALERT:
        rec->len = 0;
        return alert_received(st, sealed, plain_len) < 0 ? -1 : taken;
    case SEROW_TLS_HANDSHAKE:
        rec->len = 0;
        return handshake_received(st, sealed, plain_len) < 0 ? -1 : taken;
    default:
        return fail(st, SEROW_TLS_UNEXPECTED_MESSAGE);
    }
}
