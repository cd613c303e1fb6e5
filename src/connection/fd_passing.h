/*
 * fd_passing.h - moving connections between processes over a UNIX
 * SOCK_SEQPACKET socket (SCM_RIGHTS), each with what the receiver needs to
 * go on serving it.  One message carries up to FD_PASSING_BATCH of them.
 *
 * Two such channels exist: the ready channel (holder -> any free worker; all
 * workers wait on the same receiving end, so the kernel hands each message
 * to exactly one of them) and the hand-back channel (a stopping worker ->
 * holder; also a worker's held connections and publishes, tagged:
 * shared/holding_channel.h).  A third kind carries short messages with a few descriptors: the
 * master's requests to a generation process (lib/Serow/Generation.pm).
 */
#ifndef SEROW_FD_PASSING_H
#define SEROW_FD_PASSING_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "connection/transport.h"

/* The kernel's limit of descriptors in one SCM_RIGHTS message is 253. */
#define FD_PASSING_BATCH 64

/* The client's address when the descriptor is not the client's socket:
 * the holder's request to the app for a WebSocket's events comes over a
 * socket pair (websocket_holds.c), and the app's REMOTE_ADDR is still the
 * client's.  Read only when the descriptor's peer is a UNIX socket on an IP
 * listener, which no client's socket is: senders of clients' own sockets
 * need not set it. */
struct serow_peer_address {
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } addr;
    socklen_t len; /* 0: none */
};

struct passed_connection {
    uint32_t requests_served;
    uint32_t listener_index;
    uint64_t idle_since_ms;
    struct serow_peer_address peer; /* (before carried: the holder keeps a plain
                                     * connection's info without carried's TLS part) */
    struct serow_connection_state carried; /* how to read and write it (transport.h) */
};

/* Sends n (<= FD_PASSING_BATCH) descriptors.  0 sent, -1 with errno (EAGAIN
 * when the channel is full).  The caller still closes its copies. */
int serow_send_connections(int channel, const int *fds, const struct passed_connection *info, size_t n);

/* Receives one message.  Returns the number of connections (0 when there was
 * nothing to receive), or -1 with errno. */
int serow_receive_connections(int channel, int *fds, struct passed_connection *info, size_t max);

/* Sends one message of len bytes with n (<= FD_PASSING_BATCH) descriptors
 * (none when n is 0).  0 sent, -1 with errno.  The caller still closes its
 * copies. */
int serow_send_message(int channel, const void *data, size_t len, const int *fds, size_t n);

/* Receives one message of at most len bytes, and up to *n descriptors
 * (close-on-exec; more are closed), *n set to how many came.  Returns the
 * message's length (0 at the end of the stream), or -1 with errno (EAGAIN
 * when there is none yet). */
ssize_t serow_receive_message(int channel, void *data, size_t len, int *fds, size_t *n);

/* Makes the pair of SOCK_SEQPACKET sockets of a channel (non-blocking). */
int serow_make_channel(int fds[2]);

#endif
