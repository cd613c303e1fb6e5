/*
 * t/connection/tls_record.c - the TLS record layer (src/connection/tls_record.c)
 * against GnuTLS's own record layer, for each cipher in TLS 1.3 and 1.2.
 *
 * A GnuTLS server session and a GnuTLS client session do a real handshake
 * over a socketpair (an ECDSA P-256 certificate made here); the server's
 * state is then exported into struct serow_tls_state and the server's side
 * is this layer alone, while the client stays GnuTLS: a strict checker,
 * whose record check fails on a wrong sequence number, nonce or additional
 * data.  Thousands of messages go both ways (every size up to several
 * records, read back in pieces of random size, so records split across
 * reads and several records in one read; TLS 1.3 records padded now and
 * then), the state copied byte by byte
 * into another struct now and then (as a move to another process copies
 * it); KeyUpdate from each side; close_notify both ways; a tampered record,
 * a replayed one and ones too long (on the wire, or in content) refused with
 * the alert RFC 8446 names.
 * Prints "ok - NAME" / "not ok - NAME" (t/connection/tls_record.t).
 */
#include "connection/tls_record.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "serow_unit.h"

#define DIE(...) do { printf("not ok - "); printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)

static gnutls_certificate_credentials_t server_cred, client_cred;

/* An ECDSA P-256 key and a self-signed certificate for it. */
static void make_credentials(void)
{
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    if (gnutls_x509_privkey_init(&key) < 0 ||
        gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                     GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0 ||
        gnutls_x509_crt_init(&crt) < 0)
        DIE("an ECDSA key");
    unsigned char serial[1] = {1};
    time_t now = time(NULL);
    gnutls_x509_crt_set_version(crt, 3);
    gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    gnutls_x509_crt_set_activation_time(crt, now - 3600);
    gnutls_x509_crt_set_expiration_time(crt, now + 86400);
    gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "localhost", 9);
    gnutls_x509_crt_set_key(crt, key);
    if (gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0) < 0)
        DIE("a certificate");
    gnutls_certificate_allocate_credentials(&server_cred);
    if (gnutls_certificate_set_x509_key(server_cred, &crt, 1, key) < 0)
        DIE("the server's credentials");
    gnutls_certificate_allocate_credentials(&client_cred);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
}

/* ---- one session ---------------------------------------------------------- */

struct session {
    gnutls_session_t client;
    int client_fd, server_fd;
    struct serow_tls_state *st; /* the server: this layer alone after the handshake */
    uint8_t in[4 * SEROW_TLS_MAX_RECORD]; /* bytes read from the client, not yet opened */
    size_t in_len;
    int key_updates_read;
};

static void wait_for(int fd, short events)
{
    struct pollfd p = {fd, events, 0};
    if (poll(&p, 1, 10000) != 1)
        DIE("waited 10 s for a socket");
}

static void write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN) {
            wait_for(fd, POLLOUT);
            continue;
        }
        if (n <= 0)
            DIE("send: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

/* A handshake between a GnuTLS client and server, both non-blocking and
 * driven in turns; then the server's state exported. */
static void session_start(struct session *s, const char *priority, struct serow_tls_state *st)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
        DIE("socketpair");
    int big = 1 << 20;
    for (int i = 0; i < 2; i++) {
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    }
    s->client_fd = sv[0];
    s->server_fd = sv[1];
    s->in_len = 0;
    s->key_updates_read = 0;
    s->st = st;
    memset(st, 0xa5, sizeof *st); /* whatever was there: the export sets every byte */

    gnutls_session_t server;
    gnutls_datum_t ticket_key;
    gnutls_session_ticket_key_generate(&ticket_key);
    gnutls_init(&server, GNUTLS_SERVER | GNUTLS_NONBLOCK);
    gnutls_init(&s->client, GNUTLS_CLIENT | GNUTLS_NONBLOCK);
    if (gnutls_priority_set_direct(server, priority, NULL) < 0 ||
        gnutls_priority_set_direct(s->client, priority, NULL) < 0)
        DIE("priority %s", priority);
    gnutls_credentials_set(server, GNUTLS_CRD_CERTIFICATE, server_cred);
    gnutls_credentials_set(s->client, GNUTLS_CRD_CERTIFICATE, client_cred);
    /* a session ticket, sent by the server after its handshake: the
     * exported write sequence number counts it */
    gnutls_session_ticket_enable_server(server, &ticket_key);
    gnutls_transport_set_int(server, s->server_fd);
    gnutls_transport_set_int(s->client, s->client_fd);
    gnutls_session_set_ptr(server, st);
    gnutls_session_set_keylog_function(server, serow_tls_keylog);

    int client_done = 0, server_done = 0;
    for (int turns = 0; !(client_done && server_done); turns++) {
        if (turns > 1000)
            DIE("the handshake did not end");
        int rc;
        if (!client_done && (rc = gnutls_handshake(s->client)) == 0)
            client_done = 1;
        else if (!client_done && gnutls_error_is_fatal(rc))
            DIE("client handshake: %s", gnutls_strerror(rc));
        if (!server_done && (rc = gnutls_handshake(server)) == 0)
            server_done = 1;
        else if (!server_done && gnutls_error_is_fatal(rc))
            DIE("server handshake: %s", gnutls_strerror(rc));
    }
    if (serow_tls_export(server, st) < 0)
        DIE("export of %s", priority);
    /* the server session is gone; the socket stays */
    gnutls_deinit(server);
    gnutls_free(ticket_key.data);
}

static void session_end(struct session *s)
{
    gnutls_deinit(s->client);
    close(s->client_fd);
    close(s->server_fd);
}

/* Reads what the socket has (in a piece of random length, so that records
 * come split and several at a time) onto s->in. */
static void server_read_some(struct session *s)
{
    size_t room = sizeof s->in - s->in_len;
    size_t want = 1 + rnd() % (rnd() & 1 ? 64 : room);
    if (want > room)
        want = room;
    for (;;) {
        ssize_t n = recv(s->server_fd, s->in + s->in_len, want, 0);
        if (n > 0) {
            s->in_len += (size_t)n;
            return;
        }
        if (n < 0 && errno == EAGAIN) {
            wait_for(s->server_fd, POLLIN);
            continue;
        }
        DIE("server recv: %s", n == 0 ? "end of stream" : strerror(errno));
    }
}

/* Opens records until len bytes of application data are in out, or until
 * a record that is not (but a KeyUpdate while data is awaited).  Returns the type of the record that stopped it
 * (SEROW_TLS_APPLICATION_DATA when out is full), or -1 with st->alert. */
static int server_receive(struct session *s, uint8_t *out, size_t len, size_t *got)
{
    *got = 0;
    for (;;) {
        struct serow_tls_record rec;
        long n = serow_tls_open(s->st, s->in, s->in_len, &rec);
        if (n < 0)
            return -1;
        if (n == 0) {
            if (*got == len && len > 0)
                return SEROW_TLS_APPLICATION_DATA;
            server_read_some(s);
            continue;
        }
        if (rec.type == SEROW_TLS_APPLICATION_DATA) {
            if (*got + rec.len > len)
                DIE("more application data than sent");
            memcpy(out + *got, rec.data, rec.len);
            *got += rec.len;
        }
        memmove(s->in, s->in + n, s->in_len - (size_t)n);
        s->in_len -= (size_t)n;
        if (rec.type == SEROW_TLS_HANDSHAKE && len > 0) {
            s->key_updates_read++; /* acted on; the data follows */
            continue;
        }
        if (rec.type != SEROW_TLS_APPLICATION_DATA)
            return rec.type;
        if (*got == len)
            return SEROW_TLS_APPLICATION_DATA;
    }
}

/* pad: TLS 1.3's padding of the record (zeros after the content type) */
static void client_send(struct session *s, const uint8_t *p, size_t len, size_t pad)
{
    while (len > 0) {
        ssize_t n = gnutls_record_send2(s->client, p, len, pad, 0);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
            wait_for(s->client_fd, POLLOUT);
            continue;
        }
        if (n < 0)
            DIE("client send: %s", gnutls_strerror((int)n));
        p += n;
        len -= (size_t)n;
    }
}

/* The client reads len bytes; 0, or the library's error. */
static int client_receive(struct session *s, uint8_t *out, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = gnutls_record_recv(s->client, out + got, len - got);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
            wait_for(s->client_fd, POLLIN);
            continue;
        }
        if (n <= 0)
            return n == 0 ? -1 : (int)n;
        got += (size_t)n;
    }
    return 0;
}

static void server_send(struct session *s, const uint8_t *p, size_t len)
{
    static uint8_t sealed[8 * SEROW_TLS_MAX_RECORD];
    size_t room = serow_tls_seal_room(s->st, len);
    if (room > sizeof sealed)
        DIE("message too long for the test");
    long n = serow_tls_seal(s->st, p, len, sealed, room);
    if (n < 0)
        DIE("seal of %zu bytes", len);
    write_all(s->server_fd, sealed, (size_t)n);
}

static void server_send_alert(struct session *s, uint8_t alert)
{
    uint8_t sealed[SEROW_TLS_RECORD_OVERHEAD + 2];
    long n = serow_tls_seal_alert(s->st, alert, sealed, sizeof sealed);
    if (n < 0)
        DIE("seal of alert %d", alert);
    write_all(s->server_fd, sealed, (size_t)n);
}

/* The state moved as bytes into the other of two structs (a move to
 * another process), the old one wiped. */
static void move_state(struct session *s, struct serow_tls_state pair[2])
{
    struct serow_tls_state *to = s->st == &pair[0] ? &pair[1] : &pair[0];
    unsigned char bytes[sizeof *to];
    memcpy(bytes, s->st, sizeof bytes);
    memset(s->st, 0, sizeof *s->st);
    memcpy(to, bytes, sizeof bytes);
    s->st = to;
}

/* A TLS 1.3 record as the client would seal it with d, its write keys (our
 * read keys), of len bytes of application data, more than a record may
 * hold: written here, since neither GnuTLS nor this layer makes one. */
static size_t seal_oversized(const struct serow_tls_state *st, const struct serow_tls_direction *d,
                             size_t len, uint8_t *out)
{
    const gnutls_cipher_algorithm_t algo = st->cipher == SEROW_TLS_AES_128_GCM   ? GNUTLS_CIPHER_AES_128_GCM
                                           : st->cipher == SEROW_TLS_AES_256_GCM ? GNUTLS_CIPHER_AES_256_GCM
                                                                                 : GNUTLS_CIPHER_CHACHA20_POLY1305;
    gnutls_datum_t key = {(unsigned char *)d->key, st->cipher == SEROW_TLS_AES_128_GCM ? 16 : 32};
    gnutls_aead_cipher_hd_t h;
    if (gnutls_aead_cipher_init(&h, algo, &key) < 0)
        DIE("a cipher");
    uint8_t nonce[12];
    memcpy(nonce, d->salt, 4);
    for (int i = 0; i < 8; i++)
        nonce[4 + i] = d->iv[i] ^ d->rec_seq[i];
    size_t body = len + 1 + 16;
    uint8_t *plain = out + 5;
    out[0] = SEROW_TLS_APPLICATION_DATA;
    out[1] = out[2] = 3;
    out[3] = (uint8_t)(body >> 8);
    out[4] = (uint8_t)body;
    memset(plain, 'o', len);
    plain[len] = SEROW_TLS_APPLICATION_DATA;
    size_t sealed = body;
    if (gnutls_aead_cipher_encrypt(h, nonce, 12, out, 5, 16, plain, len + 1, plain, &sealed) < 0)
        DIE("sealing a long record");
    gnutls_aead_cipher_deinit(h);
    return 5 + body;
}

/* ---- the exchanges -------------------------------------------------------- */

static uint8_t message[3 * SEROW_TLS_MAX_PLAINTEXT + 100], got_message[sizeof message];

static size_t message_len(void)
{
    switch (rnd() % 4) {
    case 0: return 1 + rnd() % 16;
    case 1: return 1 + rnd() % 2000;
    case 2: return SEROW_TLS_MAX_PLAINTEXT - 2 + rnd() % 5; /* around one record's limit */
    default: return 1 + rnd() % sizeof message;
    }
}

/* count exchanges: the client sends a message, the server answers with it
 * reversed; moves the state every move_every.  Returns how many went right. */
static int exchange(struct session *s, struct serow_tls_state pair[2], int count, int move_every)
{
    int right = 0;
    for (int i = 0; i < count; i++) {
        size_t len = message_len();
        for (size_t k = 0; k < len; k++)
            message[k] = (uint8_t)rnd();
        /* now and then a TLS 1.3 record padded (GnuTLS pads only there) */
        size_t pad = 0;
        if (s->st->version == SEROW_TLS_1_3 && len < 2000 && rnd() % 4 == 0)
            pad = rnd() % 300;
        client_send(s, message, len, pad);
        size_t got;
        int type = server_receive(s, got_message, len, &got);
        if (type != SEROW_TLS_APPLICATION_DATA || got != len || memcmp(message, got_message, len)) {
            printf("# exchange %d: type %d, %zu of %zu bytes, alert %d\n", i, type, got, len,
                   s->st->alert);
            return right;
        }
        for (size_t k = 0; k < len; k++)
            message[k] = got_message[len - 1 - k];
        server_send(s, message, len);
        int rc = client_receive(s, got_message, len);
        if (rc != 0 || memcmp(message, got_message, len)) {
            printf("# exchange %d: the client: %s\n", i, rc ? gnutls_strerror(rc) : "other bytes");
            return right;
        }
        right++;
        if (move_every && (i + 1) % move_every == 0)
            move_state(s, pair);
    }
    return right;
}

struct suite {
    const char *name, *priority;
    uint16_t version;
    uint8_t cipher;
};

static void run_suite(const struct suite *su)
{
    static struct serow_tls_state pair[2];
    struct session s;

    /* one session: thousands of exchanges, moved; KeyUpdate; close_notify */
    session_start(&s, su->priority, &pair[0]);
    check(s.st->version == su->version && s.st->cipher == su->cipher,
          "%s: exported version %#x cipher %d", su->name, s.st->version, s.st->cipher);
    int count = 1500;
    check(exchange(&s, pair, count, 100) == count, "%s: %d messages both ways, the state moved every 100",
          su->name, count);

    if (su->version == SEROW_TLS_1_3) {
        /* the client's KeyUpdate, asking for ours: the read key moves, and
         * ours goes before the next answer */
        int rc = gnutls_session_key_update(s.client, GNUTLS_KU_PEER);
        check(rc == 0, "%s: the client sent a KeyUpdate asking for ours (%s)", su->name,
              rc ? gnutls_strerror(rc) : "");
        uint8_t before[32];
        memcpy(before, s.st->read.key, sizeof before);
        size_t got;
        int type = server_receive(&s, got_message, 0, &got);
        check(type == SEROW_TLS_HANDSHAKE && (s.st->flags & SEROW_TLS_KEY_UPDATE_DUE) &&
                  memcmp(before, s.st->read.key, sizeof before) != 0,
              "%s: its KeyUpdate read, the read key moved, ours due", su->name);
        memcpy(before, s.st->write.key, sizeof before);
        check(exchange(&s, pair, 200, 50) == 200 && !(s.st->flags & SEROW_TLS_KEY_UPDATE_DUE) &&
                  memcmp(before, s.st->write.key, sizeof before) != 0,
              "%s: our KeyUpdate sent with the next answer; 200 messages more", su->name);

        /* ours, asking for the client's: GnuTLS answers with its own */
        uint8_t sealed[SEROW_TLS_RECORD_OVERHEAD + 5];
        long n = serow_tls_seal_key_update(s.st, 1, sealed, sizeof sealed);
        check(n > 0, "%s: our KeyUpdate sealed, asking for the client's", su->name);
        write_all(s.server_fd, sealed, (size_t)n);
        memcpy(before, s.st->read.key, sizeof before);
        check(exchange(&s, pair, 200, 50) == 200 && s.key_updates_read == 1 &&
                  memcmp(before, s.st->read.key, sizeof before) != 0,
              "%s: the client's KeyUpdate came back; 200 messages more", su->name);
    } else {
        uint8_t sealed[64];
        check(serow_tls_seal_key_update(s.st, 0, sealed, sizeof sealed) < 0,
              "%s: no KeyUpdate in TLS 1.2", su->name);
    }

    /* close_notify from the client, then ours */
    int rc = gnutls_bye(s.client, GNUTLS_SHUT_WR);
    size_t got;
    int type = server_receive(&s, got_message, 0, &got);
    check(rc == 0 && type == SEROW_TLS_ALERT && (s.st->flags & SEROW_TLS_PEER_CLOSED) &&
              s.st->peer_alert == SEROW_TLS_CLOSE_NOTIFY,
          "%s: the client's close_notify read", su->name);
    server_send_alert(&s, SEROW_TLS_CLOSE_NOTIFY);
    uint8_t byte;
    ssize_t end;
    while ((end = gnutls_record_recv(s.client, &byte, 1)) == GNUTLS_E_AGAIN)
        wait_for(s.client_fd, POLLIN);
    check(end == 0, "%s: our close_notify read by the client as the end (%s)", su->name,
          end ? gnutls_strerror((int)end) : "");
    uint8_t sealed[64];
    check(serow_tls_seal(s.st, "x", 1, sealed, sizeof sealed) < 0,
          "%s: nothing sealed after close_notify", su->name);
    session_end(&s);

    /* another session: a replayed record, a tampered one */
    session_start(&s, su->priority, &pair[0]);
    client_send(&s, (const uint8_t *)"first", 5, 0);
    while (s.in_len < 5 || s.in_len < 5 + ((size_t)s.in[3] << 8 | s.in[4]))
        server_read_some(&s);
    uint8_t copy[sizeof s.in];
    size_t copy_len = s.in_len;
    memcpy(copy, s.in, copy_len);
    check(server_receive(&s, got_message, 5, &got) == SEROW_TLS_APPLICATION_DATA && got == 5,
          "%s: a record opened", su->name);
    struct serow_tls_state saved = *s.st;
    struct serow_tls_record rec;
    check(serow_tls_open(s.st, copy, copy_len, &rec) < 0 && s.st->alert == SEROW_TLS_BAD_RECORD_MAC,
          "%s: the same record again: bad_record_mac (its sequence number is past)", su->name);
    *s.st = saved;

    client_send(&s, (const uint8_t *)"second", 6, 0);
    while (s.in_len < 5 || s.in_len < 5 + ((size_t)s.in[3] << 8 | s.in[4]))
        server_read_some(&s);
    memcpy(copy, s.in, s.in_len);
    copy_len = s.in_len;
    for (size_t at = 5; at < copy_len; at++) {
        /* every byte of the record changed, one at a time: each is refused */
        *s.st = saved;
        uint8_t tampered[64];
        memcpy(tampered, copy, copy_len);
        tampered[at] ^= 0x01;
        if (serow_tls_open(s.st, tampered, copy_len, &rec) >= 0 ||
            s.st->alert != SEROW_TLS_BAD_RECORD_MAC) {
            check(0, "%s: byte %zu of a record changed: refused", su->name, at);
            break;
        }
        if (at == copy_len - 1)
            check(1, "%s: any one byte of a record changed: bad_record_mac", su->name);
    }
    *s.st = saved;
    if (su->version == SEROW_TLS_1_3) {
        /* authentic, within the ciphertext's limit, but one byte of
         * content too many */
        static uint8_t oversized[SEROW_TLS_MAX_RECORD + 64];
        size_t n = seal_oversized(s.st, &s.st->read, SEROW_TLS_MAX_PLAINTEXT + 1, oversized);
        check(serow_tls_open(s.st, oversized, n, &rec) < 0 && s.st->alert == SEROW_TLS_RECORD_OVERFLOW,
              "%s: a record of 2^14 + 1 bytes of content: record_overflow", su->name);
        *s.st = saved;
        n = seal_oversized(s.st, &s.st->read, SEROW_TLS_MAX_PLAINTEXT, oversized);
        check(serow_tls_open(s.st, oversized, n, &rec) == (long)n && rec.len == SEROW_TLS_MAX_PLAINTEXT,
              "%s: one of 2^14 bytes, as sealed here: opened", su->name);
        *s.st = saved;
    }

    uint8_t header[5] = {SEROW_TLS_APPLICATION_DATA, 3, 3, 0, 0};
    size_t too_long = SEROW_TLS_MAX_PLAINTEXT + (su->version == SEROW_TLS_1_3 ? 256 : 2048) + 1;
    header[3] = (uint8_t)(too_long >> 8);
    header[4] = (uint8_t)too_long;
    check(serow_tls_open(s.st, header, sizeof header, &rec) < 0 &&
              s.st->alert == SEROW_TLS_RECORD_OVERFLOW,
          "%s: a record longer than the version allows: record_overflow", su->name);

    /* the refusal as the client sees it: our fatal alert */
    server_send_alert(&s, s.st->alert);
    rc = client_receive(&s, &byte, 1);
    check(rc == GNUTLS_E_FATAL_ALERT_RECEIVED &&
              gnutls_alert_get(s.client) == GNUTLS_A_RECORD_OVERFLOW,
          "%s: the client received our fatal record_overflow (%s)", su->name, gnutls_strerror(rc));
    session_end(&s);
}

/* serow_tls_seal_fits is the inverse of serow_tls_seal_room: the most
 * data whose records fit, for records of any size a client may ask for
 * (write_limit) and with a KeyUpdate due or not. */
static void check_seal_fits(void)
{
    const uint16_t limits[] = {0, 63, 511, 512, 4096, 16383};
    int wrong = 0;
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++)
        for (int due = 0; due < 2; due++)
            for (size_t room = 0; room < 70000; room += 1 + room / 7) {
                struct serow_tls_state st;
                memset(&st, 0, sizeof st);
                st.write_limit = limits[i];
                st.flags = due ? SEROW_TLS_KEY_UPDATE_DUE : 0;
                size_t fits = serow_tls_seal_fits(&st, room);
                if ((fits > 0 && serow_tls_seal_room(&st, fits) > room) ||
                    serow_tls_seal_room(&st, fits + 1) <= room)
                    wrong++;
            }
    check(wrong == 0, "serow_tls_seal_fits: the most that fits, for any record size (%d wrong)", wrong);
}

int main(void)
{
    if (gnutls_global_init() < 0)
        DIE("gnutls_global_init");
    check_seal_fits();
    make_credentials();
    const struct suite suites[] = {
        {"TLS 1.3 AES-128-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM",
         SEROW_TLS_1_3, SEROW_TLS_AES_128_GCM},
        {"TLS 1.3 AES-256-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-256-GCM",
         SEROW_TLS_1_3, SEROW_TLS_AES_256_GCM},
        {"TLS 1.3 ChaCha20-Poly1305", "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305",
         SEROW_TLS_1_3, SEROW_TLS_CHACHA20_POLY1305},
        {"TLS 1.2 AES-128-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM",
         SEROW_TLS_1_2, SEROW_TLS_AES_128_GCM},
        {"TLS 1.2 AES-256-GCM", "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM",
         SEROW_TLS_1_2, SEROW_TLS_AES_256_GCM},
        {"TLS 1.2 ChaCha20-Poly1305", "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+CHACHA20-POLY1305",
         SEROW_TLS_1_2, SEROW_TLS_CHACHA20_POLY1305},
    };
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        run_suite(&suites[i]);
    gnutls_certificate_free_credentials(server_cred);
    gnutls_certificate_free_credentials(client_cred);
    gnutls_global_deinit();
    return checks_done();
}
