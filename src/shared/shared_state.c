/*
 * shared_state.c - the mapping shared by master, holder and workers.
 *
 * Owns: the mapping's layout and the walks over it that more than one
 * process needs (a worker slot's reset, the totals, the status of a slot,
 * the master's requests to a worker).  Each slot is written by its worker
 * and read by the others; the functions here say which side they are for.
 */
#include "shared/shared_state.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

size_t serow_shared_state_size(uint32_t max_workers)
{
    return sizeof(struct shared_state) + sizeof(struct worker_slot) * (size_t)max_workers;
}

int serow_make_wake_fd(void)
{
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

struct shared_state *serow_shared_state_create(uint32_t max_workers)
{
    if (max_workers == 0 || max_workers > SHARED_MAX_WORKERS)
        max_workers = SHARED_MAX_WORKERS;
    /* Anonymous and shared: untouched pages cost nothing, and the mapping
     * disappears with the last process that has it. */
    void *p = mmap(NULL, serow_shared_state_size(max_workers), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct shared_state *shared = p;
    shared->max_workers = max_workers;
    shared->holder_wake_fd = serow_make_wake_fd();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    shared->started_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    return shared;
}

uint64_t serow_shared_clock_ms(void)
{
    struct timespec ts;
    /* Not the coarse clock: its 4 ms ticks are longer than SHARED_STUCK_AFTER_MS. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t serow_shared_ms_since(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}

uint64_t serow_shared_busy_for_ms(struct worker_slot *w, uint64_t now)
{
    return atomic_load(&w->busy) ? serow_shared_ms_since(now, atomic_load(&w->busy_since_ms)) : 0;
}

int serow_shared_worker_is_stuck(struct worker_slot *w, uint64_t now)
{
    return serow_shared_busy_for_ms(w, now) >= SHARED_STUCK_AFTER_MS;
}

int serow_shared_any_worker_free(struct shared_state *shared)
{
    return serow_shared_free_workers(shared) > 0;
}

uint32_t serow_shared_free_workers(struct shared_state *shared)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < shared->max_workers; i++) {
        struct worker_slot *w = &shared->workers[i];
        if (atomic_load(&w->pid) > 0 && atomic_load(&w->free))
            n++;
    }
    return n;
}

void serow_shared_reset_worker(struct shared_state *shared, uint32_t index)
{
    if (index >= shared->max_workers)
        return;
    struct worker_slot *w = &shared->workers[index];
    uint32_t high = atomic_load(&w->slots_high_water);
    uint32_t open = atomic_load(&w->connections);
    atomic_store(&w->pid, 0);
    atomic_store(&w->wake_fd, -1);
    atomic_fetch_sub(&shared->open_connections, open <= atomic_load(&shared->open_connections) ? open : atomic_load(&shared->open_connections));
    memset(w->connections_table, 0, sizeof(struct connection_slot) * (high < SHARED_SLOTS_PER_WORKER ? high : SHARED_SLOTS_PER_WORKER));
    atomic_store(&w->slots_high_water, 0);
    atomic_store(&w->idle_connections, 0);
    atomic_store(&w->connections, 0);
    atomic_store(&w->busy, 0);
    atomic_store(&w->app_since_ms, 0);
    atomic_store(&w->app_fd, -1);
    atomic_store(&w->app_answered, 0);
    atomic_store(&w->free, 0);
    atomic_store(&w->stolen_head, 0);
    atomic_store(&w->stolen_tail, 0);
    memset((void *)w->stolen, 0, sizeof(w->stolen));
    atomic_store(&w->stopping, 0);
    atomic_store(&w->stop_requested, 0);
    atomic_store(&w->reopen_logs_requested, 0);
    w->current_request[0] = '\0';
    atomic_store(&w->request_id_len, 0);
    memset(&w->logged_request, 0, sizeof(w->logged_request));
}

int serow_shared_ask_worker(struct shared_state *shared, uint32_t index, int wake_fd,
                            enum shared_worker_request what)
{
    if (index >= shared->max_workers) {
        errno = EINVAL;
        return -1;
    }
    struct worker_slot *w = &shared->workers[index];
    atomic_store(what == SHARED_ASK_STOP ? &w->stop_requested : &w->reopen_logs_requested, 1);
    /* After the flag: the worker reads the eventfd, then the flags. */
    uint64_t one = 1;
    return write(wake_fd, &one, sizeof(one)) == (ssize_t)sizeof(one) ? 0 : -1;
}

void serow_shared_count_workers(struct shared_state *shared, struct shared_worker_counts *counts)
{
    counts->busy = counts->idle = counts->idle_connections = 0;
    for (uint32_t i = 0; i < shared->max_workers; i++) {
        struct worker_slot *w = &shared->workers[i];
        if (atomic_load(&w->pid) <= 0)
            continue;
        if (atomic_load(&w->busy))
            counts->busy++;
        else
            counts->idle++;
        counts->idle_connections += atomic_load(&w->idle_connections);
    }
}

uint32_t serow_shared_max_workers(const struct shared_state *shared)
{
    return shared->max_workers;
}

void serow_shared_set_server_stopping(struct shared_state *shared)
{
    atomic_store(&shared->server_stopping, 1);
}

void serow_shared_count_worker_restart(struct shared_state *shared)
{
    atomic_fetch_add(&shared->worker_restarts, 1);
}

void serow_shared_set_generation_pids(struct shared_state *shared, const int32_t *pids, size_t n)
{
    for (size_t i = 0; i < SHARED_GENERATIONS; i++)
        atomic_store(&shared->generation_pids[i], i < n ? pids[i] : 0);
}

const char *const serow_shared_recycle_reasons[SHARED_RECYCLE_REASONS] = {
    [SHARED_RECYCLE_RSS] = "rss",
};

int serow_shared_count_worker_recycled(struct shared_state *shared, const char *reason)
{
    for (int i = 0; i < SHARED_RECYCLE_REASONS; i++) {
        if (strcmp(reason, serow_shared_recycle_reasons[i]) == 0) {
            atomic_fetch_add(&shared->workers_recycled[i], 1);
            return 0;
        }
    }
    return -1;
}

void serow_shared_count_request_timeout(struct shared_state *shared)
{
    atomic_fetch_add(&shared->request_timeouts, 1);
}

uint64_t serow_shared_app_running_ms(struct shared_state *shared, uint32_t index,
                                     char *request_text, char *id, size_t *id_len)
{
    if (index >= shared->max_workers)
        return 0;
    struct worker_slot *w = &shared->workers[index];
    uint64_t since = atomic_load(&w->app_since_ms);
    if (since == 0)
        return 0;
    memcpy(request_text, w->current_request, SHARED_REQUEST_TEXT);
    request_text[SHARED_REQUEST_TEXT - 1] = '\0';
    uint32_t n = atomic_load(&w->request_id_len);
    *id_len = n < REQUEST_ID_MAX ? n : 0;
    memcpy(id, w->request_id, *id_len);
    uint64_t ms = serow_shared_ms_since(serow_shared_clock_ms(), since);
    return ms > 0 ? ms : 1;
}

void serow_shared_totals(struct shared_state *shared, struct serow_shared_totals *totals)
{
    serow_shared_count_workers(shared, &totals->workers);
    totals->started_ms = shared->started_ms;
    totals->holder_pid = atomic_load(&shared->holder_pid);
    for (size_t i = 0; i < SHARED_GENERATIONS; i++)
        totals->generation_pids[i] = atomic_load(&shared->generation_pids[i]);
    totals->open_connections = atomic_load(&shared->open_connections);
    totals->held_connections = atomic_load(&shared->held_connections);
    totals->waiting_connections = totals->held_connections + totals->workers.idle_connections;
    totals->queued_connections = atomic_load(&shared->queued_connections);
    totals->connections_stolen = atomic_load(&shared->connections_stolen);
    totals->connections_gathered = atomic_load(&shared->connections_gathered);
    totals->requests_total = atomic_load(&shared->requests_total);
    totals->worker_restarts = atomic_load(&shared->worker_restarts);
    for (int i = 0; i < SHARED_RECYCLE_REASONS; i++)
        totals->workers_recycled[i] = atomic_load(&shared->workers_recycled[i]);
    totals->request_timeouts = atomic_load(&shared->request_timeouts);
    totals->requests_shed = atomic_load(&shared->requests_shed);
    totals->grip_held = atomic_load(&shared->grip.held);
    totals->grip_subscriptions = atomic_load(&shared->grip.subscriptions);
    totals->grip_publishes = atomic_load(&shared->grip.publishes);
    totals->grip_deliveries = atomic_load(&shared->grip.deliveries);
    totals->grip_drops = atomic_load(&shared->grip.drops);
    totals->grip_replay_gaps = atomic_load(&shared->grip.replay_gaps);
    totals->grip_refused = atomic_load(&shared->grip.refused);
    totals->websockets = atomic_load(&shared->grip.websockets);
    totals->websocket_protocol_errors = atomic_load(&shared->grip.websocket_protocol_errors);
    totals->redis_configured = atomic_load(&shared->redis.configured);
    totals->redis_up = atomic_load(&shared->redis.up);
    totals->redis_received = atomic_load(&shared->redis.received);
    totals->redis_rejected = atomic_load(&shared->redis.rejected);
    totals->redis_published = atomic_load(&shared->redis.published);
    totals->redis_lost = atomic_load(&shared->redis.lost);
    totals->redis_gaps = atomic_load(&shared->redis.gaps);
    totals->redis_reconnects = atomic_load(&shared->redis.reconnects);
}

void serow_shared_set_busiest_channels(struct shared_state *shared, const struct shared_grip_channel *rows,
                                       uint32_t n)
{
    struct shared_grip_channels *t = &shared->grip_channels;
    if (n > SHARED_GRIP_CHANNELS)
        n = SHARED_GRIP_CHANNELS;
    uint32_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);
    atomic_store_explicit(&t->seq, seq + 1, memory_order_relaxed); /* odd: being written */
    atomic_thread_fence(memory_order_release);
    t->count = n;
    if (n)
        memcpy(t->rows, rows, sizeof(*rows) * n);
    atomic_store_explicit(&t->seq, seq + 2, memory_order_release);
}

uint32_t serow_shared_busiest_channels(struct shared_state *shared, struct shared_grip_channel *rows)
{
    struct shared_grip_channels *t = &shared->grip_channels;
    /* The holder writes a table in microseconds, once a second at most: a
     * copy that overlapped a write is made again, and nothing is shown if
     * that keeps happening (a holder stopped in the middle of a write). */
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t before = atomic_load_explicit(&t->seq, memory_order_acquire);
        if (before & 1)
            continue;
        uint32_t n = t->count;
        if (n > SHARED_GRIP_CHANNELS)
            n = SHARED_GRIP_CHANNELS;
        memcpy(rows, t->rows, sizeof(*rows) * n);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&t->seq, memory_order_relaxed) == before)
            return n;
    }
    return 0;
}

int serow_shared_worker_status(struct shared_state *shared, uint32_t index,
                               struct shared_worker_status *status)
{
    struct worker_slot *w = &shared->workers[index];
    status->pid = atomic_load(&w->pid);
    if (status->pid <= 0)
        return 0;
    status->busy = (int)atomic_load(&w->busy);
    status->requests = atomic_load(&w->requests_served);
    status->connections = atomic_load(&w->connections);
    status->idle_connections = atomic_load(&w->idle_connections);
    status->busy_for_ms = 0;
    status->request[0] = '\0';
    if (status->busy) {
        memcpy(status->request, w->current_request, sizeof(status->request));
        status->request[sizeof(status->request) - 1] = '\0';
        uint64_t since = atomic_load(&w->busy_since_ms);
        status->busy_for_ms = serow_shared_ms_since(serow_shared_clock_ms(), since);
    }
    return 1;
}
