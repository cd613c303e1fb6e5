/*
 * connection_holder.c - keeps idle keep-alive connections, passes ready ones
 * to free workers, takes idle ones away from busy workers.
 *
 * Owns: the holder process's loop and every connection it holds, the
 * keep-alive cap server-wide.  It reads the workers' slots in the shared
 * memory (shared_state.h) and takes connections only through
 * connection_transfer.c and fd_passing.c; it runs no Perl and never touches
 * a worker's own state.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "holder/connection_holder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log/access_log.h"
#include "connection/connection.h"
#include "shared/connection_transfer.h"
#include "connection/fd_passing.h"
#include "log/log.h"
#include "log/request_id.h"
#include "http/response_writer.h"
#include "holder/busy_worker.h"
#include "holder/grip_holds.h"
#include "holder/redis_relay.h"
#include "holder/websocket_holds.h"
#include "shared/holding_channel.h"

#define EPOLL_BATCH 256
/* epoll tags besides connection descriptors */
#define TAG_WAKE (1ULL << 40)
#define TAG_HANDBACK (2ULL << 40)
#define TAG_READY_CHANNEL (3ULL << 40)
/* With no worker busy and nothing to expire, the holder still looks this
 * often at the workers' idle connections to take over the long-idle ones. */
#define HANDOFF_SCAN_MS 100
/* Longest sleep: the keep-alive and cap checks need no finer grain. */
#define MAX_SLEEP_MS 1000
/* --grip, on a stop: how often the holder looks whether the workers are gone
 * (it keeps the held connections until they are), how long it gives the
 * master to say that the server stops after a stop signal (without that
 * word the signal was for the holder alone), and how long the ended holds
 * get to write their last bytes. */
#define STOP_LOOK_MS 100
#define STOP_WORD_MS 1000
#define HOLDS_END_MS 5000

struct held_connection {
    int fd;
    int in_epoll;
    uint64_t ready_since_ms; /* when it became readable (--max-queue-wait) */
    struct held_connection *prev, *next; /* oldest first */
    /* Last: a plain connection's is allocated without the TLS state at the
     * end of info.carried (HELD_PLAIN_SIZE), so that an idle plain
     * connection costs the holder no more than before TLS; read and
     * written through held_info and serow_connection_state_copy only. */
    struct passed_connection info;
};
#define HELD_PLAIN_SIZE                                                                     \
    (offsetof(struct held_connection, info) + offsetof(struct passed_connection, carried) + \
     offsetof(struct serow_connection_state, tls))

/* *to = what c holds of its connection (info as it was passed). */
static void held_info(const struct held_connection *c, struct passed_connection *to)
{
    to->requests_served = c->info.requests_served;
    to->listener_index = c->info.listener_index;
    to->idle_since_ms = c->info.idle_since_ms;
    to->peer = c->info.peer;
    serow_connection_state_copy(&to->carried, &c->info.carried);
}

struct holder {
    struct shared_state *shared;
    struct holder_settings settings;
    int epoll_fd;
    int ready_channel;
    int handback_channel;
    int wake_fd;
    int can_steal;

    struct held_connection **by_fd;
    int by_fd_size;
    struct held_connection *oldest, *newest;
    uint32_t held;

    /* ready connections the channel had no room for yet */
    int *waiting;
    size_t waiting_count, waiting_size;
    int ready_channel_watched;

    struct worker_handle workers[SHARED_MAX_WORKERS];
    struct serow_worker_look looks[SHARED_MAX_WORKERS];
    uint64_t last_handoff_scan_ms;
    struct serow_id_maker ids; /* --request-id-header: the ids of the 503s made here */
    struct serow_grip_holds *grip; /* connections held for GRIP (grip_holds.c) */
    struct serow_redis_relay *redis; /* --publish-redis (redis_relay.c); NULL: none */
    struct serow_ws_holds *ws; /* WebSockets, with --grip (websocket_holds.c) */
    pid_t master_pid;
    uint64_t stop_seen_ms; /* when the loop first saw stop_requested */
};

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t reopen_requested;

static void request_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* Only the flag: open and dup2 are done by the loop, outside the handler. */
static void request_reopen(int sig)
{
    (void)sig;
    reopen_requested = 1;
}

/* USR1: logrotate renamed --error-log.  The holder's standard error is the
 * master's descriptor on the old file (inherited at fork), so the path is
 * opened again and put in its place, as Serow::Log->open_file does in Perl. */
static void reopen_error_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        serow_log_warn("connection holder cannot reopen the error log %s: %s; still writing to "
                        "the old file", path, strerror(errno));
    } else {
        serow_log_info("connection holder %d reopened the error log", (int)getpid());
    }
    if (fd >= 0)
        close(fd);
}

static void reopen_logs(const struct holder_settings *settings)
{
    if (settings->error_log)
        reopen_error_log(settings->error_log);
    if (settings->access_log == NULL)
        return;
    if (serow_access_log_reopen(settings->access_log) != 0)
        serow_log_warn("connection holder cannot reopen the access log: %s; still writing to "
                        "the old file", strerror(errno));
    else
        serow_log_info("connection holder %d reopened the access log", (int)getpid());
}

/* ---- the connections held --------------------------------------------- */

static int hold(struct holder *h, int fd, const struct passed_connection *info)
{
    if (fd >= h->by_fd_size) {
        int size = h->by_fd_size ? h->by_fd_size : 1024;
        while (size <= fd)
            size *= 2;
        struct held_connection **grown = realloc(h->by_fd, sizeof(*grown) * (size_t)size);
        if (grown == NULL)
            return -1;
        memset(grown + h->by_fd_size, 0, sizeof(*grown) * (size_t)(size - h->by_fd_size));
        h->by_fd = grown;
        h->by_fd_size = size;
    }
    struct held_connection *c =
        calloc(1, info->carried.transport == SEROW_TRANSPORT_TLS ? sizeof(*c) : HELD_PLAIN_SIZE);
    if (c == NULL)
        return -1;
    c->fd = fd;
    c->info.requests_served = info->requests_served;
    c->info.listener_index = info->listener_index;
    c->info.idle_since_ms = info->idle_since_ms;
    c->info.peer = info->peer;
    serow_connection_state_copy(&c->info.carried, &info->carried);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)fd};
    /* (EEXIST: an entry left from when we held this socket under the same
     * number before; see serow_track_connection in worker_connections.c) */
    if (epoll_ctl(h->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0 &&
        (errno != EEXIST || epoll_ctl(h->epoll_fd, EPOLL_CTL_MOD, fd, &ev) != 0)) {
        free(c);
        return -1;
    }
    c->in_epoll = 1;
    /* Keep the list in idle order (oldest first): connections arrive from
     * several workers, mostly but not always in that order, so the walk back
     * from the newest end is short. */
    struct held_connection *after = h->newest;
    while (after && after->info.idle_since_ms > c->info.idle_since_ms)
        after = after->prev;
    c->prev = after;
    c->next = after ? after->next : h->oldest;
    if (c->next)
        c->next->prev = c;
    else
        h->newest = c;
    if (after)
        after->next = c;
    else
        h->oldest = c;
    h->by_fd[fd] = c;
    h->held++;
    atomic_store(&h->shared->held_connections, h->held);
    return 0;
}

/* Forgets a held connection; the caller closes or passes the descriptor. */
static void unhold(struct holder *h, struct held_connection *c)
{
    if (c->in_epoll)
        epoll_ctl(h->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->oldest = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        h->newest = c->prev;
    h->by_fd[c->fd] = NULL;
    h->held--;
    atomic_store(&h->shared->held_connections, h->held);
    free(c);
}

/* The end of a connection no process holds any more (a connection the holder
 * was given but could not hold, or one it held), so it is no longer open. */
static void close_unheld(struct holder *h, int fd)
{
    close(fd);
    atomic_fetch_sub(&h->shared->open_connections, 1);
}

/* The end of a connection (not a pass to a worker). */
static void close_held(struct holder *h, struct held_connection *c)
{
    int fd = c->fd;
    if (!SEROW_TRANSPORT_IS_PLAIN(&c->info.carried)) {
        serow_transport_shutdown(&c->info.carried, fd); /* TLS: close_notify */
        serow_transport_forget(&c->info.carried, fd);
        serow_transport_closed(&c->info.carried);
    }
    unhold(h, c);
    close_unheld(h, fd);
}

/* Our copy after passing it on. */
static void release_held(struct holder *h, struct held_connection *c)
{
    int fd = c->fd;
    serow_transport_forget(&c->info.carried, fd);
    unhold(h, c);
    close(fd);
}

/* ---- passing ready connections to workers ------------------------------ */

static void watch_ready_channel(struct holder *h, int on)
{
    if (h->ready_channel_watched == on)
        return;
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = TAG_READY_CHANNEL};
    epoll_ctl(h->epoll_fd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, h->ready_channel, &ev);
    h->ready_channel_watched = on;
}

/* One connection per message: each goes to one free worker, so a burst of
 * ready connections spreads over every worker that is waiting. */
static int pass_to_worker(struct holder *h, int fd)
{
    struct passed_connection info = {0};
    if (fd < h->by_fd_size && h->by_fd[fd])
        held_info(h->by_fd[fd], &info);
    if (serow_send_connections(h->ready_channel, &fd, &info, 1) != 0)
        return -1;
    atomic_fetch_add(&h->shared->queued_connections, 1);
    return 0;
}

/* The access log's line for a request shed here, as a worker writes it for a
 * request it rejects (its raw request line; what was peeked of it). */
static void log_shed(struct holder *h, int fd, const char *head, size_t len, size_t body,
                     const char *id, size_t id_len, uint64_t arrived_ns)
{
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof(addr);
    if (getpeername(fd, (struct sockaddr *)&addr, &addr_len) != 0)
        addr_len = 0;
    char remote[SEROW_REMOTE_ADDR_SIZE];
    serow_format_remote_address(remote, addr_len ? (struct sockaddr *)&addr : NULL, addr_len);
    uint64_t now = serow_request_clock_ns();
    struct access_log_entry e = {.remote_addr = remote, .status = 503, .body_bytes = body,
                                 .pid = (int)getpid()};
    /* (no app, no head given: a total only, as a worker's rejected line) */
    e.times = (struct access_log_times){arrived_ns ? arrived_ns : now, 0, 0, now};
    e.request_line = serow_access_log_raw_request_line(head, len, &e.request_line_len);
    e.request_id = (struct access_log_span){id_len ? id : NULL, id_len};
    serow_access_log_id_as_request_header(&h->settings.access_log->format, &e,
                                          h->settings.request_id_header,
                                          h->settings.request_id_header_len);
    serow_access_log_own_response_headers(&h->settings.access_log->format, e.response_headers,
                                          e.request_id, h->settings.request_id_header,
                                          h->settings.request_id_header_len);
    serow_access_log_write(h->settings.access_log, &e);
}

/* What shed peeks of a request: its line for the log, and with
 * --request-id-header as much of its head as a request id may be found in. */
#define SHED_PEEK_LINE (ACCESS_LOG_MAX_REQUEST_LINE + 2)
#define SHED_PEEK_HEAD 16384

/*
 * --max-queue-wait: a request that waited that long for a free worker is
 * answered 503 here, and its connection closed (after what the client sent
 * is read: serow_answer_and_shut).  Only "HEAD " is looked for, to send no
 * body, and the id header; the request is not parsed.
 */
static void shed(struct holder *h, struct held_connection *c)
{
    char head[SHED_PEEK_HEAD];
    size_t want = h->settings.request_id_header_len ? SHED_PEEK_HEAD
                  : h->settings.access_log          ? SHED_PEEK_LINE
                                                    : 5;
    /* (with the kernel's receive stamp, where the request's time starts, as
     * a worker reads it: worker_intake.c) */
    uint64_t arrived_ns;
    ssize_t n = serow_transport_recv_stamped(&c->info.carried, c->fd, head, want,
                                             MSG_PEEK | MSG_DONTWAIT, &arrived_ns);
    size_t len = n > 0 ? (size_t)n : 0;
    char id[REQUEST_ID_MAX];
    size_t id_len = 0;
    struct response_header id_header;
    if (h->settings.request_id_header_len) {
        id_len = serow_request_id_of_raw_head(&h->ids, head, len, h->settings.request_id_header,
                                              h->settings.request_id_header_len, id);
        id_header = (struct response_header){h->settings.request_id_header,
                                             h->settings.request_id_header_len, id, id_len};
    }
    /* Counted before the answer, as a worker counts its sheds: whoever has
     * read the 503 finds it in serow_requests_shed_total. */
    atomic_fetch_add(&h->shared->requests_shed, 1);
    size_t body = serow_answer_and_shut(&c->info.carried, c->fd, 503,
                                        len >= 5 && memcmp(head, "HEAD ", 5) == 0,
                                        id_len ? &id_header : NULL);
    serow_log_debug("connection holder: a request waited longer than --max-queue-wait %llu ms for a "
                    "free worker: answered 503", (unsigned long long)h->settings.max_queue_wait_ms);
    if (h->settings.access_log)
        log_shed(h, c->fd, head, len < SHED_PEEK_LINE ? len : SHED_PEEK_LINE, body, id, id_len,
                 arrived_ns);
    close_held(h, c);
}

/*
 * Passes the ready connections on, oldest first.  With --max-queue-wait, no
 * more than there are free workers to take them (less those passed and not
 * yet taken): the rest wait here, where their wait can be bounded, and not
 * in the channel, from which nothing can be taken back.  Those that waited
 * too long are answered 503 (shed).  While the whole server stops, workers
 * are not "free" but still take what comes: no limit then.
 */
static void flush_waiting(struct holder *h, uint64_t now)
{
    uint64_t limit = atomic_load(&h->shared->server_stopping) ? 0 : h->settings.max_queue_wait_ms;
    int64_t room = 0;
    if (limit)
        room = (int64_t)serow_shared_free_workers(h->shared) -
               (int64_t)atomic_load(&h->shared->queued_connections);
    int channel_full = 0;
    size_t sent = 0;
    while (sent < h->waiting_count) {
        int fd = h->waiting[sent];
        struct held_connection *c = fd < h->by_fd_size ? h->by_fd[fd] : NULL;
        if (limit && c && serow_shared_ms_since(now, c->ready_since_ms) >= limit) {
            shed(h, c);
        } else if (limit && room <= 0) {
            break; /* no free worker: it waits here */
        } else if (pass_to_worker(h, fd) == 0) {
            room--;
            if (c)
                release_held(h, c);
            else
                close(fd);
        } else if (errno == EAGAIN) {
            channel_full = 1;
            break; /* every worker is busy and the channel is full */
        } else if (c) {
            close_held(h, c); /* no worker side any more: nothing can serve it */
        }
        sent++;
    }
    memmove(h->waiting, h->waiting + sent, (h->waiting_count - sent) * sizeof(int));
    h->waiting_count -= sent;
    watch_ready_channel(h, channel_full);
}

/*
 * With --max-queue-wait and requests waiting here: wake up when a worker
 * becomes free (it rings wake_fd when it sees holder_awaits_free) or when the
 * oldest one's wait is over, whichever comes first.
 */
static int queue_timeout(struct holder *h, int timeout, uint64_t now)
{
    uint64_t limit = h->settings.max_queue_wait_ms;
    if (!limit || !h->waiting_count || h->ready_channel_watched)
        return timeout;
    atomic_store(&h->shared->holder_awaits_free, 1);
    if (serow_shared_free_workers(h->shared) > atomic_load(&h->shared->queued_connections))
        return 0;
    int fd = h->waiting[0];
    struct held_connection *c = fd < h->by_fd_size ? h->by_fd[fd] : NULL;
    if (c == NULL)
        return 0;
    uint64_t waited = serow_shared_ms_since(now, c->ready_since_ms);
    int64_t left = waited >= limit ? 0 : (int64_t)(limit - waited);
    return timeout < 0 || left < timeout ? (int)left : timeout;
}

static void connection_readable(struct holder *h, struct held_connection *c)
{
    char byte;
    ssize_t n = serow_transport_recv(&c->info.carried, c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR && errno != EINPROGRESS)) {
        close_held(h, c); /* the client closed its idle connection */
        return;
    }
    if (n < 0 && errno != EINPROGRESS) /* (EINPROGRESS: a TLS record is arriving) */
        return;
    /* A request: stop watching it here, queue it for a worker. */
    epoll_ctl(h->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    c->in_epoll = 0;
    if (h->settings.max_queue_wait_ms)
        c->ready_since_ms = serow_shared_clock_ms();
    if (h->waiting_count == h->waiting_size) {
        size_t size = h->waiting_size ? h->waiting_size * 2 : 256;
        int *grown = realloc(h->waiting, size * sizeof(int));
        if (grown == NULL) {
            close_held(h, c);
            return;
        }
        h->waiting = grown;
        h->waiting_size = size;
    }
    h->waiting[h->waiting_count++] = c->fd;
}

/* ---- taking connections from workers ----------------------------------- */

/*
 * Takes one idle connection out of a worker (connection_transfer.c): the
 * compare-and-swap decides between us and the worker.
 */
static int steal_connection(struct holder *h, uint32_t worker_index, uint32_t slot_index)
{
    struct passed_connection info;
    int fd = serow_take_parked_connection(h->shared, &h->workers[worker_index], worker_index,
                                    slot_index, &info);
    if (fd == TAKE_REFUSED) {
        serow_log_warn("connection holder: cannot take connections from workers "
                        "(pidfd_getfd: %s); busy workers keep their idle connections",
                        strerror(errno));
        h->can_steal = 0;
    }
    if (fd < 0)
        return 0;
    atomic_fetch_add(&h->shared->connections_stolen, 1);
    if (hold(h, fd, &info) != 0) {
        serow_log_error("connection holder: a connection taken from a worker could not be "
                        "held and is closed (%s)", strerror(errno));
        close_unheld(h, fd);
    }
    return 1;
}

/* What the scan of the workers found, for choosing how long to wait. */
struct scan_result {
    int stuck_waiting;      /* a worker is stuck with idle connections, no worker is free */
    int64_t next_deadline;  /* ms until a busy worker reaches SHARED_STUCK_AFTER_MS; -1: none */
};

/* Idle connections of workers busy for longer than SHARED_STUCK_AFTER_MS that are
 * waiting in their request, or computing while another worker is free (see
 * serow_look_at_busy_worker), and those idle longer than idle_handoff anywhere. */
static struct scan_result scan_workers(struct holder *h, uint64_t now)
{
    struct scan_result result = {0, -1};
    int handoff_scan = now - h->last_handoff_scan_ms >= HANDOFF_SCAN_MS;
    if (handoff_scan)
        h->last_handoff_scan_ms = now;
    int any_free = serow_shared_any_worker_free(h->shared);
    for (uint32_t i = 0; i < h->shared->max_workers; i++) {
        struct worker_slot *w = &h->shared->workers[i];
        if (atomic_load(&w->pid) <= 0)
            continue;
        int has_idle = atomic_load(&w->idle_connections) > 0;
        int steal_all = 0;
        if (atomic_load(&w->busy) && has_idle && h->can_steal) {
            uint64_t busy_for = serow_shared_busy_for_ms(w, now);
            if (busy_for < SHARED_STUCK_AFTER_MS) {
                int64_t left = (int64_t)(SHARED_STUCK_AFTER_MS - busy_for);
                if (result.next_deadline < 0 || left < result.next_deadline)
                    result.next_deadline = left;
            } else {
                enum busy_kind kind = serow_look_at_busy_worker(&h->looks[i], atomic_load(&w->pid),
                                                                atomic_load(&w->busy_since_ms), now);
                if (kind == BUSY_WAITING || (kind == BUSY_COMPUTING && any_free)) {
                    steal_all = 1;
                } else if (kind == BUSY_COMPUTING) {
                    result.stuck_waiting = 1; /* until a worker is free */
                } else {
                    int64_t again = kind == BUSY_NOT_KNOWN_YET ? SECOND_LOOK_MS : RELOOK_MS;
                    if (result.next_deadline < 0 || again < result.next_deadline)
                        result.next_deadline = again;
                }
            }
        }
        /* When the whole server stops, workers serve their idle connections
         * for a last request: taking them here would only delay that. */
        if (!h->can_steal || (!steal_all && !handoff_scan) || !has_idle ||
            atomic_load(&h->shared->server_stopping))
            continue;
        uint32_t high = atomic_load(&w->slots_high_water);
        if (high > SHARED_SLOTS_PER_WORKER)
            high = SHARED_SLOTS_PER_WORKER;
        int stolen = 0;
        for (uint32_t k = 0; k < high; k++) {
            struct connection_slot *s = &w->connections_table[k];
            if (atomic_load(&s->state) != SLOT_IDLE)
                continue;
            if (steal_all ||
                serow_shared_ms_since(now, atomic_load(&s->idle_since_ms)) >= h->settings.idle_handoff_ms)
                stolen += steal_connection(h, i, k);
        }
        if (stolen && steal_all)
            serow_log_debug("connection holder: took %d idle connection(s) from worker %d, busy in a "
                            "request", stolen, (int)atomic_load(&w->pid));
        if (stolen && !atomic_load(&w->busy))
            serow_wake_worker(h->shared, &h->workers[i], i); /* a busy worker looks when it is done */
    }
    return result;
}

/* ---- keep-alive timeout and cap ---------------------------------------- */

static uint32_t idle_in_workers(struct holder *h)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->shared->max_workers; i++)
        if (atomic_load(&h->shared->workers[i].pid) > 0)
            n += atomic_load(&h->shared->workers[i].idle_connections);
    return n;
}

static void expire_and_cap(struct holder *h, uint64_t now)
{
    struct held_connection *c = h->oldest;
    /* (A connection taken in this turn may have been parked after now was
     * read: its age is 0, not a wrapped-around difference.  That mistake
     * closed a kept-alive connection the moment it was taken, under the
     * client's next request: found by t/hardening/soak.t.) */
    while (c && serow_shared_ms_since(now, c->info.idle_since_ms) >= h->settings.keepalive_timeout_ms) {
        struct held_connection *next = c->next;
        if (c->in_epoll)
            close_held(h, c);
        c = next;
    }
    /* Over the cap of open connections, the oldest idle ones make room. */
    uint32_t cap = h->settings.max_keepalive_connections;
    uint32_t open = atomic_load(&h->shared->open_connections);
    for (c = h->oldest; cap && c && open > cap;) {
        struct held_connection *next = c->next;
        if (c->in_epoll) {
            close_held(h, c);
            open--;
        }
        c = next;
    }
}

/* ---- the loop ---------------------------------------------------------- */

/*
 * Whether the holder stops now, once asked (TERM, INT, QUIT).  With --grip,
 * not while the server's workers finish their requests on a graceful stop:
 * a request may still publish to the held connections, or hand over a new
 * one.  The master asks the holder once its workers are gone; a signal to
 * the whole process group (^C, a supervisor) comes before that, and is
 * kept until then.  It stops at once when the master is gone (the parent's
 * death signal) or does not say within STOP_WORD_MS that the server stops
 * (a signal for the holder alone, which the master replaces).
 */
static int stop_now(struct holder *h, uint64_t now)
{
    if (!stop_requested)
        return 0;
    if (h->grip == NULL || getppid() != h->master_pid)
        return 1;
    if (!h->stop_seen_ms)
        h->stop_seen_ms = now;
    if (!atomic_load(&h->shared->server_stopping))
        return now - h->stop_seen_ms >= STOP_WORD_MS;
    for (uint32_t i = 0; i < h->shared->max_workers; i++)
        if (atomic_load(&h->shared->workers[i].pid) > 0)
            return 0;
    return 1;
}

/* --grip, the holder stops: each hold ended cleanly (serow_grip_holds_end),
 * their last bytes written as their sockets take them, for HOLDS_END_MS at
 * most.  Nothing else is watched any more. */
static void end_holds(struct holder *h)
{
    epoll_ctl(h->epoll_fd, EPOLL_CTL_DEL, h->handback_channel, NULL);
    if (h->wake_fd >= 0)
        epoll_ctl(h->epoll_fd, EPOLL_CTL_DEL, h->wake_fd, NULL);
    watch_ready_channel(h, 0);
    serow_grip_holds_end(h->grip);
    uint64_t deadline = serow_shared_clock_ms() + HOLDS_END_MS;
    struct epoll_event events[EPOLL_BATCH];
    for (uint64_t now = serow_shared_clock_ms(); serow_grip_holds_count(h->grip) && now < deadline;
         now = serow_shared_clock_ms()) {
        int n = epoll_wait(h->epoll_fd, events, EPOLL_BATCH, (int)(deadline - now));
        for (int i = 0; i < n; i++)
            if (events[i].data.u64 & SEROW_GRIP_TAG)
                serow_grip_holds_event(h->grip, (int)(events[i].data.u64 & ~SEROW_GRIP_TAG), events[i].events);
    }
    if (serow_grip_holds_count(h->grip))
        serow_log_info("connection holder: %u held connection(s) had not taken their last bytes after "
                       "%d ms: closed", serow_grip_holds_count(h->grip), HOLDS_END_MS);
}

/* An answered long poll that stays open (grip_holds.c): idle here. */
static void grip_back_to_idle(void *arg, int fd, const struct passed_connection *info)
{
    struct holder *h = arg;
    if (hold(h, fd, info) != 0)
        close_unheld(h, fd);
}

/* A WebSocket's request to the app (websocket_holds.c): held as a
 * connection whose request has come, so that it goes to a free worker as
 * any other does. */
static void ws_dispatch(void *arg, int fd, const struct passed_connection *info)
{
    struct holder *h = arg;
    if (hold(h, fd, info) != 0)
        close_unheld(h, fd);
}

/* A hold or a publish from a worker (holding_channel.h). */
static void receive_holding(struct holder *h, const char *data, size_t len, int *fds, size_t n)
{
    struct serow_holding_head head;
    memcpy(&head, data, sizeof(head));
    const char *message = data + sizeof(head);
    size_t message_len = len - sizeof(head);
    if (head.request_line_len > message_len)
        head.request_line_len = 0;
    message_len -= head.request_line_len;
    if (h->grip == NULL || (head.has_connection && n != 1)) {
        for (size_t i = 0; i < n; i++)
            close_unheld(h, fds[i]);
        return;
    }
    if (head.has_connection == SEROW_HOLDING_WEBSOCKET)
        serow_ws_holds_add(h->ws, &head, fds[0], message, message_len);
    else if (head.has_connection)
        serow_grip_holds_add(h->grip, &head, fds[0], message, message_len, message + message_len);
    else if (h->redis)
        serow_redis_relay_publish(h->redis, message, message_len); /* delivered as it comes back */
    else
        serow_grip_holds_publish(h->grip, message, message_len);
}

static void receive_handed_back(struct holder *h)
{
    static char data[SEROW_HOLDING_MAX_MESSAGE];
    int fds[FD_PASSING_BATCH];
    /* Publishes waiting together are delivered as a batch (grip_holds.h). */
    serow_grip_holds_batch_begin(h->grip);
    for (;;) {
        size_t n = FD_PASSING_BATCH;
        ssize_t r = serow_receive_message(h->handback_channel, data, sizeof(data), fds, &n);
        if (r <= 0)
            break;
        if (serow_holding_message(data, (size_t)r)) {
            receive_holding(h, data, (size_t)r, fds, n);
            continue;
        }
        /* A stopping worker's idle connections: each descriptor with its
         * record; one without cannot be served. */
        size_t records = (size_t)r / sizeof(struct passed_connection);
        for (size_t i = 0; i < n; i++) {
            struct passed_connection info;
            if (i < records) {
                memcpy(&info, data + i * sizeof(info), sizeof(info));
                if (hold(h, fds[i], &info) == 0)
                    continue;
            }
            close_unheld(h, fds[i]);
        }
    }
    serow_grip_holds_batch_end(h->grip);
}

/*
 * How long to wait for events.  While a busy worker has idle connections, until
 * it has been busy for SHARED_STUCK_AFTER_MS.  A worker stuck past that while no worker
 * is free: until a worker becomes free (it rings wake_fd when it sees
 * holder_awaits_free) or, at the latest, SHARED_STUCK_AFTER_MS (busy periods that begin
 * meanwhile are not announced to us).  Otherwise long, with holder_sleeping set
 * so that the next worker to become busy wakes us (see worker_loop.c).  Each
 * flag is set before the state is looked at again, and workers set their own
 * state before they look at the flags, so no wake-up is missed.
 */
static int choose_timeout(struct holder *h, const struct scan_result *scan)
{
    if (!h->can_steal)
        goto sleep_long;
    if (scan->stuck_waiting) {
        atomic_store(&h->shared->holder_awaits_free, 1);
        if (serow_shared_any_worker_free(h->shared)) {
            atomic_store(&h->shared->holder_awaits_free, 0);
            return 0;
        }
        int64_t t = (int64_t)SHARED_STUCK_AFTER_MS;
        if (scan->next_deadline >= 0 && scan->next_deadline < t)
            t = scan->next_deadline;
        return t < 1 ? 1 : (int)t;
    }
    if (scan->next_deadline >= 0)
        return scan->next_deadline < 1 ? 1 : (int)scan->next_deadline;
    atomic_store(&h->shared->holder_sleeping, 1);
    /* look again after announcing the sleep: a worker that became busy
     * before it could see the flag is caught here */
    for (uint32_t i = 0; i < h->shared->max_workers; i++) {
        struct worker_slot *w = &h->shared->workers[i];
        if (atomic_load(&w->pid) > 0 && atomic_load(&w->busy) &&
            atomic_load(&w->idle_connections) > 0) {
            atomic_store(&h->shared->holder_sleeping, 0);
            return 1;
        }
    }
sleep_long:
    return h->held || idle_in_workers(h) ? HANDOFF_SCAN_MS : MAX_SLEEP_MS;
}

int serow_run_connection_holder(struct shared_state *shared, int ready_channel, int handback_channel,
                          const struct holder_settings *settings)
{
    struct holder *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -1;
    h->shared = shared;
    h->settings = *settings;
    h->ready_channel = ready_channel;
    h->handback_channel = handback_channel;
    h->can_steal = 1;
    h->wake_fd = shared->holder_wake_fd;
    serow_worker_handles_init(h->workers, SHARED_MAX_WORKERS);

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = request_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    /* Signals meant for the master reach us too when sent to the process
     * group: TTIN and TTOU would freeze us by default. */
    signal(SIGHUP, SIG_IGN);
    signal(SIGTTIN, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    if (settings->error_log || settings->access_log) {
        sa.sa_handler = request_reopen;
        sigaction(SIGUSR1, &sa, NULL);
    } else {
        signal(SIGUSR1, SIG_IGN); /* a USR1 to the process group, for the workers */
    }
    signal(SIGUSR2, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    /* The master forked us with its signals blocked (Serow::Master,
     * fork_child), and they stay blocked until here: a stop that came while
     * we started is taken now by request_stop, rather than killing us by the
     * default action before this line. */
    sigset_t masters_signals;
    sigemptyset(&masters_signals);
    const int blocked_by_master[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGTTIN, SIGTTOU, SIGUSR1, SIGCHLD};
    for (size_t i = 0; i < sizeof(blocked_by_master) / sizeof(blocked_by_master[0]); i++)
        sigaddset(&masters_signals, blocked_by_master[i]);
    sigprocmask(SIG_UNBLOCK, &masters_signals, NULL);

    serow_log_debug("connection holder %d started: keep-alive timeout %llu ms, at most %u connections, "
                    "idle connections taken from workers after %llu ms", (int)getpid(),
                    (unsigned long long)settings->keepalive_timeout_ms, settings->max_keepalive_connections,
                    (unsigned long long)settings->idle_handoff_ms);

    h->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_HANDBACK};
    if (h->epoll_fd < 0 || epoll_ctl(h->epoll_fd, EPOLL_CTL_ADD, handback_channel, &ev) != 0) {
        free(h);
        return -1;
    }
    if (h->wake_fd >= 0) {
        ev.data.u64 = TAG_WAKE;
        epoll_ctl(h->epoll_fd, EPOLL_CTL_ADD, h->wake_fd, &ev);
    }
    if (settings->grip.max_pending) {
        struct serow_grip_settings grip = settings->grip;
        grip.access_log = settings->access_log;
        h->grip = serow_grip_holds_new(shared, h->epoll_fd, &grip, grip_back_to_idle, h);
        if (h->grip == NULL) {
            free(h);
            return -1;
        }
        struct serow_ws_settings ws = settings->websocket;
        ws.max_pending = settings->grip.max_pending;
        ws.store = serow_grip_holds_store(h->grip);
        h->ws = serow_ws_holds_new(shared, h->epoll_fd, &ws, ws_dispatch, h);
        if (h->ws == NULL) {
            serow_grip_holds_free(h->grip);
            free(h);
            return -1;
        }
        serow_grip_holds_deliver_elsewhere(h->grip, serow_ws_holds_deliver, h->ws);
        if (settings->redis_host[0]) {
            h->redis = serow_redis_relay_new(shared, h->epoll_fd, h->grip, settings->redis_host,
                                             settings->redis_port, settings->redis_prefix,
                                             serow_shared_clock_ms());
            if (h->redis == NULL) {
                serow_log_error("connection holder: cannot open the link to Redis %s:%d (prefix %s)",
                                settings->redis_host, settings->redis_port, settings->redis_prefix);
                serow_ws_holds_free(h->ws);
                serow_grip_holds_free(h->grip);
                free(h);
                return -1;
            }
        }
    }
    atomic_store(&shared->holder_pid, getpid());
    h->master_pid = getppid();

    struct epoll_event events[EPOLL_BATCH];
    struct scan_result scan = {0, 0};
    while (!stop_now(h, serow_shared_clock_ms())) {
        uint64_t before = serow_shared_clock_ms();
        int timeout = queue_timeout(h, choose_timeout(h, &scan), before);
        if (h->grip) {
            int due = serow_grip_holds_timers(h->grip, before);
            if (due >= 0 && (timeout < 0 || due < timeout))
                timeout = due;
        }
        if (h->ws) {
            int due = serow_ws_holds_timers(h->ws, before);
            if (due >= 0 && (timeout < 0 || due < timeout))
                timeout = due;
        }
        if (h->redis) {
            int due = serow_redis_relay_timers(h->redis, before);
            if (due >= 0 && (timeout < 0 || due < timeout))
                timeout = due;
        }
        if (stop_requested && (timeout < 0 || timeout > STOP_LOOK_MS))
            timeout = STOP_LOOK_MS;
        int n = epoll_wait(h->epoll_fd, events, EPOLL_BATCH, timeout);
        atomic_store(&shared->holder_sleeping, 0);
        atomic_store(&shared->holder_awaits_free, 0);
        if (reopen_requested) {
            reopen_requested = 0;
            reopen_logs(&h->settings);
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = events[i].data.u64;
            if (tag == TAG_WAKE) {
                uint64_t count;
                ssize_t ignored = read(h->wake_fd, &count, sizeof(count));
                (void)ignored;
            } else if (tag == TAG_HANDBACK) {
                receive_handed_back(h);
            } else if (tag == TAG_READY_CHANNEL) {
                /* flushed below */
            } else if (tag & (SEROW_WS_TAG | SEROW_WS_APP_TAG)) {
                serow_ws_holds_event(h->ws, tag, events[i].events);
            } else if (tag & SEROW_REDIS_TAG) {
                serow_grip_holds_batch_begin(h->grip); /* the replies one read brought */
                serow_redis_relay_event(h->redis, (int)(tag & 1), serow_shared_clock_ms());
                serow_grip_holds_batch_end(h->grip);
            } else if (tag & SEROW_GRIP_TAG) {
                serow_grip_holds_event(h->grip, (int)(tag & ~SEROW_GRIP_TAG), events[i].events);
            } else {
                int fd = (int)tag;
                if (fd < h->by_fd_size && h->by_fd[fd] && h->by_fd[fd]->in_epoll)
                    connection_readable(h, h->by_fd[fd]);
            }
        }
        uint64_t now = serow_shared_clock_ms();
        if (h->waiting_count)
            flush_waiting(h, now);
        scan = scan_workers(h, now);
        expire_and_cap(h, now);
    }

    /* What the last workers sent before they left (a publish from their last
     * request, a hold) is in the channel still: delivered, held, and ended
     * with the rest. */
    if (h->grip)
        receive_handed_back(h);
    while (h->oldest)
        close_held(h, h->oldest);
    serow_redis_relay_free(h->redis);
    if (h->ws) {
        serow_grip_holds_deliver_elsewhere(h->grip, NULL, NULL);
        serow_ws_holds_free(h->ws);
    }
    if (h->grip)
        end_holds(h);
    serow_grip_holds_free(h->grip);
    for (size_t i = 0; i < h->waiting_count; i++)
        close(h->waiting[i]);
    atomic_store(&shared->holder_pid, 0);
    return 0;
}
