/*
 * connection.c - allocation and the input buffer of a client connection.
 *
 * Owns: struct connection's memory and its buffer (grown, consumed,
 * released when idle, handed out with a request body lent where it lies),
 * and the spare buffers.  It knows no loop: which lists a connection is in,
 * its timers and its socket's life are the worker's (worker_*.c).
 */
#include "connection/connection.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

/* Dotted-quad text of an IPv4 address (at least 16 bytes of out): what
 * inet_ntop writes, without the printf machinery it uses (a tenth of what
 * a Connection: close request cost the worker in C). */
static void format_ipv4(char *out, const unsigned char *a)
{
    for (int i = 0; i < 4; i++) {
        unsigned v = a[i];
        if (v >= 100)
            *out++ = (char)('0' + v / 100);
        if (v >= 10)
            *out++ = (char)('0' + v / 10 % 10);
        *out++ = (char)('0' + v % 10);
        *out++ = i < 3 ? '.' : '\0';
    }
}

int serow_format_remote_address(char out[SEROW_REMOTE_ADDR_SIZE], const struct sockaddr *addr,
                                socklen_t addr_len)
{
    if (addr != NULL && addr->sa_family == AF_INET && addr_len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        format_ipv4(out, (const unsigned char *)&in->sin_addr);
        return ntohs(in->sin_port);
    }
    if (addr != NULL && addr->sa_family == AF_INET6 && addr_len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            format_ipv4(out, &in6->sin6_addr.s6_addr[12]);
        else
            inet_ntop(AF_INET6, &in6->sin6_addr, out, SEROW_REMOTE_ADDR_SIZE);
        return ntohs(in6->sin6_port);
    }
    /* A UNIX socket peer has no address; PSGI still wants one. */
    strcpy(out, "127.0.0.1");
    return 0;
}

struct connection *serow_connection_new(int fd, const struct sockaddr *addr, socklen_t addr_len,
                                  int is_unix)
{
    struct connection *conn = calloc(1, sizeof(*conn));
    if (conn == NULL)
        return NULL;
    conn->fd = fd;
    conn->is_unix = is_unix;
    conn->timer_list = -1;
    conn->slot = -1;
    conn->state = CONNECTION_READING_HEAD;
    conn->remote_port = serow_format_remote_address(conn->remote_addr, addr, addr_len);
    return conn;
}

void serow_connection_free(struct connection *conn)
{
    conn->buffer_len = 0;
    serow_connection_release_buffer(conn);
    free(conn);
}

/* Buffers given back by idle connections, kept for the next connection that
 * reads, so that a busy keep-alive connection does not pay a malloc and a free
 * per request.  Not only those of CONNECTION_READ_SIZE: a request whose small
 * body is read ahead (worker_request_body.c, PREREAD_BODY_MAX) grows its buffer to
 * the head plus the body, and freeing that one on every request made glibc
 * give the top of the heap back to the kernel (it trims above 128 KiB free)
 * and take it again, page fault by page fault, for the next: POST 64 KiB ran
 * at half the speed (25k requests a second in bench/run, 53k with this).  Up to SPARE_BUFFERS of them, none
 * larger than SPARE_BUFFER_MAX_SIZE (a worker keeps at most 2 MiB so). */
#define SPARE_BUFFERS 16
#define SPARE_BUFFER_MAX_SIZE (2 * CONNECTION_READ_SIZE)
static struct spare_buffer {
    char *data;
    size_t size;
} spare_buffers[SPARE_BUFFERS];
static int spare_buffer_count;

size_t serow_connection_reserve(struct connection *conn, size_t max_size)
{
    if (conn->buffer == NULL && spare_buffer_count > 0 && max_size >= CONNECTION_READ_SIZE) {
        struct spare_buffer *spare = &spare_buffers[--spare_buffer_count];
        conn->buffer = spare->data;
        conn->buffer_size = spare->size;
    }
    /* A buffer with room for half a read is not grown: growing copies all
     * it holds (a request body read after its head would otherwise make a
     * 64 KiB buffer 64 KiB larger, and copy it, on every request), and one
     * over SPARE_BUFFER_MAX_SIZE is not kept among the spares. */
    if (conn->buffer_size - conn->buffer_len >= CONNECTION_READ_SIZE / 2)
        return conn->buffer_size - conn->buffer_len;
    size_t want = conn->buffer_len + CONNECTION_READ_SIZE;
    if (want > max_size)
        want = max_size;
    if (want > conn->buffer_size) {
        char *grown = realloc(conn->buffer, want);
        if (grown == NULL)
            return conn->buffer_size - conn->buffer_len;
        conn->buffer = grown;
        conn->buffer_size = want;
    }
    return conn->buffer_size - conn->buffer_len;
}

void serow_connection_consume(struct connection *conn, size_t n)
{
    if (n >= conn->buffer_len) {
        conn->buffer_len = 0;
    } else {
        memmove(conn->buffer, conn->buffer + n, conn->buffer_len - n);
        conn->buffer_len -= n;
    }
    conn->head_scan_from = 0;
    conn->line_start = 0;
    conn->request_line_ended = 0;
}

void serow_connection_give_back_buffer(char *buffer, size_t size)
{
    if (size >= CONNECTION_READ_SIZE && size <= SPARE_BUFFER_MAX_SIZE &&
        spare_buffer_count < SPARE_BUFFERS)
        spare_buffers[spare_buffer_count++] = (struct spare_buffer){buffer, size};
    else
        free(buffer);
}

void serow_connection_release_buffer(struct connection *conn)
{
    if (conn->buffer_len == 0 && conn->buffer != NULL) {
        serow_connection_give_back_buffer(conn->buffer, conn->buffer_size);
        conn->buffer = NULL;
        conn->buffer_size = 0;
    }
}

char *serow_connection_hand_out_buffer(struct connection *conn, size_t keep, size_t from,
                                       size_t *size)
{
    size_t rest = conn->buffer_len - from;
    size_t need = keep + rest;
    char *other;
    size_t other_size;
    if (spare_buffer_count > 0 && spare_buffers[spare_buffer_count - 1].size >= need) {
        struct spare_buffer *spare = &spare_buffers[--spare_buffer_count];
        other = spare->data;
        other_size = spare->size;
    } else {
        other_size = need > CONNECTION_READ_SIZE ? need : CONNECTION_READ_SIZE;
        other = malloc(other_size);
        if (other == NULL)
            return NULL;
    }
    char *old = conn->buffer;
    memcpy(other, old, keep);
    memcpy(other + keep, old + from, rest);
    *size = conn->buffer_size;
    conn->buffer = other;
    conn->buffer_size = other_size;
    conn->buffer_len = need;
    return old;
}
