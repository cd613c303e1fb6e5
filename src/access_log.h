/*
 * access_log.h - one line per answered request, in Apache's "combined"
 * format, written by the worker that answered it:
 *
 *   127.0.0.1 - user [22/Nov/2026:05:40:18 +0000] "GET / HTTP/1.1" 200 2 "referer" "agent"
 *
 * Several workers append to the same file, so every line leaves in one
 * write(2) on a descriptor opened with O_APPEND: lines never interleave.  A
 * line is at most ACCESS_LOG_MAX_LINE bytes, which also keeps it whole on a
 * pipe (standard error under systemd or a supervisor).
 *
 * The quoted fields come from the client: every byte that is not printable
 * ASCII, and '"' and '\', is written as \xHH, so that a request cannot
 * forge a line or a field (log injection).
 *
 * No Perl here.  A worker without an access log has no struct access_log at
 * all (the loop holds NULL), so the log costs nothing when it is off.
 */
#ifndef SEROW_ACCESS_LOG_H
#define SEROW_ACCESS_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "http_parser.h"

/* PIPE_BUF: the most a write(2) to a pipe keeps whole among other writers. */
#define ACCESS_LOG_MAX_LINE 4096
/* What each client-given field may take of that line, escaped; longer ones
 * are cut (and end in "..."). */
#define ACCESS_LOG_MAX_REQUEST_LINE 2048
#define ACCESS_LOG_MAX_HEADER_FIELD 768
#define ACCESS_LOG_MAX_USER 256

struct access_log {
    int fd;
    char *path;   /* NULL: standard error, never reopened */
    char line[ACCESS_LOG_MAX_LINE];
};

/* Where the logged parts of the current request sit in its connection's
 * buffer, as offsets: the head stays at the start of the buffer while the
 * body is read, but the buffer may move when it grows. */
struct access_log_request {
    size_t line_offset, line_len;       /* "GET / HTTP/1.1" */
    size_t referer_offset, referer_len; /* referer_len == SIZE_MAX: none */
    size_t agent_offset, agent_len;
};

/* What one log line says. */
struct access_log_entry {
    const char *remote_addr;
    const char *remote_user;     /* NULL or "": "-" */
    size_t remote_user_len;
    const char *request_line;    /* NULL: "-" */
    size_t request_line_len;
    const char *referer;         /* NULL: "-" */
    size_t referer_len;
    const char *user_agent;      /* NULL: "-" */
    size_t user_agent_len;
    int status;                  /* 0: "-" (the app answered on its own socket) */
    uint64_t body_bytes;         /* 0: "-" */
};

/* The log on a copy of descriptor fd, which the master opened on path for
 * appending (so that a worker that may not open the file itself, after
 * dropping privileges, still logs); path is what serow_access_log_reopen opens.
 * fd < 0: standard error, never reopened.  NULL with errno set on failure. */
struct access_log *serow_access_log_open(const char *path, int fd);
void serow_access_log_close(struct access_log *log);

/* Opens the path again (after logrotate renamed it) and, once that worked,
 * closes the old descriptor.  0, or -1 with errno set (the old one stays). */
int serow_access_log_reopen(struct access_log *log);

/* Notes where the request line and the Referer and User-Agent fields of a
 * parsed head lie in buffer. */
void serow_access_log_note_request(struct access_log_request *req, const char *buffer,
                             const struct http_request_head *head);

/* The request line of a head that may be incomplete or malformed: the first
 * line that is not empty, without its line end (up to len bytes). */
const char *serow_access_log_raw_request_line(const char *buffer, size_t len, size_t *line_len);

/* Formats the entry and writes it in one write(2).  Returns the length of
 * the line (also when the write failed: a full disk must not stop serving). */
size_t serow_access_log_write(struct access_log *log, const struct access_log_entry *entry);

/* The line without writing it (for tests and the fuzzers): into out,
 * which has room for ACCESS_LOG_MAX_LINE bytes; now is the time to show. */
size_t serow_access_log_format(char *out, const struct access_log_entry *entry, int64_t now);

#endif
