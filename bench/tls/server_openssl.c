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
#include "server_common.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

static SSL_CTX *ctx;

static long ssl_read(void *session, char *buf, size_t len)
{
    return SSL_read(session, buf, (int)len);
}

static void serve(int fd)
{
    SSL *s = SSL_new(ctx);
    SSL_set_fd(s, fd);
    if (SSL_accept(s) == 1) {
        bench_tls_read_head(ssl_read, s);
        SSL_write(s, bench_tls_answer, (int)bench_tls_answer_len);
        SSL_shutdown(s);
    }
    ERR_clear_error();
    SSL_free(s);
}

int main(int argc, char **argv)
{
    struct bench_tls_args args = bench_tls_args(argc, argv);
    ctx = SSL_CTX_new(TLS_server_method());
    int v = args.tls12 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX_set_min_proto_version(ctx, v);
    SSL_CTX_set_max_proto_version(ctx, v);
    SSL_CTX_set_num_tickets(ctx, 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, args.cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, args.key, SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    bench_tls_serve(bench_tls_listen(), serve);
}
