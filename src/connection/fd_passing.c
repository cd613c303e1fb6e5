/*
 * fd_passing.c - SCM_RIGHTS messages of connections.
 *
 * Owns: the wire format of a passed connection (its descriptor, and the bytes
 * already read from it) on a SOCK_SEQPACKET channel, and of a short message
 * with descriptors (the master and a generation process).  No loop, no policy:
 * who passes what, and when, is the holder's and the worker's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "connection/fd_passing.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int serow_make_channel(int fds[2])
{
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds);
}

/* One sendmsg of len bytes with n (<= FD_PASSING_BATCH) descriptors, retried
 * on EINTR.  0, or -1 with errno. */
static int send_with_descriptors(int channel, const void *data, size_t len, const int *fds, size_t n,
                                 int flags)
{
    if (n > FD_PASSING_BATCH) {
        errno = EINVAL;
        return -1;
    }
    union {
        char buf[CMSG_SPACE(sizeof(int) * FD_PASSING_BATCH)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct iovec iov = {(void *)data, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n);
    }
    for (;;) {
        ssize_t r = sendmsg(channel, &msg, MSG_NOSIGNAL | flags);
        if (r >= 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

int serow_send_connections(int channel, const int *fds, const struct passed_connection *info, size_t n)
{
    if (n == 0) {
        errno = EINVAL;
        return -1;
    }
    return send_with_descriptors(channel, info, sizeof(*info) * n, fds, n, MSG_DONTWAIT);
}

int serow_send_message(int channel, const void *data, size_t len, const int *fds, size_t n)
{
    return send_with_descriptors(channel, data, len, fds, n, 0);
}

ssize_t serow_receive_message(int channel, void *data, size_t len, int *fds, size_t *n)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * FD_PASSING_BATCH)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {data, len};
    struct msghdr msg = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = control.buf,
        .msg_controllen = sizeof(control.buf),
    };
    ssize_t r;
    do {
        r = recvmsg(channel, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    size_t max = *n, count = 0;
    *n = 0;
    if (r < 0)
        return -1;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int received[FD_PASSING_BATCH];
        memcpy(received, CMSG_DATA(cmsg), sizeof(int) * k);
        for (size_t i = 0; i < k; i++) {
            if (count < max)
                fds[count++] = received[i];
            else
                close(received[i]); /* more than asked for */
        }
    }
    *n = count;
    return r;
}

int serow_receive_connections(int channel, int *fds, struct passed_connection *info, size_t max)
{
    struct passed_connection infos[FD_PASSING_BATCH];
    int received[FD_PASSING_BATCH];
    size_t n = FD_PASSING_BATCH;
    ssize_t r = serow_receive_message(channel, infos, sizeof(infos), received, &n);
    if (r < 0)
        return errno == EAGAIN ? 0 : -1;
    /* Each descriptor goes with its record; one without (or more than
     * asked for) cannot be served. */
    size_t records = (size_t)r / sizeof(infos[0]);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (count < max && count < records) {
            fds[count] = received[i];
            info[count] = infos[count];
            count++;
        } else {
            close(received[i]);
        }
    }
    return (int)count;
}
