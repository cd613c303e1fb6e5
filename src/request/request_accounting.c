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
#include "log/log.h"
#include "log/request_id.h"
#include "shared/request_metrics.h"
#include "http/response_writer.h"
#include "worker/worker_internal.h"

/* ---- the request id ------------------------------------------------------ */

static void take_or_make_id(struct worker_loop *loop)
{
    const struct worker_settings *s = &loop->settings;
    const struct http_header *h =
        serow_find_header(&loop->request.head, s->request_id_header, s->request_id_header_len);
    if (h && serow_request_id_acceptable(h->value, h->value_len)) {
        memcpy(loop->request.id, h->value, h->value_len);
        loop->request.id_len = h->value_len;
        loop->request.id_made = 0;
        return;
    }
    loop->request.id_len = serow_request_id_make(&loop->ids, loop->request.id);
    loop->request.id_made = 1;
}

/* Only from the field lines the parser accepted before it stopped (head's
 * headers): none when it refused the request line itself (414, a malformed
 * one), whose end it never found, so nothing after it is a field line it
 * read; none after a field line it refused. */
size_t serow_request_accounting_rejected_id(struct worker_loop *loop,
                                            const struct http_request_head *head, char *id)
{
    const struct worker_settings *s = &loop->settings;
    if (s->request_id_header_len == 0)
        return 0;
    const struct http_header *h =
        head ? serow_find_header(head, s->request_id_header, s->request_id_header_len) : NULL;
    if (h && serow_request_id_acceptable(h->value, h->value_len)) {
        memcpy(id, h->value, h->value_len);
        return h->value_len;
    }
    return serow_request_id_make(&loop->ids, id);
}

const struct response_header *serow_request_accounting_id_header(const struct worker_loop *loop,
                                                                 const char *id, size_t id_len,
                                                                 struct response_header *h)
{
    if (id_len == 0)
        return NULL;
    *h = (struct response_header){loop->settings.request_id_header,
                                  loop->settings.request_id_header_len, id, id_len};
    return h;
}

/* The listen socket that accepted conn (its SERVER_NAME and port), or NULL. */
static const struct listener *listener_of(const struct worker_loop *loop,
                                          const struct connection *conn)
{
    return conn->listener_index >= 0 && conn->listener_index < loop->num_listeners
               ? &loop->listeners[conn->listener_index] : NULL;
}

/* ---- a request's start ----------------------------------------------------- */

/* Once the head is complete and the request goes to the app. */
void serow_request_accounting_start(struct worker_loop *loop, struct connection *conn)
{
    struct serow_request *r = &loop->request;
    uint64_t now = serow_request_clock_ns();
    r->times.arrived_ns = conn->arrived_ns ? conn->arrived_ns : now;
    r->times.app_ns = now;
    r->times.head_ns = 0;
    r->status = 0;
    r->body_bytes = 0;
    r->remote_user_len = 0;
    r->id_len = 0;
    if (loop->settings.request_id_header_len)
        take_or_make_id(loop);
    if (loop->access_log) {
        const struct access_log_format *f = &loop->access_log->format;
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

void serow_request_accounting_publish_for_master(struct worker_loop *loop)
{
    struct serow_request *r = &loop->request;
    struct connection *conn = r->conn;
    if (loop->access_log == NULL || loop->slot == NULL || conn == NULL)
        return;
    struct shared_logged_request *q = &loop->slot->logged_request;
    if (q->app_ns == r->times.app_ns && q->arrived_ns == r->times.arrived_ns)
        return; /* this request's, already (the app runs again: a streaming callback) */
    const struct access_log_format *f = &loop->access_log->format;
    const struct access_log_request *lr = &r->log_request;
    q->arrived_ns = r->times.arrived_ns;
    q->app_ns = r->times.app_ns;
    q->keepalive_requests = conn->requests_served;
    const struct listener *l = listener_of(loop, conn);
    q->server_port = l ? l->server_port : 0;
    publish_string(q->server_name, sizeof(q->server_name), l ? l->server_name : "");
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

void serow_request_accounting_note_response(struct worker_loop *loop, int status, uint64_t body_bytes)
{
    loop->request.status = status;
    loop->request.body_bytes = body_bytes;
}

void serow_request_accounting_note_error_page(struct worker_loop *loop, int status,
                                             uint64_t body_bytes)
{
    serow_request_accounting_note_response(loop, status, body_bytes);
    struct serow_request *r = &loop->request;
    if (loop->access_log)
        serow_access_log_own_response_headers(&loop->access_log->format, r->response_headers,
                                              (struct access_log_span){r->id, r->id_len},
                                              loop->settings.request_id_header,
                                              loop->settings.request_id_header_len);
}

void serow_request_accounting_note_remote_user(struct worker_loop *loop, const char *user, size_t len)
{
    if (len > sizeof(loop->request.remote_user))
        len = sizeof(loop->request.remote_user);
    memcpy(loop->request.remote_user, user, len);
    loop->request.remote_user_len = len;
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

size_t serow_request_accounting_add_id_header(struct worker_loop *loop,
                                              struct response_header *headers, size_t count)
{
    struct serow_request *r = &loop->request;
    if (r->id_len) {
        const char *name = loop->settings.request_id_header;
        size_t len = loop->settings.request_id_header_len;
        size_t i = 0;
        while (i < count && !name_is(&headers[i], name, len))
            i++;
        if (i == count) /* the app's own, if it set one, goes out instead */
            headers[count++] = (struct response_header){name, len, r->id, r->id_len};
    }
    return count;
}

void serow_request_accounting_response_head(struct worker_loop *loop,
                                            const struct response_header *headers, size_t count)
{
    struct serow_request *r = &loop->request;
    r->times.head_ns = serow_request_clock_ns();
    if (loop->access_log) {
        const struct access_log_format *f = &loop->access_log->format;
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

int serow_request_accounting_env_names(struct worker_loop *loop, const struct access_log_name **names)
{
    if (loop->access_log == NULL)
        return 0;
    *names = loop->access_log->format.env;
    return loop->access_log->format.num_env;
}

void serow_request_accounting_note_env(struct worker_loop *loop, int index, const char *value,
                                       size_t len)
{
    loop->request.env_values[index] = keep_value(&loop->request, value, len);
}

/* ---- a request's end --------------------------------------------------------- */

/* --slow-request-log: one error log line for a request slower than the limit. */
static void log_slow_request(struct worker_loop *loop, struct connection *conn, int status,
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
                   loop->request.id_len ? " id " : "", (int)loop->request.id_len, loop->request.id);
}

/* Nanoseconds from one of a request's times to a later one; 0 when either
 * was not reached or the wall clock stepped back between them. */
static inline uint64_t ns_between(uint64_t from, uint64_t to)
{
    return from && to > from ? to - from : 0;
}

static void write_log_line(struct worker_loop *loop, struct connection *conn, int status,
                           uint64_t body_bytes, int served, const struct access_log_times *times,
                           struct access_log_span rejected_id)
{
    struct serow_request *r = &loop->request;
    const struct access_log_format *f = &loop->access_log->format;
    struct access_log_entry e;
    e.remote_addr = conn->remote_addr;
    e.status = status;
    e.body_bytes = body_bytes;
    e.times = *times;
    e.pid = loop->pid;
    e.keepalive_requests = conn->requests_served;
    const struct listener *l = listener_of(loop, conn);
    e.server_name = l ? l->server_name : NULL;
    e.server_port = l ? l->server_port : 0;
    e.request_id = !served ? rejected_id
                           : r->id_len ? (struct access_log_span){r->id, r->id_len}
                                       : (struct access_log_span){NULL, 0};
    if (served) {
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
                                              loop->settings.request_id_header,
                                              loop->settings.request_id_header_len);
        for (int i = 0; i < f->num_env; i++)
            e.env[i] = (struct access_log_span){NULL, 0};
    }
    serow_access_log_id_as_request_header(f, &e, loop->settings.request_id_header,
                                          loop->settings.request_id_header_len);
    serow_access_log_write(loop->access_log, &e);
}

/* The duration, the line if there is a log.  served: see the header;
 * rejected_id: the id of a request that was not (none: {NULL, 0}). */
static void account_end(struct worker_loop *loop, struct connection *conn, int status,
                        uint64_t body_bytes, int served, struct access_log_span rejected_id)
{
    uint64_t now = serow_request_clock_ns();
    /* A request rejected while its head arrived had no app and no head
     * given.  (Its times are its own: the loop may reject one while the
     * current request's response waits to be written.) */
    struct access_log_times t = served ? loop->request.times
                                       : (struct access_log_times){conn->arrived_ns ? conn->arrived_ns : now, 0, 0, 0};
    t.end_ns = now;
    if (loop->slot) {
        struct request_counters *c = &loop->slot->counters;
        serow_request_metrics_count(c, status, served ? ns_between(t.app_ns, now) : 0);
        if (served)
            serow_request_metrics_count_phases(c, ns_between(t.arrived_ns, t.app_ns),
                                               ns_between(t.app_ns, t.head_ns),
                                               ns_between(t.head_ns, now), t.head_ns != 0);
    }
    if (loop->settings.slow_request_us && served &&
        ns_between(t.arrived_ns, now) >= loop->settings.slow_request_us * 1000) {
        struct access_log_split split;
        serow_access_log_split(&t, &split);
        log_slow_request(loop, conn, status, &split);
    }
    if (loop->access_log)
        write_log_line(loop, conn, status, body_bytes, served, &t, rejected_id);
}

void serow_request_accounting_end(struct worker_loop *loop, struct connection *conn, int status,
                                  uint64_t body_bytes)
{
    account_end(loop, conn, status, body_bytes, 1, (struct access_log_span){NULL, 0});
}

void serow_request_accounting_rejected(struct worker_loop *loop, struct connection *conn,
                                       int status, uint64_t body_bytes, const char *id,
                                       size_t id_len)
{
    account_end(loop, conn, status, body_bytes, 0,
                (struct access_log_span){id_len ? id : NULL, id_len});
}
