/*
 * connection_holder.h - the process that keeps idle keep-alive connections
 * so that they cost no worker (see shared_state.h for how connections get
 * here).  It waits on them in one epoll; when one has a request, it passes
 * it to whichever worker is free over the ready channel.  It closes those
 * idle past the keep-alive timeout, and the oldest above the cap on kept
 * connections.  No Perl here.
 */
#ifndef SEROW_CONNECTION_HOLDER_H
#define SEROW_CONNECTION_HOLDER_H

#include <signal.h>
#include <stdint.h>

#include "shared/shared_state.h"
#include "holder/grip_holds.h"
#include "holder/websocket_holds.h"

struct holder_settings {
    uint64_t keepalive_timeout_ms;
    uint64_t idle_handoff_ms;  /* idle this long in a worker: moves here */
    uint32_t max_keepalive_connections; /* 0: no cap */
    uint64_t max_queue_wait_ms; /* --max-queue-wait: ready this long with no free worker: 503; 0: no limit */
    const char *error_log; /* --error-log, reopened on SIGUSR1; NULL: none */
    struct access_log *access_log; /* --access-log, for the 503s of --max-queue-wait;
                                      reopened on SIGUSR1; NULL: none (the holder's own) */
    char request_id_header[64];    /* --request-id-header, for those 503s ("": off) */
    size_t request_id_header_len;
    struct serow_grip_settings grip; /* --grip: max_pending 0 when off */
    struct serow_ws_settings websocket; /* --websocket-*: limits, pings (the rest set by the holder) */
    /* --publish-redis (with --grip): Redis at host:port, channels "PREFIX:NAME";
     * redis_host "": none */
    char redis_host[256];
    int redis_port;
    char redis_prefix[65];
};

/*
 * Runs until SIGTERM, SIGINT or SIGQUIT (then closes every connection it
 * holds).  With settings->error_log, SIGUSR1 opens that file again as its
 * standard error (logrotate), and the access log too; without either,
 * SIGUSR1 is ignored.  ready_channel:
 * the sending end of the channel workers receive from; handback_channel:
 * the receiving end stopping workers send to.
 * Returns 0, or -1 if it could not start.
 */
int serow_run_connection_holder(struct shared_state *shared, int ready_channel, int handback_channel,
                          const struct holder_settings *settings);

#endif
