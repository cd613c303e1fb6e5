/*
 * bench/tls/server_common.h - what server_gnutls.c and server_openssl.c
 * share: all but the TLS library.  Their arguments (CERT KEY 1.3|1.2), the
 * listening socket (127.0.0.1, a port the OS picks, printed on standard
 * output), one connection at a time, the request head read, the answer.
 * Built with each by bench/tls-handshakes; not part of Serow.
 */
#ifndef BENCH_TLS_SERVER_COMMON_H
#define BENCH_TLS_SERVER_COMMON_H

#include <stddef.h>

struct bench_tls_args {
    const char *cert, *key;
    int tls12; /* "1.2": TLS 1.2 the only version offered; else TLS 1.3 */
};

/* The arguments, or the usage and the exit status 2.  SIGPIPE ignored. */
struct bench_tls_args bench_tls_args(int argc, char **argv);

/* The listening socket, its port printed; exits 1 when there is none. */
int bench_tls_listen(void);

/* Accepts connections one after another for ever, serve(fd) for each (the
 * handshake, bench_tls_read_head, the answer, close_notify); closes it after. */
void bench_tls_serve(int listen_fd, void (*serve)(int fd));

/* Reads through the library (read_some: > 0 bytes read, <= 0 the end) until
 * a request head is whole, or 4 KiB came without one. */
void bench_tls_read_head(long (*read_some)(void *session, char *buf, size_t len), void *session);

/* The answer to every request. */
extern const char bench_tls_answer[];
extern const size_t bench_tls_answer_len;

#endif
