/*
 * psgi_app_chunks.h - checking the chunked framing an app wrote itself
 * (psgi_app_chunks.c), for psgi_response.c.  Internal to src/psgi/.
 */
#ifndef SEROW_PSGI_APP_CHUNKS_H
#define SEROW_PSGI_APP_CHUNKS_H

#include <stddef.h>
#include <sys/uio.h>

#include "http/http_parser.h"

/* The largest block read at once: the size of the copy the caller gives. */
#define APP_CHUNKS_BLOCK 16384

/* Reads the next n (at most APP_CHUNKS_BLOCK) bytes of an app's chunked body
 * with decoder, on a copy in block.  Returns how many of them may go out
 * (those before an error or after the last chunk may not; *error then says
 * why), and leaves their *decoded_len decoded bytes at block. */
size_t serow_read_app_chunks(struct chunked_decoder *decoder, int *done, const char *data,
                             size_t n, char *block, size_t *decoded_len, const char **error);

/* Whether the parts of an array body are whole, valid chunked framing: known
 * before the head goes out, so that the head can say the connection closes. */
int serow_app_chunks_valid(const struct iovec *parts, size_t count);

#endif
