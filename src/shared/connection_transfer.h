/*
 * connection_transfer.h - taking a parked connection out of a worker without
 * the worker doing anything (see shared_state.h for the slot protocol).
 *
 * Two kinds of process take connections this way: the connection holder
 * (idle ones, and those of a worker stuck in a request) and a worker that
 * gathers the connections of workers waiting for the same CPU (see
 * worker_gather.c).  Both win or lose each connection by
 * one compare-and-swap on its slot, so the owner never reads a connection
 * that was taken, and nobody takes one the owner is reading.
 */
#ifndef SEROW_CONNECTION_TRANSFER_H
#define SEROW_CONNECTION_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "connection/fd_passing.h"
#include "shared/shared_state.h"

struct response_header;
struct access_log;

/* What the taker keeps open to reach one worker: a pidfd to copy its
 * descriptors, and a copy of its eventfd to wake it.  Renewed when another
 * process takes the worker slot. */
struct worker_handle {
    int32_t pid;
    int pidfd;
    int wake_fd;
};

void serow_worker_handles_init(struct worker_handle *handles, uint32_t count);
void serow_worker_handles_close(struct worker_handle *handles, uint32_t count);

/* serow_take_parked_connection's answers besides a descriptor */
#define TAKE_LOST (-1)    /* the worker claimed it first (or cannot learn of it yet) */
#define TAKE_REFUSED (-2) /* the kernel refuses pidfd_getfd here: stop trying */

/*
 * Takes connection slot_index of worker worker_index if it is still parked
 * (SLOT_IDLE).  Returns our own descriptor for it (close-on-exec), with what
 * its new owner needs in *info, or TAKE_LOST or TAKE_REFUSED.  The worker
 * learns of it through its stolen ring and closes its copy when it next looks
 * (serow_wake_worker makes that now).
 */
int serow_take_parked_connection(struct shared_state *shared, struct worker_handle *handle,
                           uint32_t worker_index, uint32_t slot_index,
                           struct passed_connection *info);

/* Rings the worker's eventfd, so that a worker waiting in epoll closes the
 * copies of what was taken from it rather than keeping them open until
 * something else wakes it. */
void serow_wake_worker(struct shared_state *shared, struct worker_handle *handle,
                 uint32_t worker_index);

/* Answers fd with the server's error page for status (Connection: close; no
 * body for a HEAD request) and shuts its sending side, after reading what
 * the client sent so far (without waiting: through its transport, carried:
 * transport.h; TLS records are discarded unopened): the caller closes it.  For a connection nobody else writes
 * on.  id_header: --request-id-header's (NULL: none).  Returns the page's
 * body bytes (for the access log). */
size_t serow_answer_and_shut(struct serow_connection_state *carried, int fd, int status,
                             int head_request, const struct response_header *id_header);

/*
 * For the master, about to kill the worker in slot worker_index because its
 * app outlived --request-timeout and its grace.  serow_take_app_connection:
 * a copy of the connection whose request the app runs (-1: none, or the app
 * returned meanwhile), and in *since_ms and *app_fd which request that was
 * (the slot's app_since_ms and app_fd), for the answer.
 * serow_answer_app_connection, once the worker is dead (its slot not reset
 * yet), with the copy and what the take said of it: answers that copy 503
 * if the app still ran that request when the worker died and no byte of its
 * response went out (returns 1); else closes it: 0 when bytes went out (the
 * response is cut), -1 when the app had returned from that request (its
 * response may be whole; the slot says something of a later one).  The 503
 * carries the request's id in header id_name (--request-id-header;
 * id_name_len 0: off), the one the worker published for it; with log
 * (--access-log; NULL: none), the 503 has its line there, in the log's
 * format, from what the worker published for it (shared_state.h, struct
 * shared_logged_request).
 */
int serow_take_app_connection(struct shared_state *shared, uint32_t worker_index,
                              uint64_t *since_ms, int32_t *app_fd);
int serow_answer_app_connection(struct shared_state *shared, uint32_t worker_index, int fd,
                                uint64_t since_ms, int32_t app_fd, const char *id_name,
                                size_t id_name_len, struct access_log *log);

#endif
