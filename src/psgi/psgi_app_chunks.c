/*
 * psgi_app_chunks.c - the chunked framing of a body the app framed itself,
 * checked.
 *
 * An app that sets Transfer-Encoding: chunked (Plack::Middleware::Chunked
 * does) writes its own chunk lines.  Were they broken, or followed by more
 * bytes, the client would read what follows as the next response.  So they
 * are read with the request parser's decoder as they go out: what follows an
 * error or the last chunk is dropped, and the connection closes after the
 * response (as after a Content-Length mismatch).  The decoder works in place,
 * so it reads a copy, a block at a time; the client gets the app's own bytes,
 * or (HTTP/1.0, framing.decode_app_chunks) the decoded ones.
 *
 * Owns: reading an app's chunk lines with the request parser's decoder
 * (http_parser.c) and saying what of them may go out.  It sends nothing and
 * keeps no state: the decoder and the verdict live in the response
 * (struct serow_response), whose bytes psgi_response.c writes.
 */
#include "psgi/psgi_app_chunks.h"

#include <string.h>

size_t serow_read_app_chunks(struct chunked_decoder *decoder, int *done, const char *data,
                             size_t n, char *block, size_t *decoded_len, const char **error)
{
    size_t decoded = n, consumed = 0;
    *decoded_len = 0;
    if (*done) {
        *error = "has bytes after its last chunk";
        return 0;
    }
    memcpy(block, data, n);
    int r = serow_decode_chunked(decoder, block, &decoded, &consumed);
    *decoded_len = decoded;
    if (r == CHUNKED_ERROR) {
        *error = "is not valid chunked framing";
    } else if (r == CHUNKED_DONE) {
        *done = 1;
        if (consumed < n)
            *error = "has bytes after its last chunk";
    }
    return consumed;
}

int serow_app_chunks_valid(const struct iovec *parts, size_t count)
{
    struct chunked_decoder decoder;
    char block[APP_CHUNKS_BLOCK];
    const char *error = NULL;
    int done = 0;
    serow_chunked_decoder_init(&decoder);
    for (size_t i = 0; i < count; i++) {
        for (size_t at = 0; at < parts[i].iov_len && error == NULL; at += APP_CHUNKS_BLOCK) {
            size_t n = parts[i].iov_len - at, decoded;
            if (n > APP_CHUNKS_BLOCK)
                n = APP_CHUNKS_BLOCK;
            serow_read_app_chunks(&decoder, &done, (const char *)parts[i].iov_base + at, n, block,
                                  &decoded, &error);
        }
    }
    return done && error == NULL;
}
