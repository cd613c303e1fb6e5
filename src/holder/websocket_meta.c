/*
 * websocket_meta.c - a held WebSocket's Meta-* fields (websocket_meta.h).
 */
#include "holder/websocket_meta.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log/log.h"

/* The field Meta-NAME: VALUE, or none (value NULL).  A name must be a
 * token and a value what a field can carry: they go into a request head. */
static void set(struct serow_ws_meta *m, const char *name, size_t name_len, const char *value, size_t value_len)
{
    int ok = name_len > 0;
    for (size_t i = 0; ok && i < name_len; i++) /* a token (RFC 9110 5.6.2) */
        ok = (name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'z') ||
             (name[i] >= 'A' && name[i] <= 'Z') || (name[i] && strchr("!#$%&'*+-.^_`|~", name[i]) != NULL);
    for (size_t i = 0; ok && value && i < value_len; i++) /* no CR, LF or other control (5.5) */
        ok = (uint8_t)value[i] >= 0x20 ? value[i] != 0x7f : value[i] == '\t';
    if (!ok) {
        serow_log_warn("connection holder: a WebSocket's meta %.*s refused (a name that is not a token, "
                       "or a value a field cannot carry)", (int)(name_len < 64 ? name_len : 64), name);
        return;
    }
    /* the field set before under that name (names are case-insensitive) goes */
    char *p = m->fields, *end = m->fields + m->len;
    while (p < end) {
        char *line_end = (char *)memchr(p, '\n', (size_t)(end - p)) + 1;
        if ((size_t)(line_end - p) > 5 + name_len && p[5 + name_len] == ':' &&
            strncasecmp(p + 5, name, name_len) == 0) {
            memmove(p, line_end, (size_t)(end - line_end));
            m->len -= (size_t)(line_end - p);
            break;
        }
        p = line_end;
    }
    if (value == NULL)
        return;
    size_t add = name_len + value_len + 9;
    if (m->len + add > SEROW_WS_MAX_META) {
        serow_log_warn("connection holder: a WebSocket's meta refused: its Meta-* fields would be over "
                       "%d bytes", SEROW_WS_MAX_META);
        return;
    }
    if (m->fields == NULL && (m->fields = malloc(SEROW_WS_MAX_META)) == NULL)
        return; /* (one allocation of the bound: meta is rare and small) */
    p = m->fields + m->len;
    memcpy(p, "Meta-", 5);
    memcpy(p + 5, name, name_len);
    memcpy(p + 5 + name_len, ": ", 2);
    memcpy(p + 7 + name_len, value, value_len);
    memcpy(p + 7 + name_len + value_len, "\r\n", 2);
    m->len += add;
}

void serow_ws_meta_control(struct serow_ws_meta *m, const struct serow_wse_control *ctl)
{
    char name[128], value[SEROW_WS_MAX_META];
    size_t name_len = serow_wse_control_string(&ctl->name, name, sizeof(name));
    size_t value_len = serow_wse_control_string(&ctl->value, value, sizeof(value));
    if (name_len > sizeof(name) || value_len > sizeof(value)) {
        serow_log_warn("connection holder: a WebSocket's set-meta refused: too long");
        return;
    }
    set(m, name, name_len, ctl->value.p ? value : NULL, value_len);
}

void serow_ws_meta_answer(struct serow_ws_meta *m, const struct serow_response_head *h)
{
    for (size_t i = 0; i < h->num_headers; i++) {
        const struct http_header *f = &h->headers[i];
        if (f->name_len > 9 && strncasecmp(f->name, "Set-Meta-", 9) == 0)
            set(m, f->name + 9, f->name_len - 9, f->value_len ? f->value : NULL, f->value_len);
    }
}

void serow_ws_meta_free(struct serow_ws_meta *m)
{
    free(m->fields);
    m->fields = NULL;
    m->len = 0;
}
