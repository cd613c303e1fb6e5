/*
 * shared_state.h - the memory that the master, the connection holder and the
 * workers share (one anonymous MAP_SHARED mapping made before the first
 * fork).  It is how idle keep-alive connections leave a worker without the
 * worker doing anything on its hot path:
 *
 *   A worker publishes each connection it owns in a slot.  While the
 *   connection is idle with nothing buffered, the slot says SLOT_IDLE; before
 *   the worker reads from it again it claims it back with one compare-and-
 *   swap (SLOT_IDLE -> SLOT_IN_WORKER).  The connection holder may instead
 *   swap SLOT_IDLE -> SLOT_STEALING, copy the descriptor out of the worker
 *   with pidfd_getfd(2) and mark it SLOT_STOLEN: whoever wins the swap owns
 *   the connection, so a request is never read by two processes and never
 *   lost.  The holder steals the idle connections of a worker that has been
 *   busy in one request for longer than SHARED_STUCK_AFTER_MS while another
 *   worker is free, and any connection idle for longer than idle_handoff; a
 *   worker that has a CPU takes those of workers waiting for the same CPU
 *   (gathering, worker_gather.c).  Takers queue the stolen slot numbers for the
 *   worker, which closes its copies the next time it looks.
 *
 * The same memory carries what the status page shows: per worker its pid,
 * requests served and current request; totals for the server; and the
 * counters of the metrics (request_metrics.h): each worker counts in its own
 * slot, and the counts stay in the slot when its worker is replaced, so that
 * totals survive worker restarts.
 */
#ifndef SEROW_SHARED_STATE_H
#define SEROW_SHARED_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "log/access_log.h"
#include "connection/connection.h" /* SEROW_REMOTE_ADDR_SIZE */
#include "log/request_id.h"
#include "shared/request_metrics.h"
#include "connection/transport.h"

/* Worker slots: more than anyone runs on one machine; TTIN stops here. */
#define SHARED_MAX_WORKERS 256
/* Connection slots per worker: beyond this a worker keeps its connections to
 * itself (they are served, just not stealable). */
#define SHARED_SLOTS_PER_WORKER 16384
/* Stolen slot numbers waiting for their worker to close its copies. */
#define SHARED_STOLEN_RING 4096
/* A worker busy in one request for this long is stuck rather than quick:
 * the holder takes its parked connections (when it waits in the request, or
 * another worker is free), and gathering workers stop counting it as one
 * that has the CPU.  Well above a fast request (tens of microseconds), well
 * below what a client notices. */
#define SHARED_STUCK_AFTER_MS 2
/* The request line shown on the status page. */
#define SHARED_REQUEST_TEXT 120

/* --request-timeout with --access-log: what the access log line of the
 * request the app runs needs, as the worker knows it when the app starts,
 * for the line the master writes with its 503 if it kills the worker
 * (connection_transfer.c).  Copied by the worker (request_accounting.c,
 * serow_request_accounting_publish_for_master) before app_since_ms says
 * that the app runs; read by the master once the worker is dead.  The
 * request line and the format's request fields (%{NAME}i, in the format's
 * order: the master compiles the same format) are spans of bytes; at most
 * a line's worth is kept, as a line holds no more. */
#define SHARED_SERVER_NAME 256
struct shared_logged_request {
    uint64_t arrived_ns, app_ns;       /* the request's times (access_log_times) */
    uint64_t keepalive_requests;       /* answered before it on its connection */
    int32_t server_port;
    uint32_t line_len;                 /* bytes[0..line_len) */
    uint32_t header_offset[ACCESS_LOG_MAX_NAMED];
    uint32_t header_len[ACCESS_LOG_MAX_NAMED]; /* UINT32_MAX: absent */
    char remote_addr[SEROW_REMOTE_ADDR_SIZE];
    char server_name[SHARED_SERVER_NAME];
    char bytes[ACCESS_LOG_MAX_LINE];
};

enum slot_state {
    SLOT_FREE = 0,
    SLOT_IN_WORKER, /* the worker reads, serves, or holds buffered bytes */
    SLOT_IDLE,      /* nothing buffered: the holder may take it */
    SLOT_STEALING,  /* the holder is copying the descriptor */
    SLOT_STOLEN,    /* the holder has it; the worker must close its copy */
};

struct connection_slot {
    _Atomic uint32_t state;
    int32_t fd;                   /* the worker's descriptor number */
    uint32_t requests_served;     /* carried along when the connection moves */
    uint32_t listener_index;
    _Atomic uint64_t idle_since_ms;
    /* what moves with it (transport.h): published when it is assigned and
     * each time it is parked, for whoever takes it */
    struct serow_connection_state carried;
};

struct worker_slot {
    _Atomic int32_t pid;              /* 0: unused */
    _Atomic int32_t generation;
    _Atomic uint32_t busy;            /* 1 while a request is being answered */
    _Atomic uint32_t free;            /* 1 while it waits with nothing to do */
    _Atomic uint32_t stopping;        /* it takes no new work: gather nothing to it */
    _Atomic uint64_t busy_since_ms;
    /* --request-timeout: when the app began to run for the current request
     * (0: it is not running, or the option is off); the master kills a
     * worker whose app outlives the timeout and its grace. */
    _Atomic uint64_t app_since_ms;
    /* --request-timeout: the worker's descriptor of the connection whose
     * request the app runs (valid while app_since_ms is not 0), and whether
     * the client may have bytes of its response already (some went out, or
     * the app has the socket itself, psgix.io): then no error page can
     * follow.  Set before the bytes go, so that the master, which takes the
     * descriptor before it kills a stuck worker, reads the truth once the
     * worker is dead (connection_transfer.c, serow_answer_app_connection). */
    _Atomic int32_t app_fd;
    _Atomic uint32_t app_answered;
    struct serow_connection_state app_carried; /* app_fd's (transport.h), with it */
    _Atomic uint64_t requests_served;
    _Atomic uint32_t slots_high_water; /* slots in use are below this */
    _Atomic uint32_t idle_connections; /* its slots in SLOT_IDLE, roughly */
    _Atomic uint32_t connections;      /* all it owns (one taken from it stops
                                        * counting when taken, before the worker
                                        * closes its copy: its death closes only
                                        * these; serow_shared_reset_worker) */
    _Atomic int32_t wake_fd;          /* its eventfd (the master made it): the holder
                                         rings it after a steal, the master when it asks */
    /* What the master asks of the worker (serow_shared_ask_worker): set by
     * the master, then the worker's eventfd rung; taken (reset) by the
     * worker when it next returns to its loop.  Workers take no signal from
     * the master: one would cut short what the app is doing, and whatever
     * a worker blocks or ignores, the processes the app starts inherit. */
    _Atomic uint32_t stop_requested;        /* stop accepting, finish, leave */
    _Atomic uint32_t reopen_logs_requested; /* logrotate moved the logs */
    char current_request[SHARED_REQUEST_TEXT];
    /* --request-id-header: the id of that request (request_id_len 0: none),
     * for the 503 the master sends if it has to kill the worker. */
    char request_id[REQUEST_ID_MAX];
    _Atomic uint32_t request_id_len;
    struct shared_logged_request logged_request;
    /* Slots taken from this worker, for it to close its copies.  Several
     * takers (the holder, gathering workers) may write at once: each reserves
     * an entry by advancing stolen_head, then writes the slot number + 1
     * there; the worker reads entries in order up to the first still 0 (its
     * taker is between the two steps) and zeroes what it read. */
    _Atomic uint32_t stolen_head;
    _Atomic uint32_t stolen_tail;     /* read by the worker only */
    _Atomic uint32_t stolen[SHARED_STOLEN_RING];
    /* written by this worker only; never reset: the next worker in the
     * slot counts on (request_metrics.h) */
    struct request_counters counters;
    struct connection_slot connections_table[SHARED_SLOTS_PER_WORKER];
};

/* Why the master replaced a worker that was still working (the metric
 * serow_worker_recycled_total{reason}); serow_shared_recycle_reasons names them. */
enum shared_recycle_reason {
    SHARED_RECYCLE_RSS, /* --max-worker-rss */
    SHARED_RECYCLE_REASONS
};
extern const char *const serow_shared_recycle_reasons[SHARED_RECYCLE_REASONS];

/* serow FILE: the generation processes the metrics may see at once (the
 * serving one, one loading, one leaving; any more are left out). */
#define SHARED_GENERATIONS 4

/* Held connections (docs/holding.md), counted by the holder alone. */
struct shared_grip_counts {
    _Atomic uint32_t held;          /* connections held for a stream or a long poll */
    _Atomic uint32_t subscriptions; /* of those connections, to channels */
    _Atomic uint64_t publishes;     /* items given to the channel store */
    _Atomic uint64_t deliveries;    /* items written (queued) to a held connection */
    _Atomic uint64_t drops;         /* held connections closed past --hold-max-pending */
    _Atomic uint64_t replay_gaps;   /* prev-ids not among the kept items */
    _Atomic uint64_t refused;       /* holds refused: --max-held-connections, a bad hold */
    _Atomic uint32_t websockets;    /* WebSocket connections held (websocket_holds.c) */
    _Atomic uint64_t websocket_protocol_errors; /* clients closed for breaking RFC 6455 */
};

/* The holder's link to Redis (--publish-redis, redis_link.h), copied
 * there by the holder alone after each turn that may change them. */
struct shared_redis_counts {
    _Atomic uint32_t configured;    /* --publish-redis given */
    _Atomic uint32_t up;            /* subscribed and able to publish */
    _Atomic uint64_t received, rejected, published, lost, gaps, reconnects;
};

/* The busiest channels of held connections (docs/holding.md), for the
 * metrics and the status page: the SHARED_GRIP_CHANNELS with the most
 * subscribers (serow_channels_busiest), each with its counts, as the holder
 * last wrote them: when they changed, at most once every
 * SHARED_GRIP_CHANNELS_MS, never on the path of a publish.  Written by the
 * holder alone under a sequence count (odd while it writes), which readers
 * check to copy a whole table (serow_shared_busiest_channels). */
#define SHARED_GRIP_CHANNELS 10
#define SHARED_GRIP_CHANNELS_MS 1000
#define SHARED_GRIP_CHANNEL_NAME 128 /* SEROW_GRIP_MAX_NAME: the longest a channel's name may be */
struct shared_grip_channel {
    uint64_t publishes, deliveries, drops;
    uint32_t subscribers;
    uint16_t name_len;
    char name[SHARED_GRIP_CHANNEL_NAME];
};
struct shared_grip_channels {
    _Atomic uint32_t seq;
    uint32_t count;
    struct shared_grip_channel rows[SHARED_GRIP_CHANNELS];
};

struct shared_state {
    uint64_t started_ms;              /* wall clock, for the uptime */
    _Atomic int32_t holder_pid;
    _Atomic int32_t generation_pids[SHARED_GENERATIONS]; /* by the master only; 0: none */
    _Atomic uint32_t holder_sleeping; /* the holder waits long: wake it on busy */
    _Atomic uint32_t holder_awaits_free; /* a worker is stuck: wake the holder when free */
    int holder_wake_fd;               /* eventfd the holder waits on */
    _Atomic uint32_t server_stopping;    /* the whole server is going: close, do not hand over */
    _Atomic uint32_t open_connections;   /* client connections, wherever they are */
    _Atomic uint32_t held_connections;   /* idle connections in the holder */
    _Atomic uint32_t queued_connections; /* ready, passed on, not yet taken */
    _Atomic uint64_t connections_stolen;
    _Atomic uint64_t requests_total;
    _Atomic uint64_t worker_restarts; /* written by the master only */
    _Atomic uint64_t workers_recycled[SHARED_RECYCLE_REASONS]; /* by the master only */
    _Atomic uint64_t connections_gathered; /* moved to a worker that had the CPU */
    _Atomic uint64_t request_timeouts;  /* --request-timeout: answered 503 or worker killed */
    _Atomic uint64_t requests_shed;     /* --max-queue-wait: answered 503 (holder, backlog) */
    struct shared_grip_counts grip;     /* held connections (GRIP): the holder's only */
    struct shared_redis_counts redis;   /* --publish-redis: the holder's only */
    struct shared_grip_channels grip_channels; /* the busiest of their channels: the holder's only */
    _Atomic uint32_t worker_slots_used;  /* slots below this have had a worker */
    uint32_t max_workers;
    struct worker_slot workers[];
};

/* Creates the mapping for max_workers worker slots (before forking), with
 * the holder's wake-up eventfd (-1 when none could be made). */
struct shared_state *serow_shared_state_create(uint32_t max_workers);

/* A new eventfd (non-blocking, close-on-exec) for a process to wait on:
 * the holder's, and each worker's (the master makes it before the fork, so
 * that it can ring it from the start).  -1 on failure (errno). */
int serow_make_wake_fd(void);
size_t serow_shared_state_size(uint32_t max_workers);

/* Monotonic milliseconds: the clock every timestamp in the mapping uses. */
uint64_t serow_shared_clock_ms(void);

/* Milliseconds from then to now, 0 when then is later.  Every process reads
 * the clock on its own: a timestamp another process wrote after we read the
 * clock (a connection parked, a request begun meanwhile) is later than our
 * now, and a plain now - then would make it billions of years old. */
uint64_t serow_shared_ms_since(uint64_t now, uint64_t then);

/* How long the worker has been in its current request (0 when it is in
 * none), and whether that is SHARED_STUCK_AFTER_MS or more. */
uint64_t serow_shared_busy_for_ms(struct worker_slot *w, uint64_t now);
int serow_shared_worker_is_stuck(struct worker_slot *w, uint64_t now);

/* Whether some worker waits with nothing to do, free to take a connection the
 * holder took from a busy one (see connection_holder.c, scan_workers). */
int serow_shared_any_worker_free(struct shared_state *shared);

/* How many workers wait with nothing to do (with --max-queue-wait the holder
 * passes no more ready connections than that: connection_holder.c). */
uint32_t serow_shared_free_workers(struct shared_state *shared);

/* The worker in slot index is gone: whatever it published is void (its
 * connections' slots, its flags, its ring of stolen slots).  Its counters
 * stay: the next worker in the slot counts on.  (The master calls it.) */
void serow_shared_reset_worker(struct shared_state *shared, uint32_t index);

/* What the master may ask of a worker. */
enum shared_worker_request {
    SHARED_ASK_STOP,
    SHARED_ASK_REOPEN_LOGS,
};

/* Asks the worker in slot index for what (the master calls it): the flag in
 * its slot, then a ring of wake_fd, the worker's eventfd (the master made it
 * before forking the worker: see Serow::Master).  The worker sees it when it
 * next returns to its event loop: at once when it waits, after the request
 * when it is in one.  0, or -1 (errno) when the eventfd could not be rung. */
int serow_shared_ask_worker(struct shared_state *shared, uint32_t index, int wake_fd,
                            enum shared_worker_request what);

/* The workers at a glance, for the metrics: how many are in a request, how
 * many are not, and the idle connections parked in them. */
struct shared_worker_counts {
    uint32_t busy, idle, idle_connections;
};
void serow_shared_count_workers(struct shared_state *shared, struct shared_worker_counts *counts);

/* The worker slots there are (serow_shared_state_create's max_workers, capped). */
uint32_t serow_shared_max_workers(const struct shared_state *shared);

/* From now on a stopping worker closes its connections after their
 * responses instead of handing them to the holder.  (The master calls it.) */
void serow_shared_set_server_stopping(struct shared_state *shared);

/* The master replaced a worker that left while the server ran. */
void serow_shared_count_worker_restart(struct shared_state *shared);

/* serow FILE: the generation processes now running, pids[0..n) (the
 * master's word, for the process metrics; past SHARED_GENERATIONS left out). */
void serow_shared_set_generation_pids(struct shared_state *shared, const int32_t *pids, size_t n);

/* The master asked a worker to leave for reason ("rss": the name in
 * serow_shared_recycle_reasons).  -1 for a reason there is no such name. */
int serow_shared_count_worker_recycled(struct shared_state *shared, const char *reason);

/* A request outlived --request-timeout: its worker answered 503, or the
 * master killed the worker (rare: a locked add from either). */
void serow_shared_count_request_timeout(struct shared_state *shared);

/* How long the app of the worker in slot index has been running for its
 * current request (0: not running), and that request's line (request_text,
 * SHARED_REQUEST_TEXT bytes) and id (--request-id-header: REQUEST_ID_MAX
 * bytes, *id_len 0: none).  For the master's kill after the grace. */
uint64_t serow_shared_app_running_ms(struct shared_state *shared, uint32_t index,
                                     char *request_text, char *id, size_t *id_len);

/* The server's numbers at one look, for the metrics and the status page: its
 * own counters, and the workers counted (serow_shared_count_workers). */
struct serow_shared_totals {
    uint64_t started_ms;                /* wall clock */
    int32_t holder_pid;
    int32_t generation_pids[SHARED_GENERATIONS]; /* 0: none */
    uint32_t open_connections;          /* client connections, wherever they are */
    uint32_t held_connections;          /* idle in the holder */
    uint32_t waiting_connections;       /* idle: in the holder or parked in a worker */
    uint32_t queued_connections;        /* ready, passed on, not yet taken */
    uint64_t connections_stolen, connections_gathered, requests_total, worker_restarts;
    uint64_t workers_recycled[SHARED_RECYCLE_REASONS];
    uint64_t request_timeouts;
    uint64_t requests_shed;
    uint32_t grip_held, grip_subscriptions;
    uint64_t grip_publishes, grip_deliveries, grip_drops, grip_replay_gaps, grip_refused;
    uint32_t websockets;
    uint64_t websocket_protocol_errors;
    uint32_t redis_configured, redis_up;
    uint64_t redis_received, redis_rejected, redis_published, redis_lost, redis_gaps, redis_reconnects;
    struct shared_worker_counts workers;
};
void serow_shared_totals(struct shared_state *shared, struct serow_shared_totals *totals);

/* The holder: the busiest channels now (rows[0..n), n at most
 * SHARED_GRIP_CHANNELS, the busiest first). */
void serow_shared_set_busiest_channels(struct shared_state *shared, const struct shared_grip_channel *rows,
                                       uint32_t n);
/* Anyone: a copy of the table the holder last wrote, into rows
 * (SHARED_GRIP_CHANNELS of them); how many there are. */
uint32_t serow_shared_busiest_channels(struct shared_state *shared, struct shared_grip_channel *rows);

/* One worker, for the status page.  request and busy_for_ms only while busy. */
struct shared_worker_status {
    int32_t pid;
    int busy;
    uint64_t requests;
    uint32_t connections, idle_connections;
    uint64_t busy_for_ms;
    char request[SHARED_REQUEST_TEXT];
};
/* 1 and *status filled when slot index has a worker, else 0. */
int serow_shared_worker_status(struct shared_state *shared, uint32_t index,
                               struct shared_worker_status *status);

#endif
