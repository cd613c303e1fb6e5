/*
 * The input buffers of connections (src/connection/connection.c): a buffer an idle
 * connection gives back is kept for the next connection that reads, also one
 * grown past CONNECTION_READ_SIZE for a body read ahead, so that a busy
 * worker does not free and allocate 64 KiB and more per request (freed, glibc
 * gave the top of the heap back to the kernel and took it again, page fault by
 * page fault: POST 64 KiB ran at half the speed, 25k requests a second against 53k).
 * Prints "ok - NAME" / "not ok - NAME" per check (t/connection/buffers.t).
 */
#include <stdio.h>
#include <string.h>

#include "connection/connection.h"
#include "serow_unit.h"

/* What serow_read_connection (src/worker/worker_intake.c) lets a buffer grow to for a head:
 * max_head_bytes with the default --max-request-line and --max-header-size. */
#define HEAD_MAX (8192 + 65536 + 8)

/* A request head of head_len bytes with a body of body_len read ahead, as
 * read_connection does it: reads into the room reserved, up to the head's
 * limit or the body's end, whichever is further. */
static void read_request(struct connection *conn, size_t head_len, size_t body_len)
{
    size_t wanted = head_len + body_len;
    while (conn->buffer_len < wanted) {
        size_t room = serow_connection_reserve(conn, wanted > HEAD_MAX ? wanted : HEAD_MAX);
        if (room == 0)
            break;
        size_t n = wanted - conn->buffer_len < room ? wanted - conn->buffer_len : room;
        memset(conn->buffer + conn->buffer_len, 'x', n);
        conn->buffer_len += n;
    }
}

/* The request served: everything consumed, the connection idle. */
static void finish_request(struct connection *conn)
{
    serow_connection_consume(conn, conn->buffer_len);
    serow_connection_release_buffer(conn);
}

int main(void)
{
    struct connection *a = serow_connection_new(-1, NULL, 0, 1);
    struct connection *b = serow_connection_new(-1, NULL, 0, 1);

    /* a head and a body of 64 KiB: more than one read's worth */
    read_request(a, 100, 65536);
    check(a->buffer_len == 100 + 65536, "a head and a 64 KiB body read ahead");
    check(a->buffer_size > CONNECTION_READ_SIZE, "its buffer grew past one read's size");
    char *grown = a->buffer;
    size_t grown_size = a->buffer_size;
    finish_request(a);
    check(a->buffer == NULL && a->buffer_size == 0, "an idle connection holds no buffer");

    read_request(b, 100, 0);
    check(b->buffer == grown, "the next connection that reads gets the grown buffer back");
    check(b->buffer_size == grown_size, "with its size");
    finish_request(b);

    /* Two at a time: two spares, both given out again. */
    read_request(a, 100, 65536);
    read_request(b, 100, 65536);
    char *first = a->buffer, *second = b->buffer;
    check(first != second, "two connections reading at once have their own buffers");
    finish_request(a);
    finish_request(b);
    read_request(a, 100, 65536);
    read_request(b, 100, 65536);
    check((a->buffer == first || a->buffer == second) && (b->buffer == first || b->buffer == second),
          "both buffers are taken again by the next two requests");
    finish_request(a);
    finish_request(b);

    /* A buffer grown far past a request's usual size (a head as long as the
     * limit allows, a pipelined burst) is freed, not kept. */
    struct connection *big = serow_connection_new(-1, NULL, 0, 1);
    read_request(big, 4 * CONNECTION_READ_SIZE, 0);
    check(big->buffer_size >= 4 * CONNECTION_READ_SIZE, "a buffer grown to 256 KiB");
    finish_request(big);
    struct connection *c[3];
    int got_big = 0;
    for (int i = 0; i < 3; i++) {
        c[i] = serow_connection_new(-1, NULL, 0, 1);
        read_request(c[i], 100, 0);
        if (c[i]->buffer_size >= 4 * CONNECTION_READ_SIZE)
            got_big = 1;
    }
    check(!got_big, "a buffer that large is not kept among the spares");

    /* A buffer still holding bytes (a pipelined request) stays with its
     * connection. */
    read_request(a, 100, 0);
    char *held = a->buffer;
    serow_connection_release_buffer(a);
    check(a->buffer == held && a->buffer_len == 100, "a buffer with unread bytes is not given back");
    finish_request(a);

    /* A body lent where it lies (serow_worker_loop_lend_body): the buffer
     * with head and body goes out, the connection goes on with a spare
     * holding the head and the pipelined bytes after the body; given back,
     * the lent buffer is the next spare. */
    read_request(a, 100, 5000);
    memcpy(a->buffer, "HEAD", 4);
    memcpy(a->buffer + 100, "BODY", 4);
    memcpy(a->buffer + 5100 - 4, "NEXT", 4); /* the last 4 bytes: a pipelined request */
    char *lent_from = a->buffer;
    size_t lent_size = 0;
    char *lent = serow_connection_hand_out_buffer(a, 100, 5096, &lent_size);
    check(lent == lent_from && lent_size >= 5100, "the buffer with the body is handed out");
    check(a->buffer != lent && a->buffer_size >= CONNECTION_READ_SIZE,
          "the connection has another, of a read's size at least");
    check(a->buffer_len == 104 && memcmp(a->buffer, "HEAD", 4) == 0 &&
              memcmp(a->buffer + 100, "NEXT", 4) == 0,
          "holding the head, then what followed the body");
    check(memcmp(lent + 100, "BODY", 4) == 0, "the body stays where it was");
    serow_connection_give_back_buffer(lent, lent_size);
    read_request(b, 100, 0);
    check(b->buffer == lent, "the buffer given back is a spare again");
    finish_request(b);
    finish_request(a);

    for (int i = 0; i < 3; i++)
        serow_connection_free(c[i]);
    serow_connection_free(a);
    serow_connection_free(b);
    serow_connection_free(big);
    return checks_done();
}
