/*
 * tls_record.h - the TLS record layer of a connection whose handshake is
 * done: application data sealed into records and records opened into
 * application data, from a state of plain bytes that can move with the
 * connection's descriptor to another process (docs/tls.md).
 *
 * The handshake is the library's (GnuTLS); so is every cryptographic
 * primitive (its AEAD ciphers and its HKDF).  What is written here is
 * protocol: the record framing, the nonces, the additional data, TLS 1.3's
 * inner content type, alerts, close_notify and KeyUpdate (RFC 8446 5 and
 * 4.6.3; RFC 5246 6.2 with RFC 5288 and RFC 7905 for TLS 1.2).  It is what
 * the kernel's TLS (kTLS) does, in user space, and its state is shaped as the
 * kernel's struct tls12_crypto_info_* so that kTLS could take a connection
 * over where a kernel has it (not done here: no kernel this project runs on
 * has CONFIG_TLS).
 *
 * No I/O: every call takes the state and the bytes.  The one thing a process
 * keeps is the library's cipher handles of the keys it used last (a handle
 * is that process's memory and cannot move with the state):
 * serow_tls_forget_keys drops a connection's.  The server's side only: the state is exported from a
 * server session (read: what the client sends).  No renegotiation, no
 * compression, no 0-RTT, no session tickets sent after the handshake.
 *
 * Owns: struct serow_tls_state and its rules.  Knows no loop and no
 * connection beyond the bytes it is given.
 */
#ifndef SEROW_TLS_RECORD_H
#define SEROW_TLS_RECORD_H

#include <gnutls/gnutls.h>
#include <stddef.h>
#include <stdint.h>

/* The versions and ciphers, numbered as the kernel numbers them
 * (linux/tls.h: TLS_1_2_VERSION, TLS_CIPHER_AES_GCM_128, ...). */
#define SEROW_TLS_1_2 0x0303
#define SEROW_TLS_1_3 0x0304
enum serow_tls_cipher {
    SEROW_TLS_AES_128_GCM = 51,
    SEROW_TLS_AES_256_GCM = 52,
    SEROW_TLS_CHACHA20_POLY1305 = 54,
};

/* Record content types and the alerts this layer sends or acts on. */
enum {
    SEROW_TLS_ALERT = 21,
    SEROW_TLS_HANDSHAKE = 22,
    SEROW_TLS_APPLICATION_DATA = 23,
};
enum {
    SEROW_TLS_CLOSE_NOTIFY = 0,
    SEROW_TLS_UNEXPECTED_MESSAGE = 10,
    SEROW_TLS_BAD_RECORD_MAC = 20,
    SEROW_TLS_RECORD_OVERFLOW = 22,
    SEROW_TLS_ILLEGAL_PARAMETER = 47,
    SEROW_TLS_DECODE_ERROR = 50,
    SEROW_TLS_PROTOCOL_VERSION = 70,
    SEROW_TLS_INTERNAL_ERROR = 80,
    SEROW_TLS_USER_CANCELED = 90,
};

/* The most application data in one record, and the most bytes one record
 * of it takes on the wire (header, TLS 1.2's explicit nonce, TLS 1.3's
 * content type, the tag). */
#define SEROW_TLS_MAX_PLAINTEXT 16384
#define SEROW_TLS_RECORD_OVERHEAD (5 + 8 + 1 + 16)
#define SEROW_TLS_MAX_RECORD (SEROW_TLS_MAX_PLAINTEXT + SEROW_TLS_RECORD_OVERHEAD)

/*
 * One direction's keys, as the kernel's struct tls12_crypto_info_aes_gcm_128
 * (and _256, _chacha20_poly1305) hold them: key, salt, iv, rec_seq.  The
 * static IV of RFC 8446 5.3 (and of ChaCha20 in TLS 1.2) is salt then iv,
 * twelve bytes; AES-GCM in TLS 1.2 has a four-byte implicit IV, the salt,
 * and sends the rest of each nonce in the record: this layer sends the
 * sequence number there (as GnuTLS and OpenSSL do), so iv is unused and the
 * kernel's iv would be rec_seq.  All big-endian bytes: no padding, no
 * pointer, nothing of the process that made it.
 */
struct serow_tls_direction {
    uint8_t key[32];     /* 16 of them for AES-128-GCM */
    uint8_t salt[4];
    uint8_t iv[8];
    uint8_t rec_seq[8];  /* the next record's sequence number */
    uint8_t secret[48];  /* TLS 1.3: the application traffic secret the key came from
                          * (KeyUpdate derives the next one); 32 bytes of it but with
                          * AES-256-GCM (SHA-384) */
};

/* flags */
#define SEROW_TLS_PEER_CLOSED 0x01   /* close_notify received: nothing more will be read */
#define SEROW_TLS_CLOSED 0x02        /* close_notify sent: nothing more may be written */
#define SEROW_TLS_FAILED 0x04        /* a fatal alert, sent or received: the connection is over */
#define SEROW_TLS_KEY_UPDATE_DUE 0x08 /* the peer asked for our KeyUpdate: sent before the next data */
#define SEROW_TLS_ALERT_SENT 0x10    /* a fatal alert sent: nothing more is */

/*
 * A connection's record state: all there is to a TLS connection after its
 * handshake, 208 bytes.  Copied as bytes (shared memory, a message beside
 * SCM_RIGHTS), it continues the same session in another process; only one
 * copy may be used at a time (two writers would reuse a nonce).
 */
struct serow_tls_state {
    uint16_t version; /* SEROW_TLS_1_2, SEROW_TLS_1_3 */
    uint8_t cipher;   /* enum serow_tls_cipher */
    uint8_t flags;
    uint8_t alert;       /* after serow_tls_open failed: the alert to send (serow_tls_seal_alert),
                          * or SEROW_TLS_CLOSE_NOTIFY when none is (the peer's was fatal) */
    uint8_t peer_alert;  /* the last alert received */
    uint16_t write_limit; /* the most application data in a record we send, when the client
                           * asked for less than SEROW_TLS_MAX_PLAINTEXT in its handshake
                           * (max_fragment_length, RFC 6066 4; record_size_limit, RFC 8449);
                           * 0: SEROW_TLS_MAX_PLAINTEXT.  During the handshake: the
                           * record_size_limit the client sent, 0 for none */
    struct serow_tls_direction read, write;
};

/*
 * What serow_tls_open found in one record.  type is
 *   SEROW_TLS_APPLICATION_DATA: data[0..len) (inside the bytes given; len
 *     may be 0);
 *   SEROW_TLS_ALERT: a close_notify (flags has SEROW_TLS_PEER_CLOSED) or a
 *     warning, in peer_alert: nothing to do but read on;
 *   SEROW_TLS_HANDSHAKE: a KeyUpdate, already acted on (the read key is the
 *     next one; our own KeyUpdate is due if the peer asked for it).
 */
struct serow_tls_record {
    uint8_t type;
    uint8_t *data;
    size_t len;
};

/* Drops the cipher handles this process keeps for st's keys: the
 * connection ends here or leaves for another process. */
void serow_tls_forget_keys(const struct serow_tls_state *st);

/* The session's TLS 1.3 traffic secrets into the state set with
 * gnutls_session_set_ptr(session, state): set as the session's keylog
 * function (gnutls_session_set_keylog_function) before its handshake. */
int serow_tls_keylog(gnutls_session_t session, const char *label, const gnutls_datum_t *secret);

/* Keeps the record_size_limit of the session's ClientHello (RFC 8449) in
 * the state set with gnutls_session_set_ptr, for serow_tls_export (the
 * library honours it in its own records but does not say it): set as the
 * session's hook for an incoming GNUTLS_HANDSHAKE_CLIENT_HELLO, before its
 * handshake (gnutls_handshake_set_hook_function). */
int serow_tls_client_hello(gnutls_session_t session, unsigned int htype, unsigned when,
                           unsigned int incoming, const gnutls_datum_t *msg);

/* After a server session's handshake: the rest of *st (version, cipher,
 * keys, IVs, sequence numbers; the secrets were kept by serow_tls_keylog).
 * 0, or -1 when the session's version or cipher is not one this layer has,
 * or when the library still holds bytes it received (read them with
 * gnutls_record_recv first: they are past the state's sequence number). */
int serow_tls_export(gnutls_session_t session, struct serow_tls_state *st);

/*
 * Opens the first record of in[0..len), in place (its plaintext is written
 * over its ciphertext).  Returns the bytes the record took (its plaintext
 * in *rec), 0 when in does not hold a whole record yet (read more, keeping
 * these bytes), or -1 when the connection must end: st->alert is the alert
 * to send first (SEROW_TLS_BAD_RECORD_MAC for a record that fails its
 * check: a wrong tag, a wrong sequence number; SEROW_TLS_RECORD_OVERFLOW
 * for one too long; SEROW_TLS_UNEXPECTED_MESSAGE, ...), or
 * SEROW_TLS_CLOSE_NOTIFY when the peer's own fatal alert ended it.  Any
 * bytes may be given; several records are opened by calls one after
 * another.
 */
long serow_tls_open(struct serow_tls_state *st, uint8_t *in, size_t len,
                    struct serow_tls_record *rec);

/* The room serow_tls_seal needs for len bytes of application data (its
 * records, and a KeyUpdate before them when one is due). */
size_t serow_tls_seal_room(const struct serow_tls_state *st, size_t len);

/* The most application data serow_tls_seal seals into room bytes. */
size_t serow_tls_seal_fits(const struct serow_tls_state *st, size_t room);

/* Seals data[0..len) as application data into out (room bytes), in records
 * of at most SEROW_TLS_MAX_PLAINTEXT (or write_limit), after our KeyUpdate
 * when one is due.
 * Returns the bytes written (0 for len 0 with no KeyUpdate due), or -1:
 * nothing written when room is short of serow_tls_seal_room or after
 * close_notify or a fatal alert; else (the sequence numbers spent, the
 * library failing) the connection must end.  data and out must not
 * overlap. */
long serow_tls_seal(struct serow_tls_state *st, const void *data, size_t len, uint8_t *out,
                    size_t room);

/* Seals an alert into out (room at least SEROW_TLS_RECORD_OVERHEAD + 2):
 * close_notify (a warning; no data is sealed after it), or a fatal one
 * (the connection is over; st->alert after serow_tls_open failed).  Returns
 * the bytes written, or -1 after close_notify or a fatal alert was sent. */
long serow_tls_seal_alert(struct serow_tls_state *st, uint8_t description, uint8_t *out,
                          size_t room);

/* TLS 1.3: seals our KeyUpdate (asking the peer for its own when
 * request_update) and moves our writing to the next key.  Room as for an
 * alert.  Returns the bytes written, or -1 (TLS 1.2 has no KeyUpdate). */
long serow_tls_seal_key_update(struct serow_tls_state *st, int request_update, uint8_t *out,
                               size_t room);

#endif
