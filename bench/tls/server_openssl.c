/*
 * bench/tls/server_openssl.c - the smallest TLS server OpenSSL makes, for
 * bench/tls-handshakes: one process, one connection at a time, blocking.
 *
 *   server_openssl CERT KEY VERSIONS
 *     As server_gnutls.c: VERSIONS "1.3" or "1.2"; the port on standard
 *     output; per connection the handshake, one request head, a fixed
 *     answer, close_notify, close; one session ticket per full handshake.
 *
 * Built by bench/tls-handshakes with gcc; not part of Serow.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
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
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    int v = strcmp(argv[3], "1.2") == 0 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX_set_min_proto_version(ctx, v);
    SSL_CTX_set_max_proto_version(ctx, v);
    SSL_CTX_set_num_tickets(ctx, 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, argv[1]) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, argv[2], SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 1;
    }

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
        SSL *s = SSL_new(ctx);
        SSL_set_fd(s, fd);
        if (SSL_accept(s) == 1) {
            char buf[4096];
            int got = 0;
            while (got < (int)sizeof buf - 1) {
                int n = SSL_read(s, buf + got, (int)sizeof buf - 1 - got);
                if (n <= 0)
                    break;
                got += n;
                buf[got] = '\0';
                if (strstr(buf, "\r\n\r\n"))
                    break;
            }
            SSL_write(s, answer, sizeof answer - 1);
            SSL_shutdown(s);
        }
        ERR_clear_error();
        SSL_free(s);
        close(fd);
    }
}
