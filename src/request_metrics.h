/*
 * request_metrics.h - the counters behind the Prometheus metrics: requests
 * by status, a histogram of request durations, connections accepted.
 *
 * Each worker counts in its own slot of the shared memory (shared_state.h)
 * and is the only process that writes there, so a count is a plain load and
 * store (relaxed atomics: no locked instruction on the hot path); whoever
 * scrapes sums every slot.  When a worker is gone, the master folds its
 * slot into the retired counters before the slot is reused, so that totals
 * survive worker restarts and never go backwards: the fold runs under a
 * sequence counter, and a sum that overlapped a fold is taken again.
 */
#ifndef SEROW_REQUEST_METRICS_H
#define SEROW_REQUEST_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

/* Counts by status are indexed by the status itself: 100-599 are the
 * statuses a response can have (the writer refuses others); index 0 counts
 * requests answered with no status the server saw (the app took the socket
 * with psgix.io and answered on it). */
#define METRICS_STATUS_SLOTS 600

/* The upper bounds of the duration histogram's buckets, in seconds: the
 * Prometheus client libraries' defaults, which most dashboards expect. */
#define METRICS_DURATION_BUCKETS 11
extern const double metrics_duration_bounds[METRICS_DURATION_BUCKETS];

struct request_counters {
    _Atomic uint64_t by_status[METRICS_STATUS_SLOTS];
    /* not cumulative here; the last one is above the largest bound (+Inf) */
    _Atomic uint64_t duration_buckets[METRICS_DURATION_BUCKETS + 1];
    _Atomic uint64_t duration_sum_ns;
    _Atomic uint64_t connections_accepted;
};

/* The same, summed, as plain numbers. */
struct request_totals {
    uint64_t by_status[METRICS_STATUS_SLOTS];
    uint64_t duration_buckets[METRICS_DURATION_BUCKETS + 1];
    uint64_t duration_sum_ns;
    uint64_t connections_accepted;
};

struct shared_state;

/* In the worker that owns c: one request answered with status (0: none seen)
 * that took duration_ns. */
void request_metrics_count(struct request_counters *c, int status, uint64_t duration_ns);
void request_metrics_count_accept(struct request_counters *c);

/* In the master, for a slot whose worker has exited: adds its counts to the
 * retired ones and zeroes it. */
void request_metrics_retire(struct shared_state *shared, uint32_t worker_index);

/* Anywhere: the totals over every slot and the retired counts. */
void request_metrics_sum(struct shared_state *shared, struct request_totals *out);

/* Monotonic nanoseconds, for durations. */
uint64_t metrics_clock_ns(void);

#endif
