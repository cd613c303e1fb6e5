/*
 * bench/tls/server_gnutls.c - the smallest TLS server GnuTLS makes, for
 * bench/tls-handshakes: one process, one connection at a time, blocking.
 *
 *   server_gnutls CERT KEY VERSIONS
 *     VERSIONS: "1.3" or "1.2" (the only version offered).  Listens on
 *     127.0.0.1 at a port the OS picks, prints it on standard output, then
 *     per connection: the handshake, one request head read, a fixed answer,
 *     close_notify, close.  One session ticket per full handshake, as a
 *     server that offers resumption sends (OpenSSL's bench server sends one too).
 *
 * Built by bench/tls-handshakes with gcc; not part of Serow.
 */
#include "server_common.h"

#include <gnutls/gnutls.h>
#include <stdio.h>

static gnutls_certificate_credentials_t cred;
static gnutls_priority_t prio;
static gnutls_datum_t ticket_key;

static long record_recv(void *session, char *buf, size_t len)
{
    return gnutls_record_recv(session, buf, len);
}

static void serve(int fd)
{
    gnutls_session_t s;
    gnutls_init(&s, GNUTLS_SERVER);
    gnutls_priority_set(s, prio);
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
    gnutls_session_ticket_enable_server(s, &ticket_key);
    gnutls_transport_set_int(s, fd);
    int rc;
    do
        rc = gnutls_handshake(s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc == 0) {
        bench_tls_read_head(record_recv, s);
        gnutls_record_send(s, bench_tls_answer, bench_tls_answer_len);
        gnutls_bye(s, GNUTLS_SHUT_WR);
    }
    gnutls_deinit(s);
}

int main(int argc, char **argv)
{
    struct bench_tls_args args = bench_tls_args(argc, argv);
    gnutls_global_init();
    gnutls_certificate_allocate_credentials(&cred);
    int rc = gnutls_certificate_set_x509_key_file(cred, args.cert, args.key, GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        fprintf(stderr, "%s\n", gnutls_strerror(rc));
        return 1;
    }
    const char *p = args.tls12 ? "NORMAL:-VERS-ALL:+VERS-TLS1.2" : "NORMAL:-VERS-ALL:+VERS-TLS1.3";
    if (gnutls_priority_init(&prio, p, NULL) < 0)
        return 1;
    gnutls_session_ticket_key_generate(&ticket_key);
    bench_tls_serve(bench_tls_listen(), serve);
}
