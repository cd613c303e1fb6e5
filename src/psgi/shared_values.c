/*
 * shared_values.c - the shared memory as Perl values: the hashes behind the
 * Prometheus metrics (Serow::Metrics) and the status page (SerowStatus).
 *
 * Owns: the names and the shape of those hashes.  It reads the shared
 * memory only through shared_state.c and request_metrics.c (snapshots),
 * never its fields; it writes nothing there.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/shared_values.h"

#include "XSUB.h"

#include <stdio.h>

#include "shared/request_metrics.h"

/* What the metrics (Serow::Shared::metrics) and the status page
 * (Serow::Shared::status) both show of serow_shared_totals, under the same
 * names; each adds its own. */
static void store_shared_totals(pTHX_ HV *h, const struct serow_shared_totals *t)
{
    hv_stores(h, "open_connections", newSVuv(t->open_connections));
    hv_stores(h, "connections_stolen", newSVnv((double)t->connections_stolen));
    hv_stores(h, "connections_gathered", newSVnv((double)t->connections_gathered));
    hv_stores(h, "started", newSVnv((double)t->started_ms / 1000.0));
}

/* The counts of held connections (--grip), under the same keys in the
 * metrics' hash and the status page's. */
static void store_grip_counts(pTHX_ HV *hv, const struct serow_shared_totals *t)
{
    hv_stores(hv, "grip_held", newSVuv(t->grip_held));
    hv_stores(hv, "grip_subscriptions", newSVuv(t->grip_subscriptions));
    hv_stores(hv, "grip_publishes", newSVnv((double)t->grip_publishes));
    hv_stores(hv, "grip_deliveries", newSVnv((double)t->grip_deliveries));
    hv_stores(hv, "grip_drops", newSVnv((double)t->grip_drops));
    hv_stores(hv, "grip_replay_gaps", newSVnv((double)t->grip_replay_gaps));
    hv_stores(hv, "grip_refused", newSVnv((double)t->grip_refused));
    hv_stores(hv, "websockets", newSVuv(t->websockets));
    hv_stores(hv, "websocket_protocol_errors", newSVnv((double)t->websocket_protocol_errors));
}

/* The holder's link to Redis (--publish-redis): absent without it, so
 * that no page shows a link that is not there. */
static void store_redis_counts(pTHX_ HV *hv, const struct serow_shared_totals *t)
{
    if (!t->redis_configured)
        return;
    hv_stores(hv, "redis_up", newSVuv(t->redis_up));
    hv_stores(hv, "redis_received", newSVnv((double)t->redis_received));
    hv_stores(hv, "redis_rejected", newSVnv((double)t->redis_rejected));
    hv_stores(hv, "redis_published", newSVnv((double)t->redis_published));
    hv_stores(hv, "redis_lost", newSVnv((double)t->redis_lost));
    hv_stores(hv, "redis_gaps", newSVnv((double)t->redis_gaps));
    hv_stores(hv, "redis_reconnects", newSVnv((double)t->redis_reconnects));
}

/* The busiest channels (--grip), the busiest first, under the same key in
 * both: channels => [{channel, subscribers, publishes, deliveries, drops}]. */
static void store_busiest_channels(pTHX_ HV *hv, struct shared_state *shared)
{
    static struct shared_grip_channel rows[SHARED_GRIP_CHANNELS];
    uint32_t n = serow_shared_busiest_channels(shared, rows);
    AV *channels = newAV();
    for (uint32_t i = 0; i < n; i++) {
        HV *c = newHV();
        hv_stores(c, "channel", newSVpvn(rows[i].name, rows[i].name_len < SHARED_GRIP_CHANNEL_NAME
                                                           ? rows[i].name_len : SHARED_GRIP_CHANNEL_NAME));
        hv_stores(c, "subscribers", newSVuv(rows[i].subscribers));
        hv_stores(c, "publishes", newSVnv((double)rows[i].publishes));
        hv_stores(c, "deliveries", newSVnv((double)rows[i].deliveries));
        hv_stores(c, "drops", newSVnv((double)rows[i].drops));
        av_push(channels, newRV_noinc((SV *)c));
    }
    hv_stores(hv, "channels", newRV_noinc((SV *)channels));
}

SV *serow_shared_metrics_value(pTHX_ struct shared_state *shared)
{
    /* The numbers behind the Prometheus metrics (Serow::Metrics), summed
     * over every worker slot. */
    struct request_totals t;
    serow_request_metrics_sum(shared, &t);
    HV *m = newHV();
    HV *by_status = newHV();
    uint64_t count = 0;
    for (int i = 0; i < METRICS_STATUS_SLOTS; i++) {
        if (t.by_status[i] == 0)
            continue;
        char code[8];
        int n = snprintf(code, sizeof(code), "%d", i);
        hv_store(by_status, code, n, newSVnv((double)t.by_status[i]), 0);
    }
    AV *buckets = newAV();
    for (int i = 0; i <= METRICS_DURATION_BUCKETS; i++) {
        count += t.duration_buckets[i];
        AV *pair = newAV();
        av_push(pair, i < METRICS_DURATION_BUCKETS ? newSVnv(serow_metrics_duration_bounds[i]) : newSVpvs("+Inf"));
        av_push(pair, newSVnv((double)count)); /* cumulative, as Prometheus wants */
        av_push(buckets, newRV_noinc((SV *)pair));
    }
    /* where the time went: phase => {buckets => [[le, cumulative]...], sum, count} */
    HV *phases = newHV();
    for (int p = 0; p < METRICS_PHASES; p++) {
        HV *phase = newHV();
        AV *pb = newAV();
        uint64_t cumulative = 0;
        for (int i = 0; i <= METRICS_PHASE_BUCKETS; i++) {
            cumulative += t.phases[p].buckets[i];
            AV *pair = newAV();
            av_push(pair, i < METRICS_PHASE_BUCKETS ? newSVnv(serow_metrics_phase_bounds[i])
                                                    : newSVpvs("+Inf"));
            av_push(pair, newSVnv((double)cumulative));
            av_push(pb, newRV_noinc((SV *)pair));
        }
        hv_stores(phase, "buckets", newRV_noinc((SV *)pb));
        hv_stores(phase, "count", newSVnv((double)cumulative));
        hv_stores(phase, "sum", newSVnv((double)t.phases[p].sum_ns / 1e9));
        hv_store(phases, serow_metrics_phase_names[p], (I32)strlen(serow_metrics_phase_names[p]),
                 newRV_noinc((SV *)phase), 0);
    }
    hv_stores(m, "phases", newRV_noinc((SV *)phases));
    struct serow_shared_totals totals;
    serow_shared_totals(shared, &totals);
    store_shared_totals(aTHX_ m, &totals);
    hv_stores(m, "requests_by_status", newRV_noinc((SV *)by_status));
    hv_stores(m, "duration_buckets", newRV_noinc((SV *)buckets));
    hv_stores(m, "duration_count", newSVnv((double)count));
    hv_stores(m, "duration_sum", newSVnv((double)t.duration_sum_ns / 1e9));
    hv_stores(m, "connections_accepted", newSVnv((double)t.connections_accepted));
    hv_stores(m, "worker_restarts", newSVnv((double)totals.worker_restarts));
    HV *recycled = newHV();
    for (int i = 0; i < SHARED_RECYCLE_REASONS; i++)
        hv_store(recycled, serow_shared_recycle_reasons[i], strlen(serow_shared_recycle_reasons[i]),
                 newSVnv((double)totals.workers_recycled[i]), 0);
    hv_stores(m, "workers_recycled", newRV_noinc((SV *)recycled));
    hv_stores(m, "request_timeouts", newSVnv((double)totals.request_timeouts));
    hv_stores(m, "requests_shed", newSVnv((double)totals.requests_shed));
    store_grip_counts(aTHX_ m, &totals);
    store_redis_counts(aTHX_ m, &totals);
    store_busiest_channels(aTHX_ m, shared);
    hv_stores(m, "busy_workers", newSVuv(totals.workers.busy));
    hv_stores(m, "idle_workers", newSVuv(totals.workers.idle));
    hv_stores(m, "idle_connections", newSVuv(totals.waiting_connections));
    hv_stores(m, "queued_connections", newSVuv(totals.queued_connections));
    /* The processes whose /proc the metrics read (Serow::Metrics): the
     * holder, and each worker with its slot (stable across its restarts). */
    hv_stores(m, "holder_pid", newSViv(totals.holder_pid));
    AV *generations = newAV();
    for (size_t i = 0; i < SHARED_GENERATIONS; i++)
        if (totals.generation_pids[i] > 0)
            av_push(generations, newSViv(totals.generation_pids[i]));
    hv_stores(m, "generation_pids", newRV_noinc((SV *)generations));
    AV *workers = newAV();
    uint32_t slots = serow_shared_max_workers(shared);
    for (uint32_t i = 0; i < slots; i++) {
        struct shared_worker_status w;
        if (!serow_shared_worker_status(shared, i, &w))
            continue;
        AV *pair = newAV();
        av_push(pair, newSVuv(i));
        av_push(pair, newSViv(w.pid));
        av_push(workers, newRV_noinc((SV *)pair));
    }
    hv_stores(m, "workers", newRV_noinc((SV *)workers));
    return newRV_noinc((SV *)m);
}

SV *serow_shared_status_value(pTHX_ struct shared_state *shared)
{
    /* A snapshot for the status page: totals and one hash per worker. */
    HV *status = newHV();
    AV *workers = newAV();
    uint32_t slots = serow_shared_max_workers(shared);
    for (uint32_t i = 0; i < slots; i++) {
        struct shared_worker_status w;
        if (!serow_shared_worker_status(shared, i, &w))
            continue;
        HV *h = newHV();
        hv_stores(h, "pid", newSViv(w.pid));
        hv_stores(h, "slot", newSVuv(i));
        hv_stores(h, "busy", newSViv(w.busy));
        hv_stores(h, "requests", newSVnv((double)w.requests));
        hv_stores(h, "connections", newSVuv(w.connections));
        hv_stores(h, "idle_connections", newSVuv(w.idle_connections));
        if (w.busy) {
            hv_stores(h, "request", newSVpv(w.request, 0));
            hv_stores(h, "busy_for_ms", newSVnv((double)w.busy_for_ms));
        }
        av_push(workers, newRV_noinc((SV *)h));
    }
    struct serow_shared_totals totals;
    serow_shared_totals(shared, &totals);
    store_shared_totals(aTHX_ status, &totals);
    hv_stores(status, "processing", newSVuv(totals.workers.busy));
    hv_stores(status, "waiting", newSVuv(totals.waiting_connections));
    hv_stores(status, "queued", newSVuv(totals.queued_connections));
    hv_stores(status, "held_by_holder", newSVuv(totals.held_connections));
    store_grip_counts(aTHX_ status, &totals);
    store_redis_counts(aTHX_ status, &totals);
    store_busiest_channels(aTHX_ status, shared);
    hv_stores(status, "requests_total", newSVnv((double)totals.requests_total));
    hv_stores(status, "holder_pid", newSViv(totals.holder_pid));
    hv_stores(status, "workers", newRV_noinc((SV *)workers));
    return newRV_noinc((SV *)status);
}
