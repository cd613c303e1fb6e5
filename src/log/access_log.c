/*
 * access_log.c - formats and writes access log lines (see access_log.h), by
 * the operation lists access_log_format.c compiled.
 *
 * Owns: what each directive writes, the escaping of what a client sent
 * (text and json), the log file's descriptor (one write(2) a line; reopened
 * on USR1).  It knows no loop and no request struct: request_accounting.c
 * hands it the fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "log/access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "http/http_parser.h" /* serow_percent_decode: %U is the decoded path */

/* "[22/Nov/2026:05:40:18 +0000]" */
#define TIME_FIELD_SIZE 64 /* 28 used; room for any int the compiler imagines */
/* The most digits a number has (2^64 - 1). */
#define UINT_DIGITS 20

/* ---- the file ------------------------------------------------------------ */

static int open_for_append(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

struct access_log *serow_access_log_open(const char *path, int fd, const char *format,
                                         char *error, size_t error_size)
{
    struct access_log *log = calloc(1, sizeof(*log));
    if (log == NULL)
        return NULL;
    if (serow_access_log_compile(format, &log->format, error, error_size) != 0) {
        free(log);
        errno = EINVAL;
        return NULL;
    }
    /* (a copy above the standard descriptors, closed on exec) */
    log->fd = fcntl(fd >= 0 ? fd : 2, F_DUPFD_CLOEXEC, 3);
    if (log->fd >= 0 && fd >= 0 && path != NULL && (log->path = strdup(path)) == NULL) {
        close(log->fd);
        log->fd = -1;
    }
    if (log->fd < 0) {
        int saved = errno;
        free(log->path);
        serow_access_log_format_free(&log->format);
        free(log);
        errno = saved;
        snprintf(error, error_size, "%s", strerror(saved));
        return NULL;
    }
    tzset(); /* localtime_r does not read TZ itself */
    return log;
}

void serow_access_log_close(struct access_log *log)
{
    if (log == NULL)
        return;
    close(log->fd);
    free(log->path);
    serow_access_log_format_free(&log->format);
    free(log);
}

int serow_access_log_reopen(struct access_log *log)
{
    if (log->path == NULL)
        return 0; /* standard error belongs to whoever started the server */
    int fd = open_for_append(log->path);
    if (fd < 0)
        return -1;
    close(log->fd);
    log->fd = fd;
    return 0;
}

/* ---- where the logged parts of a request are --------------------------- */

static size_t offset_in(const char *buffer, const char *p)
{
    return (size_t)(p - buffer);
}

void serow_access_log_note_request(const struct access_log_format *format,
                                   struct access_log_request *req, const char *buffer,
                                   const struct http_request_head *head)
{
    /* The request line runs from the method to its line end; the parser
     * leaves the version out, so find the end again. */
    const char *start = head->method;
    const char *end = head->target + head->target_len;
    while (*end != '\r' && *end != '\n')
        end++;
    req->line_offset = offset_in(buffer, start);
    req->line_len = (size_t)(end - start);
    for (int i = 0; i < format->num_request_headers; i++) {
        const struct access_log_name *n = &format->request_headers[i];
        const struct http_header *h = serow_find_header(head, n->name, n->len);
        req->header_offset[i] = h ? offset_in(buffer, h->value) : 0;
        req->header_len[i] = h ? h->value_len : SIZE_MAX;
    }
}

const char *serow_access_log_raw_request_line(const char *buffer, size_t len, size_t *line_len)
{
    size_t i = 0;
    while (i < len && (buffer[i] == '\r' || buffer[i] == '\n'))
        i++;
    if (i == len) {
        *line_len = 0;
        return NULL;
    }
    const char *line = buffer + i;
    const char *lf = memchr(line, '\n', len - i);
    size_t n = lf ? (size_t)(lf - line) : len - i;
    if (n > 0 && line[n - 1] == '\r')
        n--;
    *line_len = n;
    return line;
}

/* ---- times ----------------------------------------------------------------- */

static inline uint64_t us_between(uint64_t from, uint64_t to)
{
    /* The wall clock may step back between two readings: no part is negative. */
    return from && to > from ? (to - from) / 1000 : 0;
}

void serow_access_log_split(const struct access_log_times *t, struct access_log_split *out)
{
    out->total_us = us_between(t->arrived_ns, t->end_ns);
    out->queue_us = us_between(t->arrived_ns, t->app_ns);
    out->app_us = us_between(t->app_ns, t->head_ns);
    out->write_us = us_between(t->head_ns, t->end_ns);
}

/* ---- formatting -------------------------------------------------------- */

/* A bounded writer: bytes past the end are dropped, never written. */
struct out {
    char *p, *end;
};

static inline void put(struct out *o, const char *s, size_t n)
{
    size_t room = (size_t)(o->end - o->p);
    if (n > room)
        n = room;
    memcpy(o->p, s, n);
    o->p += n;
}

/* A format's literal: most are a few bytes, and a call to memcpy costs more
 * than they do, so a short one is copied as ACCESS_LOG_LITERAL_CHUNK bytes of constant
 * size (two moves; the literal store has that much slack after its end, and
 * the bytes past the literal in the line are overwritten next). */
static inline void put_literal(struct out *o, const char *s, size_t n)
{
    if (n <= ACCESS_LOG_LITERAL_CHUNK && (size_t)(o->end - o->p) >= ACCESS_LOG_LITERAL_CHUNK) {
        memcpy(o->p, s, ACCESS_LOG_LITERAL_CHUNK);
        o->p += n;
        return;
    }
    put(o, s, n);
}

static void put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline void put_uint(struct out *o, uint64_t v)
{
    /* Two digits a division, right to left, then into the line as one
     * copy of constant size (a few moves, where a copy of the digits' own
     * length would be a call to memcpy): digits has room for that copy to
     * read past the last digit, and the line's bytes past the number are
     * written next. */
    char digits[2 * UINT_DIGITS];
    char *end = digits + UINT_DIGITS, *p = end;
    while (v >= 100) {
        const char *pair = digit_pairs + (v % 100) * 2;
        v /= 100;
        *--p = pair[1];
        *--p = pair[0];
    }
    if (v >= 10) {
        *--p = digit_pairs[v * 2 + 1];
        *--p = digit_pairs[v * 2];
    } else {
        *--p = (char)('0' + v);
    }
    size_t n = (size_t)(end - p);
    if ((size_t)(o->end - o->p) >= UINT_DIGITS) {
        memcpy(o->p, p, UINT_DIGITS);
        o->p += n;
    } else {
        put(o, p, n);
    }
}

/* Bytes written as they are: printable ASCII but '"' and '\\' (PLAIN), and
 * of those all but ' ' in a field that is not quoted (PLAIN_UNQUOTED).  A
 * table: one load a byte, where the comparisons took four. */
#define PLAIN 1
#define PLAIN_UNQUOTED 2
static const unsigned char plain_bytes[256] = {
    [' '] = PLAIN,
    ['!'] = PLAIN | PLAIN_UNQUOTED,
    /* '"' escaped */
    ['#' ... '['] = PLAIN | PLAIN_UNQUOTED,
    /* '\\' escaped */
    [']' ... '~'] = PLAIN | PLAIN_UNQUOTED,
};

static inline int is_plain(unsigned char c)
{
    return plain_bytes[c] & PLAIN;
}

static const char hex[] = "0123456789ABCDEF";

/* The bytes Apache escapes with a backslash and a letter rather than \xHH
 * (ap_escape_logitem): log readers made for Apache's lines undo these. */
static char backslash_letter(unsigned char c)
{
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '\b': return 'b';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    case '\v': return 'v';
    default: return 0;
    }
}

/*
 * Writes s as it may appear in the log, escaped as Apache escapes it:
 * printable ASCII as is; '"' and '\' as \" and \\; backspace, newline,
 * carriage return, tab and vertical tab as \b \n \r \t \v; anything else
 * (other control bytes, DEL, bytes above 0x7F) as \xHH, so that a field
 * never ends early and never carries a line end; with escape_space, ' ' as
 * \x20 too (for a field that is not quoted).  At most budget bytes; a cut
 * field ends in "...".  Empty or NULL: "-".
 */
static void put_escaped(struct out *o, const char *s, size_t n, size_t budget, int escape_space)
{
    if (s == NULL || n == 0) {
        put(o, "-", 1);
        return;
    }
    size_t room = (size_t)(o->end - o->p);
    if (budget > room)
        budget = room;
    if (budget < 3)
        return;
    budget -= 3; /* kept for "..." */
    const unsigned char plain = escape_space ? PLAIN_UNQUOTED : PLAIN;
    size_t i = 0;
    while (i < n) {
        /* a run of plain bytes is copied at once */
        size_t run = i;
        while (run < n && (plain_bytes[(unsigned char)s[run]] & plain))
            run++;
        if (run > i) {
            size_t take = run - i;
            if (take > budget) {
                memcpy(o->p, s + i, budget);
                o->p += budget;
                put(o, "...", 3);
                return;
            }
            memcpy(o->p, s + i, take);
            o->p += take;
            budget -= take;
            i = run;
            continue;
        }
        if (budget < 4) {
            put(o, "...", 3);
            return;
        }
        unsigned char c = (unsigned char)s[i++];
        char letter = backslash_letter(c);
        o->p[0] = '\\';
        if (letter) {
            o->p[1] = letter;
            o->p += 2;
            budget -= 2;
            continue;
        }
        o->p[1] = 'x';
        o->p[2] = hex[c >> 4];
        o->p[3] = hex[c & 15];
        o->p += 4;
        budget -= 4;
    }
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; }
    else return 0;
    if (len > n)
        return 0;
    uint32_t cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/*
 * Writes s as a JSON string (quotes included): '"' and '\' escaped, control
 * bytes and DEL as \u00XX, valid UTF-8 as it is, any other byte as \u00XX
 * (so the line always parses; such a byte reads back as the code point of
 * its value).  At most budget bytes; a cut string ends in "...".  NULL: null.
 */
static void put_json_string(struct out *o, const char *s, size_t n, size_t budget)
{
    if (s == NULL) {
        put(o, "null", 4);
        return;
    }
    size_t room = (size_t)(o->end - o->p);
    if (budget > room)
        budget = room;
    if (budget < 5)
        return;
    budget -= 5; /* the quotes and "..." */
    *o->p++ = '"';
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && is_plain(u[run]))
            run++;
        if (run > i) {
            size_t take = run - i;
            if (take > budget) {
                take = budget;
                memcpy(o->p, s + i, take);
                o->p += take;
                memcpy(o->p, "...", 3);
                o->p += 3;
                break;
            }
            memcpy(o->p, s + i, take);
            o->p += take;
            budget -= take;
            i = run;
            continue;
        }
        size_t seq = u[i] >= 0x80 ? utf8_sequence(u + i, n - i) : 0;
        size_t need = seq ? seq : (u[i] == '"' || u[i] == '\\') ? 2 : 6;
        if (need > budget) {
            memcpy(o->p, "...", 3);
            o->p += 3;
            break;
        }
        if (seq) {
            memcpy(o->p, s + i, seq);
            i += seq;
        } else if (need == 2) {
            o->p[0] = '\\';
            o->p[1] = (char)u[i++];
        } else {
            unsigned char c = u[i++];
            memcpy(o->p, "\\u00", 4);
            o->p[4] = hex[c >> 4];
            o->p[5] = hex[c & 15];
        }
        o->p += need;
        budget -= need;
    }
    *o->p++ = '"';
}

/* The time field, formatted again only when the second changes: Apache's
 * "[22/Nov/2026:05:40:18 +0000]", or ISO 8601 "2026-11-22T05:40:18+00:00". */
static const char *time_field(int64_t now, int iso, size_t *len)
{
    static char text[2][TIME_FIELD_SIZE];
    static size_t text_len[2];
    static int64_t formatted_for[2] = {-1, -1};
    if (now != formatted_for[iso]) {
        static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        time_t t = (time_t)now;
        struct tm tm;
        localtime_r(&t, &tm);
        int offset = (int)(tm.tm_gmtoff / 60); /* minutes east of UTC */
        char sign = offset < 0 ? '-' : '+';
        if (offset < 0)
            offset = -offset;
        int n;
        if (iso)
            n = snprintf(text[1], sizeof(text[1]), "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, sign, offset / 60, offset % 60);
        else
            n = snprintf(text[0], sizeof(text[0]), "[%02d/%s/%04d:%02d:%02d:%02d %c%02d%02d]",
                         tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, sign, offset / 60, offset % 60);
        text_len[iso] = n > 0 && (size_t)n < TIME_FIELD_SIZE ? (size_t)n : 0;
        formatted_for[iso] = now;
    }
    *len = text_len[iso];
    return text[iso];
}

/* The parts of a request line "METHOD TARGET PROTOCOL": the target's path
 * and query ("?..." included; empty when none). */
struct line_parts {
    struct access_log_span method, path, query, protocol;
};

static void split_request_line(const char *line, size_t len, struct line_parts *parts)
{
    memset(parts, 0, sizeof(*parts));
    if (line == NULL)
        return;
    const char *end = line + len;
    const char *sp1 = memchr(line, ' ', len);
    parts->method = (struct access_log_span){line, sp1 ? (size_t)(sp1 - line) : len};
    if (sp1 == NULL)
        return;
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', (size_t)(end - target));
    const char *target_end = sp2 ? sp2 : end;
    const char *q = memchr(target, '?', (size_t)(target_end - target));
    parts->path = (struct access_log_span){target, (size_t)((q ? q : target_end) - target)};
    parts->query = (struct access_log_span){q ? q : target_end, q ? (size_t)(target_end - q) : 0};
    if (sp2)
        parts->protocol = (struct access_log_span){sp2 + 1, (size_t)(end - sp2 - 1)};
}

/* A text field: escaped in a text format, a JSON string in json. */
static void put_text(struct out *o, const struct access_log_op *op, const char *s, size_t n)
{
    if (op->json)
        put_json_string(o, s, n, op->budget ? op->budget : ACCESS_LOG_MAX_HEADER_FIELD);
    else
        put_escaped(o, s, n, op->budget ? op->budget : ACCESS_LOG_MAX_HEADER_FIELD,
                    op->escape_space);
}

static void put_span(struct out *o, const struct access_log_op *op, struct access_log_span s)
{
    put_text(o, op, s.p, s.len);
}

/*
 * %U as Apache writes it: the path percent-decoded (its r->uri; an
 * absolute-form target's path alone), then escaped as any field is, so
 * "/a%20b%2Fc%00" is logged "/a b/c\x00".  Only the first
 * ACCESS_LOG_MAX_LINE bytes of a longer path are decoded: they decode to
 * more than the field's budget, which cuts it anyway.
 */
static void put_decoded_path(struct out *o, const struct access_log_op *op,
                             struct access_log_span path)
{
    if (path.p && path.len && path.p[0] != '/') {
        const char *scheme_end = memmem(path.p, path.len, "://", 3);
        if (scheme_end) { /* absolute-form: from the path after the authority */
            const char *authority = scheme_end + 3;
            const char *slash = memchr(authority, '/', (size_t)(path.p + path.len - authority));
            path = slash ? (struct access_log_span){slash, (size_t)(path.p + path.len - slash)}
                         : (struct access_log_span){"/", 1};
        }
    }
    char decoded[ACCESS_LOG_MAX_LINE];
    size_t len = path.len < sizeof(decoded) ? path.len : sizeof(decoded);
    if (path.p)
        memcpy(decoded, path.p, len);
    put_text(o, op, path.p ? decoded : NULL, path.p ? serow_percent_decode(decoded, len) : 0);
}

void serow_access_log_id_as_request_header(const struct access_log_format *f,
                                           struct access_log_entry *e, const char *name,
                                           size_t name_len)
{
    if (e->request_id.len == 0)
        return;
    for (int i = 0; i < f->num_request_headers; i++)
        if (f->request_headers[i].len == name_len &&
            strncasecmp(f->request_headers[i].name, name, name_len) == 0)
            e->request_headers[i] = e->request_id;
}

void serow_access_log_own_response_headers(const struct access_log_format *f,
                                           struct access_log_span *response_headers,
                                           struct access_log_span id, const char *name,
                                           size_t name_len)
{
    for (int i = 0; i < f->num_response_headers; i++)
        response_headers[i] = name_len && id.len && f->response_headers[i].len == name_len &&
                                      strncasecmp(f->response_headers[i].name, name, name_len) == 0
                                  ? id
                                  : (struct access_log_span){NULL, 0};
}

/* A number; "-" (text) or null (json) when absent. */
static inline void put_number(struct out *o, const struct access_log_op *op, int present, uint64_t v)
{
    if (present)
        put_uint(o, v);
    else if (op->json)
        put(o, "null", 4);
    else
        put(o, "-", 1);
}

size_t serow_access_log_format(char *line, const struct access_log_format *format,
                               const struct access_log_entry *e)
{
    struct out o = {line, line + ACCESS_LOG_MAX_LINE - 1}; /* -1: the final "\n" */
    struct line_parts parts;
    int have_parts = 0;
    for (int i = 0; i < format->num_ops; i++) {
        const struct access_log_op *op = &format->ops[i];
        switch ((enum access_log_op_kind)op->kind) {
        case LOG_LITERAL:
            put_literal(&o, op->text, op->len);
            break;
        case LOG_REMOTE_ADDR: {
            const char *a = e->remote_addr && *e->remote_addr ? e->remote_addr : NULL;
            if (op->json)
                put_json_string(&o, a, a ? strlen(a) : 0, 128);
            else
                put_str(&o, a ? a : "-");
            break;
        }
        case LOG_IDENT:
            put(&o, op->json ? "null" : "-", op->json ? 4 : 1);
            break;
        case LOG_REMOTE_USER:
            put_text(&o, op, e->remote_user_len ? e->remote_user : NULL, e->remote_user_len);
            break;
        case LOG_TIME: {
            int64_t now = (int64_t)(e->times.end_ns / 1000000000ULL);
            size_t len;
            const char *text = time_field(now, op->json, &len);
            if (op->json)
                put(&o, "\"", 1);
            put(&o, text, len);
            if (op->json)
                put(&o, "\"", 1);
            break;
        }
        case LOG_REQUEST_LINE:
            put_text(&o, op, e->request_line, e->request_line_len);
            break;
        case LOG_STATUS:
            put_number(&o, op, e->status > 0, (uint64_t)e->status);
            break;
        case LOG_BYTES_CLF:
            put_number(&o, op, e->body_bytes > 0, e->body_bytes);
            break;
        case LOG_BYTES:
            put_uint(&o, e->body_bytes);
            break;
        case LOG_TOTAL_US:
            put_uint(&o, us_between(e->times.arrived_ns, e->times.end_ns));
            break;
        case LOG_TOTAL_MS:
            put_uint(&o, us_between(e->times.arrived_ns, e->times.end_ns) / 1000);
            break;
        case LOG_TOTAL_S:
            put_uint(&o, us_between(e->times.arrived_ns, e->times.end_ns) / 1000000);
            break;
        case LOG_QUEUE_US:
            put_uint(&o, us_between(e->times.arrived_ns, e->times.app_ns));
            break;
        case LOG_APP_US:
            put_uint(&o, us_between(e->times.app_ns, e->times.head_ns));
            break;
        case LOG_WRITE_US:
            put_uint(&o, us_between(e->times.head_ns, e->times.end_ns));
            break;
        case LOG_METHOD: case LOG_PATH: case LOG_QUERY: case LOG_PROTOCOL:
            if (!have_parts) {
                split_request_line(e->request_line, e->request_line_len, &parts);
                have_parts = 1;
            }
            if (op->kind == LOG_QUERY) {
                /* Apache writes "" for no query string, not "-" */
                if (parts.query.len)
                    put_span(&o, op, parts.query);
                else if (op->json)
                    put(&o, parts.method.p ? "\"\"" : "null", parts.method.p ? 2 : 4);
                break;
            }
            if (op->kind == LOG_PATH)
                put_decoded_path(&o, op, parts.path);
            else
                put_span(&o, op, op->kind == LOG_METHOD ? parts.method : parts.protocol);
            break;
        case LOG_SERVER_NAME:
            put_text(&o, op, e->server_name, e->server_name ? strlen(e->server_name) : 0);
            break;
        case LOG_SERVER_PORT:
            put_number(&o, op, e->server_port > 0, (uint64_t)e->server_port);
            break;
        case LOG_PID:
            put_uint(&o, (uint64_t)e->pid);
            break;
        case LOG_KEEPALIVE:
            put_uint(&o, e->keepalive_requests);
            break;
        case LOG_REQUEST_ID:
            put_span(&o, op, e->request_id);
            break;
        case LOG_REQUEST_HEADER:
            put_span(&o, op, e->request_headers[op->index]);
            break;
        case LOG_RESPONSE_HEADER:
            put_span(&o, op, e->response_headers[op->index]);
            break;
        case LOG_ENV:
            put_span(&o, op, e->env[op->index]);
            break;
        }
    }
    *o.p++ = '\n'; /* the writer kept a byte for it */
    return (size_t)(o.p - line);
}

size_t serow_access_log_write(struct access_log *log, const struct access_log_entry *entry)
{
    size_t n = serow_access_log_format(log->line, &log->format, entry);
    for (;;) {
        /* One write: O_APPEND puts the whole line at the end of the file,
         * after any other worker's. */
        ssize_t w = write(log->fd, log->line, n);
        if (w >= 0 || errno != EINTR)
            break;
    }
    return n;
}
