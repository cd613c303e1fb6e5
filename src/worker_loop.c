/*
 * worker_loop.c - epoll loop of a worker: accept, read, find complete request
 * heads, answer bad ones, expire slow and idle connections.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fd_passing.h"
#include "log.h"
#include "request_accounting.h"

/* Events taken from one epoll_wait: enough to amortise the call. */
#define EPOLL_BATCH 64
/* Connections accepted per readiness event of a listen socket, so that one
 * worker does not take a whole burst while others idle (EPOLLEXCLUSIVE wakes
 * one worker per connection anyway). */
#define ACCEPT_BATCH 16
/* A closing connection whose client still sends is drained this long, and at
 * most this much, so that the client reads our response instead of a reset. */
#define LINGER_SECONDS 2.0
#define LINGER_MAX_BYTES (1024 * 1024)
/* A body up to this size (Content-Length, or chunked with its framing) is read
 * in the event loop before the app sees the request: a client that sends its
 * body slowly then holds a connection, not a worker (slow-body attacks send
 * small bodies byte by byte).  It is also what such a connection may hold in
 * memory.  Larger bodies are read while the request is served (spooled to a
 * temp file past --body-memory-limit), under --min-body-rate. */
#define PREREAD_BODY_MAX (64 * 1024)
/* When the whole server stops (TERM, or Server::Starter retiring the old
 * server after a reload), a client on a kept-alive connection may be sending
 * its next request at this very moment: a close would make that request fail.
 * So idle connections wait this long for one, which is answered with
 * Connection: close; only connections silent for the whole time are closed.
 * Long against a busy client's gap between requests, short for a stop. */
#define STOP_GRACE_SECONDS 1.0
/* While the holder still has connections during that time, a stopping worker
 * looks this often whether they became ready (it may hold none of its own). */
#define STOP_GRACE_POLL_MS 20
/* A client that pipelines gets this many requests answered in a row; then
 * the worker looks at its other connections and listen sockets before the
 * next one (look_around).  One read takes up to the head limits, 72 KiB by
 * default: a thousand small requests, which would otherwise all go before
 * any other connection of the worker.  The look costs an epoll_wait that
 * does not block, once per this many pipelined requests. */
#define PIPELINED_REQUESTS_PER_TURN 8

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- Date header ------------------------------------------------------- */

const char *http_date_now(void)
{
    static char date[40];
    static time_t formatted_for = -1;
    time_t now = time(NULL);
    if (now != formatted_for) {
        static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
        static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        struct tm tm;
        gmtime_r(&now, &tm);
        snprintf(date, sizeof(date), "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
                 tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                 tm.tm_sec);
        formatted_for = now;
    }
    return date;
}

/* ---- timer lists: each holds connections in deadline order ------------- */

static void timer_remove(struct worker_loop *loop, struct connection *conn)
{
    if (conn->timer_list < 0)
        return;
    struct timer_list *list = &loop->timers[conn->timer_list];
    if (conn->timer_link.prev)
        conn->timer_link.prev->timer_link.next = conn->timer_link.next;
    else
        list->first = conn->timer_link.next;
    if (conn->timer_link.next)
        conn->timer_link.next->timer_link.prev = conn->timer_link.prev;
    else
        list->last = conn->timer_link.prev;
    conn->timer_link.prev = conn->timer_link.next = NULL;
    conn->timer_list = -1;
}

/* Every list has one timeout for all its members, so appending keeps it sorted. */
static void timer_append(struct worker_loop *loop, struct connection *conn,
                         enum timer_list_kind kind, double deadline)
{
    timer_remove(loop, conn);
    struct timer_list *list = &loop->timers[kind];
    conn->deadline = deadline;
    conn->timer_list = (int)kind;
    conn->timer_link.next = NULL;
    conn->timer_link.prev = list->last;
    if (list->last)
        list->last->timer_link.next = conn;
    else
        list->first = conn;
    list->last = conn;
}

/* ---- ready queue: connections holding a complete request head ----------- */

static void ready_push(struct worker_loop *loop, struct connection *conn)
{
    if (conn->in_ready_queue)
        return;
    conn->in_ready_queue = 1;
    conn->ready_link.next = NULL;
    conn->ready_link.prev = loop->ready_last;
    if (loop->ready_last)
        loop->ready_last->ready_link.next = conn;
    else
        loop->ready_first = conn;
    loop->ready_last = conn;
}

static void ready_remove(struct worker_loop *loop, struct connection *conn)
{
    if (!conn->in_ready_queue)
        return;
    if (conn->ready_link.prev)
        conn->ready_link.prev->ready_link.next = conn->ready_link.next;
    else
        loop->ready_first = conn->ready_link.next;
    if (conn->ready_link.next)
        conn->ready_link.next->ready_link.prev = conn->ready_link.prev;
    else
        loop->ready_last = conn->ready_link.prev;
    conn->in_ready_queue = 0;
}

/* ---- set-up ------------------------------------------------------------ */

struct worker_loop *worker_loop_new(const struct worker_settings *settings)
{
    struct worker_loop *loop = calloc(1, sizeof(*loop));
    if (loop == NULL)
        return NULL;
    loop->settings = *settings;
    /* Room for max_headers fields, as configured (no silent lower cap), but
     * no more than can fit in the header section. */
    size_t capacity = settings->limits.max_headers;
    if (capacity > settings->limits.max_header_size / WORKER_MIN_FIELD_LINE + 1)
        capacity = settings->limits.max_header_size / WORKER_MIN_FIELD_LINE + 1;
    loop->headers = calloc(capacity + 1, sizeof(*loop->headers)); /* +1: never calloc(0) */
    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->headers == NULL || loop->epoll_fd < 0) {
        if (loop->epoll_fd >= 0)
            close(loop->epoll_fd);
        free(loop->headers);
        free(loop);
        return NULL;
    }
    loop->headers_capacity = capacity;
    loop->pending_events = calloc(EPOLL_BATCH, sizeof(struct epoll_event));
    if (loop->pending_events == NULL) {
        close(loop->epoll_fd);
        free(loop);
        return NULL;
    }
    loop->ready_channel = -1;
    loop->handback_channel = -1;
    loop->wake_fd = -1;
    loop->accepting = 1;
    loop->head.headers = loop->headers;
    loop->head.headers_capacity = capacity;
    return loop;
}

static void close_connection(struct worker_loop *loop, struct connection *conn);

void worker_loop_free(struct worker_loop *loop)
{
    for (int fd = 0; fd < loop->connections_size; fd++)
        if (loop->connections[fd])
            close_connection(loop, loop->connections[fd]);
    free(loop->connections);
    free(loop->headers);
    free(loop->pending_events);
    free(loop->slot_owner);
    free(loop->free_slots);
    if (loop->gather_handles) {
        worker_handles_close(loop->gather_handles, loop->shared->max_workers);
        free(loop->gather_handles);
    }
    access_log_close(loop->access_log);
    if (loop->wake_fd >= 0)
        close(loop->wake_fd);
    close(loop->epoll_fd);
    free(loop);
}

/* Listen sockets are tagged in epoll by index | LISTENER_TAG, the ready
 * channel by READY_CHANNEL_TAG, connections by their fd. */
#define LISTENER_TAG (1ULL << 40)
#define READY_CHANNEL_TAG (1ULL << 41)
#define WAKE_TAG (1ULL << 42)

int worker_loop_add_listener(struct worker_loop *loop, int fd, int is_unix,
                             const char *server_name, int server_port)
{
    if (loop->num_listeners >= WORKER_MAX_LISTENERS)
        return -1;
    struct listener *l = &loop->listeners[loop->num_listeners];
    l->fd = fd;
    l->is_unix = is_unix;
    snprintf(l->server_name, sizeof(l->server_name), "%s", server_name);
    l->server_port = server_port;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    /* EPOLLEXCLUSIVE: a new connection wakes one waiting worker, not all. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE,
                             .data.u64 = LISTENER_TAG | (uint64_t)loop->num_listeners};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
        return -1;
    loop->num_listeners++;
    return 0;
}

/* ---- slots: how the holder sees this worker's connections --------------- */

/* The CPUs this process may run on (taskset, cpusets): how many workers can
 * run at once.  0 when unknown, which turns gathering off. */
static int count_usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 0;
    return CPU_COUNT(&set);
}

int worker_loop_join_holder(struct worker_loop *loop, struct shared_state *shared,
                            uint32_t worker_index, int ready_channel, int handback_channel)
{
    if (worker_index >= shared->max_workers)
        return -1;
    loop->slot_owner = calloc(SHARED_SLOTS_PER_WORKER, sizeof(*loop->slot_owner));
    loop->free_slots = malloc(SHARED_SLOTS_PER_WORKER * sizeof(*loop->free_slots));
    if (loop->slot_owner == NULL || loop->free_slots == NULL)
        return -1;
    /* lowest numbers on top: the holder scans up to the high-water mark */
    for (uint32_t i = 0; i < SHARED_SLOTS_PER_WORKER; i++)
        loop->free_slots[i] = SHARED_SLOTS_PER_WORKER - 1 - i;
    loop->free_slot_count = SHARED_SLOTS_PER_WORKER;
    loop->shared = shared;
    loop->slot = &shared->workers[worker_index];
    loop->ready_channel = ready_channel;
    loop->handback_channel = handback_channel;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = READY_CHANNEL_TAG};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, ready_channel, &ev) != 0)
        return -1;
    /* Without it, the copy of a connection the holder took from this worker
     * while it waited would stay open until the worker next woke up: the
     * holder could not close it. */
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wake = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
    if (loop->wake_fd < 0 || epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->wake_fd, &wake) != 0)
        return -1;
    atomic_store(&loop->slot->wake_fd, loop->wake_fd);
    atomic_store(&loop->slot->pid, (int32_t)getpid());
    loop->worker_index = worker_index;
    uint32_t used = atomic_load(&shared->worker_slots_used);
    while (used < worker_index + 1 &&
           !atomic_compare_exchange_weak(&shared->worker_slots_used, &used, worker_index + 1))
        ;
    loop->usable_cpus = count_usable_cpus();
    loop->cpus_counted_ms = shared_clock_ms();
    return 0;
}

static void slot_assign(struct worker_loop *loop, struct connection *conn)
{
    if (loop->slot == NULL || loop->free_slot_count == 0)
        return; /* not stealable: it stays with this worker */
    uint32_t index = loop->free_slots[--loop->free_slot_count];
    struct connection_slot *s = &loop->slot->connections_table[index];
    s->fd = conn->fd;
    s->listener_index = (uint32_t)conn->listener_index;
    atomic_store(&s->state, SLOT_IN_WORKER);
    conn->slot = (int32_t)index;
    loop->slot_owner[index] = conn;
    if (index >= atomic_load(&loop->slot->slots_high_water))
        atomic_store(&loop->slot->slots_high_water, index + 1);
    atomic_fetch_add(&loop->slot->connections, 1);
}

static void slot_release(struct worker_loop *loop, struct connection *conn)
{
    if (conn->slot < 0)
        return;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    if (atomic_load(&s->state) == SLOT_IDLE)
        atomic_fetch_sub(&loop->slot->idle_connections, 1);
    atomic_store(&s->state, SLOT_FREE);
    loop->slot_owner[conn->slot] = NULL;
    loop->free_slots[loop->free_slot_count++] = (uint32_t)conn->slot;
    conn->slot = -1;
    atomic_fetch_sub(&loop->slot->connections, 1);
}

/* Idle with nothing buffered since idle_since_ms: from now on the holder (or
 * a gathering worker) may take it. */
static void slot_park(struct worker_loop *loop, struct connection *conn, uint64_t idle_since_ms)
{
    if (conn->slot < 0)
        return;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    s->requests_served = (uint32_t)conn->requests_served;
    atomic_store(&s->idle_since_ms, idle_since_ms);
    atomic_fetch_add(&loop->slot->idle_connections, 1);
    atomic_store(&s->state, SLOT_IDLE);
}

/* Takes a parked connection back before touching it.  0 when the holder got
 * there first: the connection is no longer ours to read. */
static int slot_claim(struct worker_loop *loop, struct connection *conn)
{
    if (conn->slot < 0)
        return 1;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    uint32_t expected = SLOT_IDLE;
    while (!atomic_compare_exchange_strong(&s->state, &expected, SLOT_IN_WORKER)) {
        if (expected == SLOT_IN_WORKER)
            return 1; /* it was never parked */
        if (expected != SLOT_STEALING)
            break;
        /* The holder is copying the descriptor (one system call): whether
         * it gets it is not known yet.  If pidfd_getfd fails, the slot goes
         * back to SLOT_IDLE and the connection is still ours: giving it up
         * now would leave its request unread by anyone. */
        sched_yield();
        expected = SLOT_IDLE;
    }
    if (expected == SLOT_IDLE) {
        atomic_fetch_sub(&loop->slot->idle_connections, 1);
        return 1;
    }
    /* Stolen (or being stolen): stop watching it; the ring tells us when our
     * copy may be closed. */
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    timer_remove(loop, conn);
    ready_remove(loop, conn);
    conn->state = CONNECTION_GONE;
    return 0;
}

/* A parked connection claimed for a read that found nothing: an event that
 * was not its own (epoll keeps a closed connection's entry while another
 * process holds a copy, and reports it under the number a new connection now
 * has; or a batch of events was older than the connection).  Left claimed,
 * it could never be taken again (handed to the holder after idle_handoff, or
 * gathered): it goes back to being parked, idle since when it was. */
static void park_again_if_nothing_came(struct worker_loop *loop, struct connection *conn)
{
    if (conn->slot < 0 || conn->state != CONNECTION_IDLE || conn->buffer_len > 0)
        return;
    struct connection_slot *s = &loop->slot->connections_table[conn->slot];
    if (atomic_load(&s->state) != SLOT_IN_WORKER)
        return; /* parked already (stray empty lines) */
    connection_release_buffer(conn); /* (the read made one) */
    slot_park(loop, conn, atomic_load(&s->idle_since_ms));
}

static void close_connection(struct worker_loop *loop, struct connection *conn);
static void forget_connection(struct worker_loop *loop, struct connection *conn);
static void hand_back_connections(struct worker_loop *loop, struct connection **conns, size_t n);

/* Closes our copies of the connections the holder or another worker took. */
static void drop_stolen_connections(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    uint32_t tail = atomic_load(&loop->slot->stolen_tail);
    uint32_t head = atomic_load(&loop->slot->stolen_head);
    while (tail != head) {
        _Atomic uint32_t *entry = &loop->slot->stolen[tail % SHARED_STOLEN_RING];
        uint32_t written = atomic_load(entry);
        if (written == 0)
            break; /* reserved, not written yet: read it next time */
        atomic_store(entry, 0);
        tail++;
        uint32_t index = written - 1;
        struct connection *conn = index < SHARED_SLOTS_PER_WORKER ? loop->slot_owner[index] : NULL;
        if (conn == NULL || conn->slot != (int32_t)index ||
            atomic_load(&loop->slot->connections_table[index].state) != SLOT_STOLEN)
            continue;
        forget_connection(loop, conn);
    }
    atomic_store(&loop->slot->stolen_tail, tail);
}

/* Rings the holder if flag says it waits for news (clearing the flag, so
 * that one worker rings once). */
static void wake_holder_if(struct worker_loop *loop, _Atomic uint32_t *flag)
{
    uint32_t set = 1;
    if (atomic_load(flag) && atomic_compare_exchange_strong(flag, &set, 0) &&
        loop->shared->holder_wake_fd >= 0) {
        uint64_t one = 1;
        ssize_t ignored = write(loop->shared->holder_wake_fd, &one, sizeof(one));
        (void)ignored;
    }
}

/* The holder waits long when no busy worker has idle connections it could
 * take: tell it when we are one. */
static void announce_busy(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    atomic_store(&loop->slot->busy_since_ms, shared_clock_ms());
    atomic_store(&loop->slot->busy, 1);
    if (atomic_load(&loop->slot->idle_connections) > 0)
        wake_holder_if(loop, &loop->shared->holder_sleeping);
}

/* About to wait with nothing to do: a connection taken from a stuck worker
 * could come here.  The holder may be waiting for just that. */
static void announce_free(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    atomic_store(&loop->slot->free, 1);
    wake_holder_if(loop, &loop->shared->holder_awaits_free);
}

static void announce_not_free(struct worker_loop *loop)
{
    if (loop->slot != NULL)
        atomic_store(&loop->slot->free, 0);
}

static void announce_done(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    atomic_store(&loop->slot->busy, 0);
    atomic_fetch_add(&loop->slot->requests_served, 1);
    atomic_fetch_add(&loop->shared->requests_total, 1);
}

static void publish_current_request(struct worker_loop *loop)
{
    if (loop->slot == NULL)
        return;
    char *text = loop->slot->current_request;
    size_t m = loop->head.method_len, t = loop->head.target_len;
    if (m > SHARED_REQUEST_TEXT / 4)
        m = SHARED_REQUEST_TEXT / 4;
    if (m + 1 + t >= SHARED_REQUEST_TEXT)
        t = SHARED_REQUEST_TEXT - m - 2;
    memcpy(text, loop->head.method, m);
    text[m] = ' ';
    memcpy(text + m + 1, loop->head.target, t);
    text[m + 1 + t] = '\0';
}

/* ---- connections ------------------------------------------------------- */

static int track_connection(struct worker_loop *loop, struct connection *conn)
{
    if (conn->fd >= loop->connections_size) {
        int size = loop->connections_size ? loop->connections_size : 256;
        while (size <= conn->fd)
            size *= 2;
        struct connection **grown = realloc(loop->connections, sizeof(*grown) * (size_t)size);
        if (grown == NULL)
            return -1;
        memset(grown + loop->connections_size, 0,
               sizeof(*grown) * (size_t)(size - loop->connections_size));
        loop->connections = grown;
        loop->connections_size = size;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)conn->fd};
    /* EEXIST: an entry for this very socket under this number is left (epoll
     * forgets one only with the socket's last copy; forget_connection removes
     * its own, but a copy inherited across a fork may not be): set it anew
     * rather than drop a connection that comes back. */
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, conn->fd, &ev) != 0 &&
        (errno != EEXIST || epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, conn->fd, &ev) != 0))
        return -1;
    loop->connections[conn->fd] = conn;
    loop->num_connections++;
    return 0;
}

/* Our copy goes away; the connection itself may live on elsewhere. */
static void forget_connection(struct worker_loop *loop, struct connection *conn)
{
    timer_remove(loop, conn);
    ready_remove(loop, conn);
    if (loop->turn_over == conn)
        loop->turn_over = NULL;
    if (loop->current == conn)
        loop->current = NULL;
    slot_release(loop, conn);
    /* close() removes a descriptor from epoll only with the last copy of its
     * socket, and other copies are common: the app's psgix.io handle, a
     * connection taken away whose old owner has not closed its copy yet.
     * Left in, the entry reports that socket's events under this number,
     * which the next connection here gets: a worker would spin on a socket
     * the app keeps with unread input. */
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    close(conn->fd);
    loop->connections[conn->fd] = NULL;
    loop->num_connections--;
    connection_free(conn);
}

/* The end of a client connection. */
static void close_connection(struct worker_loop *loop, struct connection *conn)
{
    if (loop->shared)
        atomic_fetch_sub(&loop->shared->open_connections, 1);
    forget_connection(loop, conn);
}

/* Stop sending, then discard what the client still sends for a while: closing
 * with unread input makes the kernel send a reset, which can destroy the
 * response before the client reads it. */
static void close_lingering(struct worker_loop *loop, struct connection *conn)
{
    ready_remove(loop, conn);
    if (loop->current == conn)
        loop->current = NULL;
    shutdown(conn->fd, SHUT_WR);
    conn->state = CONNECTION_LINGERING;
    conn->buffer_len = 0;
    conn->requests_served = 0; /* reused as the count of bytes discarded */
    timer_append(loop, conn, TIMER_LINGERING, now_seconds() + LINGER_SECONDS);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* Whether head is a parsed request line with the method HEAD.  A request
 * that failed before its method was read has method_len 0. */
static int is_head_request(const struct http_request_head *head)
{
    return head != NULL && head->method_len == 4 && memcmp(head->method, "HEAD", 4) == 0;
}

/* Writes without waiting: used for errors on connections that are not being
 * served, where a client that does not read gets nothing more.  head is the
 * request as far as it was parsed (NULL: not at all): a response to HEAD
 * keeps the Content-Length but sends no content (RFC 9110 9.3.2). */
static size_t send_error_response(struct connection *conn, int status,
                                  const struct http_request_head *head)
{
    char response[512];
    const char *reason = reason_phrase(status);
    int omit_body = is_head_request(head);
    int n = snprintf(response, sizeof(response),
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s%s",
                     status, reason, http_date_now(), strlen(reason) + 1,
                     omit_body ? "" : reason, omit_body ? "" : "\n");
    ssize_t ignored = send(conn->fd, response, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    return omit_body ? 0 : strlen(reason) + 1;
}

static void reject_connection(struct worker_loop *loop, struct connection *conn, int status,
                              const struct http_request_head *head)
{
    size_t body = send_error_response(conn, status, head);
    request_accounting_end(loop, conn, status, body, 0);
    close_lingering(loop, conn);
}

/* The most a request head can take in the buffer before a limit answers it. */
static size_t max_head_bytes(const struct worker_loop *loop)
{
    return loop->settings.limits.max_request_line + loop->settings.limits.max_header_size + 8;
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

/*
 * Looks at the buffered bytes of a connection that is receiving a head.
 * A head is parsed only when it looks complete, a new line has ended (to
 * reject garbage early), the line still arriving has outgrown its limit or
 * the buffer is full (to apply the limits): a client sending one byte at a
 * time cannot make us parse the same bytes over and over for each byte.
 */
static void park_idle_connection(struct worker_loop *loop, struct connection *conn);

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

static void examine_buffered_head(struct worker_loop *loop, struct connection *conn,
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
        connection_consume(conn, conn->buffer_len);
        park_idle_connection(loop, conn);
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
        ready_push(loop, conn);
        return;
    }
    if (new_line || new_bytes_from == 0 || open_line_over_limit(loop, conn) ||
        conn->buffer_len >= max_head_bytes(loop)) {
        struct http_request_head probe;
        probe.headers = loop->headers;
        probe.headers_capacity = loop->headers_capacity;
        int r = parse_request_head(conn->buffer, conn->buffer_len, &probe,
                                   &loop->settings.limits);
        if (r == HTTP_PARSE_ERROR) {
            reject_connection(loop, conn, probe.error_status, &probe);
        } else if (r > 0) {
            ready_push(loop, conn); /* e.g. a head ended by a bare "\r\n" after empty lines */
        } else if (conn->buffer_len >= max_head_bytes(loop)) {
            reject_connection(loop, conn, 431, &probe);
        }
    }
}

/* Whether a body read before serving is all here, or as much of it as is
 * read ahead (then the app reads the rest).  A chunked body is decoded into
 * scratch space only to find its end; a malformed one, or one whose size
 * lines announce more than --max-body-size, counts as complete: the worker's
 * read of it answers 400 or 413, as without the read-ahead. */
static int preread_body_complete(struct connection *conn)
{
    if (conn->body_preread == CONNECTION_PREREAD_CHUNKED) {
        char scratch[4096];
        while (conn->body_scanned < conn->buffer_len) {
            size_t len = conn->buffer_len - conn->body_scanned, consumed = 0;
            if (len > sizeof(scratch))
                len = sizeof(scratch);
            memcpy(scratch, conn->buffer + conn->body_scanned, len);
            int r = decode_chunked(&conn->body_scan, scratch, &len, &consumed);
            conn->body_scanned += consumed;
            if (r != CHUNKED_NEED_MORE)
                return 1;
        }
    }
    return conn->buffer_len >= conn->body_wanted;
}

/* A connection whose small body is being read before it is served: more of
 * it arrived.  Complete, it is ready; else its read timeout starts again. */
static void examine_buffered_body(struct worker_loop *loop, struct connection *conn)
{
    if (preread_body_complete(conn)) {
        timer_remove(loop, conn);
        ready_push(loop, conn);
    } else
        timer_append(loop, conn, TIMER_READING_BODY, now_seconds() + loop->settings.read_timeout);
}

/* Reads what the socket has.  Returns -1 when the connection was closed.
 * (recv rather than read, here and wherever a client socket is read: it skips
 * the file layer, about 70 ns of each call on this project's machine.) */
static int read_connection(struct worker_loop *loop, struct connection *conn)
{
    for (;;) {
        size_t max = conn->body_wanted > max_head_bytes(loop) ? conn->body_wanted
                                                              : max_head_bytes(loop);
        size_t room = connection_reserve(conn, max);
        if (room == 0) {
            if (conn->body_preread)
                examine_buffered_body(loop, conn); /* as much as is read ahead */
            return 0; /* else full: examine_buffered_head has answered it */
        }
        ssize_t n = recv(conn->fd, conn->buffer + conn->buffer_len, room, 0);
        if (n > 0 && conn->body_preread) {
            conn->buffer_len += (size_t)n;
            examine_buffered_body(loop, conn);
            if (conn->in_ready_queue || (size_t)n < room)
                return 0;
            continue;
        }
        if (n > 0) {
            size_t before = conn->buffer_len;
            conn->buffer_len += (size_t)n;
            if (conn->state == CONNECTION_IDLE) {
                conn->state = CONNECTION_READING_HEAD;
                timer_append(loop, conn, TIMER_READING_HEAD,
                             now_seconds() + loop->settings.header_timeout);
            }
            examine_buffered_head(loop, conn, before);
            if (conn->state == CONNECTION_LINGERING || conn->state == CONNECTION_IDLE ||
                conn->in_ready_queue)
                return 0; /* (parked: not ours to read until claimed again) */
            if ((size_t)n < room)
                return 0; /* the socket is most likely empty: let epoll say */
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            close_connection(loop, conn);
            return -1;
        }
        return 0;
    }
}

/* Starts watching a connection that is new to this worker.  Returns it, or
 * NULL when it could not be tracked (then it is closed). */
static struct connection *adopt_connection(struct worker_loop *loop, int fd,
                                           const struct sockaddr *addr, socklen_t addr_len,
                                           int listener_index)
{
    struct listener *l = &loop->listeners[listener_index];
    struct connection *conn = connection_new(fd, l->is_unix ? NULL : addr, addr_len, l->is_unix);
    if (conn == NULL || track_connection(loop, conn) != 0) {
        /* (a client loses its connection here: say so, it should not happen) */
        serow_log_error("worker: a connection could not be watched and is closed (%s)",
                        conn ? strerror(errno) : "out of memory");
        if (conn)
            connection_free(conn);
        close(fd);
        if (loop->shared)
            atomic_fetch_sub(&loop->shared->open_connections, 1);
        return NULL;
    }
    conn->listener_index = listener_index;
    slot_assign(loop, conn);
    timer_append(loop, conn, TIMER_READING_HEAD, now_seconds() + loop->settings.header_timeout);
    return conn;
}

/* Accepts one connection.  Returns 0 when there was none to take. */
static int accept_connection(struct worker_loop *loop, int listener_index)
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
        request_metrics_count_accept(&loop->slot->counters);
    struct connection *conn = adopt_connection(loop, fd, (struct sockaddr *)&addr, addr_len,
                                               listener_index);
    /* TCP_DEFER_ACCEPT usually means the request is already here. */
    if (conn)
        read_connection(loop, conn);
    return 1;
}

/* Starts watching a connection another process passed or gave up, with the
 * count of requests it has served.  NULL when it could not be tracked. */
static struct connection *adopt_passed_connection(struct worker_loop *loop, int fd,
                                                  const struct passed_connection *info)
{
    uint32_t listener = info->listener_index < (uint32_t)loop->num_listeners ? info->listener_index : 0;
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof(addr);
    if (getpeername(fd, (struct sockaddr *)&addr, &addr_len) != 0)
        addr_len = 0;
    struct connection *conn = adopt_connection(loop, fd, addr_len ? (struct sockaddr *)&addr : NULL,
                                               addr_len, (int)listener);
    if (conn)
        conn->requests_served = info->requests_served;
    return conn;
}

/* Takes connections with a request waiting from the holder. */
static void receive_ready_connection(struct worker_loop *loop)
{
    int fd;
    struct passed_connection info;
    if (receive_connections(loop->ready_channel, &fd, &info, 1) != 1)
        return; /* another worker was quicker */
    atomic_fetch_sub(&loop->shared->queued_connections, 1);
    struct connection *conn = adopt_passed_connection(loop, fd, &info);
    if (conn)
        read_connection(loop, conn);
}

/* ---- gathering connections where the CPU is ------------------------------
 *
 * Workers that outnumber the CPUs they may run on take turns on them.  A
 * connection whose worker waits for its turn waits with it, up to a few
 * scheduler ticks (4 ms each at HZ=250), although the worker that has the CPU
 * could answer it at once; and every hand-over of the CPU from one busy
 * worker to another is a context switch.  Measured here with everything on
 * one CPU, 16 keep-alive clients: 4 workers, each serving its own
 * connections, 83k req/s with a p99 of 5.2 ms; 1 worker serving all of
 * them, 106k req/s with a p99 of 0.39 ms.
 *
 * So the workers that hold the most connections, as many as there are CPUs
 * (ties: the lower slot), take the parked connections of the other workers,
 * up to an even share each: on one CPU the busy connections gather in one
 * worker, which serves them as an event loop would.  A worker stuck in a
 * request (SHARED_STUCK_AFTER_MS) is out of the count; the holder hands its
 * parked connections to free workers, and the next gatherer collects them.
 * New connections still go to whichever worker the kernel wakes, and move
 * once, after their first request.  Nothing of this happens while there are
 * no more workers than CPUs.
 */

/* How often a worker looks at the others: the look reads a few words of
 * every worker's slot, so not on every request. */
#define GATHER_LOOK_MS 1
/* How often the CPUs are counted again (an operator's taskset). */
#define RECOUNT_CPUS_MS 1000

/* A parked connection taken from another worker: idle here as it was there. */
static void adopt_gathered_connection(struct worker_loop *loop, int fd,
                                      const struct passed_connection *info)
{
    struct connection *conn = adopt_passed_connection(loop, fd, info);
    if (conn == NULL)
        return;
    conn->state = CONNECTION_IDLE;
    uint64_t idle_ms = shared_ms_since(shared_clock_ms(), info->idle_since_ms);
    timer_append(loop, conn, TIMER_IDLE,
                 now_seconds() + loop->settings.keepalive_timeout - (double)idle_ms / 1000.0);
    slot_park(loop, conn, info->idle_since_ms);
}

/* Gatherers rank by connections owned, ties to the lower slot: whether the
 * worker in slot i with c connections ranks ahead of us. */
static int ranks_ahead(const struct worker_loop *loop, uint32_t i, uint32_t c, uint32_t mine)
{
    return c > mine || (c == mine && i < loop->worker_index);
}

/* Takes worker `from`'s parked connections while this worker holds fewer
 * than share.  Returns how many it took. */
static uint32_t gather_from(struct worker_loop *loop, uint32_t from, uint32_t share)
{
    struct worker_slot *w = &loop->shared->workers[from];
    uint32_t high = atomic_load(&w->slots_high_water);
    if (high > SHARED_SLOTS_PER_WORKER)
        high = SHARED_SLOTS_PER_WORKER;
    uint32_t taken = 0;
    for (uint32_t k = 0; k < high && atomic_load(&loop->slot->connections) < share; k++) {
        if (atomic_load(&w->connections_table[k].state) != SLOT_IDLE)
            continue;
        struct passed_connection info;
        int fd = take_parked_connection(loop->shared, &loop->gather_handles[from], from, k, &info);
        if (fd == TAKE_REFUSED) {
            loop->usable_cpus = 0; /* not allowed here: never try again */
            break;
        }
        if (fd < 0)
            continue;
        taken++;
        adopt_gathered_connection(loop, fd, &info);
    }
    if (taken) {
        atomic_fetch_add(&loop->shared->connections_gathered, taken);
        /* Its copies must go now, not when it next wakes: until then a
         * connection we close stays open (the client would wait for the end
         * of a response that ends with the connection).  Not only when it
         * says it is free: it may be between that look and its wait. */
        wake_worker(loop->shared, &loop->gather_handles[from], from);
    }
    return taken;
}

static void gather_connections(struct worker_loop *loop)
{
    if (loop->usable_cpus <= 0 || loop->stopping)
        return;
    uint64_t now = shared_clock_ms();
    if (now - loop->gather_looked_ms < GATHER_LOOK_MS)
        return;
    loop->gather_looked_ms = now;
    if (now - loop->cpus_counted_ms >= RECOUNT_CPUS_MS) {
        loop->cpus_counted_ms = now;
        loop->usable_cpus = count_usable_cpus();
    }

    struct shared_state *shared = loop->shared;
    uint32_t used = atomic_load(&shared->worker_slots_used);
    if (used > shared->max_workers)
        used = shared->max_workers;
    uint32_t me = loop->worker_index;
    uint32_t my_connections = atomic_load(&loop->slot->connections);
    uint32_t cpus = (uint32_t)loop->usable_cpus;
    /* Ahead of us: the workers that count (alive, not stopping, not stuck)
     * with more connections, or as many in a lower slot. */
    uint32_t ahead = 0, counting = 0, total = 0;
    for (uint32_t i = 0; i < used; i++) {
        struct worker_slot *w = &shared->workers[i];
        if (atomic_load(&w->pid) <= 0)
            continue;
        uint32_t c = atomic_load(&w->connections);
        total += c;
        if (i == me || atomic_load(&w->stopping) || shared_worker_is_stuck(w, now))
            continue;
        counting++;
        ahead += ranks_ahead(loop, i, c, my_connections);
    }
    if (ahead >= cpus || counting + 1 <= cpus)
        return; /* not a gatherer, or every worker that counts has a CPU */
    uint32_t share = (total + cpus - 1) / cpus;
    if (my_connections >= share)
        return;
    if (loop->gather_handles == NULL) {
        loop->gather_handles = malloc(sizeof(*loop->gather_handles) * shared->max_workers);
        if (loop->gather_handles == NULL)
            return;
        worker_handles_init(loop->gather_handles, shared->max_workers);
    }
    /* From the workers behind us, which are not in a request (a stuck one's
     * are the holder's to spread; a quick one is looked at again soon). */
    for (uint32_t i = 0; i < used && atomic_load(&loop->slot->connections) < share; i++) {
        struct worker_slot *w = &shared->workers[i];
        if (i == me || atomic_load(&w->pid) <= 0 || atomic_load(&w->stopping) ||
            atomic_load(&w->busy) || atomic_load(&w->idle_connections) == 0)
            continue;
        if (ranks_ahead(loop, i, atomic_load(&w->connections), my_connections))
            continue; /* ahead of us: a gatherer too, or about to be */
        gather_from(loop, i, share);
    }
}

static void drain_lingering(struct worker_loop *loop, struct connection *conn)
{
    char discard[16384];
    for (;;) {
        ssize_t n = recv(conn->fd, discard, sizeof(discard), 0);
        if (n > 0) {
            conn->requests_served += (unsigned long)n;
            if (conn->requests_served > LINGER_MAX_BYTES) {
                close_connection(loop, conn);
                return;
            }
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return;
        close_connection(loop, conn);
        return;
    }
}

/*
 * The header and keep-alive timeouts are the client's time, but a worker busy
 * with a request reads nobody meanwhile.  So before a connection is expired,
 * what it has sent is read: a head that arrived complete in time is served,
 * not answered 408, and a request sent on an idle connection is not dropped,
 * just because the worker got to them late.
 */
static void expire_timers(struct worker_loop *loop, double now)
{
    struct connection *conn;
    while ((conn = loop->timers[TIMER_READING_HEAD].first) && conn->deadline <= now) {
        if (!conn->in_ready_queue && read_connection(loop, conn) < 0)
            continue; /* the client has gone */
        if (conn->state == CONNECTION_LINGERING)
            continue; /* what arrived was answered with an error */
        if (conn->in_ready_queue) {
            /* served next; the timer only matters if its head turns out to be
             * empty lines, and appending keeps the list in deadline order */
            timer_append(loop, conn, TIMER_READING_HEAD, now + loop->settings.header_timeout);
        } else if (conn->buffer_len == 0) {
            close_connection(loop, conn); /* nothing sent: nothing to answer */
        } else {
            /* parsed only to learn the method: a HEAD gets no body */
            struct http_request_head probe;
            probe.headers = loop->headers;
            probe.headers_capacity = loop->headers_capacity;
            parse_request_head(conn->buffer, conn->buffer_len, &probe, &loop->settings.limits);
            reject_connection(loop, conn, 408, &probe);
        }
    }
    while ((conn = loop->timers[TIMER_READING_BODY].first) && conn->deadline <= now) {
        if (read_connection(loop, conn) < 0 || conn->in_ready_queue || conn->deadline > now)
            continue; /* gone, or its body (or more of it) came in time */
        struct http_request_head probe; /* a complete head: for its method */
        probe.headers = loop->headers;
        probe.headers_capacity = loop->headers_capacity;
        parse_request_head(conn->buffer, conn->buffer_len, &probe, &loop->settings.limits);
        reject_connection(loop, conn, 408, &probe);
    }
    while ((conn = loop->timers[TIMER_IDLE].first) && conn->deadline <= now) {
        if (!slot_claim(loop, conn))
            continue; /* the holder has it, and keeps its own time */
        if (read_connection(loop, conn) < 0)
            continue;
        if (conn->state == CONNECTION_IDLE)
            close_connection(loop, conn); /* still nothing: now it is idle too long */
    }
    while ((conn = loop->timers[TIMER_LINGERING].first) && conn->deadline <= now)
        close_connection(loop, conn);
}

static int next_timeout_ms(struct worker_loop *loop, double now)
{
    double earliest = -1;
    for (int k = 0; k < TIMER_LIST_COUNT; k++) {
        struct connection *first = loop->timers[k].first;
        if (first && (earliest < 0 || first->deadline < earliest))
            earliest = first->deadline;
    }
    if (earliest < 0)
        return -1;
    double ms = (earliest - now) * 1000.0 + 10.0; /* coarse clock: do not wake early */
    return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

/*
 * A request whose body is small (Content-Length up to PREREAD_BODY_MAX) or
 * chunked, and not all here yet, is not served yet: its connection goes back
 * to the event loop until the body has arrived, or PREREAD_BODY_MAX bytes of
 * a chunked one.  A client that asked for 100 Continue gets it now, as it
 * would once the worker began to read the body (which it reads whole before
 * the app runs).  Returns 1 when the connection waits.
 */
static int wait_for_small_body(struct worker_loop *loop, struct connection *conn,
                               size_t head_len)
{
    const struct http_request_head *head = &loop->head;
    if (conn->body_preread) {
        /* back from the event loop with its body */
        conn->body_preread = CONNECTION_PREREAD_NONE;
        return 0;
    }
    if (head->framing == HTTP_BODY_LENGTH && head->content_length <= PREREAD_BODY_MAX) {
        conn->body_preread = CONNECTION_PREREAD_LENGTH;
        conn->body_wanted = head_len + (size_t)head->content_length;
    } else if (head->framing == HTTP_BODY_CHUNKED) {
        conn->body_preread = CONNECTION_PREREAD_CHUNKED;
        /* encoded bytes, no more than --max-body-size of them: the app reads
         * the rest, and answers 413 once the decoded body passes the limit */
        uint64_t ahead = loop->settings.max_body_size &&
                         loop->settings.max_body_size < PREREAD_BODY_MAX
                             ? loop->settings.max_body_size
                             : PREREAD_BODY_MAX;
        conn->body_wanted = head_len + (size_t)ahead;
        conn->body_scanned = head_len;
        chunked_decoder_init(&conn->body_scan);
        conn->body_scan.max_body = loop->settings.max_body_size;
    } else {
        return 0;
    }
    if (preread_body_complete(conn)) {
        conn->body_preread = CONNECTION_PREREAD_NONE;
        return 0;
    }
    if (head->expect_continue && conn->buffer_len == head_len) {
        static const char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t ignored = send(conn->fd, continue_line, sizeof(continue_line) - 1,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)ignored; /* an empty socket buffer takes 25 bytes; else the client gave up */
    }
    timer_append(loop, conn, TIMER_READING_BODY, now_seconds() + loop->settings.read_timeout);
    return 1;
}

/* Takes a connection off the ready queue and parses its head for serving. */
static int start_request(struct worker_loop *loop, struct connection *conn)
{
    ready_remove(loop, conn);
    int r = parse_request_head(conn->buffer, conn->buffer_len, &loop->head,
                               &loop->settings.limits);
    if (r == HTTP_PARSE_INCOMPLETE) {
        /* "\r\n\r\n" matched only empty lines before the request line */
        return 0;
    }
    if (r == HTTP_PARSE_ERROR) {
        reject_connection(loop, conn, loop->head.error_status, &loop->head);
        return 0;
    }
    if (loop->settings.max_body_size && loop->head.framing == HTTP_BODY_LENGTH &&
        loop->head.content_length > loop->settings.max_body_size) {
        reject_connection(loop, conn, 413, &loop->head);
        return 0;
    }
    if (wait_for_small_body(loop, conn, (size_t)r))
        return 0;
    timer_remove(loop, conn);
    conn->state = CONNECTION_SERVING;
    conn->empty_lines_dropped = 0;
    loop->current = conn;
    loop->head_len = (size_t)r;
    loop->body_remaining = loop->head.framing == HTTP_BODY_LENGTH ? loop->head.content_length : 0;
    loop->body_received = 0;
    loop->body_started = now_seconds();
    loop->body_done = loop->head.framing == HTTP_BODY_NONE ||
                      (loop->head.framing == HTTP_BODY_LENGTH && loop->body_remaining == 0);
    loop->continue_sent = 0;
    loop->response_started = 0;
    if (loop->head.framing == HTTP_BODY_CHUNKED) {
        chunked_decoder_init(&loop->chunked);
        loop->chunked.max_body = loop->settings.max_body_size;
    }
    request_accounting_start(loop, conn);
    announce_busy(loop);
    publish_current_request(loop);
    return 1;
}

/*
 * epoll_wait that a signal always interrupts.  A signal caught after the
 * embedding last looked at its pending signals, but before epoll_wait began,
 * would leave the loop asleep with the signal unhandled (a TERM ignored until
 * the master's --graceful-timeout kills the worker).  So signals are blocked
 * while *signal_pending is checked, and epoll_pwait unblocks them atomically
 * (and those blocked outside the wait: wait_signal_mask).
 */
static int epoll_wait_unless_signalled(struct worker_loop *loop, struct epoll_event *events,
                                       int timeout_ms)
{
    if (loop->signal_pending == NULL)
        return epoll_wait(loop->epoll_fd, events, EPOLL_BATCH, timeout_ms);
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    int n;
    if (*loop->signal_pending) {
        n = -1;
        errno = EINTR;
    } else {
        n = epoll_pwait(loop->epoll_fd, events, EPOLL_BATCH, timeout_ms,
                        loop->has_wait_signal_mask ? &loop->wait_signal_mask : &old);
    }
    int saved_errno = errno;
    /* epoll_pwait lets a pending signal in only when it finds no event: a
     * worker that always has one (a busy server, or a listener the master
     * shut down) would keep its stop signal blocked for ever.  So the wait
     * mask is put in place once more, which delivers it (Perl's handler
     * only notes it: the loop returns at its next wait). */
    if (loop->has_wait_signal_mask)
        sigprocmask(SIG_SETMASK, &loop->wait_signal_mask, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
    return n;
}

/* Waits up to timeout_ms for events, which become the loop's pending ones
 * (none on an error).  Returns their count, or -1 (EINTR: a signal to
 * handle). */
static int wait_for_events(struct worker_loop *loop, int timeout_ms)
{
    int n = epoll_wait_unless_signalled(loop, loop->pending_events, timeout_ms);
    loop->pending_next = 0;
    loop->pending_count = n > 0 ? n : 0;
    return n;
}

/* ---- the whole server stopping ------------------------------------------ */

static int in_stop_grace(const struct worker_loop *loop, double now)
{
    return loop->stop_grace_until > 0 && now < loop->stop_grace_until;
}

/* Idle connections in the holder, or passed on and not yet taken by a worker. */
static int holder_has_connections(const struct worker_loop *loop)
{
    return loop->shared && loop->ready_channel >= 0 &&
           (atomic_load(&loop->shared->held_connections) > 0 ||
            atomic_load(&loop->shared->queued_connections) > 0);
}

/* Caps the deadlines of a timer list: min() keeps the list in order. */
static void cap_deadlines(struct worker_loop *loop, enum timer_list_kind kind, double deadline)
{
    for (struct connection *conn = loop->timers[kind].first; conn; conn = conn->timer_link.next)
        if (conn->deadline > deadline)
            conn->deadline = deadline;
}

/* The grace is over: what the holder still passes is no longer taken. */
static void end_stop_grace_if_over(struct worker_loop *loop)
{
    if (in_stop_grace(loop, now_seconds()))
        return;
    loop->stop_grace_until = 0;
    if (loop->ready_channel >= 0)
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, loop->ready_channel, NULL);
}

/* Handles one event from epoll.  Returns as soon as a request is ready
 * rather than reading every connection that has something: the ones left
 * unread stay idle, and so free for the holder to take elsewhere, while this
 * worker answers. */
static void handle_event(struct worker_loop *loop, const struct epoll_event *event)
{
    uint64_t tag = event->data.u64;
    if (tag & LISTENER_TAG) {
        for (int i = 0; i < ACCEPT_BATCH && loop->accepting && !loop->ready_first; i++)
            if (!accept_connection(loop, (int)(tag & 0xffff)))
                break;
        return;
    }
    if (tag == WAKE_TAG) {
        uint64_t count;
        ssize_t ignored = read(loop->wake_fd, &count, sizeof(count));
        (void)ignored; /* the loop's next turn drops what was taken */
        return;
    }
    if (tag == READY_CHANNEL_TAG) {
        if (!loop->stopping || in_stop_grace(loop, now_seconds()))
            receive_ready_connection(loop);
        return;
    }
    int fd = (int)tag;
    struct connection *conn = fd < loop->connections_size ? loop->connections[fd] : NULL;
    if (conn == NULL || conn->in_ready_queue)
        return;
    switch (conn->state) {
    case CONNECTION_LINGERING:
        drain_lingering(loop, conn);
        break;
    case CONNECTION_IDLE:
        if (slot_claim(loop, conn) && read_connection(loop, conn) == 0)
            park_again_if_nothing_came(loop, conn);
        break;
    case CONNECTION_READING_HEAD:
        read_connection(loop, conn);
        break;
    default:
        break;
    }
}

/*
 * A pipelining connection's turn is over: the events from the last wait not
 * handled yet, or if there are none the events of a wait that does not
 * block, are handled now (the connections that have a request join the ready
 * queue, new connections are accepted), and only then is the pipelining
 * connection's next request looked at: it goes behind them.
 */
static void look_around(struct worker_loop *loop)
{
    if (loop->pending_next >= loop->pending_count)
        (void)wait_for_events(loop, 0); /* (EINTR: the loop's next wait says) */
    while (loop->pending_next < loop->pending_count)
        handle_event(loop, &loop->pending_events[loop->pending_next++]);
    struct connection *conn = loop->turn_over;
    loop->turn_over = NULL;
    if (conn != NULL && conn->state == CONNECTION_READING_HEAD && !conn->in_ready_queue)
        examine_buffered_head(loop, conn, 0);
}

int worker_loop_next_request(struct worker_loop *loop)
{
    for (;;) {
        drop_stolen_connections(loop);
        gather_connections(loop);
        if (loop->turn_over)
            look_around(loop);
        while (loop->ready_first) {
            if (start_request(loop, loop->ready_first))
                return 1;
        }
        if (loop->pending_next < loop->pending_count) {
            handle_event(loop, &loop->pending_events[loop->pending_next++]);
            continue;
        }
        expire_timers(loop, now_seconds());
        if (loop->ready_first)
            continue;
        if (loop->stop_grace_until > 0)
            end_stop_grace_if_over(loop);
        if (loop->stopping && worker_loop_is_drained(loop))
            return 0;

        int timeout_ms = next_timeout_ms(loop, now_seconds());
        if (loop->stop_grace_until > 0 && holder_has_connections(loop) &&
            (timeout_ms < 0 || timeout_ms > STOP_GRACE_POLL_MS))
            timeout_ms = STOP_GRACE_POLL_MS;
        /* (a stopping worker takes no connections the holder takes from stuck workers) */
        if (timeout_ms != 0 && !loop->stopping)
            announce_free(loop);
        int n = wait_for_events(loop, timeout_ms);
        if (timeout_ms != 0)
            announce_not_free(loop);
        if (n < 0)
            return 0; /* EINTR: let Perl run its signal handlers */
    }
}

/* ---- serving the current request ---------------------------------------- */

/* Waits until fd is ready for events, up to timeout seconds. 1 ready, 0 not. */
static int wait_for(int fd, short events, double timeout)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    double deadline = now_seconds() + timeout;
    for (;;) {
        double left = deadline - now_seconds();
        if (left <= 0)
            return 0;
        int r = poll(&pfd, 1, (int)(left * 1000.0) + 1);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

int serow_client_hung_up(struct worker_loop *loop, double timeout)
{
    return loop->current == NULL || wait_for(loop->current->fd, POLLRDHUP, timeout);
}

int worker_loop_write(struct worker_loop *loop, struct iovec *iov, int iovcnt)
{
    struct connection *conn = loop->current;
    if (conn == NULL)
        return -1;
    loop->response_started = 1;
    while (iovcnt > 0) {
        int batch = iovcnt > IOV_MAX ? IOV_MAX : iovcnt;
        ssize_t n = writev(conn->fd, iov, batch);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN && wait_for(conn->fd, POLLOUT, loop->settings.write_timeout))
                continue;
            return -1;
        }
        while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

int worker_loop_sendfile(struct worker_loop *loop, int file_fd, uint64_t offset, uint64_t len)
{
    struct connection *conn = loop->current;
    if (conn == NULL)
        return -1;
    loop->response_started = 1;
    off_t off = (off_t)offset;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = sendfile(conn->fd, file_fd, &off, chunk);
        if (n > 0) {
            len -= (uint64_t)n;
            continue;
        }
        if (n == 0)
            return -1; /* the file is shorter than it said */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN && wait_for(conn->fd, POLLOUT, loop->settings.write_timeout))
            continue;
        return -1;
    }
    return 0;
}

static void send_continue_if_expected(struct worker_loop *loop)
{
    struct connection *conn = loop->current;
    /* Only when the body has not started arriving: then the client waits for us. */
    if (loop->head.expect_continue && !loop->continue_sent && !loop->response_started &&
        conn->buffer_len <= loop->head_len) {
        static const char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";
        struct iovec iov = {(void *)continue_line, sizeof(continue_line) - 1};
        worker_loop_write(loop, &iov, 1);
        loop->response_started = 0;
    }
    loop->continue_sent = 1;
}

/*
 * How long read_more_body may wait for the next bytes.  --read-timeout bounds
 * each wait, but a client sending a byte just before it runs out would hold
 * the worker for ever; so the body must also average --min-body-rate, after
 * read_timeout of grace (as Apache's mod_reqtimeout MinRate).  0: out of time.
 */
static double body_wait_left(const struct worker_loop *loop)
{
    double wait = loop->settings.read_timeout;
    if (loop->settings.min_body_rate > 0) {
        double deadline = loop->body_started + loop->settings.read_timeout +
                          (double)loop->body_received / loop->settings.min_body_rate;
        double left = deadline - now_seconds();
        if (left < wait)
            wait = left > 0 ? left : 0;
    }
    return wait;
}

/* Reads more of the current connection's input into its buffer (after the
 * head).  0 ok, 408 on timeout, -1 when the client is gone. */
static int read_more_body(struct worker_loop *loop)
{
    struct connection *conn = loop->current;
    for (;;) {
        size_t room = connection_reserve(conn, loop->head_len + CONNECTION_READ_SIZE);
        if (room == 0)
            return 0;
        ssize_t n = recv(conn->fd, conn->buffer + conn->buffer_len, room, 0);
        if (n > 0) {
            conn->buffer_len += (size_t)n;
            return 0;
        }
        if (n == 0)
            return -1;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -1;
        double wait = body_wait_left(loop);
        if (wait <= 0 || !wait_for(conn->fd, POLLIN, wait))
            return 408;
    }
}

int worker_loop_read_body(struct worker_loop *loop, char *out, size_t cap, size_t *got)
{
    struct connection *conn = loop->current;
    *got = 0;
    if (conn == NULL)
        return -1;
    if (loop->body_done)
        return 0;
    send_continue_if_expected(loop);

    for (;;) {
        /* body bytes buffered after the head */
        size_t avail = conn->buffer_len - loop->head_len;
        if (avail > 0) {
            char *body = conn->buffer + loop->head_len;
            if (loop->head.framing == HTTP_BODY_LENGTH) {
                size_t take = avail < cap ? avail : cap;
                if ((uint64_t)take > loop->body_remaining)
                    take = (size_t)loop->body_remaining;
                memcpy(out, body, take);
                /* keep the head, drop the body bytes just handed out */
                memmove(body, body + take, avail - take);
                conn->buffer_len -= take;
                loop->body_remaining -= take;
                loop->body_received += take;
                if (loop->body_remaining == 0)
                    loop->body_done = 1;
                *got = take;
                return 0;
            } else {
                /* decoded data is never longer than its input: give the
                 * decoder at most cap bytes and all it decodes fits in out */
                size_t len = avail < cap ? avail : cap, consumed = 0;
                int r = decode_chunked(&loop->chunked, body, &len, &consumed);
                if (r == CHUNKED_ERROR)
                    return 400;
                /* as soon as the size line says so, like a Content-Length
                 * over the limit (and so the body never passes it) */
                if (r == CHUNKED_TOO_LARGE)
                    return 413;
                size_t take = len;
                memcpy(out, body, take);
                memmove(body, body + consumed, avail - consumed);
                conn->buffer_len -= consumed;
                loop->body_received += take;
                if (r == CHUNKED_DONE)
                    loop->body_done = 1;
                if (take > 0 || loop->body_done) {
                    *got = take;
                    return 0;
                }
            }
        }
        int r = read_more_body(loop);
        if (r != 0)
            return r;
    }
}

int worker_loop_body_buffered(const struct worker_loop *loop, size_t max)
{
    const struct connection *conn = loop->current;
    return conn != NULL && loop->head.framing == HTTP_BODY_LENGTH && !loop->body_done &&
           loop->head.content_length <= max && loop->body_received == 0 &&
           conn->buffer_len - loop->head_len >= loop->head.content_length;
}

int worker_loop_may_keep_alive(struct worker_loop *loop)
{
    struct connection *conn = loop->current;
    if (conn == NULL || !loop->head.keep_alive)
        return 0;
    /* A stopping worker keeps connections open only if it can hand them over,
     * and only if the server goes on without it.  (When the whole server
     * stops, this worker may not have handled its TERM yet: it waits until
     * the request in the app is answered.) */
    if (loop->stopping && loop->handback_channel < 0)
        return 0;
    if (loop->shared && atomic_load(&loop->shared->server_stopping))
        return 0;
    if (loop->settings.max_keepalive_requests &&
        conn->requests_served + 1 >= loop->settings.max_keepalive_requests)
        return 0;
    /* Over the cap of kept connections, new ones are answered and closed. */
    if (loop->shared && loop->settings.max_keepalive_connections &&
        atomic_load(&loop->shared->open_connections) > loop->settings.max_keepalive_connections)
        return 0;
    return 1;
}

void worker_loop_finish_request(struct worker_loop *loop, int keep_alive)
{
    struct connection *conn = loop->current;
    if (conn == NULL)
        return;
    request_accounting_end(loop, conn, loop->response_status, loop->response_body_bytes, 1);
    loop->current = NULL;
    conn->requests_served++;
    loop->requests_total++;
    announce_done(loop);

    if (!loop->body_done)
        keep_alive = 0; /* the app did not read the body: where would the next request start? */
    if (!keep_alive) {
        if (conn->buffer_len > loop->head_len || !loop->body_done)
            close_lingering(loop, conn); /* the client may still be sending */
        else
            close_connection(loop, conn);
        return;
    }
    connection_consume(conn, loop->head_len);
    if (conn->buffer_len > 0) {
        /* pipelined: the next request is (partly) here already */
        conn->state = CONNECTION_READING_HEAD;
        timer_append(loop, conn, TIMER_READING_HEAD, now_seconds() + loop->settings.header_timeout);
        if (++conn->pipelined_in_a_row < PIPELINED_REQUESTS_PER_TURN) {
            examine_buffered_head(loop, conn, 0);
        } else {
            conn->pipelined_in_a_row = 0;
            loop->turn_over = conn;
        }
    } else {
        conn->pipelined_in_a_row = 0;
        park_idle_connection(loop, conn);
    }
}

/* Between two requests with nothing buffered: the connection waits for its
 * next request parked (the holder may take it), or goes to the holder at once
 * if this worker is stopping, or, when the whole server stops, waits here for
 * STOP_GRACE_SECONDS: its response promised keep-alive, so the next request
 * may be on its way already (it is answered with Connection: close). */
static void park_idle_connection(struct worker_loop *loop, struct connection *conn)
{
    connection_release_buffer(conn);
    if (loop->whole_server_stopping) {
        conn->state = CONNECTION_IDLE;
        timer_append(loop, conn, TIMER_IDLE, now_seconds() + STOP_GRACE_SECONDS);
        return;
    }
    if (loop->stopping) {
        hand_back_connections(loop, &conn, 1);
        return;
    }
    conn->state = CONNECTION_IDLE;
    timer_append(loop, conn, TIMER_IDLE, now_seconds() + loop->settings.keepalive_timeout);
    slot_park(loop, conn, shared_clock_ms());
}

void worker_loop_fail_request(struct worker_loop *loop, int status)
{
    struct connection *conn = loop->current;
    if (conn == NULL)
        return;
    if (!loop->response_started) {
        size_t body = send_error_response(conn, status, &loop->head);
        request_accounting_note_response(loop, status, body);
    }
    /* else the response was cut: the log shows the status it began with */
    request_accounting_end(loop, conn, loop->response_status, loop->response_body_bytes, 1);
    loop->current = NULL;
    conn->requests_served++;
    loop->requests_total++;
    announce_done(loop);
    close_lingering(loop, conn);
}

void worker_loop_release_current(struct worker_loop *loop)
{
    struct connection *conn = loop->current;
    if (conn == NULL)
        return;
    request_accounting_end(loop, conn, loop->response_status, loop->response_body_bytes, 1);
    loop->requests_total++;
    announce_done(loop);
    close_connection(loop, conn); /* our descriptor only: the app holds a duplicate */
}

/* Gives connections (idle, nothing buffered, claimed) to the holder, which
 * keeps them for the workers that stay: a restart or recycling closes no
 * kept-alive connection.  Without a holder they are closed. */
static void hand_back_connections(struct worker_loop *loop, struct connection **conns, size_t n)
{
    int fds[FD_PASSING_BATCH];
    struct passed_connection info[FD_PASSING_BATCH];
    for (size_t i = 0; i < n; i++) {
        fds[i] = conns[i]->fd;
        info[i].requests_served = (uint32_t)conns[i]->requests_served;
        info[i].listener_index = (uint32_t)conns[i]->listener_index;
        info[i].idle_since_ms = shared_clock_ms();
    }
    /* When the whole server stops, the holder would only close them too. */
    int sent = n > 0 && loop->handback_channel >= 0 &&
               !atomic_load(&loop->shared->server_stopping) &&
               send_connections(loop->handback_channel, fds, info, n) == 0;
    for (size_t i = 0; i < n; i++) {
        if (sent)
            forget_connection(loop, conns[i]);
        else
            close_connection(loop, conns[i]);
    }
}

static void hand_back_idle_connections(struct worker_loop *loop)
{
    struct connection *conn;
    while ((conn = loop->timers[TIMER_IDLE].first)) {
        struct connection *batch[FD_PASSING_BATCH];
        size_t n = 0;
        struct connection *next;
        for (; conn && n < FD_PASSING_BATCH; conn = next) {
            next = conn->timer_link.next;
            timer_remove(loop, conn);
            if (slot_claim(loop, conn))
                batch[n++] = conn; /* else the holder has it already */
        }
        hand_back_connections(loop, batch, n);
    }
}

void worker_loop_set_wait_signal_mask(struct worker_loop *loop, const sigset_t *mask)
{
    loop->wait_signal_mask = *mask;
    loop->has_wait_signal_mask = 1;
}

void worker_loop_stop(struct worker_loop *loop)
{
    if (loop->stopping)
        return;
    loop->stopping = 1;
    loop->accepting = 0;
    if (loop->slot)
        atomic_store(&loop->slot->stopping, 1);
    for (int i = 0; i < loop->num_listeners; i++)
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, loop->listeners[i].fd, NULL);
    if (loop->shared && atomic_load(&loop->shared->server_stopping)) {
        /* Nobody takes over: serve what comes in the grace time, then close
         * (the timers read each connection once more before closing it). */
        loop->whole_server_stopping = 1;
        loop->stop_grace_until = now_seconds() + STOP_GRACE_SECONDS;
        cap_deadlines(loop, TIMER_IDLE, loop->stop_grace_until);
        cap_deadlines(loop, TIMER_READING_HEAD, loop->stop_grace_until);
        return;
    }
    if (loop->ready_channel >= 0)
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, loop->ready_channel, NULL);
    hand_back_idle_connections(loop);
    /* Kept-alive connections that have sent nothing of their next request are
     * idle too.  New connections are not: their first request is on its way. */
    struct connection *conn;
    for (conn = loop->timers[TIMER_READING_HEAD].first; conn;) {
        struct connection *next = conn->timer_link.next;
        if (conn->buffer_len == 0 && conn->requests_served > 0)
            close_connection(loop, conn);
        conn = next;
    }
}

int worker_loop_is_drained(const struct worker_loop *loop)
{
    /* In the grace of a whole-server stop, idle connections may still bring
     * a request, and so may those the holder passes on. */
    if (loop->whole_server_stopping && loop->timers[TIMER_IDLE].first != NULL)
        return 0;
    if (loop->stop_grace_until > 0 && holder_has_connections(loop))
        return 0;
    return loop->num_connections == 0 || (loop->current == NULL && loop->ready_first == NULL &&
                                          loop->timers[TIMER_READING_HEAD].first == NULL &&
                                          loop->timers[TIMER_READING_BODY].first == NULL &&
                                          loop->timers[TIMER_LINGERING].first == NULL);
}
