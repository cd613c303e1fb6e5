/*
 * connection.h - one client connection as a worker sees it: the socket, the
 * bytes read but not yet used, and where it stands in its current request.
 * No Perl here.
 */
#ifndef SEROW_CONNECTION_H
#define SEROW_CONNECTION_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>

#include "http/http_parser.h"
#include "connection/transport.h"

/* One read(2) asks for this much: buffering input 64 KiB at a time instead of
 * line by line is what made Oneman 3x faster. */
#define CONNECTION_READ_SIZE 65536
/* Room for the text of an IPv6 address (INET6_ADDRSTRLEN, 46) and more. */
#define SEROW_REMOTE_ADDR_SIZE 64

enum connection_state {
    CONNECTION_READING_HEAD, /* waiting for (the rest of) a request head */
    CONNECTION_IDLE,         /* keep-alive, nothing buffered */
    CONNECTION_SERVING,      /* its request is being answered */
    CONNECTION_LINGERING,    /* closing: input discarded until EOF or timeout */
    CONNECTION_GONE,         /* taken by the holder: our copy waits to be closed */
};

enum connection_preread {
    CONNECTION_PREREAD_NONE,
    CONNECTION_PREREAD_LENGTH,  /* complete at body_wanted bytes */
    CONNECTION_PREREAD_CHUNKED, /* complete when body_scan is done */
};

struct connection_list_link {
    struct connection *prev, *next;
};

/* A list of connections threaded through one of their links (timer_link or
 * ready_link): the worker's timer lists and its ready queue. */
struct connection_list {
    struct connection *first, *last;
};

struct connection {
    int fd;
    struct serow_connection_state carried; /* what moves with it (transport.h) */
    enum connection_state state;
    int listener_index;        /* which listen socket accepted it */
    int is_unix;
    char remote_addr[SEROW_REMOTE_ADDR_SIZE];
    int remote_port;

    char *buffer;              /* bytes received and not yet consumed */
    size_t buffer_len;
    size_t buffer_size;
    size_t head_scan_from;     /* where to look for new line ends */
    size_t line_start;         /* where the head's line still arriving begins */
    int request_line_ended;    /* a line other than an empty one has ended */
    int empty_lines_dropped;   /* stray empty lines were dropped since the last request */
    /* A small body read in the event loop before its request is served
     * (src/worker/worker_request_body.c, PREREAD_BODY_MAX): */
    int body_preread;          /* CONNECTION_PREREAD_NONE, _LENGTH or _CHUNKED */
    size_t body_wanted;        /* head + body bytes to buffer at most */
    size_t body_scanned;       /* chunked: where body_scan has looked up to */
    struct chunked_decoder body_scan; /* chunked: finds the end, decodes nothing kept */

    double deadline;           /* header timeout or keep-alive expiry */
    struct connection_list_link timer_link; /* in one of the loop's timer lists */
    struct connection_list_link ready_link; /* in the loop's ready queue */
    int in_ready_queue;
    int timer_list;            /* which list timer_link is in, or -1 */

    /* When the request head being read arrived, as far as the first read
     * of it tells (the kernel's receive stamp when it gives one: see
     * serow_recv_stamped in transport.h; request_accounting.h's clock); 0: not known
     * (the request's queue time then counts as 0). */
    uint64_t arrived_ns;

    unsigned long requests_served;
    unsigned pipelined_in_a_row; /* requests answered in a row with the next one buffered */
    int32_t slot;              /* its slot in the shared table, or -1 */
    int watching_writes;       /* TLS: epoll waits for it to be writable, not readable: its
                                * handshake is held up by a write (worker_intake.c) */
    void *perl_io;             /* the psgix.io handle (an SV*), made on demand */
};

struct connection *serow_connection_new(int fd, const struct sockaddr *addr, socklen_t addr_len,
                                  int is_unix);

/* The peer's address as REMOTE_ADDR and the access log show it (a UNIX
 * socket's peer: 127.0.0.1), into out; returns its port (0: none). */
int serow_format_remote_address(char out[SEROW_REMOTE_ADDR_SIZE], const struct sockaddr *addr,
                                socklen_t addr_len);
void serow_connection_free(struct connection *conn);

/* Makes room for CONNECTION_READ_SIZE more bytes, up to max_size in all.
 * Returns the free space (0 when the buffer is at max_size). */
size_t serow_connection_reserve(struct connection *conn, size_t max_size);

/* Drops the first n buffered bytes (a consumed head or body part). */
void serow_connection_consume(struct connection *conn, size_t n);

/* Gives back memory held by an idle connection, so that an idle keep-alive
 * connection costs as little as possible. */
void serow_connection_release_buffer(struct connection *conn);

/* Hands the connection's buffer to the caller, who owns it from then on
 * (its size in *size): the connection goes on with another buffer (a spare
 * when one is big enough) holding the old one's first keep bytes followed by
 * those from `from` on, as if the bytes between had been consumed.  NULL
 * when no other buffer could be had (then nothing changed). */
char *serow_connection_hand_out_buffer(struct connection *conn, size_t keep, size_t from,
                                       size_t *size);

/* A buffer handed out comes back: kept among the spares the next
 * connection that reads takes, or freed. */
void serow_connection_give_back_buffer(char *buffer, size_t size);

#endif
