/*
 * access_log.c - formats and writes access log lines (see access_log.h).
 *
 * Owns: the Apache combined format, the escaping of what a client sent, the
 * log file's descriptor (one write(2) a line; reopened on USR1).  It knows
 * no loop and no request struct: request_accounting.c hands it the fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* "[22/Nov/2026:05:40:18 +0000]" */
#define TIME_FIELD_SIZE 64 /* 28 used; room for any int the compiler imagines */

static int open_for_append(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

struct access_log *serow_access_log_open(const char *path, int fd)
{
    struct access_log *log = calloc(1, sizeof(*log));
    if (log == NULL)
        return NULL;
    /* (a copy above the standard descriptors, closed on exec) */
    log->fd = fcntl(fd >= 0 ? fd : 2, F_DUPFD_CLOEXEC, 3);
    if (log->fd >= 0 && fd >= 0 && path != NULL && (log->path = strdup(path)) == NULL) {
        close(log->fd);
        log->fd = -1;
    }
    if (log->fd < 0) {
        int saved = errno;
        free(log->path);
        free(log);
        errno = saved;
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

void serow_access_log_note_request(struct access_log_request *req, const char *buffer,
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

    const struct http_header *h = serow_find_header(head, "Referer", 7);
    req->referer_offset = h ? offset_in(buffer, h->value) : 0;
    req->referer_len = h ? h->value_len : SIZE_MAX;
    h = serow_find_header(head, "User-Agent", 10);
    req->agent_offset = h ? offset_in(buffer, h->value) : 0;
    req->agent_len = h ? h->value_len : SIZE_MAX;
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

/* ---- formatting -------------------------------------------------------- */

/* A bounded writer: bytes past the end are dropped, never written. */
struct out {
    char *p, *end;
};

static void put(struct out *o, const char *s, size_t n)
{
    size_t room = (size_t)(o->end - o->p);
    if (n > room)
        n = room;
    memcpy(o->p, s, n);
    o->p += n;
}

static void put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void put_uint(struct out *o, uint64_t v)
{
    char digits[24];
    char *p = digits + sizeof(digits);
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(o, p, (size_t)(digits + sizeof(digits) - p));
}

/* Bytes written as they are in a field: printable ASCII but '"' and '\'. */
static inline int is_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/*
 * Writes s as it may appear in the log: printable ASCII as is, anything else
 * (control bytes, DEL, bytes above 0x7F) and '"' and '\' as \xHH, so that a
 * field never ends early and never carries a line end; with escape_space,
 * ' ' too (for a field that is not quoted).  At most budget bytes; a cut
 * field ends in "...".  Empty or NULL: "-".
 */
static void put_escaped(struct out *o, const char *s, size_t n, size_t budget, int escape_space)
{
    static const char hex[] = "0123456789ABCDEF";
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
    size_t i = 0;
    while (i < n) {
        /* a run of plain bytes is copied at once */
        size_t run = i;
        while (run < n && is_plain((unsigned char)s[run]) && !(escape_space && s[run] == ' '))
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
        o->p[0] = '\\';
        o->p[1] = 'x';
        o->p[2] = hex[c >> 4];
        o->p[3] = hex[c & 15];
        o->p += 4;
        budget -= 4;
    }
}

/* The time field, formatted again only when the second changes. */
static const char *time_field(int64_t now)
{
    static char text[TIME_FIELD_SIZE];
    static int64_t formatted_for = -1;
    if (now != formatted_for) {
        static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        time_t t = (time_t)now;
        struct tm tm;
        localtime_r(&t, &tm);
        int offset = (int)(tm.tm_gmtoff / 60); /* minutes east of UTC */
        char sign = offset < 0 ? '-' : '+';
        if (offset < 0)
            offset = -offset;
        snprintf(text, sizeof(text), "[%02d/%s/%04d:%02d:%02d:%02d %c%02d%02d]", tm.tm_mday,
                 months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec, sign,
                 offset / 60, offset % 60);
        formatted_for = now;
    }
    return text;
}

size_t serow_access_log_format(char *line, const struct access_log_entry *e, int64_t now)
{
    struct out o = {line, line + ACCESS_LOG_MAX_LINE - 1}; /* -1: the final "\n" */
    put_str(&o, e->remote_addr && *e->remote_addr ? e->remote_addr : "-");
    put(&o, " - ", 3);
    /* Not quoted in the format, so a space would shift every field after it:
     * it is escaped too. */
    put_escaped(&o, e->remote_user, e->remote_user_len, ACCESS_LOG_MAX_USER, 1);
    put(&o, " ", 1);
    put_str(&o, time_field(now));
    put(&o, " \"", 2);
    put_escaped(&o, e->request_line, e->request_line_len, ACCESS_LOG_MAX_REQUEST_LINE, 0);
    put(&o, "\" ", 2);
    if (e->status > 0)
        put_uint(&o, (uint64_t)e->status);
    else
        put(&o, "-", 1);
    put(&o, " ", 1);
    if (e->body_bytes > 0)
        put_uint(&o, e->body_bytes);
    else
        put(&o, "-", 1);
    put(&o, " \"", 2);
    put_escaped(&o, e->referer, e->referer_len, ACCESS_LOG_MAX_HEADER_FIELD, 0);
    put(&o, "\" \"", 3);
    put_escaped(&o, e->user_agent, e->user_agent_len, ACCESS_LOG_MAX_HEADER_FIELD, 0);
    put(&o, "\"", 1);
    *o.p++ = '\n'; /* the writer kept a byte for it */
    return (size_t)(o.p - line);
}

size_t serow_access_log_write(struct access_log *log, const struct access_log_entry *entry)
{
    size_t n = serow_access_log_format(log->line, entry, (int64_t)time(NULL));
    for (;;) {
        /* One write: O_APPEND puts the whole line at the end of the file,
         * after any other worker's. */
        ssize_t w = write(log->fd, log->line, n);
        if (w >= 0 || errno != EINTR)
            break;
    }
    return n;
}
