/*
 * bench/tls/load.c - the TLS client of bench/tls-run (OpenSSL: the same
 * client for every server).  TLS 1.3 with TLS_AES_128_GCM_SHA256 only, so
 * that every server negotiates the same cipher; the certificate is not
 * verified (no chain building), but TLS 1.3 still makes the client check the
 * server's signature in every full handshake.
 *
 *   load handshakes PORT PROCS SECONDS [resume]
 *     PROCS processes each open connections one after another for SECONDS:
 *     a handshake, "GET /" with Connection: close, the answer read to its
 *     end, close.  With "resume", each process offers the session (ticket)
 *     its previous connection received, and counts the connections the
 *     server resumed (SSL_session_reused); without it, none is offered.
 *     Prints one line: "handshakes N per_sec R resumed K errors E
 *     client_cpu_s C protocol P cipher S" (protocol and cipher of the first
 *     connection; client_cpu_s is the user + system time of the PROCS
 *     processes, which taskset puts on one CPU: SECONDS of it is that CPU
 *     saturated).
 *
 *   load hold PORT CONNS PROCS
 *     Opens CONNS keep-alive connections in PROCS processes (so at most
 *     PROCS handshakes in flight), each answered once ("GET /", the answer
 *     read by its Content-Length), and keeps them open.  Prints "held H
 *     failed F" once all are tried, then waits for a line on stdin: "again"
 *     asks every held connection once more and prints "again_ok A
 *     again_failed B"; end of input closes them all.  Each process keeps
 *     CONNS / PROCS descriptors (and the parent none): raise the open-file
 *     limit to that.
 *
 * Built by bench/tls-run with gcc.
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char close_request[] = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
static const char keep_request[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static SSL_CTX *client_context(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    /* sessions are kept by hand (SSL_get1_session), not in a cache */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    return ctx;
}

static int tcp_connect(int port, int rst_on_close)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (rst_on_close) {
        /* RST on close: the client's ports are not left in TIME_WAIT */
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- handshakes ------------------------------------------------------- */

/* One connection with a Connection: close request; 1 when it was answered.
 * *session: the session to offer (NULL: none), replaced by the one this
 * connection got when keep is set.  *resumed: whether the server resumed. */
static int handshake_once(SSL_CTX *ctx, int port, SSL_SESSION **session, int keep, int *resumed,
                          char *info, size_t info_len)
{
    int fd = tcp_connect(port, 1), ok = 0;
    *resumed = 0;
    if (fd < 0)
        return 0;
    SSL *s = SSL_new(ctx);
    SSL_set_fd(s, fd);
    if (*session)
        SSL_set_session(s, *session);
    if (SSL_connect(s) == 1 && SSL_write(s, close_request, sizeof close_request - 1) > 0) {
        char buf[4096], status[12];
        int n, total = 0;
        /* to the end: a server that closes without close_notify is an
         * error here, but its answer came */
        while ((n = SSL_read(s, buf, sizeof buf)) > 0) {
            if (total < (int)sizeof status)
                memcpy(status + total, buf, (size_t)n < sizeof status - total ? (size_t)n : sizeof status - total);
            total += n;
        }
        ok = total >= (int)sizeof status && memcmp(status, "HTTP/1.1 200", sizeof status) == 0;
        *resumed = SSL_session_reused(s);
        if (info && ok)
            snprintf(info, info_len, "protocol %s cipher %s", SSL_get_version(s),
                     SSL_get_cipher_name(s));
        /* the answer is all here: the connection ended well.  Without
         * this, SSL_free takes the session for a broken connection's and
         * marks it not resumable (ssl_clear_bad_session). */
        if (ok)
            SSL_set_shutdown(s, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        if (keep) {
            /* TLS 1.3's tickets come after the handshake: read with the answer */
            SSL_SESSION *got = SSL_get1_session(s);
            if (got && SSL_SESSION_is_resumable(got)) {
                if (*session)
                    SSL_SESSION_free(*session);
                *session = got;
            } else if (got) {
                SSL_SESSION_free(got);
            }
        }
    }
    ERR_clear_error();
    SSL_free(s);
    close(fd);
    return ok;
}

static double cpu_of_children(void)
{
    struct rusage r;
    getrusage(RUSAGE_CHILDREN, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static int handshakes(int port, int procs, double seconds, int resume)
{
    SSL_CTX *ctx = client_context();
    char info[200] = "protocol ? cipher ?";
    SSL_SESSION *none = NULL;
    int resumed;
    if (!handshake_once(ctx, port, &none, 0, &resumed, info, sizeof info)) {
        fprintf(stderr, "load: the first connection failed\n");
        return 1;
    }
    int pipefd[2];
    if (pipe(pipefd) < 0)
        return 1;
    for (int p = 0; p < procs; p++) {
        if (fork() == 0) {
            long r[3] = {0, 0, 0}; /* done, resumed, errors */
            SSL_SESSION *session = NULL;
            double end = now() + seconds;
            while (now() < end) {
                if (handshake_once(ctx, port, &session, resume, &resumed, NULL, 0)) {
                    r[0]++;
                    r[1] += resumed;
                } else {
                    r[2]++;
                }
            }
            if (write(pipefd[1], r, sizeof r) != sizeof r)
                _exit(1);
            _exit(0);
        }
    }
    close(pipefd[1]);
    long total[3] = {0, 0, 0}, r[3];
    while (read(pipefd[0], r, sizeof r) == sizeof r)
        for (int i = 0; i < 3; i++)
            total[i] += r[i];
    while (wait(NULL) > 0)
        ;
    printf("handshakes %ld per_sec %.0f resumed %ld errors %ld client_cpu_s %.2f %s\n", total[0],
           total[0] / seconds, total[1], total[2], cpu_of_children(), info);
    return 0;
}

/* ---- hold --------------------------------------------------------------- */

/* Reads one answer (head, then Content-Length bytes of body); 1 on a 200. */
static int read_answer(SSL *s)
{
    char buf[16384];
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == sizeof buf - 1)
            return 0;
        int n = SSL_read(s, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            return 0;
        have += n;
        buf[have] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    if (memcmp(buf, "HTTP/1.1 200", 12) != 0)
        return 0;
    const char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (!cl || cl > end)
        return 0;
    long want = strtol(cl + 17, NULL, 10);
    long got = (long)(have - (end + 4 - buf));
    while (got < want) {
        int n = SSL_read(s, buf, sizeof buf);
        if (n <= 0)
            return 0;
        got += n;
    }
    return got == want;
}

static int ask(SSL *s)
{
    return SSL_write(s, keep_request, sizeof keep_request - 1) > 0 && read_answer(s);
}

static int hold(int port, int conns, int procs)
{
    SSL_CTX *ctx = client_context();
    int up[2];
    if (pipe(up) < 0)
        return 1;
    int *down = calloc(procs, sizeof *down);
    pid_t *kids = calloc(procs, sizeof *kids);
    for (int p = 0; p < procs; p++) {
        int d[2];
        if (pipe(d) < 0)
            return 1;
        kids[p] = fork();
        if (kids[p] == 0) {
            close(d[1]);
            /* the earlier children's pipes: their end of input is theirs */
            for (int q = 0; q < p; q++)
                close(down[q]);
            int mine = conns / procs + (p < conns % procs);
            SSL **ssl = calloc(mine, sizeof *ssl);
            long r[2] = {0, 0}; /* held, failed */
            for (int i = 0; i < mine; i++) {
                int fd = tcp_connect(port, 0);
                SSL *s = fd < 0 ? NULL : SSL_new(ctx);
                if (s) {
                    SSL_set_fd(s, fd);
                    if (SSL_connect(s) == 1 && ask(s)) {
                        ssl[i] = s;
                        r[0]++;
                        continue;
                    }
                    SSL_free(s);
                }
                if (fd >= 0)
                    close(fd);
                ERR_clear_error();
                r[1]++;
            }
            if (write(up[1], r, sizeof r) != sizeof r)
                _exit(1);
            char c;
            if (read(d[0], &c, 1) == 1) {
                long a[2] = {0, 0}; /* again ok, again failed */
                for (int i = 0; i < mine; i++)
                    if (ssl[i])
                        a[ask(ssl[i]) ? 0 : 1]++;
                if (write(up[1], a, sizeof a) != sizeof a)
                    _exit(1);
            }
            _exit(0);
        }
        close(d[0]);
        down[p] = d[1];
    }
    close(up[1]);
    long held = 0, failed = 0, r[2];
    for (int p = 0; p < procs && read(up[0], r, sizeof r) == sizeof r; p++) {
        held += r[0];
        failed += r[1];
    }
    printf("held %ld failed %ld\n", held, failed);
    fflush(stdout);
    char line[100];
    if (fgets(line, sizeof line, stdin) && strncmp(line, "again", 5) == 0) {
        for (int p = 0; p < procs; p++)
            if (write(down[p], "a", 1) != 1)
                return 1;
        long ok = 0, bad = 0;
        for (int p = 0; p < procs && read(up[0], r, sizeof r) == sizeof r; p++) {
            ok += r[0];
            bad += r[1];
        }
        printf("again_ok %ld again_failed %ld\n", ok, bad);
        fflush(stdout);
    }
    for (int p = 0; p < procs; p++)
        close(down[p]);
    while (wait(NULL) > 0)
        ;
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 5 && strcmp(argv[1], "handshakes") == 0)
        return handshakes(atoi(argv[2]), atoi(argv[3]), atof(argv[4]),
                          argc > 5 && strcmp(argv[5], "resume") == 0);
    if (argc == 5 && strcmp(argv[1], "hold") == 0)
        return hold(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: %s handshakes PORT PROCS SECONDS [resume]\n"
                    "       %s hold PORT CONNS PROCS\n", argv[0], argv[0]);
    return 2;
}
