/*
 * transport.h - the one way a client connection's bytes move.
 *
 * Every read, write, sendfile and shutdown of a client connection goes
 * through the functions here: in a worker (a request's head and body, the
 * response, 100 Continue, error pages, the lingering close), in the holder
 * (its peeks at a held connection, the 503 it sheds) and in the master (the
 * 503 of a request whose worker it killed).  What they take besides the
 * descriptor is the connection's struct serow_connection_state, which moves
 * with the descriptor from process to process.  A transport is the set of
 * operations that state names: plain (the socket's bytes as they are), TLS
 * (tls_transport.h: its record state in serow_connection_state, moved with
 * the descriptor), and a test-only one that reads and writes a few bytes at
 * a time (below).
 *
 * The one connection that bypasses the seam is the app's psgix.io on a
 * plain connection: a Perl handle on a duplicate of the descriptor
 * (psgi_input.c), which reads and writes the socket's raw bytes.  Under TLS
 * it would see the records, so there psgix.io is a handle tied to the
 * transport (psgi_tls_socket.c).  Waiting for readiness
 * (epoll, poll) and what the kernel says of the socket (TCP_INFO,
 * getpeername) are not reads: they stay on the descriptor.  (With TLS, bytes
 * decrypted and not yet taken may wait in the transport, where epoll cannot
 * see them: a recv that fills its room says "read again", and
 * serow_transport_buffered says so between requests.)
 *
 * The plain transport is inline, behind one well-predicted branch: the
 * common path costs what the system call it makes did before the seam.
 */
#ifndef SEROW_TRANSPORT_H
#define SEROW_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "connection/tls_record.h"

enum serow_transport_kind {
    SEROW_TRANSPORT_PLAIN = 0, /* the socket's bytes as they are: TCP, a UNIX socket */
    SEROW_TRANSPORT_SHORT,     /* tests only: short reads and writes (SEROW_TEST_TRANSPORT) */
    SEROW_TRANSPORT_TLS,       /* TLS: the handshake, then records (tls_transport.c) */
    SEROW_TRANSPORT_KINDS
};

/* Where a TLS connection stands (serow_connection_state.tls_phase). */
enum serow_tls_phase {
    SEROW_TLS_PHASE_HANDSHAKE = 0, /* a library session in this process: it cannot move yet */
    SEROW_TLS_PHASE_RECORDS,       /* tls holds all there is: it moves with the descriptor */
};

/*
 * What moves with a client connection from one of Serow's processes to
 * another, beside its descriptor (which the kernel moves): its one home.  A
 * worker keeps it in its struct connection; it travels in struct
 * passed_connection (fd passing: the holder's ready connections, a stopping
 * worker's hand-back), in the connection's shared slot for whoever takes a
 * parked one (the holder stealing, a worker gathering: struct
 * connection_slot), and in the worker's slot for the request the app runs
 * (the master's 503: struct worker_slot).  That is which transport reads
 * and writes it and, with TLS, the record layer's state (docs/tls.md): only
 * one process at a time uses it, the one that owns the connection.  The
 * part after transport means nothing to a plain connection and is not
 * copied for one (serow_connection_state_copy).
 */
struct serow_connection_state {
    uint32_t transport; /* enum serow_transport_kind */
    uint8_t tls_phase;  /* TLS: enum serow_tls_phase */
    uint8_t tls_suite;  /* TLS: its protocol and cipher, for the env (tls_peer.c); 0: not yet */
    uint16_t tls_peer;  /* TLS with --ssl-verify-client: 1 + the index of the record of its
                         * client's certificate (tls_peer.c); 0: none */
    uint64_t tls_id;    /* TLS: this connection among those a process has had on its
                         * descriptor number (what the process keeps beside it is
                         * keyed by both: tls_transport.c) */
    struct serow_tls_state tls;
};

/* *to = *from, without the TLS part of a plain connection's (a copy on
 * every keep-alive request: 4 bytes, not 224). */
static inline void serow_connection_state_copy(struct serow_connection_state *to,
                                               const struct serow_connection_state *from)
{
    if (__builtin_expect(from->transport != SEROW_TRANSPORT_TLS, 1))
        to->transport = from->transport;
    else
        *to = *from;
}

/* A transport's operations, as the system calls they stand for: a count of
 * bytes, or -1 with errno (EAGAIN: not now; for a peek, EINPROGRESS: bytes
 * are arriving but none can be read yet, as a TLS record not all there).
 * flags are recv's and send's (MSG_PEEK, MSG_DONTWAIT, MSG_MORE); MSG_DONTWAIT says that the caller
 * will not wait and try again, so that EAGAIN loses what it was for.
 * stamp_ns, when not NULL: the kernel's receive stamp of the bytes read
 * (serow_transport_recv_stamped).  shutdown ends the sending side. */
struct serow_transport_ops {
    ssize_t (*recv)(struct serow_connection_state *cs, int fd, void *into, size_t room,
                    int flags, uint64_t *stamp_ns);
    ssize_t (*send)(struct serow_connection_state *cs, int fd, const void *data, size_t len,
                    int flags);
    ssize_t (*writev)(struct serow_connection_state *cs, int fd, const struct iovec *iov,
                      int iovcnt);
    ssize_t (*sendfile)(struct serow_connection_state *cs, int fd, int file_fd, off_t *offset,
                        size_t count);
    int (*shutdown)(struct serow_connection_state *cs, int fd);
};

extern const struct serow_transport_ops *const serow_transports[SEROW_TRANSPORT_KINDS];

/* The transport of the connections this process accepts: plain, unless the
 * environment variable SEROW_TEST_TRANSPORT names the test transport
 * ("short", or "short:SEED" to repeat a run's random lengths), read once. */
enum serow_transport_kind serow_transport_of_listeners(void);

/*
 * recv of up to room bytes into into (flags as recv's), with the kernel's
 * receive stamp of those bytes in *stamp_ns, in nanoseconds of the wall
 * clock: SO_TIMESTAMPNS, set on the listen sockets and so on every
 * connection accepted from them.  *stamp_ns is 0 without one (a UNIX
 * socket) or when nothing was read.  Where a request's time starts
 * (access_log.h): the worker's first read of a head, the holder's peek at
 * a request it sheds.  The plain transport's stamped read.
 * On TCP it is not the arrival of the first byte returned but of the last
 * segment among those the call copied: tcp_recvmsg_locked takes the stamp
 * of each skb it copies from, and tcp_try_coalesce gives a queued skb the
 * stamp of each segment merged into it.  So a head split over segments
 * that arrived apart, or read with the start of its body, is stamped with
 * the later arrival (the time its first bytes waited for the rest is not
 * counted).  Reading one byte first would not fix it (a merged skb has its
 * last segment's stamp) and would cost every request a system call.
 */
static inline ssize_t serow_recv_stamped(int fd, void *into, size_t room, int flags,
                                         uint64_t *stamp_ns)
{
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {into, room};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    ssize_t n = recvmsg(fd, &msg, flags);
    *stamp_ns = 0;
    struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        *stamp_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    }
    return n;
}

#define SEROW_TRANSPORT_IS_PLAIN(cs) __builtin_expect((cs)->transport == SEROW_TRANSPORT_PLAIN, 1)

/* (recv rather than read wherever a client socket is read: it skips the
 * file layer, about 70 ns of each call on this project's machine.) */
static inline ssize_t serow_transport_recv(struct serow_connection_state *cs, int fd, void *into,
                                           size_t room, int flags)
{
    if (SEROW_TRANSPORT_IS_PLAIN(cs))
        return recv(fd, into, room, flags);
    return serow_transports[cs->transport]->recv(cs, fd, into, room, flags, NULL);
}

static inline ssize_t serow_transport_recv_stamped(struct serow_connection_state *cs, int fd,
                                                   void *into, size_t room, int flags,
                                                   uint64_t *stamp_ns)
{
    if (SEROW_TRANSPORT_IS_PLAIN(cs))
        return serow_recv_stamped(fd, into, room, flags, stamp_ns);
    return serow_transports[cs->transport]->recv(cs, fd, into, room, flags, stamp_ns);
}

/* (MSG_NOSIGNAL always: a client gone is an error to the caller, not a
 * SIGPIPE.) */
static inline ssize_t serow_transport_send(struct serow_connection_state *cs, int fd,
                                           const void *data, size_t len, int flags)
{
    if (SEROW_TRANSPORT_IS_PLAIN(cs))
        return send(fd, data, len, flags | MSG_NOSIGNAL);
    return serow_transports[cs->transport]->send(cs, fd, data, len, flags);
}

static inline ssize_t serow_transport_writev(struct serow_connection_state *cs, int fd,
                                             const struct iovec *iov, int iovcnt)
{
    if (SEROW_TRANSPORT_IS_PLAIN(cs))
        return writev(fd, iov, iovcnt);
    return serow_transports[cs->transport]->writev(cs, fd, iov, iovcnt);
}

static inline ssize_t serow_transport_sendfile(struct serow_connection_state *cs, int fd,
                                               int file_fd, off_t *offset, size_t count)
{
    if (SEROW_TRANSPORT_IS_PLAIN(cs))
        return sendfile(fd, file_fd, offset, count);
    return serow_transports[cs->transport]->sendfile(cs, fd, file_fd, offset, count);
}

static inline int serow_transport_shutdown(struct serow_connection_state *cs, int fd)
{
    if (SEROW_TRANSPORT_IS_PLAIN(cs))
        return shutdown(fd, SHUT_WR);
    return serow_transports[cs->transport]->shutdown(cs, fd);
}

/* Sends what the socket takes now of data, without waiting: for the answers
 * sent to a client that may not read (error pages, a 100 Continue from the
 * event loop).  A short send is followed by another for the rest, up to
 * EAGAIN or an error.  Returns the bytes sent. */
size_t serow_transport_send_now(struct serow_connection_state *cs, int fd, const void *data,
                                size_t len);

/* TLS: whether the transport holds plaintext it decrypted and no one has
 * read yet, which epoll cannot report (a record longer than the room of
 * the read that opened it).  0 for every other transport. */
int serow_transport_buffered_tls(struct serow_connection_state *cs, int fd);
static inline int serow_transport_buffered(struct serow_connection_state *cs, int fd)
{
    return SEROW_TRANSPORT_IS_PLAIN(cs) ? 0 : serow_transport_buffered_tls(cs, fd);
}

/* TLS: whether the handshake is held up by a write the socket did not take
 * (the library's flight, more than the socket holds): the caller waits for
 * the socket to be writable, not readable, and reads again, which writes on.
 * 0 for every other transport, and once the handshake is done. */
int serow_transport_handshake_writing_tls(const struct serow_connection_state *cs, int fd);
static inline int serow_transport_handshake_writing(const struct serow_connection_state *cs,
                                                    int fd)
{
    return SEROW_TRANSPORT_IS_PLAIN(cs) ? 0 : serow_transport_handshake_writing_tls(cs, fd);
}

/* The connection ends in this process (closed, or given to another): what
 * the transport kept beside its descriptor here goes.  Its state, if it
 * moves, stays valid. */
void serow_transport_forget_tls(struct serow_connection_state *cs, int fd);
static inline void serow_transport_forget(struct serow_connection_state *cs, int fd)
{
    if (!SEROW_TRANSPORT_IS_PLAIN(cs))
        serow_transport_forget_tls(cs, fd);
}

/* The connection is closed for good, by this process (not handed on): what
 * it has beside its state in memory every process shares goes with it
 * (TLS: the record of its client's certificate, tls_peer.c). */
void serow_transport_closed_tls(const struct serow_connection_state *cs);
static inline void serow_transport_closed(const struct serow_connection_state *cs)
{
    if (__builtin_expect(cs->transport == SEROW_TRANSPORT_TLS, 0) && cs->tls_peer != 0)
        serow_transport_closed_tls(cs);
}

#endif
