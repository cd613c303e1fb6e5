/*
 * tls_transport.h - serving a connection over TLS: the server's
 * credentials, the handshake (GnuTLS's, non-blocking), and the TLS
 * transport's operations after it, through the record layer
 * (tls_record.h), from the state that moves with the connection
 * (struct serow_connection_state, transport.h).  docs/tls.md.
 *
 * Owns: the process's credentials, priorities and session tickets' key (set
 * in the master, at start and on HUP, which keeps its privileges, and
 * inherited by every process it forks after),
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

/* Reads each certificate chain and its private key (PEM files: the i-th
 * key is the i-th certificate's; the first pair is the one a client that
 * names no host, or none of the certificates' names, gets), sets the
 * priorities (NULL: the default) and, with tickets, makes the session
 * tickets' master key unless a call before made it (a HUP keeps it).  0, or
 * -1 with what is wrong in err, starting with the option it is about
 * ("--ssl-key: ..."): then what the calls before set stays in use. */
int serow_tls_configure(const char *const *cert_files, const char *const *key_files,
                        size_t pairs, const char *priorities, int tickets, char *err,
                        size_t err_size);

/* --ssl-verify-client MODE, --ssl-client-ca FILE, --ssl-crl FILE (NULL:
 * none), for about max_connections open at once (tls_peer.h); before
 * serow_tls_configure, whose credentials get the CA and the CRL, at start
 * and on each HUP.  0, or -1 with what is wrong in err, starting with
 * the option. */
int serow_tls_configure_clients(const char *mode, const char *ca_file, const char *crl_file,
                                unsigned long max_connections, char *err, size_t err_size);

/* Whether serow_tls_configure succeeded in this process (or its parent). */
int serow_tls_configured(void);

/* The state of a connection just accepted on a TLS listener: its
 * handshake is still to come. */
void serow_tls_accepted(struct serow_connection_state *cs);

/* Called in this process after records are sealed from cs and before they
 * are sent (NULL: nothing is): so that a copy of the state kept elsewhere
 * is never behind a record on the wire.  The worker keeps there the state
 * the master seals its 503 from (request_timeout.c). */
void serow_tls_set_seal_observer(void (*observer)(const struct serow_connection_state *cs));

/* psgix.io (psgi_tls_socket.c).  Plaintext the caller read from the
 * connection on fd and did not use, given back to be read again before
 * what follows (0, or -1 without memory); the plaintext opened and not read
 * yet; and what the process keeps beside the connection moved from one of
 * its descriptors to another (a duplicate: the app's handle takes the
 * connection; 0, or -1 without memory, when what was kept is lost). */
int serow_tls_unread(struct serow_connection_state *cs, int fd, const void *data, size_t len);
size_t serow_tls_unread_bytes(const struct serow_connection_state *cs, int fd);
int serow_tls_move_local(const struct serow_connection_state *cs, int from_fd, int to_fd);

extern const struct serow_transport_ops serow_tls_transport_ops;

#endif
