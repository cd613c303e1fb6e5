/*
 * worker_gather.c - gathering connections where the CPU is.
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
 *
 * Owns: the gathering state of the loop (usable_cpus, the handles on other
 * workers, when it last looked).  It takes only parked connections, through
 * the shared state's serow_take_parked_connection, and adopts them as the intake
 * does; it may not touch another worker's connections any other way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/worker_internal.h"

#include <sched.h>
#include <stdlib.h>

/* How often a worker looks at the others: the look reads a few words of
 * every worker's slot, so not on every request. */
#define GATHER_LOOK_MS 1
/* How often the CPUs are counted again (an operator's taskset). */
#define RECOUNT_CPUS_MS 1000

/* The CPUs this process may run on (taskset, cpusets): how many workers can
 * run at once.  0 when unknown, which turns gathering off. */
static int count_usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 0;
    return CPU_COUNT(&set);
}

/* On joining the holder: whether there is anything to gather for. */
void serow_gather_start(struct worker_loop *loop)
{
    loop->usable_cpus = count_usable_cpus();
    loop->cpus_counted_ms = serow_shared_clock_ms();
}

void serow_gather_free(struct worker_loop *loop)
{
    if (loop->gather_handles) {
        serow_worker_handles_close(loop->gather_handles, loop->shared->max_workers);
        free(loop->gather_handles);
    }
}

/* A parked connection taken from another worker: idle here as it was there. */
static void adopt_gathered_connection(struct worker_loop *loop, int fd,
                                      const struct passed_connection *info)
{
    struct connection *conn = serow_adopt_passed_connection(loop, fd, info);
    if (conn == NULL)
        return;
    conn->state = CONNECTION_IDLE;
    uint64_t idle_ms = serow_shared_ms_since(serow_shared_clock_ms(), info->idle_since_ms);
    serow_timer_append(loop, conn, TIMER_IDLE,
                 serow_now_seconds() + loop->settings.keepalive_timeout - (double)idle_ms / 1000.0);
    serow_slot_park(loop, conn, info->idle_since_ms);
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
        int fd = serow_take_parked_connection(loop->shared, &loop->gather_handles[from], from, k, &info);
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
        serow_wake_worker(loop->shared, &loop->gather_handles[from], from);
    }
    return taken;
}

void serow_gather_connections(struct worker_loop *loop)
{
    if (loop->usable_cpus <= 0 || loop->stopping)
        return;
    uint64_t now = serow_shared_clock_ms();
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
        if (i == me || atomic_load(&w->stopping) || serow_shared_worker_is_stuck(w, now))
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
        serow_worker_handles_init(loop->gather_handles, shared->max_workers);
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
