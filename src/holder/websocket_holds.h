/*
 * websocket_holds.h - the WebSocket connections the holder holds
 * (docs/websocket.md): RFC 6455 on the client's side, Pushpin's
 * WebSocket-over-HTTP on the app's.  A worker hands over an upgrade with its
 * request head (worker_websocket.c); the holder sends the app the OPEN
 * event as a POST that any free worker serves, answers 101 when the app
 * accepts, and from then on carries the client's messages to the app as
 * events, one request in flight per connection, and the app's events back
 * as frames.
 *
 * A request to the app goes over a socket pair: the holder writes the POST
 * into its end and gives the other to the loop (dispatch), which passes it
 * to a free worker as it passes any connection whose next request has come;
 * the holder reads the response from its end until the worker closes it
 * (the POST is HTTP/1.0: one response, delimited by its length or the
 * close).  The loop (connection_holder.c) owns the epoll; this file owns
 * every WebSocket's state.
 */
#ifndef SEROW_WEBSOCKET_HOLDS_H
#define SEROW_WEBSOCKET_HOLDS_H

#include <stddef.h>
#include <stdint.h>

#include "connection/fd_passing.h"
#include "shared/holding_channel.h"
#include "shared/shared_state.h"

/* epoll tags: a client's socket, the holder's end of a request to the app;
 * with the descriptor in the low bits. */
#define SEROW_WS_TAG     (1ULL << 49)
#define SEROW_WS_APP_TAG (1ULL << 50)

/* Defaults of the settings (lib/Serow/Options.pm has the options'). */
#define SEROW_WS_MAX_MESSAGE (1u << 20)    /* --websocket-max-message */
#define SEROW_WS_MAX_GATHERED (64u << 10)  /* --websocket-max-gathered */
#define SEROW_WS_PING_INTERVAL_MS 30000    /* --websocket-ping-interval */
#define SEROW_WS_PING_TIMEOUT_MS 30000     /* --websocket-ping-timeout */

struct serow_channels;
struct serow_delivery;

struct serow_ws_settings {
    uint64_t max_message;  /* the largest data message a client may send, all its frames (1009 past it) */
    size_t max_gathered;   /* events gathered while a request is in flight, past which the
                            * client is not read until they go (one message more at most) */
    uint64_t ping_interval_ms; /* a client quiet that long is pinged */
    uint64_t ping_timeout_ms;  /* ... and closed when it said nothing that long after */
    size_t max_pending;    /* --hold-max-pending: bytes queued for one client */
    struct serow_channels *store; /* grip_holds.c's: subscriptions (c:{"type":"subscribe"}) */
    uint8_t deflate;       /* --websocket-deflate: permessage-deflate offered by a client is accepted */
};

/* A request to the app, written into fd: the loop passes it to a free
 * worker, as a connection of info's listener.  The descriptor is the loop's
 * from here (closed on failure). */
typedef void (*serow_ws_dispatch)(void *arg, int fd, const struct passed_connection *info);

struct serow_ws_holds;

struct serow_ws_holds *serow_ws_holds_new(struct shared_state *shared, int epoll_fd,
                                          const struct serow_ws_settings *settings,
                                          serow_ws_dispatch dispatch, void *arg);
/* An upgrade from a worker: its descriptor (ours from here), the request
 * head (checked by the worker). */
void serow_ws_holds_add(struct serow_ws_holds *ws, const struct serow_holding_head *head, int fd,
                        const char *request_head, size_t len);
/* epoll said something of a descriptor tagged SEROW_WS_TAG or SEROW_WS_APP_TAG. */
void serow_ws_holds_event(struct serow_ws_holds *ws, uint64_t tag, uint32_t events);
/* A published item for a subscriber that may be one of ours (a
 * serow_grip_elsewhere: ws is the struct serow_ws_holds): its ws-message
 * format, as a frame. */
void serow_ws_holds_deliver(void *ws, const struct serow_delivery *d);
/* Pings the quiet clients, closes those that did not answer a ping or the
 * app's close in time, sends the apps' keep-alives; the ms until the next
 * is due (-1: none). */
int serow_ws_holds_timers(struct serow_ws_holds *ws, uint64_t now_ms);
uint32_t serow_ws_holds_count(const struct serow_ws_holds *ws);
/* Closes every WebSocket (the holder stops), with 1001 where it can. */
void serow_ws_holds_free(struct serow_ws_holds *ws);

#endif
