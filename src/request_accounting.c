/*
 * request_accounting.c - what is recorded of each request a worker answers:
 * its access log line and its metrics (see request_accounting.h).
 *
 * Owns: the accounting part of the request (its start time, status and
 * body bytes in struct serow_request).  It formats through access_log.c and
 * counts through request_metrics.c, and decides nothing about the request.
 */
#include "request_accounting.h"

#include <stdint.h>
#include <string.h>

#include "access_log.h"
#include "request_metrics.h"
#include "worker_internal.h"

/* The duration, and the line if there is a log (see the header). */
void serow_request_accounting_end(struct worker_loop *loop, struct connection *conn, int status,
                            uint64_t body_bytes, int served)
{
    if (loop->slot)
        serow_request_metrics_count(&loop->slot->counters, status,
                              served ? serow_metrics_clock_ns() - loop->request.started_ns : 0);
    if (loop->access_log == NULL)
        return;
    struct access_log_entry e = {.remote_addr = conn->remote_addr, .status = status,
                                 .body_bytes = body_bytes};
    if (served) {
        const struct access_log_request *r = &loop->request.log_request;
        e.request_line = conn->buffer + r->line_offset;
        e.request_line_len = r->line_len;
        if (r->referer_len != SIZE_MAX) {
            e.referer = conn->buffer + r->referer_offset;
            e.referer_len = r->referer_len;
        }
        if (r->agent_len != SIZE_MAX) {
            e.user_agent = conn->buffer + r->agent_offset;
            e.user_agent_len = r->agent_len;
        }
        e.remote_user = loop->request.remote_user;
        e.remote_user_len = loop->request.remote_user_len;
    } else {
        e.request_line = serow_access_log_raw_request_line(conn->buffer, conn->buffer_len,
                                                     &e.request_line_len);
    }
    serow_access_log_write(loop->access_log, &e);
}

/* Once the head is complete and the request goes to the app. */
void serow_request_accounting_start(struct worker_loop *loop, struct connection *conn)
{
    loop->request.started_ns = serow_metrics_clock_ns();
    loop->request.status = 0;
    loop->request.body_bytes = 0;
    loop->request.remote_user_len = 0;
    if (loop->access_log)
        serow_access_log_note_request(&loop->request.log_request, conn->buffer, &loop->request.head);
}

void serow_request_accounting_note_response(struct worker_loop *loop, int status, uint64_t body_bytes)
{
    loop->request.status = status;
    loop->request.body_bytes = body_bytes;
}

void serow_request_accounting_note_remote_user(struct worker_loop *loop, const char *user, size_t len)
{
    if (len > sizeof(loop->request.remote_user))
        len = sizeof(loop->request.remote_user);
    memcpy(loop->request.remote_user, user, len);
    loop->request.remote_user_len = len;
}
