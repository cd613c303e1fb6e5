/*
 * bench/tls/client.c - full TLS handshakes as fast as they go, for
 * bench/tls-handshakes (OpenSSL's client: the same load for every server).
 *
 *   client PORT VERSION PROCS SECONDS
 *     PROCS processes each open connections one after another to
 *     127.0.0.1:PORT for SECONDS: a full handshake (no session is ever
 *     resumed: the client keeps none), "GET / HTTP/1.1" with
 *     Connection: close, the answer read to its end, close.  Prints
 *     "handshakes N per_sec R errors E protocol P cipher C" (the last two
 *     of the first connection).
 *
 * The client verifies no certificate (no chain building), but TLS 1.3 and
 * ECDHE-ECDSA still make it check the server's signature: its cost per
 * handshake is close to the server's, so with PROCS = 1 on two cores both
 * sides run at once.  Built by bench/tls-handshakes with gcc.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char request[] = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* One connection; 1 when it completed.  The first one's protocol and
 * cipher are written to info. */
static int one(SSL_CTX *ctx, int port, char *info, size_t info_len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1, ok = 0;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* RST on close: the client's ports are not left in TIME_WAIT */
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        SSL *s = SSL_new(ctx);
        SSL_set_fd(s, fd);
        if (SSL_connect(s) == 1 && SSL_write(s, request, sizeof request - 1) > 0) {
            char buf[4096];
            int n, total = 0;
            while ((n = SSL_read(s, buf, sizeof buf)) > 0)
                total += n;
            ok = total > 0;
            if (info && ok)
                snprintf(info, info_len, "protocol %s cipher %s", SSL_get_version(s),
                         SSL_get_cipher_name(s));
        }
        SSL_free(s);
    }
    close(fd);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s PORT 1.3|1.2 PROCS SECONDS\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), procs = atoi(argv[3]);
    double seconds = atof(argv[4]);
    signal(SIGPIPE, SIG_IGN);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    int v = strcmp(argv[2], "1.2") == 0 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX_set_min_proto_version(ctx, v);
    SSL_CTX_set_max_proto_version(ctx, v);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);

    char info[200] = "protocol ? cipher ?";
    if (!one(ctx, port, info, sizeof info)) {
        fprintf(stderr, "client: the first handshake failed\n");
        return 1;
    }
    int pipefd[2];
    if (pipe(pipefd) < 0)
        return 1;
    for (int p = 0; p < procs; p++) {
        if (fork() == 0) {
            long done = 0, errors = 0;
            double end = now() + seconds;
            while (now() < end) {
                if (one(ctx, port, NULL, 0))
                    done++;
                else
                    errors++;
            }
            long r[2] = {done, errors};
            if (write(pipefd[1], r, sizeof r) != sizeof r)
                _exit(1);
            _exit(0);
        }
    }
    close(pipefd[1]);
    long done = 0, errors = 0, r[2];
    while (read(pipefd[0], r, sizeof r) == sizeof r) {
        done += r[0];
        errors += r[1];
    }
    while (wait(NULL) > 0)
        ;
    printf("handshakes %ld per_sec %.0f errors %ld %s\n", done, done / seconds, errors, info);
    return 0;
}
