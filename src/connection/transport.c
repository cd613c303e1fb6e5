/*
 * transport.c - the transports' operations (the plain one's are inline in
 * transport.h), the choice of the transport of accepted connections, and
 * the test transport.
 *
 * Owns: serow_transports, the test transport's generator and counts.  It
 * knows no loop, no connection beyond its descriptor and its
 * serow_connection_state: what a caller does with a short read or write,
 * or with EAGAIN, is the caller's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "connection/transport.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "connection/tls_transport.h"
#include "log/log.h"

size_t serow_transport_send_now(struct serow_connection_state *cs, int fd, const void *data,
                                size_t len)
{
    size_t sent = 0;
    while (sent < len) {
        ssize_t n = serow_transport_send(cs, fd, (const char *)data + sent, len - sent,
                                         MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        sent += (size_t)n;
    }
    return sent;
}

/* ---- plain: the socket's bytes as they are ---------------------------- */

static ssize_t plain_recv(struct serow_connection_state *cs, int fd, void *into, size_t room,
                          int flags, uint64_t *stamp_ns)
{
    if (stamp_ns)
        return serow_recv_stamped(fd, into, room, flags, stamp_ns);
    return recv(fd, into, room, flags);
}

static ssize_t plain_send(struct serow_connection_state *cs, int fd, const void *data, size_t len,
                          int flags)
{
    return send(fd, data, len, flags | MSG_NOSIGNAL);
}

static ssize_t plain_writev(struct serow_connection_state *cs, int fd, const struct iovec *iov,
                            int iovcnt)
{
    return writev(fd, iov, iovcnt);
}

static ssize_t plain_sendfile(struct serow_connection_state *cs, int fd, int file_fd,
                              off_t *offset, size_t count)
{
    return sendfile(fd, file_fd, offset, count);
}

static int plain_shutdown(struct serow_connection_state *cs, int fd)
{
    return shutdown(fd, SHUT_WR);
}

static const struct serow_transport_ops plain_ops = {
    plain_recv, plain_send, plain_writev, plain_sendfile, plain_shutdown,
};

/* ---- short: tests only -------------------------------------------------
 *
 * Proves that the seam is the only path and that every caller copes with
 * what a socket may do (t/transport/): each read and each write moves
 * between 1 and all of the bytes asked for, at random (a quarter of the
 * calls one byte, a quarter up to 16, a quarter up to 4096, a quarter all),
 * and one call in eight where the caller waits and tries again fails with
 * EAGAIN although the socket is ready (never with MSG_DONTWAIT, which says
 * the caller would not try again: EAGAIN there means a full socket buffer,
 * which the transport cannot fake honestly).  Chosen only by
 * SEROW_TEST_TRANSPORT, read once; each process counts what it shortened
 * and says so in the error log at debug level when it exits.
 */

static uint64_t short_random; /* xorshift64* state: never 0 once started */
static struct {
    unsigned long reads, reads_shortened, writes, writes_shortened, eagain;
} short_counts;

static void short_report(void)
{
    serow_log_debug("short transport: %lu of %lu reads and %lu of %lu writes shortened, "
                    "%lu EAGAIN made up",
                    short_counts.reads_shortened, short_counts.reads,
                    short_counts.writes_shortened, short_counts.writes, short_counts.eagain);
}

/* The seed: SEROW_TEST_TRANSPORT's after "short:", else the time and the
 * pid (logged, so that a run can be repeated). */
static void short_start(void)
{
    if (short_random)
        return;
    const char *chosen = getenv("SEROW_TEST_TRANSPORT");
    const char *colon = chosen ? strchr(chosen, ':') : NULL;
    uint64_t seed = colon ? strtoull(colon + 1, NULL, 10)
                          : (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    short_random = seed ? seed : 1;
    serow_log_debug("short transport in process %d, seed %llu", (int)getpid(),
                    (unsigned long long)seed);
    atexit(short_report);
}

static uint64_t short_next(void)
{
    short_start();
    short_random ^= short_random >> 12;
    short_random ^= short_random << 25;
    short_random ^= short_random >> 27;
    return short_random * 2685821657736338717ULL;
}

/* How many of len bytes this call moves. */
static size_t short_length(size_t len)
{
    uint64_t r = short_next();
    size_t most;
    switch (r & 3) {
    case 0: most = 1; break;
    case 1: most = 1 + (size_t)((r >> 8) % 16); break;
    case 2: most = 1 + (size_t)((r >> 8) % 4096); break;
    default: most = len; break;
    }
    return most < len ? most : len;
}

/* Whether this call fails with EAGAIN although the socket is ready. */
static int short_eagain(int flags)
{
    if ((flags & MSG_DONTWAIT) || (short_next() & 7) != 0)
        return 0;
    short_counts.eagain++;
    errno = EAGAIN;
    return 1;
}

static ssize_t short_recv(struct serow_connection_state *cs, int fd, void *into, size_t room,
                          int flags, uint64_t *stamp_ns)
{
    if (stamp_ns)
        *stamp_ns = 0;
    if (room > 0 && short_eagain(flags))
        return -1;
    size_t k = room > 0 ? short_length(room) : 0;
    short_counts.reads++;
    short_counts.reads_shortened += k < room;
    return plain_recv(cs, fd, into, k, flags, stamp_ns);
}

static ssize_t short_send(struct serow_connection_state *cs, int fd, const void *data, size_t len,
                          int flags)
{
    if (len > 0 && short_eagain(flags))
        return -1;
    size_t k = len > 0 ? short_length(len) : 0;
    short_counts.writes++;
    short_counts.writes_shortened += k < len;
    return plain_send(cs, fd, data, k, flags);
}

static ssize_t short_writev(struct serow_connection_state *cs, int fd, const struct iovec *iov,
                            int iovcnt)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total > 0 && short_eagain(0))
        return -1;
    size_t k = total > 0 ? short_length(total) : 0;
    short_counts.writes++;
    short_counts.writes_shortened += k < total;
    /* the first k bytes of iov: the parts they cover, the last one cut */
    struct iovec part[IOV_MAX];
    int count = 0;
    for (size_t left = k; count < iovcnt && count < IOV_MAX && left > 0; count++) {
        part[count] = iov[count];
        if (part[count].iov_len > left)
            part[count].iov_len = left;
        left -= part[count].iov_len;
    }
    if (count == 0)
        return plain_writev(cs, fd, iov, 0);
    return plain_writev(cs, fd, part, count);
}

static ssize_t short_sendfile(struct serow_connection_state *cs, int fd, int file_fd,
                              off_t *offset, size_t count)
{
    if (count > 0 && short_eagain(0))
        return -1;
    size_t k = count > 0 ? short_length(count) : 0;
    short_counts.writes++;
    short_counts.writes_shortened += k < count;
    return plain_sendfile(cs, fd, file_fd, offset, k);
}

static const struct serow_transport_ops short_ops = {
    short_recv, short_send, short_writev, short_sendfile, plain_shutdown,
};

const struct serow_transport_ops *const serow_transports[SEROW_TRANSPORT_KINDS] = {
    [SEROW_TRANSPORT_PLAIN] = &plain_ops,
    [SEROW_TRANSPORT_SHORT] = &short_ops,
    [SEROW_TRANSPORT_TLS] = &serow_tls_transport_ops,
};

enum serow_transport_kind serow_transport_of_listeners(void)
{
    static int chosen = -1;
    if (chosen < 0) {
        const char *name = getenv("SEROW_TEST_TRANSPORT");
        chosen = SEROW_TRANSPORT_PLAIN;
        if (name != NULL && (strcmp(name, "short") == 0 || strncmp(name, "short:", 6) == 0)) {
            chosen = SEROW_TRANSPORT_SHORT;
            short_start();
        } else if (name != NULL && *name != '\0') {
            serow_log_warn("SEROW_TEST_TRANSPORT=%s names no test transport (\"short\"): "
                           "the plain one serves", name);
        }
    }
    return (enum serow_transport_kind)chosen;
}
