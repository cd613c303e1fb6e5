/*
 * request_metrics.h - the counters behind the Prometheus metrics: requests
 * by status, a histogram of request durations, connections accepted.
 *
 * Each worker counts in its own slot of the shared memory (shared_state.h)
 * and is the only process that writes there, so a count is a plain load and
 * store (relaxed atomics: no locked instruction on the hot path); whoever
 * scrapes sums every slot.
 *
 * A slot's counters are never reset: when a worker exits, the master resets
 * what the slot says about connections (shared_reset_worker) but leaves the
 * counters, and the next worker in the slot counts on from there.  So totals
 * survive worker restarts and never go backwards, with nothing to move
 * between slots and nothing a scrape could catch half done.
 */
#ifndef SEROW_REQUEST_METRICS_H
#define SEROW_REQUEST_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

/* Counts by status are indexed by the status itself: 100-599 are the
 * statuses a response can have (the writer refuses others; 499 counts the
 * responses a client did not take whole, SEROW_STATUS_CLIENT_GONE); index 0
 * counts requests answered with no status the server saw (the app took the
 * socket with psgix.io and answered on it). */
#define METRICS_STATUS_SLOTS 600

/* The upper bounds of the duration histogram's buckets, in seconds: the
 * Prometheus client libraries' defaults, which most dashboards expect. */
#define METRICS_DURATION_BUCKETS 11
extern const double serow_metrics_duration_bounds[METRICS_DURATION_BUCKETS];

/* Where a served request's time went (access_log.h, struct access_log_split):
 * waiting for a worker, in the app until it gave the response's head, and
 * writing the response.  Their histograms share finer bounds than the
 * duration's, from half a millisecond: a queue or a write is often shorter
 * than the 5 ms the duration's buckets start at. */
enum metrics_phase { METRICS_PHASE_QUEUE, METRICS_PHASE_APP, METRICS_PHASE_WRITE, METRICS_PHASES };
extern const char *const serow_metrics_phase_names[METRICS_PHASES];
#define METRICS_PHASE_BUCKETS 14
extern const double serow_metrics_phase_bounds[METRICS_PHASE_BUCKETS];

struct phase_counters {
    _Atomic uint64_t buckets[METRICS_PHASE_BUCKETS + 1]; /* not cumulative; last: +Inf */
    _Atomic uint64_t sum_ns;
};

struct request_counters {
    _Atomic uint64_t by_status[METRICS_STATUS_SLOTS];
    /* not cumulative here; the last one is above the largest bound (+Inf) */
    _Atomic uint64_t duration_buckets[METRICS_DURATION_BUCKETS + 1];
    _Atomic uint64_t duration_sum_ns;
    _Atomic uint64_t connections_accepted;
    struct phase_counters phases[METRICS_PHASES];
};

/* The same, summed, as plain numbers. */
struct request_totals {
    uint64_t by_status[METRICS_STATUS_SLOTS];
    uint64_t duration_buckets[METRICS_DURATION_BUCKETS + 1];
    uint64_t duration_sum_ns;
    uint64_t connections_accepted;
    struct {
        uint64_t buckets[METRICS_PHASE_BUCKETS + 1];
        uint64_t sum_ns;
    } phases[METRICS_PHASES];
};

struct shared_state;

/* In the worker that owns c: one request answered with status (0: none seen)
 * that took duration_ns. */
void serow_request_metrics_count(struct request_counters *c, int status, uint64_t duration_ns);
void serow_request_metrics_count_accept(struct request_counters *c);
/* A served request's time in its phases, in nanoseconds; with_head 0: the
 * app gave no head (it answered on psgix.io), only the queue counts. */
void serow_request_metrics_count_phases(struct request_counters *c, uint64_t queue_ns,
                                        uint64_t app_ns, uint64_t write_ns, int with_head);

/* Anywhere: the totals over every slot. */
void serow_request_metrics_sum(struct shared_state *shared, struct request_totals *out);

/* Monotonic nanoseconds, for durations. */
uint64_t serow_metrics_clock_ns(void);

#endif
