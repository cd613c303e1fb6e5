/*
 * bench/tls/records.c - what the record layer (src/connection/tls_record.c)
 * costs per record, for bench/tls-handshakes: nanoseconds to seal and then
 * open one record of 100 bytes and one of 16 KiB, for each cipher in TLS 1.3,
 * through serow_tls_seal and serow_tls_open (which make the library's cipher
 * handle in each call, since a handle cannot move with the state), beside
 * the library's AEAD alone with one handle kept (the floor: what a process
 * that kept its handles would pay).
 *
 * Built by bench/tls-handshakes with gcc; not part of Serow.
 */
#include "connection/tls_record.h"

#include <gnutls/crypto.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static uint8_t data[SEROW_TLS_MAX_PLAINTEXT], sealed[2 * SEROW_TLS_MAX_RECORD];

int main(void)
{
    const struct { const char *name; uint8_t cipher; gnutls_cipher_algorithm_t library; } ciphers[] = {
        {"AES-128-GCM", SEROW_TLS_AES_128_GCM, GNUTLS_CIPHER_AES_128_GCM},
        {"AES-256-GCM", SEROW_TLS_AES_256_GCM, GNUTLS_CIPHER_AES_256_GCM},
        {"ChaCha20-Poly1305", SEROW_TLS_CHACHA20_POLY1305, GNUTLS_CIPHER_CHACHA20_POLY1305},
    };
    const size_t sizes[] = {100, SEROW_TLS_MAX_PLAINTEXT};
    memset(data, 'x', sizeof data);
    for (size_t c = 0; c < 3; c++) {
        for (size_t z = 0; z < 2; z++) {
            size_t len = sizes[z];
            int rounds = len > 1000 ? 20000 : 200000;
            struct serow_tls_state writer, reader;
            memset(&writer, 0, sizeof writer);
            writer.version = SEROW_TLS_1_3;
            writer.cipher = ciphers[c].cipher;
            reader = writer;
            double start = now();
            for (int i = 0; i < rounds; i++) {
                struct serow_tls_record rec;
                long n = serow_tls_seal(&writer, data, len, sealed, sizeof sealed);
                if (n < 0 || serow_tls_open(&reader, sealed, (size_t)n, &rec) != n) {
                    fprintf(stderr, "records: a record did not open\n");
                    return 1;
                }
            }
            double layer = (now() - start) / rounds * 1e9;

            uint8_t key[32] = {0}, nonce[12] = {0}, aad[5] = {23, 3, 3, 0, 0};
            gnutls_datum_t k = {key, ciphers[c].cipher == SEROW_TLS_AES_128_GCM ? 16 : 32};
            gnutls_aead_cipher_hd_t h;
            gnutls_aead_cipher_init(&h, ciphers[c].library, &k);
            start = now();
            for (int i = 0; i < rounds; i++) {
                size_t out = len + 16, back = len;
                nonce[11] = (uint8_t)i;
                gnutls_aead_cipher_encrypt(h, nonce, 12, aad, 5, 16, data, len, sealed, &out);
                gnutls_aead_cipher_decrypt(h, nonce, 12, aad, 5, 16, sealed, out, sealed, &back);
            }
            double floor_ns = (now() - start) / rounds * 1e9;
            gnutls_aead_cipher_deinit(h);
            printf("records TLS 1.3 %s %zu bytes: seal+open %.0f ns (the AEAD alone, handle kept: %.0f ns)\n",
                   ciphers[c].name, len, layer, floor_ns);
        }
    }
    return 0;
}
