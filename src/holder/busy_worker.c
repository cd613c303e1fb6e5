/*
 * busy_worker.c - looks at a worker busy in one request for longer than
 * SHARED_STUCK_AFTER_MS, through its /proc files (stat, schedstat), and
 * says what it is doing (busy_worker.h).
 *
 * Owns: reading a worker's /proc files and what they mean.  It decides
 * nothing about connections (taking them is connection_holder.c's), and
 * reads no shared memory and no socket: the holder gives it the pid, the
 * busy period and the last look.
 */
#include "holder/busy_worker.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int read_proc_file(int32_t pid, const char *name, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

enum busy_kind serow_look_at_busy_worker(struct serow_worker_look *w, int32_t pid,
                                         uint64_t busy_since, uint64_t now)
{
    int same_period = w->looked_busy_since_ms == busy_since;
    if (same_period && now - w->looked_at_ms <
                           (w->looked_kind == BUSY_NOT_KNOWN_YET ? SECOND_LOOK_MS : RELOOK_MS))
        return w->looked_kind;
    char buf[512];
    enum busy_kind kind = BUSY_NOT_KNOWN_YET;
    uint64_t cpu_ns = 0;
    if (read_proc_file(pid, "stat", buf, sizeof(buf)) == 0) {
        const char *end = strrchr(buf, ')'); /* the name may hold spaces and ')' */
        if (end && end[1] == ' ' && end[2] != 'R')
            kind = BUSY_WAITING;
    }
    if (kind != BUSY_WAITING && read_proc_file(pid, "schedstat", buf, sizeof(buf)) == 0) {
        cpu_ns = strtoull(buf, NULL, 10);
        if (same_period && now > w->looked_at_ms && w->looked_cpu_ns)
            kind = (cpu_ns - w->looked_cpu_ns) * 2 >= (now - w->looked_at_ms) * 1000000
                       ? BUSY_COMPUTING
                       : BUSY_WAITING_FOR_CPU;
    }
    w->looked_busy_since_ms = busy_since;
    w->looked_at_ms = now;
    w->looked_kind = kind;
    w->looked_cpu_ns = cpu_ns;
    return kind;
}
