/*
 * request_id.h - the ids of --request-id-header: the client's when it sent a
 * sane one, else made here.  Every process that answers a request (a worker,
 * the connection holder) makes its own, unique across processes and
 * restarts; this file has no loop and no Perl, so each can use it.
 */
#ifndef SEROW_REQUEST_ID_H
#define SEROW_REQUEST_ID_H

#include <stddef.h>
#include <stdint.h>

/* The longest request id taken from a client; a longer one is replaced. */
#define REQUEST_ID_MAX 128

/* A process's ids: a random prefix drawn on first use (after the fork) and
 * a count.  Zeroed: ready. */
struct serow_id_maker {
    char prefix[16];
    int prefix_drawn;
    uint64_t made;
};

/* Whether a client's id is taken as it is: 1 to REQUEST_ID_MAX - 1 visible
 * ASCII bytes (it is logged, echoed and handed to the app). */
int serow_request_id_acceptable(const char *p, size_t len);

/* A new id (32 hex digits) into out (>= 32 bytes); returns 32. */
size_t serow_request_id_make(struct serow_id_maker *maker, char *out);

/*
 * The id of a request whose head has not been parsed (the holder's sheds:
 * it peeks, it does not parse): the value of the first field line named
 * name among the complete lines of head[0..len) after the request line, if
 * it is acceptable; else a made one.  (A worker takes the id of a request
 * it refuses from what its parser accepted: request_accounting.c.)
 * Into out (REQUEST_ID_MAX bytes); returns its length.
 */
size_t serow_request_id_of_raw_head(struct serow_id_maker *maker, const char *head, size_t len,
                                    const char *name, size_t name_len, char *out);

#endif
