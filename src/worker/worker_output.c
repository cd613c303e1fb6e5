/*
 * worker_output.c - what a worker writes to a client: a request's
 * response bytes (writev, sendfile, through the connection's transport:
 * connection/transport.h), waiting for a slow reader up to --write-timeout,
 * and the error pages sent without waiting.
 *
 * Owns: the write side of a connection.  What the bytes say is
 * response_writer.c's (heads, framing, error pages, the Date header) and the
 * PSGI response's (psgi_response.c); this file only moves them.  It may not
 * touch the loop's tables, timers or slots: a write that fails is reported
 * to the caller, which decides what becomes of the connection.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>

#include "http/response_writer.h"
#include "connection/transport.h"

int serow_wait_for(int fd, short events, double timeout)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    double deadline = serow_now_seconds() + timeout;
    for (;;) {
        double left = deadline - serow_now_seconds();
        if (left <= 0)
            return 0;
        int r = poll(&pfd, 1, (int)(left * 1000.0) + 1);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

int serow_worker_loop_client_hung_up(struct serow_request *r, double timeout)
{
    if (r->conn == NULL)
        return 1;
    if (timeout <= 0) {
        /* (serow_wait_for would not look at all) */
        struct pollfd pfd = {.fd = r->conn->fd, .events = POLLRDHUP};
        return poll(&pfd, 1, 0) > 0;
    }
    return serow_wait_for(r->conn->fd, POLLRDHUP, timeout);
}

/* Bytes of the final response are about to go out: no error page can follow
 * them.  While the app runs under --request-timeout the slot learns it too,
 * before the bytes go (the master answers the client of a worker it kills
 * only if none went: request_timeout.c).  (A 1xx's bytes too, while they
 * go: serow_worker_loop_write_interim undoes it after.)  Inline here, for
 * every write; a call for those who write themselves. */
static inline void response_starts(struct serow_request *r)
{
    r->response_started = 1;
    if (r->worker->app_timer.running != NULL)
        serow_app_timer_note_answer(r);
}

void serow_worker_loop_response_starts(struct serow_request *r)
{
    response_starts(r);
}

void serow_worker_loop_socket_lent(struct serow_request *r)
{
    if (r->worker->app_timer.running != NULL)
        serow_app_timer_note_answer(r);
}

/* After a write or sendfile that failed: whether to try again (a signal, or
 * a full socket that drains within --write-timeout). */
static int may_write_again(const struct serow_request *r)
{
    return errno == EINTR ||
           (errno == EAGAIN && serow_wait_for(r->conn->fd, POLLOUT, r->worker->settings.write_timeout));
}

int serow_worker_loop_write(struct serow_request *r, struct iovec *iov, int iovcnt)
{
    struct connection *conn = r->conn;
    if (conn == NULL)
        return -1;
    response_starts(r);
    while (iovcnt > 0) {
        int batch = iovcnt > IOV_MAX ? IOV_MAX : iovcnt;
        ssize_t n = serow_transport_writev(&conn->carried, conn->fd, iov, batch);
        if (n < 0) {
            if (may_write_again(r))
                continue;
            return -1;
        }
        while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

int serow_worker_loop_write_interim(struct serow_request *r, struct iovec *iov, int iovcnt)
{
    int result = serow_worker_loop_write(r, iov, iovcnt);
    r->response_started = 0;
    if (result == 0 && r->worker->app_timer.running != NULL)
        serow_app_timer_note_interim_sent(r);
    return result;
}

int serow_worker_loop_sendfile(struct serow_request *r, int file_fd, uint64_t offset,
                               uint64_t len)
{
    struct connection *conn = r->conn;
    if (conn == NULL)
        return -1;
    response_starts(r);
    off_t off = (off_t)offset;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = serow_transport_sendfile(&conn->carried, conn->fd, file_fd, &off, chunk);
        if (n > 0) {
            len -= (uint64_t)n;
            continue;
        }
        if (n == 0)
            return -2; /* the file is shorter than it said */
        if (may_write_again(r))
            continue;
        return -1;
    }
    return 0;
}

/* Without waiting: a client that does not read gets nothing more.  A
 * response to HEAD keeps the Content-Length but sends no content (RFC 9110
 * 9.3.2). */
size_t serow_send_error_response(struct connection *conn, int status,
                                 const struct http_request_head *head,
                                 const struct response_header *id_header)
{
    char response[512];
    size_t body = 0;
    size_t n = serow_format_error_response(response, sizeof(response), status, serow_is_head_request(head),
                                           id_header, &body);
    serow_transport_send_now(&conn->carried, conn->fd, response, n);
    return body;
}
