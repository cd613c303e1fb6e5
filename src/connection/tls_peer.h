/*
 * tls_peer.h - a TLS connection as the app's env sees it (docs/tls.md,
 * "Client certificates"): its protocol and cipher, and, with
 * --ssl-verify-client, its client's certificate, asked for and checked in
 * the handshake, under the names Apache's mod_ssl gives them (SSL_PROTOCOL,
 * SSL_CIPHER, SSL_CLIENT_VERIFY, SSL_CLIENT_S_DN, ...).
 *
 * A TLS connection moves between processes and the library's session does
 * not (it is freed after the handshake), so what the env says of the
 * client's certificate is written once, at the handshake, into a record of
 * a table that every process shares (made by the master only when
 * --ssl-verify-client is set), and the connection's state names the record
 * (serow_connection_state.tls_peer): whichever process serves a request
 * reads it there.  The protocol and the cipher are in the state itself.
 *
 * Owns: the --ssl-verify-client mode, the table of records, and the rules
 * of a record's life: written by the process that did the handshake before
 * the connection goes anywhere, read-only after, let go by the process that
 * closes the connection (serow_transport_closed, transport.h).
 */
#ifndef SEROW_TLS_PEER_H
#define SEROW_TLS_PEER_H

#include <gnutls/gnutls.h>
#include <stddef.h>

#include "connection/transport.h"

/* --ssl-verify-client, as nginx's ssl_verify_client. */
enum serow_verify_client {
    SEROW_VERIFY_CLIENT_OFF = 0,
    SEROW_VERIFY_CLIENT_ON,             /* no valid certificate: no handshake */
    SEROW_VERIFY_CLIENT_OPTIONAL,       /* none, or a valid one */
    SEROW_VERIFY_CLIENT_OPTIONAL_NO_CA, /* none, or any one, its check said to the app */
};

/* The master, before it forks, at start and on each HUP, before
 * serow_tls_configure: the mode ("off", "on", "optional",
 * "optional_no_ca"), the CA file (NULL for none: optional_no_ca only), a
 * CRL file of that CA's (NULL: none), kept for serow_tls_peer_trust, and,
 * the first time, the table, with room for about max_connections
 * connections with a certificate at once.  0, or -1 with what is wrong in
 * err, starting with the option it is about. */
int serow_tls_peer_configure(const char *mode, const char *ca_file, const char *crl_file,
                             unsigned long max_connections, char *err, size_t err_size);

/* Reads the CA and CRL files named to serow_tls_peer_configure into a set
 * of credentials (each set serow_tls_configure makes, SNI's too: a client's
 * certificate is checked against the set its session has); nothing while
 * the mode is off.  0, or -1 with what is wrong in err. */
int serow_tls_peer_trust(gnutls_certificate_credentials_t credentials, char *err, size_t err_size);

/* A server session about to start its handshake: the certificate asked for
 * and checked as the mode says. */
void serow_tls_peer_ask(gnutls_session_t session);

/* A server session whose handshake is done (its state exported into cs):
 * cs->tls_suite set and, when the client sent a certificate, its record
 * written and named in cs->tls_peer.  0, or -1 when the connection must end
 * (*why says why; *alert is the alert to send), as when the mode wants a
 * certificate the session has not, or the table has no room. */
int serow_tls_peer_record(gnutls_session_t session, struct serow_connection_state *cs, int fd,
                          const char **why, gnutls_alert_description_t *alert);

/* One variable of the env. */
struct serow_tls_var {
    const char *name;
    size_t name_len;
    const char *value;
    size_t len;
};
#define SEROW_TLS_VARS_MAX 16

/* The SSL_* variables of a TLS connection's request, into vars (room for
 * SEROW_TLS_VARS_MAX), their values pointing into the record, static
 * strings or scratch (32 bytes); how many. */
size_t serow_tls_env_vars(const struct serow_connection_state *cs, struct serow_tls_var *vars,
                          char *scratch);

#endif
