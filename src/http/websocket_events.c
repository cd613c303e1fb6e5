/*
 * websocket_events.c - GRIP's WebSocket-over-HTTP events, control messages
 * and its Sec-WebSocket-Extensions parameter: see websocket_events.h.
 */
#include "http/websocket_events.h"
#include "http/websocket_frame.h"

#include <string.h>
#include <strings.h>

static const char *const type_names[] = {
    [SEROW_WSE_OPEN] = "OPEN",   [SEROW_WSE_TEXT] = "TEXT",   [SEROW_WSE_BINARY] = "BINARY",
    [SEROW_WSE_PING] = "PING",   [SEROW_WSE_PONG] = "PONG",   [SEROW_WSE_CLOSE] = "CLOSE",
    [SEROW_WSE_DISCONNECT] = "DISCONNECT",
};

const char *serow_wse_type_name(unsigned type)
{
    return type >= SEROW_WSE_OPEN && type <= SEROW_WSE_DISCONNECT ? type_names[type] : NULL;
}

static int type_char(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int hex_value(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static long parse_fail(struct serow_wse_event *ev, const char *why)
{
    ev->fail_why = why;
    return SEROW_WSE_FAIL;
}

/* The rules on an event's content that a WebSocket's frames impose: the
 * holder would otherwise send what the client must close on. */
static long check_content(struct serow_wse_event *ev)
{
    ev->close_code = 0;
    ev->reason = NULL;
    ev->reason_len = 0;
    switch (ev->type) {
    case SEROW_WSE_TEXT: {
        struct serow_utf8_state u = {0};
        if (!serow_utf8_check(&u, ev->content, ev->content_len) || !serow_utf8_complete(&u))
            return parse_fail(ev, "TEXT that is not UTF-8");
        break;
    }
    case SEROW_WSE_PING:
    case SEROW_WSE_PONG:
        if (ev->content_len > SEROW_WS_MAX_CONTROL_PAYLOAD)
            return parse_fail(ev, "PING or PONG over 125 bytes");
        break;
    case SEROW_WSE_CLOSE:
        if (ev->content_len == 0)
            break;
        if (ev->content_len == 1)
            return parse_fail(ev, "CLOSE with one byte");
        if (ev->content_len > SEROW_WS_MAX_CONTROL_PAYLOAD)
            return parse_fail(ev, "CLOSE over 125 bytes");
        ev->close_code = (uint16_t)(ev->content[0] << 8 | ev->content[1]);
        if (!serow_ws_close_code_valid(ev->close_code))
            return parse_fail(ev, "CLOSE with a code a WebSocket may not send");
        ev->reason = ev->content + 2;
        ev->reason_len = ev->content_len - 2;
        struct serow_utf8_state u = {0};
        if (!serow_utf8_check(&u, ev->reason, ev->reason_len) || !serow_utf8_complete(&u))
            return parse_fail(ev, "CLOSE reason that is not UTF-8");
        break;
    }
    return 0;
}

long serow_wse_parse(const uint8_t *buf, size_t len, struct serow_wse_event *ev)
{
    memset(ev, 0, sizeof *ev);
    size_t i = 0;
    while (i < len && i <= SEROW_WSE_MAX_TYPE && type_char(buf[i]))
        i++;
    if (i > SEROW_WSE_MAX_TYPE)
        return parse_fail(ev, "TYPE over 32 bytes");
    if (i == len)
        return SEROW_WSE_MORE;
    if (i == 0)
        return parse_fail(ev, "no TYPE");
    ev->type = SEROW_WSE_OTHER;
    for (unsigned t = SEROW_WSE_OPEN; t <= SEROW_WSE_DISCONNECT; t++)
        if (strlen(type_names[t]) == i && memcmp(type_names[t], buf, i) == 0)
            ev->type = (uint8_t)t;

    if (buf[i] == '\r') {
        if (i + 1 == len)
            return SEROW_WSE_MORE;
        if (buf[i + 1] != '\n')
            return parse_fail(ev, "CR without LF");
        ev->content = buf + i; /* empty, but inside buf */
        if (check_content(ev) < 0)
            return SEROW_WSE_FAIL;
        return (long)(i + 2);
    }
    if (buf[i] != ' ')
        return parse_fail(ev, "TYPE not followed by a space or CRLF");

    size_t at = i + 1, digits = 0;
    uint64_t n = 0;
    int v;
    while (at < len && (v = hex_value(buf[at])) >= 0) {
        if (++digits > 16)
            return parse_fail(ev, "length over 16 hex digits");
        n = n << 4 | (uint64_t)v;
        at++;
    }
    if (at == len)
        return SEROW_WSE_MORE;
    if (digits == 0)
        return parse_fail(ev, "no length after the space");
    if (buf[at] != '\r')
        return parse_fail(ev, "length not followed by CRLF");
    if (at + 1 == len)
        return SEROW_WSE_MORE;
    if (buf[at + 1] != '\n')
        return parse_fail(ev, "CR without LF");
    at += 2;
    /* The content and its CRLF; a length past the buffer waits for more
     * (the caller bounds a response body). */
    if (n > len - at)
        return SEROW_WSE_MORE;
    size_t after = len - at - (size_t)n;
    if (after >= 1 && buf[at + n] != '\r')
        return parse_fail(ev, "content not followed by CRLF");
    if (after < 2)
        return SEROW_WSE_MORE;
    if (buf[at + n + 1] != '\n')
        return parse_fail(ev, "content not followed by CRLF");
    ev->has_content = 1;
    ev->content = buf + at;
    ev->content_len = (size_t)n;
    if (check_content(ev) < 0)
        return SEROW_WSE_FAIL;
    return (long)(at + n + 2);
}

size_t serow_wse_encode(uint8_t *out, unsigned type, const uint8_t *content, size_t len,
                        int with_content)
{
    const char *name = serow_wse_type_name(type);
    size_t name_len = name ? strlen(name) : 0;
    char hex[17];
    size_t hex_len = 0;
    if (with_content) {
        size_t n = len;
        do {
            hex[hex_len++] = "0123456789abcdef"[n & 15];
            n >>= 4;
        } while (n);
    }
    size_t total = name_len + (with_content ? 1 + hex_len + 2 + len : 0) + 2;
    if (out == NULL)
        return total;
    uint8_t *p = out;
    memcpy(p, name, name_len);
    p += name_len;
    if (with_content) {
        *p++ = ' ';
        while (hex_len)
            *p++ = (uint8_t)hex[--hex_len];
        *p++ = '\r';
        *p++ = '\n';
        if (len)
            memcpy(p, content, len);
        p += len;
    }
    *p++ = '\r';
    *p++ = '\n';
    return (size_t)(p - out);
}

size_t serow_wse_encode_close(uint8_t *out, unsigned code, const uint8_t *reason, size_t len)
{
    if (code == 0 || code == SEROW_WS_NO_STATUS)
        return serow_wse_encode(out, SEROW_WSE_CLOSE, NULL, 0, 0);
    /* a close frame's payload as it came: the code in two bytes, then the reason */
    uint8_t payload[SEROW_WS_MAX_CONTROL_PAYLOAD];
    if (len > sizeof payload - 2)
        len = sizeof payload - 2; /* a reader's close frame never has more */
    payload[0] = (uint8_t)(code >> 8);
    payload[1] = (uint8_t)code;
    if (len)
        memcpy(payload + 2, reason, len);
    return serow_wse_encode(out, SEROW_WSE_CLOSE, payload, 2 + len, 1);
}

int serow_wse_app_message(const struct serow_wse_event *ev, int grip, const uint8_t *prefix,
                          size_t prefix_len, const uint8_t **body, size_t *body_len)
{
    *body = ev->content;
    *body_len = ev->content_len;
    if (!grip)
        return SEROW_WSE_MESSAGE;
    if (ev->type == SEROW_WSE_TEXT && ev->content_len >= 2 && memcmp(ev->content, "c:", 2) == 0) {
        *body += 2;
        *body_len -= 2;
        return SEROW_WSE_CONTROL;
    }
    /* The prefix lets an app send a message that itself starts with "c:". */
    if (ev->content_len >= prefix_len && (prefix_len == 0 || memcmp(ev->content, prefix, prefix_len) == 0)) {
        *body += prefix_len;
        *body_len -= prefix_len;
        return SEROW_WSE_MESSAGE;
    }
    return SEROW_WSE_DROPPED;
}

/* ---- JSON (RFC 8259), as much as a control message needs -------------------- */

#define JSON_MAX_DEPTH 32

struct json {
    const uint8_t *p, *end;
    const char *fail_why;
};

static int json_fail(struct json *j, const char *why)
{
    if (j->fail_why == NULL)
        j->fail_why = why;
    return 0;
}

static void json_ws(struct json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int json_hex4(struct json *j, uint32_t *v)
{
    if (j->end - j->p < 4)
        return json_fail(j, "JSON: short \\u escape");
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex_value(*j->p++);
        if (h < 0)
            return json_fail(j, "JSON: bad \\u escape");
        *v = *v << 4 | (uint32_t)h;
    }
    return 1;
}

/* Appends one byte of a decoded string; past cap only counts. */
static void put(char *out, size_t cap, size_t *n, uint8_t c)
{
    if (out != NULL && *n < cap)
        out[*n] = (char)c;
    (*n)++;
}

/* A string at j->p, decoded into out[0..cap) (out NULL: only checked);
 * *n its decoded length, which may exceed cap. */
static int json_string(struct json *j, char *out, size_t cap, size_t *n)
{
    *n = 0;
    if (j->p == j->end || *j->p != '"')
        return json_fail(j, "JSON: string expected");
    j->p++;
    while (j->p < j->end) {
        uint8_t c = *j->p++;
        if (c == '"')
            return 1;
        if (c < 0x20)
            return json_fail(j, "JSON: control character in a string");
        if (c != '\\') {
            put(out, cap, n, c); /* the event was checked as UTF-8 whole */
            continue;
        }
        if (j->p == j->end)
            break;
        c = *j->p++;
        switch (c) {
        case '"': case '\\': case '/': put(out, cap, n, c); break;
        case 'b': put(out, cap, n, '\b'); break;
        case 'f': put(out, cap, n, '\f'); break;
        case 'n': put(out, cap, n, '\n'); break;
        case 'r': put(out, cap, n, '\r'); break;
        case 't': put(out, cap, n, '\t'); break;
        case 'u': {
            uint32_t cp, lo;
            if (!json_hex4(j, &cp))
                return 0;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return json_fail(j, "JSON: lone low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
                    return json_fail(j, "JSON: lone high surrogate");
                j->p += 2;
                if (!json_hex4(j, &lo))
                    return 0;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return json_fail(j, "JSON: lone high surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80) {
                put(out, cap, n, (uint8_t)cp);
            } else if (cp < 0x800) {
                put(out, cap, n, (uint8_t)(0xC0 | cp >> 6));
                put(out, cap, n, (uint8_t)(0x80 | (cp & 0x3F)));
            } else if (cp < 0x10000) {
                put(out, cap, n, (uint8_t)(0xE0 | cp >> 12));
                put(out, cap, n, (uint8_t)(0x80 | (cp >> 6 & 0x3F)));
                put(out, cap, n, (uint8_t)(0x80 | (cp & 0x3F)));
            } else {
                put(out, cap, n, (uint8_t)(0xF0 | cp >> 18));
                put(out, cap, n, (uint8_t)(0x80 | (cp >> 12 & 0x3F)));
                put(out, cap, n, (uint8_t)(0x80 | (cp >> 6 & 0x3F)));
                put(out, cap, n, (uint8_t)(0x80 | (cp & 0x3F)));
            }
            break;
        }
        default:
            return json_fail(j, "JSON: bad escape");
        }
    }
    return json_fail(j, "JSON: unterminated string");
}

static int is_digit(struct json *j)
{
    return j->p < j->end && *j->p >= '0' && *j->p <= '9';
}

/* number = [ "-" ] int [ frac ] [ exp ] */
static int json_number(struct json *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (!is_digit(j))
        return json_fail(j, "JSON: bad number");
    if (*j->p++ != '0')
        while (is_digit(j))
            j->p++;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!is_digit(j))
            return json_fail(j, "JSON: bad number");
        while (is_digit(j))
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (!is_digit(j))
            return json_fail(j, "JSON: bad number");
        while (is_digit(j))
            j->p++;
    }
    return 1;
}

static int json_value(struct json *j, int depth);

/* The members of an object or the elements of an array, after its opening. */
static int json_container(struct json *j, int depth, uint8_t close, int object)
{
    json_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 1;
    }
    for (;;) {
        size_t n;
        json_ws(j);
        if (object) {
            if (!json_string(j, NULL, 0, &n))
                return 0;
            json_ws(j);
            if (j->p == j->end || *j->p++ != ':')
                return json_fail(j, "JSON: ':' expected");
        }
        if (!json_value(j, depth + 1))
            return 0;
        json_ws(j);
        if (j->p == j->end)
            return json_fail(j, "JSON: unterminated object or array");
        uint8_t c = *j->p++;
        if (c == close)
            return 1;
        if (c != ',')
            return json_fail(j, "JSON: ',' expected");
    }
}

static int json_literal(struct json *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return json_fail(j, "JSON: bad value");
    j->p += n;
    return 1;
}

/* Any value, checked and skipped. */
static int json_value(struct json *j, int depth)
{
    size_t n;
    if (depth > JSON_MAX_DEPTH)
        return json_fail(j, "JSON: nested too deep");
    json_ws(j);
    if (j->p == j->end)
        return json_fail(j, "JSON: value expected");
    switch (*j->p) {
    case '"': return json_string(j, NULL, 0, &n);
    case '{': j->p++; return json_container(j, depth, '}', 1);
    case '[': j->p++; return json_container(j, depth, ']', 0);
    case 't': return json_literal(j, "true");
    case 'f': return json_literal(j, "false");
    case 'n': return json_literal(j, "null");
    default: return json_number(j);
    }
}

static const char *const control_names[] = {
    [SEROW_WSC_SUBSCRIBE] = "subscribe",       [SEROW_WSC_UNSUBSCRIBE] = "unsubscribe",
    [SEROW_WSC_DETACH] = "detach",             [SEROW_WSC_SESSION] = "session",
    [SEROW_WSC_SET_META] = "set-meta",         [SEROW_WSC_KEEP_ALIVE] = "keep-alive",
    [SEROW_WSC_SEND_DELAYED] = "send-delayed", [SEROW_WSC_FLUSH_DELAYED] = "flush-delayed",
};

static int control_fail(struct serow_wse_control *c, const char *why)
{
    c->fail_why = why;
    return 0;
}

/* The string members a control message's reader keeps (where they stand):
 * the slot of key's, or NULL. */
static struct serow_wse_json_string *member_kept(struct serow_wse_control *c,
                                                 struct serow_wse_json_string *message_type,
                                                 struct serow_wse_json_string *mode, const char *key,
                                                 size_t len)
{
    static const struct {
        const char *name;
        int which;
    } kept[] = {{"name", 0}, {"value", 1}, {"content", 2}, {"message-type", 3}, {"mode", 4}};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        if (strlen(kept[i].name) != len || memcmp(kept[i].name, key, len) != 0)
            continue;
        struct serow_wse_json_string *slots[] = {&c->name, &c->value, &c->content, message_type, mode};
        return slots[kept[i].which];
    }
    return NULL;
}

/* keep-alive's "timeout": a whole number of seconds that fits an int, as
 * Pushpin reads it. */
static int json_seconds(struct json *j, uint32_t *out)
{
    const uint8_t *start = j->p;
    if (!json_number(j))
        return 0;
    uint64_t v = 0;
    for (const uint8_t *p = start; p < j->p; p++) {
        if (*p < '0' || *p > '9' || v > INT32_MAX)
            return json_fail(j, "\"timeout\" is not a whole number of seconds");
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > INT32_MAX)
        return json_fail(j, "\"timeout\" is not a whole number of seconds");
    *out = (uint32_t)v;
    return 1;
}

static int string_is(const struct serow_wse_json_string *s, const char *word)
{
    char got[16];
    size_t n = serow_wse_control_string(s, got, sizeof got);
    return n == strlen(word) && memcmp(got, word, n) == 0;
}

size_t serow_wse_control_string(const struct serow_wse_json_string *s, char *out, size_t cap)
{
    if (s->p == NULL)
        return 0;
    struct json j = {s->p, s->p + s->len, NULL};
    size_t n = 0;
    json_string(&j, out, cap, &n); /* (checked when the message was read) */
    return n;
}

int serow_wse_parse_control(const uint8_t *json, size_t len, struct serow_wse_control *c)
{
    memset(c, 0, sizeof *c);
    struct json j = {json, json + len, NULL};
    char key[16], type[16];
    size_t key_len, type_len = 0;
    int seen_type = 0, seen_channel = 0, seen_timeout = 0;
    struct serow_wse_json_string message_type = {0}, mode = {0};

    json_ws(&j);
    if (j.p == j.end || *j.p++ != '{')
        return control_fail(c, "not a JSON object");
    json_ws(&j);
    if (j.p < j.end && *j.p == '}') {
        j.p++;
    } else {
        for (;;) {
            json_ws(&j);
            if (!json_string(&j, key, sizeof key, &key_len))
                return control_fail(c, j.fail_why);
            json_ws(&j);
            if (j.p == j.end || *j.p++ != ':')
                return control_fail(c, "JSON: ':' expected");
            json_ws(&j);
            int is_type = key_len == 4 && memcmp(key, "type", 4) == 0;
            int is_channel = key_len == 7 && memcmp(key, "channel", 7) == 0;
            struct serow_wse_json_string *kept = member_kept(c, &message_type, &mode, key, key_len);
            int is_timeout = key_len == 7 && memcmp(key, "timeout", 7) == 0;
            if ((is_type && seen_type++) || (is_channel && seen_channel++) || (kept && kept->p) ||
                (is_timeout && seen_timeout++))
                return control_fail(c, "a member given twice");
            if (is_type || is_channel || kept) {
                if (j.p == j.end || *j.p != '"')
                    return control_fail(c, "a member that must be a string is not");
                const uint8_t *start = j.p;
                size_t n;
                int ok = is_type      ? json_string(&j, type, sizeof type, &type_len)
                         : is_channel ? json_string(&j, c->channel, sizeof c->channel, &c->channel_len)
                                      : json_string(&j, NULL, 0, &n);
                if (!ok)
                    return control_fail(c, j.fail_why);
                if (kept)
                    *kept = (struct serow_wse_json_string){start, (size_t)(j.p - start)};
            } else if (is_timeout) {
                if (!json_seconds(&j, &c->timeout_s))
                    return control_fail(c, j.fail_why);
            } else if (!json_value(&j, 1)) {
                return control_fail(c, j.fail_why);
            }
            json_ws(&j);
            if (j.p == j.end)
                return control_fail(c, "JSON: unterminated object");
            uint8_t ch = *j.p++;
            if (ch == '}')
                break;
            if (ch != ',')
                return control_fail(c, "JSON: ',' expected");
        }
    }
    json_ws(&j);
    if (j.p != j.end)
        return control_fail(c, "JSON: bytes after the object");
    if (!seen_type)
        return control_fail(c, "no \"type\"");
    for (unsigned t = SEROW_WSC_SUBSCRIBE; t <= SEROW_WSC_FLUSH_DELAYED; t++)
        if (strlen(control_names[t]) == type_len && memcmp(control_names[t], type, type_len) == 0)
            c->type = (uint8_t)t;
    if (c->type == 0)
        return control_fail(c, "unknown \"type\"");
    if (c->type == SEROW_WSC_SET_META && c->name.p == NULL)
        return control_fail(c, "no \"name\"");
    c->message_type = SEROW_WSE_TEXT;
    if (message_type.p) {
        static const struct {
            const char *name;
            uint8_t type;
        } types[] = {{"text", SEROW_WSE_TEXT}, {"binary", SEROW_WSE_BINARY},
                     {"ping", SEROW_WSE_PING}, {"pong", SEROW_WSE_PONG}};
        c->message_type = 0;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (string_is(&message_type, types[i].name))
                c->message_type = types[i].type;
        if (c->message_type == 0)
            return control_fail(c, "\"message-type\" is not text, binary, ping or pong");
    }
    if (mode.p) {
        if (string_is(&mode, "interval"))
            c->mode = SEROW_WSE_KEEP_ALIVE_INTERVAL;
        else if (!string_is(&mode, "idle"))
            return control_fail(c, "\"mode\" is neither idle nor interval");
    }
    if (c->type == SEROW_WSC_SUBSCRIBE || c->type == SEROW_WSC_UNSUBSCRIBE) {
        if (!seen_channel)
            return control_fail(c, "no \"channel\"");
        if (c->channel_len > sizeof c->channel ||
            !serow_grip_channel_name_ok(c->channel, c->channel_len))
            return control_fail(c, "a channel name grip_instruct.h's rule refuses");
    }
    return 1;
}

/* ---- Sec-WebSocket-Extensions (RFC 6455 section 9.1) ------------------------- */

static int tchar(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

struct field {
    const uint8_t *p, *end;
};

static void ows(struct field *f)
{
    while (f->p < f->end && (*f->p == ' ' || *f->p == '\t'))
        f->p++;
}

static size_t token(struct field *f)
{
    const uint8_t *start = f->p;
    while (f->p < f->end && tchar(*f->p))
        f->p++;
    return (size_t)(f->p - start);
}

int serow_wse_grip_extension(const char *value, size_t len, char prefix[SEROW_WSE_MAX_PREFIX],
                             size_t *prefix_len)
{
    struct field f = {(const uint8_t *)value, (const uint8_t *)value + len};
    int grip = 0;
    *prefix_len = 0;
    for (;;) {
        ows(&f);
        const uint8_t *name = f.p;
        size_t name_len = token(&f);
        if (name_len == 0)
            return -1;
        int this_grip = name_len == 4 && strncasecmp((const char *)name, "grip", 4) == 0;
        int prefix_given = 0;
        ows(&f);
        while (f.p < f.end && *f.p == ';') {
            f.p++;
            ows(&f);
            const uint8_t *pname = f.p;
            size_t pname_len = token(&f);
            if (pname_len == 0)
                return -1;
            int is_prefix = this_grip && pname_len == 14 &&
                            strncasecmp((const char *)pname, "message-prefix", 14) == 0;
            char val[SEROW_WSE_MAX_PREFIX];
            size_t val_len = 0;
            ows(&f);
            if (f.p < f.end && *f.p == '=') {
                f.p++;
                ows(&f);
                if (f.p < f.end && *f.p == '"') {
                    f.p++;
                    for (;;) {
                        if (f.p == f.end)
                            return -1;
                        uint8_t c = *f.p++;
                        if (c == '"')
                            break;
                        if (c == '\\') {
                            if (f.p == f.end)
                                return -1;
                            c = *f.p++;
                        }
                        if (c < 0x20 && c != '\t')
                            return -1;
                        if (val_len == sizeof val)
                            return -1;
                        val[val_len++] = (char)c;
                    }
                } else {
                    const uint8_t *v = f.p;
                    val_len = token(&f);
                    if (val_len == 0 || val_len > sizeof val)
                        return -1;
                    memcpy(val, v, val_len);
                }
                ows(&f);
            }
            if (is_prefix && !grip) {
                memcpy(prefix, val, val_len);
                *prefix_len = val_len;
                prefix_given = 1;
            }
        }
        if (this_grip && !grip) {
            grip = 1;
            if (!prefix_given) {
                memcpy(prefix, SEROW_WSE_DEFAULT_PREFIX, 2);
                *prefix_len = 2;
            }
        }
        if (f.p == f.end)
            return grip;
        if (*f.p++ != ',')
            return -1;
    }
}
