/*
 * fd_passing.h - moving connections between processes over a UNIX
 * SOCK_SEQPACKET socket (SCM_RIGHTS), each with what the receiver needs to
 * go on serving it.  One message carries up to FD_PASSING_BATCH of them.
 *
 * Two such channels exist: the ready channel (holder -> any free worker; all
 * workers wait on the same receiving end, so the kernel hands each message
 * to exactly one of them) and the hand-back channel (a stopping worker ->
 * holder).
 */
#ifndef SEROW_FD_PASSING_H
#define SEROW_FD_PASSING_H

#include <stddef.h>
#include <stdint.h>

/* The kernel's limit of descriptors in one SCM_RIGHTS message is 253. */
#define FD_PASSING_BATCH 64

struct passed_connection {
    uint32_t requests_served;
    uint32_t listener_index;
    uint64_t idle_since_ms;
};

/* Sends n (<= FD_PASSING_BATCH) descriptors.  0 sent, -1 with errno (EAGAIN
 * when the channel is full).  The caller still closes its copies. */
int serow_send_connections(int channel, const int *fds, const struct passed_connection *info, size_t n);

/* Receives one message.  Returns the number of connections (0 when there was
 * nothing to receive), or -1 with errno. */
int serow_receive_connections(int channel, int *fds, struct passed_connection *info, size_t max);

/* Makes the pair of SOCK_SEQPACKET sockets of a channel (non-blocking). */
int serow_make_channel(int fds[2]);

#endif
