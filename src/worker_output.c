/*
 * worker_output.c - what a worker writes to a client: the current
 * response's bytes (writev, sendfile, through the connection's transport:
 * transport.h), waiting for a slow reader up to --write-timeout, and the
 * error pages sent without waiting.
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
#include "worker_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>

#include "response_writer.h"
#include "transport.h"

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

int serow_client_hung_up(struct worker_loop *loop, double timeout)
{
    return loop->request.conn == NULL || serow_wait_for(loop->request.conn->fd, POLLRDHUP, timeout);
}

int serow_worker_loop_write(struct worker_loop *loop, struct iovec *iov, int iovcnt)
{
    struct connection *conn = loop->request.conn;
    if (conn == NULL)
        return -1;
    serow_response_starts(loop);
    while (iovcnt > 0) {
        int batch = iovcnt > IOV_MAX ? IOV_MAX : iovcnt;
        ssize_t n = serow_transport_writev(&conn->carried, conn->fd, iov, batch);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN && serow_wait_for(conn->fd, POLLOUT, loop->settings.write_timeout))
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

int serow_worker_loop_write_interim(struct worker_loop *loop, struct iovec *iov, int iovcnt)
{
    int r = serow_worker_loop_write(loop, iov, iovcnt);
    loop->request.response_started = 0;
    if (r == 0 && loop->app_timer.running)
        serow_app_timer_note_interim_sent(loop);
    return r;
}

int serow_worker_loop_sendfile(struct worker_loop *loop, int file_fd, uint64_t offset, uint64_t len)
{
    struct connection *conn = loop->request.conn;
    if (conn == NULL)
        return -1;
    serow_response_starts(loop);
    off_t off = (off_t)offset;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = serow_transport_sendfile(&conn->carried, conn->fd, file_fd, &off, chunk);
        if (n > 0) {
            len -= (uint64_t)n;
            continue;
        }
        if (n == 0)
            return -1; /* the file is shorter than it said */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN && serow_wait_for(conn->fd, POLLOUT, loop->settings.write_timeout))
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
