/*
 * request_metrics.c - per-worker request counters in the shared memory.
 */
#include "shared/request_metrics.h"

#include <string.h>
#include <time.h>

#include "shared/shared_state.h"

const double serow_metrics_duration_bounds[METRICS_DURATION_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

/* The same bounds in nanoseconds, for the comparison on the hot path. */
static const uint64_t bounds_ns[METRICS_DURATION_BUCKETS] = {
    5000000ULL,   10000000ULL,   25000000ULL,   50000000ULL,   100000000ULL,   250000000ULL,
    500000000ULL, 1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL,
};

const char *const serow_metrics_phase_names[METRICS_PHASES] = {"queue", "app", "write"};

const double serow_metrics_phase_bounds[METRICS_PHASE_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

static const uint64_t phase_bounds_ns[METRICS_PHASE_BUCKETS] = {
    500000ULL,    1000000ULL,    2500000ULL,    5000000ULL,    10000000ULL,
    25000000ULL,  50000000ULL,   100000000ULL,  250000000ULL,  500000000ULL,
    1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL,
};

/* Only the owner writes: a load and a store, not a locked read-modify-write. */
static inline void bump(_Atomic uint64_t *counter, uint64_t by)
{
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

uint64_t serow_metrics_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void serow_request_metrics_count(struct request_counters *c, int status, uint64_t duration_ns)
{
    if (status < 0 || status >= METRICS_STATUS_SLOTS)
        status = 0;
    bump(&c->by_status[status], 1);
    int bucket = 0;
    while (bucket < METRICS_DURATION_BUCKETS && duration_ns > bounds_ns[bucket])
        bucket++;
    bump(&c->duration_buckets[bucket], 1);
    bump(&c->duration_sum_ns, duration_ns);
}

void serow_request_metrics_count_accept(struct request_counters *c)
{
    bump(&c->connections_accepted, 1);
}

static inline void count_phase(struct phase_counters *p, uint64_t ns)
{
    int bucket = 0;
    while (bucket < METRICS_PHASE_BUCKETS && ns > phase_bounds_ns[bucket])
        bucket++;
    bump(&p->buckets[bucket], 1);
    bump(&p->sum_ns, ns);
}

void serow_request_metrics_count_phases(struct request_counters *c, uint64_t queue_ns,
                                        uint64_t app_ns, uint64_t write_ns, int with_head)
{
    count_phase(&c->phases[METRICS_PHASE_QUEUE], queue_ns);
    if (with_head) {
        count_phase(&c->phases[METRICS_PHASE_APP], app_ns);
        count_phase(&c->phases[METRICS_PHASE_WRITE], write_ns);
    }
}

static void add_counters(struct request_totals *out, struct request_counters *c)
{
    for (int i = 0; i < METRICS_STATUS_SLOTS; i++)
        out->by_status[i] += atomic_load_explicit(&c->by_status[i], memory_order_relaxed);
    for (int i = 0; i <= METRICS_DURATION_BUCKETS; i++)
        out->duration_buckets[i] +=
            atomic_load_explicit(&c->duration_buckets[i], memory_order_relaxed);
    out->duration_sum_ns += atomic_load_explicit(&c->duration_sum_ns, memory_order_relaxed);
    out->connections_accepted +=
        atomic_load_explicit(&c->connections_accepted, memory_order_relaxed);
    for (int p = 0; p < METRICS_PHASES; p++) {
        for (int i = 0; i <= METRICS_PHASE_BUCKETS; i++)
            out->phases[p].buckets[i] +=
                atomic_load_explicit(&c->phases[p].buckets[i], memory_order_relaxed);
        out->phases[p].sum_ns += atomic_load_explicit(&c->phases[p].sum_ns, memory_order_relaxed);
    }
}

void serow_request_metrics_sum(struct shared_state *shared, struct request_totals *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < shared->max_workers; i++)
        add_counters(out, &shared->workers[i].counters);
}
