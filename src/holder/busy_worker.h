/*
 * busy_worker.h - what a worker busy in one request for long is doing, told
 * from /proc, for the connection holder (connection_holder.c) to decide
 * whether to take its idle connections.  Internal to src/holder/.
 */
#ifndef SEROW_BUSY_WORKER_H
#define SEROW_BUSY_WORKER_H

#include <stdint.h>

/*
 * What a worker busy for longer than SHARED_STUCK_AFTER_MS is doing:
 *
 * - waiting in its request (sleeping on a database, a lock, a sleep()): its
 *   parked connections are better off with whichever worker is done first,
 *   even when none is free yet;
 * - computing a long request: they are better off with a free worker, which
 *   serves them on another CPU, or on the same one in turns with the long
 *   request (the scheduler shares a CPU among runnable workers);
 * - waiting for a CPU: its request is quick, but other processes (or other
 *   workers) have the CPU.  Moving its connections buys nothing (a free
 *   worker would wait for a CPU too) and undoes gathering (worker_gather.c):
 *   on a loaded machine a gatherer would lose its connections every time it
 *   was preempted for a few milliseconds.
 *
 * Told apart from /proc: the state in /proc/PID/stat (R: running or
 * runnable), and for a runnable one, the CPU time in /proc/PID/schedstat
 * over two looks: computing if it got at least half of the time between
 * them.  Looked at no more often than every RELOOK_MS per busy period (after
 * a first look, sooner: the second look decides).
 */
enum busy_kind { BUSY_NOT_KNOWN_YET, BUSY_WAITING, BUSY_COMPUTING, BUSY_WAITING_FOR_CPU };
#define RELOOK_MS 10
#define SECOND_LOOK_MS 1


/* The last look at what a busy worker was doing (see serow_look_at_busy_worker):
 * for which busy period, when, and what it said.  The holder keeps one per
 * worker slot, zeroed at the start. */
struct serow_worker_look {
    uint64_t looked_busy_since_ms, looked_at_ms;
    int looked_kind;        /* enum busy_kind */
    uint64_t looked_cpu_ns; /* its CPU time then (schedstat) */
};

/* What the worker pid, busy since busy_since (ms, its slot's busy_since_ms),
 * is doing at now (ms); w is its last look, updated.  BUSY_NOT_KNOWN_YET
 * until a second look, SECOND_LOOK_MS later, decides. */
enum busy_kind serow_look_at_busy_worker(struct serow_worker_look *w, int32_t pid,
                                         uint64_t busy_since, uint64_t now);

#endif
