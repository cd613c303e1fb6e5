/*
 * worker_intake.c - how requests come in: accepting connections, adopting
 * the ones the holder or another worker passes, reading what clients send,
 * and finding complete request heads without parsing the same bytes over
 * and over.  A head that is complete goes to the ready queue; a malformed
 * one, or one over the limits, is answered here with an error page and a
 * lingering close, and Perl never sees it.
 *
 * Owns: the listen sockets' accepting, a connection's head-reading state
 * (line tracking, where to scan from) and the header timeout's start.  The
 * parse itself is http_parser.c's; a body read ahead is
 * worker_request_body.c's; a connection that turns out idle is parked by
 * worker_parking.c.  It may not start serving a request: that is
 * worker_loop.c's, which takes connections off the ready queue.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection/fd_passing.h"
#include "connection/tls_transport.h"
#include "log/log.h"
#include "request/request_accounting.h"

/* The most a request head can take in the buffer before a limit answers it. */
static size_t max_head_bytes(const struct worker_loop *loop)
{
    return loop->settings.limits.max_request_line + loop->settings.limits.max_header_size + 8;
}

/* Parses a head that is not (or not yet) served, into the loop's header
 * array: to apply the limits early, or to learn its method for an error
 * page (a HEAD gets no body). */
static int parse_probe(struct worker_loop *loop, const struct connection *conn,
                       struct http_request_head *probe)
{
    probe->headers = loop->probe_headers;
    probe->headers_capacity = loop->headers_capacity;
    return serow_parse_request_head(conn->buffer, conn->buffer_len, probe, &loop->settings.limits);
}

/* Answers status with the server's error page and closes the connection.
 * head: the buffer as parsed for the answer (its method, and the field
 * lines the parser accepted, where a request id may be). */
void serow_reject_connection(struct worker_loop *loop, struct connection *conn, int status,
                             const struct http_request_head *head)
{
    char id[REQUEST_ID_MAX];
    size_t id_len = serow_request_accounting_rejected_id(loop, head, id);
    struct response_header h;
    size_t body = serow_send_error_response(conn, status, head,
                                            serow_request_accounting_id_header(loop, id, id_len, &h));
    serow_request_accounting_rejected(loop, conn, status, body, id, id_len);
    serow_close_lingering(loop, conn);
}

/* 408 for a head or a read-ahead body that did not arrive in time. */
void serow_reject_timed_out(struct worker_loop *loop, struct connection *conn)
{
    struct http_request_head probe;
    parse_probe(loop, conn, &probe);
    serow_reject_connection(loop, conn, 408, &probe);
}

/*
 * Follows the line ends in the buffer from offset from up to offset to: where
 * the line still arriving begins, and whether the request line has ended (any
 * line but an empty one: a malformed line is rejected by the parse that its
 * line end causes).  Returns whether a line ended.
 */
static int track_line_ends(struct connection *conn, size_t from, size_t to)
{
    int ended = 0;
    const char *lf;
    while (from < to && (lf = memchr(conn->buffer + from, '\n', to - from)) != NULL) {
        size_t end = (size_t)(lf - conn->buffer);
        if (!(end == conn->line_start + 1 && conn->buffer[conn->line_start] == '\r'))
            conn->request_line_ended = 1;
        conn->line_start = end + 1;
        from = end + 1;
        ended = 1;
    }
    return ended;
}

/*
 * Whether the line still arriving is already longer than its limit allows
 * (the request line its own, a field line the whole header section's): then
 * a parse answers 414 or 431 now instead of waiting for a line end that a
 * client may never send.  The +1 leaves room for a CR whose LF is on its way.
 */
static int open_line_over_limit(const struct worker_loop *loop, const struct connection *conn)
{
    size_t limit = conn->request_line_ended ? loop->settings.limits.max_header_size
                                            : loop->settings.limits.max_request_line;
    return conn->buffer_len - conn->line_start > limit + 1;
}

/* Whether the whole buffer is empty lines (CRLF pairs). */
static int only_empty_lines(const struct connection *conn)
{
    if (conn->buffer_len == 0 || conn->buffer_len % 2)
        return 0;
    for (size_t i = 0; i < conn->buffer_len; i += 2)
        if (conn->buffer[i] != '\r' || conn->buffer[i + 1] != '\n')
            return 0;
    return 1;
}

/*
 * Looks at the buffered bytes of a connection that is receiving a head.
 * A head is parsed only when it looks complete, a new line has ended (to
 * reject garbage early), the line still arriving has outgrown its limit or
 * the buffer is full (to apply the limits): a client sending one byte at a
 * time cannot make us parse the same bytes over and over for each byte.
 * new_bytes_from: where the bytes not looked at yet begin (0: look at all).
 */
void serow_examine_buffered_head(struct worker_loop *loop, struct connection *conn,
                                 size_t new_bytes_from)
{
    /* RFC 9112 2.2: empty lines before a request line are ignored.  Some
     * clients end a POST body with a stray CRLF: dropped here, once between
     * two requests, it leaves the connection idle (closed quietly at the
     * keep-alive timeout) instead of a head being read (408 at the header
     * timeout).  Empty lines before a request are left to the parser.  (Not
     * while stopping: parking would hand the connection over and free it
     * under our callers.) */
    if (conn->requests_served > 0 && !conn->empty_lines_dropped && !loop->stopping &&
        only_empty_lines(conn)) {
        conn->empty_lines_dropped = 1;
        serow_connection_consume(conn, conn->buffer_len);
        serow_park_idle_connection(loop, conn);
        return;
    }
    size_t scan = conn->head_scan_from > 3 ? conn->head_scan_from - 3 : 0;
    int complete = 0, new_line = 0;
    /* Where the head ends if it is complete; lines are followed no further:
     * the bytes after it are a body read with the head (a read takes up to
     * the head's limits, 72 KiB by default), and looking for line ends in
     * them cost a POST a scan of its whole first read. */
    size_t head_end = conn->buffer_len;
    for (size_t i = scan; i + 3 < conn->buffer_len; i++) {
        if (conn->buffer[i] == '\r' && conn->buffer[i + 1] == '\n' &&
            conn->buffer[i + 2] == '\r' && conn->buffer[i + 3] == '\n') {
            complete = 1;
            head_end = i + 4;
            break;
        }
    }
    new_line = track_line_ends(conn, new_bytes_from, head_end);
    conn->head_scan_from = conn->buffer_len;

    if (complete) {
        serow_ready_push(loop, conn);
        return;
    }
    if (new_line || new_bytes_from == 0 || open_line_over_limit(loop, conn) ||
        conn->buffer_len >= max_head_bytes(loop)) {
        struct http_request_head probe;
        int r = parse_probe(loop, conn, &probe);
        if (r == HTTP_PARSE_ERROR) {
            serow_reject_connection(loop, conn, probe.error_status, &probe);
        } else if (r > 0) {
            serow_ready_push(loop, conn); /* e.g. a head ended by a bare "\r\n" after empty lines */
        } else if (conn->buffer_len >= max_head_bytes(loop)) {
            serow_reject_connection(loop, conn, 431, &probe);
        }
    }
}

/*
 * recv for the first bytes of a request head: the kernel says when they
 * arrived (SO_TIMESTAMPNS, set on the listen sockets and so on every
 * connection accepted from them; on TCP the arrival of the last segment
 * this read takes bytes of: transport.h's serow_recv_stamped), which
 * is where the request's time starts: what it waited in the listen backlog,
 * in the holder, or parked in a busy worker counts as its queue time.
 * Without a stamp (a Unix socket) the time of the read stands in.
 */
static inline __attribute__((always_inline)) ssize_t recv_head_start(struct connection *conn,
                                                                      char *into, size_t room,
                                                                      int flags)
{
    uint64_t stamp;
    ssize_t n = serow_transport_recv_stamped(&conn->carried, conn->fd, into, room, flags, &stamp);
    if (n > 0)
        conn->arrived_ns = stamp ? stamp : serow_request_clock_ns();
    return n;
}

/* TLS: a handshake held up by a write (the library's flight, more than the
 * socket took) waits for the socket to drain, not for input: the client
 * sends nothing more until it has the whole flight.  Watched for that alone:
 * the library reads nothing until its write is done, so input left waiting
 * (a TLS 1.3 client's ChangeCipherSpec) would wake the worker over and over.
 * Otherwise, and once the handshake is done, for input again. */
static void watch_handshake(struct worker_loop *loop, struct connection *conn)
{
    int writing = serow_transport_handshake_writing(&conn->carried, conn->fd);
    if (writing == conn->watching_writes)
        return;
    struct epoll_event ev = {.events = writing ? EPOLLOUT : SEROW_CONNECTION_EVENTS,
                             .data.u64 = (uint64_t)conn->fd};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, conn->fd, &ev) == 0)
        conn->watching_writes = writing;
}

/* Reads what the socket has (through its transport: transport.h).  Returns
 * -1 when the connection was closed.  Woken by epoll, a read shorter than
 * the room it had says that the socket is most likely empty: epoll says when
 * it is not.  until_empty: reads on up to EAGAIN, for a caller that will not
 * wait to be woken (a short read says nothing: a TLS record, or the test
 * transport's). */
static inline __attribute__((always_inline)) int read_connection(struct worker_loop *loop,
                                                                 struct connection *conn,
                                                                 int until_empty)
{
    int flags = until_empty ? MSG_DONTWAIT : 0;
    for (;;) {
        /* (a body read ahead with a byte to spare: the NUL after it when
         * psgi.input reads it where it lies, serow_worker_loop_lend_body) */
        size_t max = conn->body_wanted + 1 > max_head_bytes(loop) ? conn->body_wanted + 1
                                                                  : max_head_bytes(loop);
        size_t room = serow_connection_reserve(conn, max);
        if (room == 0) {
            if (conn->body_preread)
                serow_examine_buffered_body(loop, conn); /* as much as is read ahead */
            return 0; /* else full: serow_examine_buffered_head has answered it */
        }
        ssize_t n = conn->buffer_len == 0 && !conn->body_preread
                        ? recv_head_start(conn, conn->buffer, room, flags)
                        : serow_transport_recv(&conn->carried, conn->fd,
                                               conn->buffer + conn->buffer_len, room, flags);
        if (__builtin_expect(conn->watching_writes, 0) ||
            (n < 0 && !SEROW_TRANSPORT_IS_PLAIN(&conn->carried)))
            watch_handshake(loop, conn); /* (a TLS handshake: which way it waits) */
        if (n > 0 && conn->body_preread) {
            conn->buffer_len += (size_t)n;
            serow_examine_buffered_body(loop, conn);
            if (conn->in_ready_queue || ((size_t)n < room && !until_empty))
                return 0;
            continue;
        }
        if (n > 0) {
            size_t before = conn->buffer_len;
            conn->buffer_len += (size_t)n;
            if (conn->state == CONNECTION_IDLE) {
                conn->state = CONNECTION_READING_HEAD;
                serow_timer_append(loop, conn, TIMER_READING_HEAD,
                                   serow_now_seconds() + loop->settings.header_timeout);
            }
            serow_examine_buffered_head(loop, conn, before);
            if (conn->state == CONNECTION_LINGERING || conn->state == CONNECTION_IDLE ||
                conn->in_ready_queue)
                return 0; /* (parked: not ours to read until claimed again) */
            if ((size_t)n < room && !until_empty)
                return 0; /* the socket is most likely empty: let epoll say */
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            serow_close_connection(loop, conn);
            return -1;
        }
        if (errno == EINTR && until_empty)
            continue;
        return 0;
    }
}

int serow_read_connection(struct worker_loop *loop, struct connection *conn)
{
    return read_connection(loop, conn, 0);
}

int serow_read_all_sent(struct worker_loop *loop, struct connection *conn)
{
    return read_connection(loop, conn, 1);
}

/* Starts watching a connection that is new to this worker, read and
 * written as carried says.  Returns it, or NULL when it could not be
 * tracked (then it is closed). */
static struct connection *adopt_connection(struct worker_loop *loop, int fd,
                                           const struct sockaddr *addr, socklen_t addr_len,
                                           int listener_index,
                                           const struct serow_connection_state *carried)
{
    struct listener *l = &loop->listeners[listener_index];
    struct connection *conn = serow_connection_new(fd, l->is_unix ? NULL : addr, addr_len, l->is_unix);
    if (conn == NULL || serow_track_connection(loop, conn) != 0) {
        /* (a client loses its connection here: say so, it should not happen) */
        serow_log_error("worker: a connection could not be watched and is closed (%s)",
                        conn ? strerror(errno) : "out of memory");
        if (conn)
            serow_connection_free(conn);
        close(fd);
        if (loop->shared)
            atomic_fetch_sub(&loop->shared->open_connections, 1);
        return NULL;
    }
    conn->listener_index = listener_index;
    serow_connection_state_copy(&conn->carried, carried);
    serow_slot_assign(loop, conn);
    serow_timer_append(loop, conn, TIMER_READING_HEAD,
                       serow_now_seconds() + loop->settings.header_timeout);
    return conn;
}

/*
 * --max-queue-wait in the listen backlog.  A connection waits there, with its
 * request, until a worker is free to accept it, and nothing bounds that wait
 * but this: once the first read has found request bytes, the kernel says how
 * long ago the last of them arrived (TCP_INFO's tcpi_last_data_recv, in ms:
 * since the last data segment came in; the request is counted from there, so
 * a client still sending is never judged on its first bytes).  Longer than
 * the limit: the request is answered 503 (Retry-After, Connection: close),
 * as the holder answers those that waited in its queue, and logged.
 *
 * Only for a connection just accepted, and only once: a kept-alive one that
 * comes back from the holder is judged there, by how long it was ready.  A
 * client that connected and sent nothing yet has no request that waited
 * (buffer empty: not judged); a Unix socket has no TCP_INFO: its backlog is
 * not bounded.  One getsockopt per accepted connection, with the option only.
 */
static void shed_if_waited_in_backlog(struct worker_loop *loop, struct connection *conn)
{
    if (conn->buffer_len == 0 || conn->is_unix || conn->state == CONNECTION_LINGERING)
        return;
    struct tcp_info info;
    socklen_t len = sizeof(info);
    if (getsockopt(conn->fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_last_data_recv) + sizeof(info.tcpi_last_data_recv) ||
        info.tcpi_last_data_recv < loop->settings.max_queue_wait_ms)
        return;
    struct http_request_head probe;
    parse_probe(loop, conn, &probe); /* (for a HEAD: no body) */
    if (loop->shared)
        atomic_fetch_add(&loop->shared->requests_shed, 1);
    serow_log_debug("worker %d: a request waited %u ms in the listen backlog, longer than "
                    "--max-queue-wait %llu ms: answered 503", (int)getpid(),
                    (unsigned)info.tcpi_last_data_recv,
                    (unsigned long long)loop->settings.max_queue_wait_ms);
    serow_reject_connection(loop, conn, 503, &probe);
}

/* Accepts one connection.  Returns 0 when there was none to take. */
int serow_accept_connection(struct worker_loop *loop, int listener_index)
{
    struct listener *l = &loop->listeners[listener_index];
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof(addr);
    int fd = accept4(l->fd, (struct sockaddr *)&addr, &addr_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return 0; /* EAGAIN: another worker took it; EMFILE etc.: try later */
    if (loop->shared)
        atomic_fetch_add(&loop->shared->open_connections, 1);
    if (loop->slot)
        serow_request_metrics_count_accept(&loop->slot->counters);
    /* (a plain connection's state is its transport alone: the rest, 220
     * bytes, is neither set nor copied) */
    struct serow_connection_state carried;
    carried.transport = l->transport;
    if (l->transport == SEROW_TRANSPORT_TLS)
        serow_tls_accepted(&carried); /* (its handshake: the first reads, timed by the header timer) */
    struct connection *conn = adopt_connection(loop, fd, (struct sockaddr *)&addr, addr_len,
                                               listener_index, &carried);
    /* TCP_DEFER_ACCEPT usually means the request is already here. */
    if (conn && serow_read_connection(loop, conn) == 0 && loop->settings.max_queue_wait_ms)
        shed_if_waited_in_backlog(loop, conn);
    return 1;
}

/* Starts watching a connection another process passed or gave up, with the
 * count of requests it has served.  NULL when it could not be tracked. */
struct connection *serow_adopt_passed_connection(struct worker_loop *loop, int fd,
                                                 const struct passed_connection *info)
{
    uint32_t listener = info->listener_index < (uint32_t)loop->num_listeners ? info->listener_index : 0;
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof(addr);
    const struct sockaddr *peer = (struct sockaddr *)&addr;
    if (getpeername(fd, (struct sockaddr *)&addr, &addr_len) != 0)
        addr_len = 0;
    else if (addr.ss_family == AF_UNIX && info->peer.len && info->peer.len <= sizeof(info->peer.addr)) {
        peer = &info->peer.addr.sa; /* (the holder's socket pair: the client's address it gave) */
        addr_len = info->peer.len;
    }
    struct connection *conn = adopt_connection(loop, fd, addr_len ? peer : NULL,
                                               addr_len, (int)listener, &info->carried);
    if (conn)
        conn->requests_served = info->requests_served;
    return conn;
}

/* Takes connections with a request waiting from the holder. */
void serow_receive_ready_connection(struct worker_loop *loop)
{
    int fd;
    struct passed_connection info;
    if (serow_receive_connections(loop->ready_channel, &fd, &info, 1) != 1)
        return; /* another worker was quicker */
    atomic_fetch_sub(&loop->shared->queued_connections, 1);
    struct connection *conn = serow_adopt_passed_connection(loop, fd, &info);
    if (conn)
        serow_read_connection(loop, conn);
}
