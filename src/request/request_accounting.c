/*
 * request_accounting.c - what is recorded of each request a worker answers:
 * its access log line, its metrics, the slow request log, and its id
 * (see request_accounting.h).
 *
 * Owns: the accounting part of the request (its times, status and body
 * bytes, the values kept for its log line, its id, in struct serow_request).
 * It formats through access_log.c and counts through request_metrics.c, and
 * decides nothing about the request.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "request/request_accounting.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log/access_log.h"
#include "connection/connection.h"
#include "log/log.h"
#include "request/request.h"
#include "log/request_id.h"
#include "shared/request_metrics.h"
#include "http/response_writer.h"
#include "shared/shared_state.h"
#include "request/request_worker.h"

/* ---- the request id ------------------------------------------------------ */

static void take_or_make_id(struct serow_request *r, const char *name, size_t name_len)
{
    const struct http_header *h = serow_find_header(&r->head, name, name_len);
    if (h && serow_request_id_acceptable(h->value, h->value_len)) {
        memcpy(r->id, h->value, h->value_len);
        r->id_len = h->value_len;
        r->id_made = 0;
        return;
    }
    r->id_len = serow_request_id_make(serow_worker_loop_ids(r->worker), r->id);
    r->id_made = 1;
}

/* Only from the field lines the parser accepted before it stopped (head's
 * headers): none when it refused the request line itself (414, a malformed
 * one), whose end it never found, so nothing after it is a field line it
 * read; none after a field line it refused. */
size_t serow_request_accounting_rejected_id(struct worker_loop *loop,
                                            const struct http_request_head *head, char *id)
{
    size_t name_len;
    const char *name = serow_worker_loop_id_header(loop, &name_len);
    if (name_len == 0)
        return 0;
    const struct http_header *h = head ? serow_find_header(head, name, name_len) : NULL;
    if (h && serow_request_id_acceptable(h->value, h->value_len)) {
        memcpy(id, h->value, h->value_len);
        return h->value_len;
    }
    return serow_request_id_make(serow_worker_loop_ids(loop), id);
}

const struct response_header *serow_request_accounting_id_header(const struct worker_loop *loop,
                                                                 const char *id, size_t id_len,
                                                                 struct response_header *h)
{
    if (id_len == 0)
        return NULL;
    size_t name_len;
    const char *name = serow_worker_loop_id_header(loop, &name_len);
    *h = (struct response_header){name, name_len, id, id_len};
    return h;
}


/* ---- a request's start ----------------------------------------------------- */

/* Once the head is complete and the request goes to the app. */
void serow_request_accounting_start(struct serow_request *r)
{
    struct connection *conn = r->conn;
    size_t id_name_len;
    const char *id_name = serow_worker_loop_id_header(r->worker, &id_name_len);
    struct access_log *log = serow_worker_loop_access_log(r->worker);
    uint64_t now = serow_request_clock_ns();
    r->times.arrived_ns = conn->arrived_ns ? conn->arrived_ns : now;
    r->times.app_ns = now;
    r->times.head_ns = 0;
    r->status = 0;
    r->body_bytes = 0;
    r->remote_user_len = 0;
    r->id_len = 0;
    if (id_name_len)
        take_or_make_id(r, id_name, id_name_len);
    if (log) {
        const struct access_log_format *f = &log->format;
        r->values_used = 0;
        for (int i = 0; i < f->num_response_headers; i++)
            r->response_headers[i].p = NULL;
        for (int i = 0; i < f->num_env; i++)
            r->env_values[i].p = NULL;
        serow_access_log_note_request(f, &r->log_request, conn->buffer, &r->head);
    }
}

/* ---- what the master needs if it kills the worker ---------------------------- */

/* Appends p[0..len) to the slot's bytes, cut to the room left; its span. */
static void publish_span(struct shared_logged_request *q, size_t *used, const char *p, size_t len,
                         uint32_t *offset, uint32_t *span_len)
{
    size_t room = sizeof(q->bytes) - *used;
    if (len > room)
        len = room;
    memcpy(q->bytes + *used, p, len);
    *offset = (uint32_t)*used;
    *span_len = (uint32_t)len;
    *used += len;
}

static void publish_string(char *out, size_t size, const char *s)
{
    size_t n = strnlen(s, size - 1);
    memcpy(out, s, n);
    out[n] = '\0';
}

void serow_request_accounting_publish_for_master(struct serow_request *r)
{
    struct connection *conn = r->conn;
    struct access_log *log = serow_worker_loop_access_log(r->worker);
    struct worker_slot *slot = serow_worker_loop_slot(r->worker);
    if (log == NULL || slot == NULL || conn == NULL)
        return;
    struct shared_logged_request *q = &slot->logged_request;
    if (q->app_ns == r->times.app_ns && q->arrived_ns == r->times.arrived_ns)
        return; /* this request's, already (the app runs again: a streaming callback) */
    const struct access_log_format *f = &log->format;
    const struct access_log_request *lr = &r->log_request;
    q->arrived_ns = r->times.arrived_ns;
    q->app_ns = r->times.app_ns;
    q->keepalive_requests = conn->requests_served;
    int port = 0;
    const char *name = serow_worker_loop_listener(r->worker, conn->listener_index, &port);
    q->server_port = port;
    publish_string(q->server_name, sizeof(q->server_name), name ? name : "");
    publish_string(q->remote_addr, sizeof(q->remote_addr), conn->remote_addr);
    size_t used = 0;
    uint32_t line_offset; /* 0: the line comes first */
    publish_span(q, &used, conn->buffer + lr->line_offset, lr->line_len, &line_offset, &q->line_len);
    for (int i = 0; i < f->num_request_headers; i++) {
        if (lr->header_len[i] == SIZE_MAX)
            q->header_len[i] = UINT32_MAX;
        else
            publish_span(q, &used, conn->buffer + lr->header_offset[i], lr->header_len[i],
                         &q->header_offset[i], &q->header_len[i]);
    }
}

/* ---- what the response and the app add ------------------------------------ */

void serow_request_accounting_note_response(struct serow_request *r, int status,
                                            uint64_t body_bytes)
{
    r->status = status;
    r->body_bytes = body_bytes;
}

void serow_request_accounting_note_error_page(struct serow_request *r, int status,
                                             uint64_t body_bytes)
{
    serow_request_accounting_note_response(r, status, body_bytes);
    struct access_log *log = serow_worker_loop_access_log(r->worker);
    if (log) {
        size_t name_len;
        const char *name = serow_worker_loop_id_header(r->worker, &name_len);
        serow_access_log_own_response_headers(&log->format, r->response_headers,
                                              (struct access_log_span){r->id, r->id_len},
                                              name, name_len);
    }
}

void serow_request_accounting_note_remote_user(struct serow_request *r, const char *user,
                                               size_t len)
{
    if (len > sizeof(r->remote_user))
        len = sizeof(r->remote_user);
    memcpy(r->remote_user, user, len);
    r->remote_user_len = len;
}

/* A copy of a value in the request's room for them (cut when it is full). */
static struct access_log_span keep_value(struct serow_request *r, const char *p, size_t len)
{
    size_t room = sizeof(r->values) - r->values_used;
    if (len > room)
        len = room;
    char *copy = r->values + r->values_used;
    memcpy(copy, p, len);
    r->values_used += len;
    return (struct access_log_span){copy, len};
}

static int name_is(const struct response_header *h, const char *name, size_t len)
{
    return h->name_len == len && strncasecmp(h->name, name, len) == 0;
}

size_t serow_request_accounting_add_id_header(struct serow_request *r,
                                              struct response_header *headers, size_t count)
{
    if (r->id_len) {
        size_t len;
        const char *name = serow_worker_loop_id_header(r->worker, &len);
        size_t i = 0;
        while (i < count && !name_is(&headers[i], name, len))
            i++;
        if (i == count) /* the app's own, if it set one, goes out instead */
            headers[count++] = (struct response_header){name, len, r->id, r->id_len};
    }
    return count;
}

void serow_request_accounting_response_head(struct serow_request *r,
                                            const struct response_header *headers, size_t count)
{
    struct access_log *log = serow_worker_loop_access_log(r->worker);
    r->times.head_ns = serow_request_clock_ns();
    if (log) {
        const struct access_log_format *f = &log->format;
        for (int n = 0; n < f->num_response_headers; n++) {
            const struct access_log_name *want = &f->response_headers[n];
            for (size_t i = 0; i < count; i++)
                if (name_is(&headers[i], want->name, want->len)) {
                    r->response_headers[n] = keep_value(r, headers[i].value, headers[i].value_len);
                    break;
                }
        }
    }
}

int serow_request_accounting_env_names(const struct serow_request *r,
                                       const struct access_log_name **names)
{
    struct access_log *log = serow_worker_loop_access_log(r->worker);
    if (log == NULL)
        return 0;
    *names = log->format.env;
    return log->format.num_env;
}

void serow_request_accounting_note_env(struct serow_request *r, int index, const char *value,
                                       size_t len)
{
    r->env_values[index] = keep_value(r, value, len);
}

/* ---- a request's end --------------------------------------------------------- */

/* --slow-request-log: one error log line for a request slower than the limit. */
static void log_slow_request(const struct serow_request *r, struct connection *conn, int status,
                             const struct access_log_split *split)
{
    size_t line_len;
    const char *line = serow_access_log_raw_request_line(conn->buffer, conn->buffer_len, &line_len);
    char printable[SHARED_REQUEST_TEXT];
    size_t n = line_len < sizeof(printable) - 1 ? line_len : sizeof(printable) - 1;
    for (size_t i = 0; i < n; i++) /* for the error log, not to be read back */
        printable[i] = (unsigned char)line[i] >= 0x20 && (unsigned char)line[i] < 0x7f ? line[i] : '?';
    printable[n] = '\0';
    serow_log_warn("slow request: %llu ms (queue %llu ms, app %llu ms, write %llu ms) "
                   "worker %d status %d \"%s\"%s%.*s",
                   (unsigned long long)(split->total_us / 1000),
                   (unsigned long long)(split->queue_us / 1000),
                   (unsigned long long)(split->app_us / 1000),
                   (unsigned long long)(split->write_us / 1000), (int)getpid(), status, printable,
                   r->id_len ? " id " : "", (int)r->id_len, r->id);
}

/* Nanoseconds from one of a request's times to a later one; 0 when either
 * was not reached or the wall clock stepped back between them. */
static inline uint64_t ns_between(uint64_t from, uint64_t to)
{
    return from && to > from ? to - from : 0;
}

/* The line of a request: r served (NULL: one rejected, whose id is
 * rejected_id). */
static void write_log_line(struct worker_loop *loop, struct access_log *log,
                           const struct serow_request *r, struct connection *conn, int status,
                           uint64_t body_bytes, const struct access_log_times *times,
                           struct access_log_span rejected_id)
{
    size_t id_name_len;
    const char *id_name = serow_worker_loop_id_header(loop, &id_name_len);
    const struct access_log_format *f = &log->format;
    struct access_log_entry e;
    e.remote_addr = conn->remote_addr;
    e.status = status;
    e.body_bytes = body_bytes;
    e.times = *times;
    e.pid = serow_worker_loop_pid(loop);
    e.keepalive_requests = conn->requests_served;
    e.server_port = 0;
    e.server_name = serow_worker_loop_listener(loop, conn->listener_index, &e.server_port);
    e.request_id = r == NULL ? rejected_id
                   : r->id_len ? (struct access_log_span){r->id, r->id_len}
                               : (struct access_log_span){NULL, 0};
    if (r != NULL) {
        const struct access_log_request *lr = &r->log_request;
        e.request_line = conn->buffer + lr->line_offset;
        e.request_line_len = lr->line_len;
        for (int i = 0; i < f->num_request_headers; i++)
            e.request_headers[i] = lr->header_len[i] == SIZE_MAX
                                       ? (struct access_log_span){NULL, 0}
                                       : (struct access_log_span){conn->buffer + lr->header_offset[i],
                                                                  lr->header_len[i]};
        for (int i = 0; i < f->num_response_headers; i++)
            e.response_headers[i] = r->response_headers[i];
        for (int i = 0; i < f->num_env; i++)
            e.env[i] = r->env_values[i];
        e.remote_user = r->remote_user;
        e.remote_user_len = r->remote_user_len;
    } else {
        e.request_line = serow_access_log_raw_request_line(conn->buffer, conn->buffer_len,
                                                           &e.request_line_len);
        e.remote_user = NULL;
        e.remote_user_len = 0;
        for (int i = 0; i < f->num_request_headers; i++)
            e.request_headers[i] = (struct access_log_span){NULL, 0};
        serow_access_log_own_response_headers(f, e.response_headers, rejected_id,
                                              id_name, id_name_len);
        for (int i = 0; i < f->num_env; i++)
            e.env[i] = (struct access_log_span){NULL, 0};
    }
    serow_access_log_id_as_request_header(f, &e, id_name, id_name_len);
    serow_access_log_write(log, &e);
}

/* The duration, the line if there is a log.  r: the request served (NULL:
 * one rejected, whose id is rejected_id, {NULL, 0} for none). */
static void account_end(struct worker_loop *loop, const struct serow_request *r,
                        struct connection *conn, int status, uint64_t body_bytes,
                        struct access_log_span rejected_id)
{
    uint64_t now = serow_request_clock_ns();
    /* A request rejected while its head arrived had no app and no head
     * given.  (Its times are its own: the loop may reject one while a
     * request's response waits to be written.) */
    struct access_log_times t = r != NULL ? r->times
                                          : (struct access_log_times){conn->arrived_ns ? conn->arrived_ns : now, 0, 0, 0};
    t.end_ns = now;
    struct worker_slot *slot = serow_worker_loop_slot(loop);
    if (slot) {
        struct request_counters *c = &slot->counters;
        serow_request_metrics_count(c, status, r != NULL ? ns_between(t.app_ns, now) : 0);
        if (r != NULL)
            serow_request_metrics_count_phases(c, ns_between(t.arrived_ns, t.app_ns),
                                               ns_between(t.app_ns, t.head_ns),
                                               ns_between(t.head_ns, now), t.head_ns != 0);
    }
    uint64_t slow_us = serow_worker_loop_slow_request_us(loop);
    if (slow_us && r != NULL && ns_between(t.arrived_ns, now) >= slow_us * 1000) {
        struct access_log_split split;
        serow_access_log_split(&t, &split);
        log_slow_request(r, conn, status, &split);
    }
    struct access_log *log = serow_worker_loop_access_log(loop);
    if (log)
        write_log_line(loop, log, r, conn, status, body_bytes, &t, rejected_id);
}

void serow_request_accounting_end(const struct serow_request *r)
{
    account_end(r->worker, r, r->conn, r->status, r->body_bytes,
                (struct access_log_span){NULL, 0});
}

void serow_request_accounting_rejected(struct worker_loop *loop, struct connection *conn,
                                       int status, uint64_t body_bytes, const char *id,
                                       size_t id_len)
{
    account_end(loop, NULL, conn, status, body_bytes,
                (struct access_log_span){id_len ? id : NULL, id_len});
}
