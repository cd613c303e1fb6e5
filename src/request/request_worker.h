/*
 * request_worker.h - what a request asks of the worker that serves it.
 *
 * A request (request.h) is served by a worker (struct worker_loop, opaque
 * here: its layout is the worker's own), and what is recorded of it
 * (request_accounting.c) needs a few things of that worker: the id header
 * it was configured with, the slow request limit, the listener a connection
 * came on, its access log, its shared slot, the ids it makes, its pid.
 * They are asked here, below the worker, and answered by
 * worker/worker_loop.c, so that the request's code includes nothing from
 * the layer above it; worker/worker_loop.h, the worker's public face,
 * includes this header.  No Perl here.
 */
#ifndef SEROW_REQUEST_WORKER_H
#define SEROW_REQUEST_WORKER_H

#include <stddef.h>
#include <stdint.h>

struct access_log;
struct serow_id_maker;
struct worker_loop;
struct worker_slot;

/* --request-id-header's name (*len 0: the option is off). */
const char *serow_worker_loop_id_header(const struct worker_loop *loop, size_t *len);
/* --slow-request-log, in microseconds (0: off). */
uint64_t serow_worker_loop_slow_request_us(const struct worker_loop *loop);
/* The listen socket of index (a connection's listener_index): its
 * SERVER_NAME, and its port in *port; NULL when there is none. */
const char *serow_worker_loop_listener(const struct worker_loop *loop, int index, int *port);
/* The access log the worker writes to (NULL: none). */
struct access_log *serow_worker_loop_access_log(const struct worker_loop *loop);
/* The worker's slot in the shared memory (NULL: running without the
 * holder). */
struct worker_slot *serow_worker_loop_slot(const struct worker_loop *loop);
/* The request ids the worker makes (--request-id-header). */
struct serow_id_maker *serow_worker_loop_ids(struct worker_loop *loop);
/* The worker's pid, for the log (%P). */
int serow_worker_loop_pid(const struct worker_loop *loop);

#endif
