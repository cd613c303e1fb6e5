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
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s CERT KEY 1.3|1.2\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    gnutls_global_init();
    gnutls_certificate_credentials_t cred;
    gnutls_certificate_allocate_credentials(&cred);
    int rc = gnutls_certificate_set_x509_key_file(cred, argv[1], argv[2], GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        fprintf(stderr, "%s\n", gnutls_strerror(rc));
        return 1;
    }
    gnutls_priority_t prio;
    const char *p = strcmp(argv[3], "1.2") == 0 ? "NORMAL:-VERS-ALL:+VERS-TLS1.2"
                                                  : "NORMAL:-VERS-ALL:+VERS-TLS1.3";
    if (gnutls_priority_init(&prio, p, NULL) < 0)
        return 1;
    gnutls_datum_t ticket_key;
    gnutls_session_ticket_key_generate(&ticket_key);

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 1024) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
        perror("listen");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);

    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        gnutls_session_t s;
        gnutls_init(&s, GNUTLS_SERVER);
        gnutls_priority_set(s, prio);
        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
        gnutls_session_ticket_enable_server(s, &ticket_key);
        gnutls_transport_set_int(s, fd);
        do
            rc = gnutls_handshake(s);
        while (rc < 0 && !gnutls_error_is_fatal(rc));
        if (rc == 0) {
            char buf[4096];
            size_t got = 0;
            while (got < sizeof buf - 1) {
                ssize_t n = gnutls_record_recv(s, buf + got, sizeof buf - 1 - got);
                if (n <= 0)
                    break;
                got += (size_t)n;
                buf[got] = '\0';
                if (strstr(buf, "\r\n\r\n"))
                    break;
            }
            gnutls_record_send(s, answer, sizeof answer - 1);
            gnutls_bye(s, GNUTLS_SHUT_WR);
        }
        gnutls_deinit(s);
        close(fd);
    }
}
