/*
 * worker_request_body.c - request bodies: the small ones read ahead in the
 * event loop before the app runs, the rest read while the request is served
 * (Content-Length or chunked, the chunked coding removed here), and the
 * "100 Continue" that a client waiting to send its body is owed.
 *
 * Owns: the body state of a request being served (its body_remaining,
 * body_received, body_started, body_done, continue_sent, the chunked
 * decoder, in struct serow_request), the read-ahead state of a connection (body_preread and its
 * scan), the read timeout of a body and the minimum body rate; a body
 * lent in the connection's buffer instead of read (serow_worker_loop_lend_body).  It reads
 * only the connection it is given; it may not close connections or answer
 * with error pages: it returns the status (400, 408, 413) for its caller to
 * answer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http/response_writer.h"

/* A body up to this size (Content-Length, or chunked with its framing) is read
 * in the event loop before the app sees the request: a client that sends its
 * body slowly then holds a connection, not a worker (slow-body attacks send
 * small bodies byte by byte).  It is also what such a connection may hold in
 * memory.  Larger bodies are read while the request is served (spooled to a
 * temp file past --body-memory-limit), under --min-body-rate. */
#define PREREAD_BODY_MAX (64 * 1024)

/*
 * The one place "100 Continue" is sent (its bytes are response_writer.c's).
 * A client that sent "Expect: 100-continue" waits for it before its body.
 * In the event loop (serving NULL) the worker waits for no one client: the
 * line goes out only if the socket takes it at once (an empty socket buffer
 * takes 25 bytes; else the client gave up).  While the request is served, it is the
 * request's own write, and may wait up to --write-timeout like the
 * response; it is interim, so the response has still not started.
 */
static void send_continue(struct connection *conn, struct serow_request *serving)
{
    size_t len;
    const char *continue_line = serow_continue_response(&len);
    if (serving == NULL) {
        serow_transport_send_now(&conn->carried, conn->fd, continue_line, len);
        return;
    }
    struct iovec iov = {(void *)continue_line, len};
    serow_worker_loop_write_interim(serving, &iov, 1);
}

/* A decoder for a request's chunked body, with the body's limits: its
 * size (--max-body-size, 413) and its chunk extensions' bytes
 * (--max-chunk-extensions, 400). */
static void start_request_decoder(const struct worker_loop *loop, struct chunked_decoder *decoder)
{
    serow_chunked_decoder_init(decoder);
    decoder->max_body = loop->settings.max_body_size;
    decoder->max_extension_bytes = loop->settings.max_chunk_extensions;
}

/* ---- read ahead, in the event loop -------------------------------------- */

/* Whether a body read before serving is all here, or as much of it as is
 * read ahead (then the app reads the rest).  A chunked body is decoded into
 * scratch space only to find its end; a malformed one, or one whose size
 * lines announce more than --max-body-size, counts as complete: the worker's
 * read of it answers 400 or 413, as without the read-ahead. */
static int preread_body_complete(struct connection *conn)
{
    if (conn->body_preread == CONNECTION_PREREAD_CHUNKED) {
        char scratch[4096];
        while (conn->body_scanned < conn->buffer_len) {
            size_t len = conn->buffer_len - conn->body_scanned, consumed = 0;
            if (len > sizeof(scratch))
                len = sizeof(scratch);
            memcpy(scratch, conn->buffer + conn->body_scanned, len);
            int r = serow_decode_chunked(&conn->body_scan, scratch, &len, &consumed);
            conn->body_scanned += consumed;
            if (r != CHUNKED_NEED_MORE)
                return 1;
        }
    }
    return conn->buffer_len >= conn->body_wanted;
}

/* A connection whose small body is being read before it is served: more of
 * it arrived.  Complete, it is ready; else its read timeout starts again. */
void serow_examine_buffered_body(struct worker_loop *loop, struct connection *conn)
{
    if (preread_body_complete(conn)) {
        serow_timer_remove(loop, conn);
        serow_ready_push(loop, conn);
    } else
        serow_timer_append(loop, conn, TIMER_READING_BODY,
                           serow_now_seconds() + loop->settings.read_timeout);
}

/*
 * A request whose body is small (Content-Length up to PREREAD_BODY_MAX) or
 * chunked, and not all here yet, is not served yet: its connection goes back
 * to the event loop until the body has arrived, or PREREAD_BODY_MAX bytes of
 * a chunked one.  A client that asked for 100 Continue gets it now, as it
 * would once the worker began to read the body (which it reads whole before
 * the app runs).  Returns 1 when the connection waits.
 */
int serow_wait_for_small_body(struct worker_loop *loop, struct connection *conn,
                              const struct http_request_head *head, size_t head_len)
{
    if (conn->body_preread) {
        /* back from the event loop with its body */
        conn->body_preread = CONNECTION_PREREAD_NONE;
        return 0;
    }
    if (head->framing == HTTP_BODY_LENGTH && head->content_length <= PREREAD_BODY_MAX) {
        conn->body_preread = CONNECTION_PREREAD_LENGTH;
        conn->body_wanted = head_len + (size_t)head->content_length;
    } else if (head->framing == HTTP_BODY_CHUNKED) {
        conn->body_preread = CONNECTION_PREREAD_CHUNKED;
        /* encoded bytes, no more than --max-body-size of them: the app reads
         * the rest, and answers 413 once the decoded body passes the limit */
        uint64_t ahead = loop->settings.max_body_size &&
                         loop->settings.max_body_size < PREREAD_BODY_MAX
                             ? loop->settings.max_body_size
                             : PREREAD_BODY_MAX;
        conn->body_wanted = head_len + (size_t)ahead;
        conn->body_scanned = head_len;
        start_request_decoder(loop, &conn->body_scan);
    } else {
        return 0;
    }
    if (preread_body_complete(conn)) {
        conn->body_preread = CONNECTION_PREREAD_NONE;
        return 0;
    }
    if (head->expect_continue && conn->buffer_len == head_len)
        send_continue(conn, NULL);
    serow_timer_append(loop, conn, TIMER_READING_BODY,
                       serow_now_seconds() + loop->settings.read_timeout);
    return 1;
}

/* ---- read while serving ------------------------------------------------- */

void serow_body_start(struct serow_request *r)
{
    r->body_remaining = r->head.framing == HTTP_BODY_LENGTH ? r->head.content_length : 0;
    r->body_received = 0;
    r->body_started = serow_now_seconds();
    r->body_done = r->head.framing == HTTP_BODY_NONE ||
                      (r->head.framing == HTTP_BODY_LENGTH && r->body_remaining == 0);
    r->continue_sent = 0;
    r->response_started = 0;
    if (r->head.framing == HTTP_BODY_CHUNKED)
        start_request_decoder(r->worker, &r->chunked);
}

static void send_continue_if_expected(struct serow_request *r)
{
    struct connection *conn = r->conn;
    /* Only when the body has not started arriving: then the client waits for us. */
    if (r->head.expect_continue && !r->continue_sent && !r->response_started &&
        conn->buffer_len <= r->head_len)
        send_continue(conn, r);
    r->continue_sent = 1;
}

/*
 * How long read_more_body may wait for the next bytes.  --read-timeout bounds
 * each wait, but a client sending a byte just before it runs out would hold
 * the worker for ever; so the body must also average --min-body-rate, after
 * read_timeout of grace (as Apache's mod_reqtimeout MinRate).  0: out of time.
 */
static double body_wait_left(const struct serow_request *r)
{
    double wait = r->worker->settings.read_timeout;
    if (r->worker->settings.min_body_rate > 0) {
        double deadline = r->body_started + r->worker->settings.read_timeout +
                          (double)r->body_received / r->worker->settings.min_body_rate;
        double left = deadline - serow_now_seconds();
        if (left < wait)
            wait = left > 0 ? left : 0;
    }
    return wait;
}

/* Reads more of r's connection's input into its buffer (after the
 * head).  0 ok, 408 on timeout, -1 when the client is gone. */
static int read_more_body(struct serow_request *r)
{
    struct connection *conn = r->conn;
    serow_worker_loop_send_held(r); /* (no write in flight while the transport reads) */
    for (;;) {
        size_t room = serow_connection_reserve(conn, r->head_len + CONNECTION_READ_SIZE);
        if (room == 0)
            return 0;
        ssize_t n = serow_transport_recv(&conn->carried, conn->fd, conn->buffer + conn->buffer_len,
                                         room, 0);
        if (n > 0) {
            conn->buffer_len += (size_t)n;
            return 0;
        }
        if (n == 0)
            return -1;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -1;
        double wait = body_wait_left(r);
        if (wait <= 0 || !serow_wait_for(conn->fd, POLLIN, wait))
            return 408;
    }
}

int serow_worker_loop_read_body(struct serow_request *r, char *out, size_t cap, size_t *got)
{
    struct connection *conn = r->conn;
    *got = 0;
    if (conn == NULL)
        return -1;
    if (r->body_done)
        return 0;
    send_continue_if_expected(r);

    for (;;) {
        /* body bytes buffered after the head */
        size_t avail = conn->buffer_len - r->head_len;
        if (avail > 0) {
            char *body = conn->buffer + r->head_len;
            if (r->head.framing == HTTP_BODY_LENGTH) {
                size_t take = avail < cap ? avail : cap;
                if ((uint64_t)take > r->body_remaining)
                    take = (size_t)r->body_remaining;
                memcpy(out, body, take);
                /* keep the head, drop the body bytes just handed out */
                memmove(body, body + take, avail - take);
                conn->buffer_len -= take;
                r->body_remaining -= take;
                r->body_received += take;
                if (r->body_remaining == 0)
                    r->body_done = 1;
                *got = take;
                return 0;
            } else {
                /* decoded data is never longer than its input: give the
                 * decoder at most cap bytes and all it decodes fits in out */
                size_t len = avail < cap ? avail : cap, consumed = 0;
                int decoded = serow_decode_chunked(&r->chunked, body, &len, &consumed);
                if (decoded == CHUNKED_ERROR)
                    return 400;
                /* as soon as the size line says so, like a Content-Length
                 * over the limit (and so the body never passes it) */
                if (decoded == CHUNKED_TOO_LARGE)
                    return 413;
                size_t take = len;
                memcpy(out, body, take);
                memmove(body, body + consumed, avail - consumed);
                conn->buffer_len -= consumed;
                r->body_received += take;
                if (decoded == CHUNKED_DONE)
                    r->body_done = 1;
                if (take > 0 || r->body_done) {
                    *got = take;
                    return 0;
                }
            }
        }
        int status = read_more_body(r);
        if (status != 0)
            return status;
    }
}

/*
 * A body all in the connection's buffer lent where it lies instead of
 * copied out (psgi.input's handle reads it there: src/psgi/psgi_input.c): the
 * buffer, head and body, goes to the caller, and the connection goes on with
 * another holding the head and what followed the body (a pipelined request),
 * as serow_worker_loop_read_body would have left it after reading the body
 * whole.  The head is copied, not moved: the request's parsed head points
 * into the buffer lent, which must outlive the request.
 */
char *serow_worker_loop_lend_body(struct serow_request *r, char **buffer, size_t *size)
{
    struct connection *conn = r->conn;
    size_t head_len = r->head_len;
    size_t end = head_len + (size_t)r->body_remaining;
    if (end >= conn->buffer_size)
        return NULL; /* no byte for the NUL after the body */
    char *lent = serow_connection_hand_out_buffer(conn, head_len, end, size);
    if (lent == NULL)
        return NULL;
    lent[end] = '\0'; /* (what followed the body is in the connection's new buffer) */
    r->body_received = r->body_remaining;
    r->body_remaining = 0;
    r->body_done = 1;
    *buffer = lent;
    return lent + head_len;
}

int serow_worker_loop_body_buffered(const struct serow_request *r, size_t max)
{
    const struct connection *conn = r->conn;
    return conn != NULL && r->head.framing == HTTP_BODY_LENGTH && !r->body_done &&
           r->head.content_length <= max && r->body_received == 0 &&
           conn->buffer_len - r->head_len >= r->head.content_length;
}

size_t serow_worker_loop_body_read_size(const struct serow_request *r, size_t max)
{
    if (r->conn && r->head.framing == HTTP_BODY_LENGTH && r->body_remaining < max)
        return (size_t)r->body_remaining;
    return max;
}
