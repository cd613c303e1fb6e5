/*
 * tls_transport.h - serving a connection over TLS: the server's
 * credentials, the handshake (GnuTLS's, non-blocking), and the TLS
 * transport's operations after it, through the record layer
 * (tls_record.h), from the state that moves with the connection
 * (struct serow_connection_state, transport.h).  docs/tls.md.
 *
 * Owns: the process's credentials and priorities (set once in the master,
 * before privileges are dropped, and inherited by every process it forks),
 * and what a process keeps beside a TLS connection it owns: a handshake's
 * session, plaintext opened but not yet read, sealed bytes the socket has
 * not taken yet.  Knows no loop: its recv, send, writev, sendfile and
 * shutdown behave as the system calls (transport.h).
 */
#ifndef SEROW_TLS_TRANSPORT_H
#define SEROW_TLS_TRANSPORT_H

#include <stddef.h>

#include "connection/transport.h"

/* The priorities (GnuTLS's syntax) used unless --ssl-priorities says
 * otherwise: Mozilla's "intermediate" profile as nginx's users know it,
 * TLS 1.2 and 1.3, ECDHE, AEAD ciphers only (the record layer's three). */
#define SEROW_TLS_DEFAULT_PRIORITIES                                                    \
    "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:"         \
    "+AES-256-GCM:+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA"

/* Reads the certificate chain and the private key (PEM files) and sets the
 * priorities (NULL: the default).  0, or -1 with what is wrong in err,
 * starting with the option it is about ("--ssl-key: ..."). */
int serow_tls_configure(const char *cert_file, const char *key_file, const char *priorities,
                        char *err, size_t err_size);

/* --ssl-verify-client MODE, --ssl-client-ca FILE, --ssl-crl FILE (NULL:
 * none), for about max_connections open at once (tls_peer.h); after
 * serow_tls_configure.  0, or -1 with what is wrong in err, starting with
 * the option. */
int serow_tls_configure_clients(const char *mode, const char *ca_file, const char *crl_file,
                                unsigned long max_connections, char *err, size_t err_size);

/* Whether serow_tls_configure succeeded in this process (or its parent). */
int serow_tls_configured(void);

/* The state of a connection just accepted on a TLS listener: its
 * handshake is still to come. */
void serow_tls_accepted(struct serow_connection_state *cs);

extern const struct serow_transport_ops serow_tls_transport_ops;

#endif
