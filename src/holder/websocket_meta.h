/*
 * websocket_meta.h - a held WebSocket's meta: the Meta-* fields that go
 * with every request the holder sends the app for it (docs/websocket.md),
 * as Pushpin keeps a connection's meta.  The app sets them with GRIP's
 * set-meta control message or a Set-Meta-NAME field on an answer; the
 * client's own Meta-* fields never reach the app (websocket_holds.c leaves
 * them out), so an app can trust them.
 */
#ifndef SEROW_WEBSOCKET_META_H
#define SEROW_WEBSOCKET_META_H

#include <stddef.h>

#include "http/http_response_head.h"
#include "http/websocket_events.h"

/* All the fields' bytes, past which a new one is refused (logged). */
#define SEROW_WS_MAX_META 8192

struct serow_ws_meta {
    char *fields; /* "Meta-NAME: VALUE\r\n" each; NULL: none yet */
    size_t len;
};

/* A set-meta control message: its value, or none when it has no "value". */
void serow_ws_meta_control(struct serow_ws_meta *m, const struct serow_wse_control *ctl);
/* The Set-Meta-NAME fields of an answer: an empty one takes the field away. */
void serow_ws_meta_answer(struct serow_ws_meta *m, const struct serow_response_head *h);
void serow_ws_meta_free(struct serow_ws_meta *m);

#endif
