/*
 * psgi_tls_socket.c - psgix.io on a TLS connection.
 *
 * A plain connection's psgix.io is a handle on a duplicate of its socket
 * (psgi_input.c); a TLS connection's socket carries records, so its
 * psgix.io is a handle tied (lib/Serow/TLSSocket.pm) to the calls here,
 * which read the plaintext the client sent and seal what the app writes,
 * through the connection's TLS transport.  The handle is opened on a
 * duplicate of the socket too, so that fileno, select, poll and an event
 * loop's watchers see the socket; what they cannot see is plaintext opened
 * and not read yet, which pending says (as IO::Socket::SSL's does).
 *
 * Owns: struct serow_tls_socket, and which state and descriptor its
 * operations use.  The rule that keeps one writer per state: while its
 * request lives the connection is the worker's, and the handle uses the
 * worker's state and descriptor (so that what the app writes and the
 * server's response are one sequence of records); when the request ends
 * with the app keeping the handle, the connection becomes the handle's
 * (its state copied, what the transport keeps beside it moved to the
 * handle's own duplicate) and the worker forgets it, sending nothing;
 * otherwise the handle no longer reaches it, and its calls fail (EBADF).
 * The bytes the worker read past the request's head are given back to the
 * transport before the handle's first use of the connection, so that they
 * are read first (a WebSocket's first frames may come with its upgrade).
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_tls_socket.h"

#include "XSUB.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connection/connection.h"
#include "connection/tls_transport.h"
#include "psgi/psgi_input.h"
#include "request/request.h"

struct serow_tls_socket {
    struct serow_request *req;        /* while its request lives: the worker's connection */
    struct serow_connection_state cs; /* the handle's own, once the connection is */
    int fd;                           /* the handle's own duplicate, once it is; else -1 */
    int app_fd;                       /* the Perl handle's own duplicate: its fileno */
    int closed;                       /* close was called */
};

static SV *opener;

void serow_tls_socket_set_opener(pTHX_ SV *code)
{
    SV *old = opener;
    opener = SvOK(code) ? newSVsv(code) : NULL;
    SvREFCNT_dec(old);
}

SV *serow_tls_socket_make(pTHX_ struct serow_request *req)
{
    if (opener == NULL || req->conn == NULL)
        return NULL;
    struct serow_tls_socket *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->req = req;
    s->fd = -1;
    SV *tie = sv_setref_pv(newSV(0), "Serow::TLSSocket::Tie", s);
    SV *handle;
    ENTER;
    SAVETMPS;
    handle = serow_call_socket_opener(aTHX_ opener, req->conn->fd, sv_2mortal(tie));
    FREETMPS; /* (the handle's tie holds the tie object from here) */
    LEAVE;
    /* (without a handle the tie object went with the temporaries, and
     * serow_tls_socket_free with it) */
    if (handle != NULL) {
        IO *io = sv_2io(SvRV(handle));
        s->app_fd = IoIFP(io) ? PerlIO_fileno(IoIFP(io)) : -1;
        req->socket.tls = s;
    }
    return handle;
}

/* The state and descriptor the handle's calls use now, or -1 (EBADF).
 * While the request lives, the read-ahead is given back first. */
static int connection_of(struct serow_tls_socket *s, struct serow_connection_state **cs, int *fd)
{
    if (s->closed || (s->req == NULL && s->fd < 0) || (s->req && s->req->conn == NULL)) {
        errno = EBADF;
        return -1;
    }
    if (s->req == NULL) {
        *cs = &s->cs;
        *fd = s->fd;
        return 0;
    }
    struct connection *conn = s->req->conn;
    size_t head_len = s->req->head_len;
    if (conn->buffer_len > head_len) {
        if (serow_tls_unread(&conn->carried, conn->fd, conn->buffer + head_len,
                             conn->buffer_len - head_len) < 0) {
            errno = ENOMEM;
            return -1;
        }
        conn->buffer_len = head_len;
    }
    *cs = &conn->carried;
    *fd = conn->fd;
    return 0;
}

/* After EAGAIN: whether to wait for the socket (it is blocking) and try
 * again.  A signal ends the wait with EINTR, for Perl to deliver it. */
static int wait_for(int fd, short events)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_NONBLOCK)) {
        errno = EAGAIN;
        return 0;
    }
    struct pollfd p = {fd, events, 0};
    return poll(&p, 1, -1) >= 0;
}

ssize_t serow_tls_socket_read(struct serow_tls_socket *s, void *into, size_t len)
{
    struct serow_connection_state *cs;
    int fd;
    if (connection_of(s, &cs, &fd) < 0)
        return -1;
    if (len == 0)
        return 0;
    for (;;) {
        ssize_t n = serow_transport_recv(cs, fd, into, len, 0);
        if (n >= 0 || errno != EAGAIN || !wait_for(fd, POLLIN))
            return n;
    }
}

ssize_t serow_tls_socket_write(struct serow_tls_socket *s, const void *data, size_t len)
{
    struct serow_connection_state *cs;
    int fd;
    if (connection_of(s, &cs, &fd) < 0)
        return -1;
    size_t sent = 0;
    while (sent < len) {
        ssize_t n = serow_transport_send(cs, fd, (const char *)data + sent, len - sent, 0);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EAGAIN && wait_for(fd, POLLOUT))
            continue;
        if (sent > 0)
            break; /* (non-blocking: the count so far; the caller sends the rest) */
        return -1;
    }
    return (ssize_t)sent;
}

/* The Perl handle's descriptor keeps the socket open as long as the app
 * keeps the handle, and a tied close cannot close it (Perl closes it when
 * the handle goes, and would then close whatever reused its number).  So
 * at close it is pointed at /dev/null in one dup2: the socket loses this
 * reference at once, and the client gets its FIN after the close_notify
 * (when it was the last one: the worker's own, while its request lives,
 * ends with the request), while the number stays taken until Perl closes
 * it. */
static void let_go_of_app_fd(struct serow_tls_socket *s)
{
    if (s->app_fd < 0)
        return;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        (void)dup2(null, s->app_fd);
        close(null);
    }
}

int serow_tls_socket_close(struct serow_tls_socket *s)
{
    struct serow_connection_state *cs;
    int fd;
    if (connection_of(s, &cs, &fd) < 0)
        return -1;
    /* What a write left unsent goes first, as far as the socket takes it
     * now (send with nothing new only flushes); then close_notify, after
     * which the server's own writes on it fail (the app ended it). */
    (void)serow_transport_send(cs, fd, "", 0, 0);
    serow_transport_shutdown(cs, fd);
    s->closed = 1;
    if (s->req == NULL) {
        serow_transport_forget(cs, fd);
        explicit_bzero(cs, sizeof *cs);
        close(s->fd);
        s->fd = -1;
    }
    let_go_of_app_fd(s);
    return 0;
}

size_t serow_tls_socket_pending(struct serow_tls_socket *s)
{
    struct serow_connection_state *cs;
    int fd;
    if (connection_of(s, &cs, &fd) < 0)
        return 0;
    return serow_tls_unread_bytes(cs, fd);
}

int serow_tls_socket_fileno(struct serow_tls_socket *s)
{
    return s->closed ? -1 : s->app_fd;
}

void serow_tls_socket_free(struct serow_tls_socket *s)
{
    if (s->req != NULL) {
        /* (the request still lives: its connection is the worker's) */
        s->req->socket.tls = NULL;
    } else if (s->fd >= 0) {
        /* The app let go of the connection without closing it: closed now,
         * with close_notify, as a plain socket's last copy sends its FIN.
         * (The handle is going: its descriptor is Perl's to close, and its
         * number may be another's already.) */
        s->app_fd = -1;
        serow_tls_socket_close(s);
    }
    free(s);
}

int serow_tls_socket_take_connection(struct serow_request *req)
{
    struct serow_tls_socket *s = req->socket.tls;
    if (s == NULL || req->conn == NULL)
        return 0;
    struct connection *conn = req->conn;
    struct serow_connection_state *cs;
    int fd, rc = -1;
    req->socket.tls = NULL;
    if (!s->closed && connection_of(s, &cs, &fd) == 0 && (s->fd = dup(conn->fd)) >= 0) {
        serow_connection_state_copy(&s->cs, &conn->carried);
        if (serow_tls_move_local(&s->cs, conn->fd, s->fd) == 0)
            rc = 0;
    }
    if (rc < 0 && s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    s->req = NULL;
    /* The worker's copy is no longer a TLS connection of its own: it is
     * forgotten without a close_notify, or a forgetting of the keys the
     * handle now uses. */
    explicit_bzero(&conn->carried, sizeof conn->carried);
    conn->carried.transport = SEROW_TRANSPORT_PLAIN;
    return rc;
}

void serow_tls_socket_detach(struct serow_request *req)
{
    struct serow_tls_socket *s = req->socket.tls;
    if (s == NULL)
        return;
    req->socket.tls = NULL;
    s->req = NULL; /* (s->fd is -1: its calls fail from now) */
}
