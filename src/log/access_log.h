/*
 * access_log.h - one line per answered request, in the format the operator
 * chose with --access-log-format, written by the worker that answered it.
 * The default is Apache's "combined":
 *
 *   127.0.0.1 - user [22/Nov/2026:05:40:18 +0000] "GET / HTTP/1.1" 200 2 "referer" "agent"
 *
 * A format is an Apache LogFormat string (or the name of one: combined,
 * common, json) compiled once, when the worker opens its log, into a list of
 * operations (struct access_log_format); a request runs down that list and
 * never parses the format again.  serow_access_log_compile is also what the
 * master calls at start-up to refuse a bad format, naming the directive.
 *
 * Several workers append to the same file, so every line leaves in one
 * write(2) on a descriptor opened with O_APPEND: lines never interleave.  A
 * line is at most ACCESS_LOG_MAX_LINE bytes, which also keeps it whole on a
 * pipe (standard error under systemd or a supervisor).
 *
 * What comes from the client is escaped as Apache escapes it, so that a
 * request cannot forge a line or a field (log injection): in a text format
 * '"' and '\' are written \" and \\, backspace, newline, carriage return,
 * tab and vertical tab \b \n \r \t \v, and every other byte that is not
 * printable ASCII \xHH.  In the json format
 * values are JSON strings: '"' '\' and control bytes escaped as JSON says,
 * valid UTF-8 kept, any other byte written as \u00HH.
 *
 * No Perl here.  A worker without an access log has no struct access_log at
 * all (the loop holds NULL), so the log costs nothing when it is off.
 */
#ifndef SEROW_ACCESS_LOG_H
#define SEROW_ACCESS_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "http/http_parser.h"

/* PIPE_BUF: the most a write(2) to a pipe keeps whole among other writers. */
#define ACCESS_LOG_MAX_LINE 4096
/* What each client-given field may take of that line, escaped; longer ones
 * are cut (and end in "..."). */
#define ACCESS_LOG_MAX_REQUEST_LINE 2048
#define ACCESS_LOG_MAX_HEADER_FIELD 768
#define ACCESS_LOG_MAX_USER 256
/* A format has at most this many directives and literal runs, and names at
 * most ACCESS_LOG_MAX_NAMED distinct fields of each kind (%{NAME}i, %{NAME}o,
 * %{NAME}e), each name at most ACCESS_LOG_MAX_NAME bytes. */
#define ACCESS_LOG_MAX_OPS 128
#define ACCESS_LOG_MAX_NAMED 8
#define ACCESS_LOG_MAX_NAME 64
/* Literals up to this long are copied in one constant-size move
 * (access_log.c, put_literal), so a compiled format keeps this many bytes
 * of room after its last literal (access_log_format.c). */
#define ACCESS_LOG_LITERAL_CHUNK 16
/* Room a request keeps for the response header and env values it logs
 * (%{NAME}o, %{NAME}e), copied while they exist; longer ones are cut. */
#define ACCESS_LOG_VALUES_ROOM 1024

enum access_log_op_kind {
    LOG_LITERAL,
    LOG_REMOTE_ADDR,   /* %h %a */
    LOG_IDENT,         /* %l: always "-" */
    LOG_REMOTE_USER,   /* %u */
    LOG_TIME,          /* %t, or ISO 8601 in json */
    LOG_REQUEST_LINE,  /* %r */
    LOG_STATUS,        /* %s %>s */
    LOG_BYTES_CLF,     /* %b: "-" for none */
    LOG_BYTES,         /* %B: 0 for none */
    LOG_TOTAL_US,      /* %D */
    LOG_TOTAL_MS,      /* %{ms}T */
    LOG_TOTAL_S,       /* %T */
    LOG_QUEUE_US,      /* %{queue_us}x */
    LOG_APP_US,        /* %{app_us}x */
    LOG_WRITE_US,      /* %{write_us}x */
    LOG_METHOD,        /* %m */
    LOG_PATH,          /* %U */
    LOG_QUERY,         /* %q: "?..." or "" */
    LOG_PROTOCOL,      /* %H */
    LOG_SERVER_NAME,   /* %v %V */
    LOG_SERVER_PORT,   /* %p */
    LOG_PID,           /* %P */
    LOG_KEEPALIVE,     /* %k: requests before this one on its connection */
    LOG_REQUEST_ID,    /* %{request_id}x */
    LOG_REQUEST_HEADER,  /* %{NAME}i */
    LOG_RESPONSE_HEADER, /* %{NAME}o */
    LOG_ENV,             /* %{NAME}e */
};

struct access_log_op {
    uint8_t kind;     /* enum access_log_op_kind */
    uint8_t json;     /* a json value: a string in quotes, or a number; null when absent */
    uint8_t index;    /* LOG_*_HEADER, LOG_ENV: which of the format's names */
    uint8_t escape_space; /* an unquoted text field: ' ' escaped too (%u) */
    uint16_t budget;  /* most bytes the field may take (escaped) */
    uint16_t len;     /* LOG_LITERAL: its length */
    const char *text; /* LOG_LITERAL: its bytes (in the format's own copy) */
};

/* A name a format logs, as given ("X-Request-Id"; matched without case for
 * headers). */
struct access_log_name {
    char name[ACCESS_LOG_MAX_NAME + 1];
    size_t len;
};

struct access_log_format {
    struct access_log_op ops[ACCESS_LOG_MAX_OPS];
    int num_ops;
    int json;
    struct access_log_name request_headers[ACCESS_LOG_MAX_NAMED];
    int num_request_headers;
    struct access_log_name response_headers[ACCESS_LOG_MAX_NAMED];
    int num_response_headers;
    struct access_log_name env[ACCESS_LOG_MAX_NAMED];
    int num_env;
    char *literals; /* the literal runs, unescaped */
};

/* Compiles format (a LogFormat string, or "combined", "common", "json") into
 * *out.  0, or -1 with a message naming the directive at fault in error
 * (error_size bytes). */
int serow_access_log_compile(const char *format, struct access_log_format *out, char *error,
                             size_t error_size);
void serow_access_log_format_free(struct access_log_format *format);

struct access_log {
    int fd;
    char *path;   /* NULL: standard error, never reopened */
    struct access_log_format format;
    char line[ACCESS_LOG_MAX_LINE];
};

/* A span of bytes a request logs (NULL: absent, "-" or null in the line). */
struct access_log_span {
    const char *p;
    size_t len;
};

/* Where the logged parts of the current request sit in its connection's
 * buffer, as offsets: the head stays at the start of the buffer while the
 * body is read, but the buffer may move when it grows. */
struct access_log_request {
    size_t line_offset, line_len;       /* "GET / HTTP/1.1" */
    /* the format's %{NAME}i, in its order; len == SIZE_MAX: none */
    size_t header_offset[ACCESS_LOG_MAX_NAMED], header_len[ACCESS_LOG_MAX_NAMED];
};

/* A request's times, in nanoseconds of the wall clock (CLOCK_REALTIME: the
 * kernel stamps arriving bytes on that clock): when its head arrived (the
 * stamp of the first read of it: transport.h's serow_recv_stamped),
 * when the app was called, when the app gave the final response's head,
 * when the last byte of the response was written.  A time not reached
 * (no app called, no head given) is 0. */
struct access_log_times {
    uint64_t arrived_ns, app_ns, head_ns, end_ns;
};

/* The clock of those times: the wall clock, in nanoseconds, because the
 * kernel stamps the bytes it receives on that clock (SO_TIMESTAMPNS,
 * transport.h's serow_recv_stamped).  Every process that writes a line
 * reads it (a worker, the holder, the master). */
static inline uint64_t serow_request_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* What one log line says. */
struct access_log_entry {
    const char *remote_addr;
    const char *remote_user;     /* NULL or "": "-" */
    size_t remote_user_len;
    const char *request_line;    /* NULL: "-" */
    size_t request_line_len;
    struct access_log_span request_headers[ACCESS_LOG_MAX_NAMED];
    struct access_log_span response_headers[ACCESS_LOG_MAX_NAMED];
    struct access_log_span env[ACCESS_LOG_MAX_NAMED];
    struct access_log_span request_id;
    const char *server_name;
    int server_port;             /* 0: "-" */
    int pid;
    uint64_t keepalive_requests; /* answered before on the same connection */
    int status;                  /* 0: "-" (the app answered on its own socket) */
    uint64_t body_bytes;         /* 0: "-" */
    struct access_log_times times;
};

/* The parts of a request's time, in microseconds, as the log and the
 * metrics count them; a part whose end was not reached is 0. */
struct access_log_split {
    uint64_t total_us, queue_us, app_us, write_us;
};
void serow_access_log_split(const struct access_log_times *t, struct access_log_split *out);

/* The log on a copy of descriptor fd, which the master opened on path for
 * appending (so that a worker that may not open the file itself, after
 * dropping privileges, still logs); path is what serow_access_log_reopen opens.
 * fd < 0: standard error, never reopened.  format: as for
 * serow_access_log_compile.  NULL with errno set on failure (EINVAL: a bad
 * format, its message in error). */
struct access_log *serow_access_log_open(const char *path, int fd, const char *format,
                                         char *error, size_t error_size);
void serow_access_log_close(struct access_log *log);

/* Opens the path again (after logrotate renamed it) and, once that worked,
 * closes the old descriptor.  0, or -1 with errno set (the old one stays). */
int serow_access_log_reopen(struct access_log *log);

/* Notes where the request line and the format's request header fields of a
 * parsed head lie in buffer. */
void serow_access_log_note_request(const struct access_log_format *format,
                                   struct access_log_request *req, const char *buffer,
                                   const struct http_request_head *head);

/* The request line of a head that may be incomplete or malformed: the first
 * line that is not empty, without its line end (up to len bytes). */
const char *serow_access_log_raw_request_line(const char *buffer, size_t len, size_t *line_len);

/* --request-id-header: the entry's request_id is also what %{NAME}i of
 * that header shows, whether the client sent the id or not (the header is
 * named name, name_len bytes). */
void serow_access_log_id_as_request_header(const struct access_log_format *format,
                                           struct access_log_entry *e, const char *name,
                                           size_t name_len);

/* A response the server wrote itself (an error page, not the app's): the
 * response headers the format names (%{NAME}o) are those the page carried,
 * which of them only the request id: the entry's request_id under the
 * header named name (name_len bytes; 0: --request-id-header is off), none
 * other.  response_headers: the format's (an entry's, or a request's). */
void serow_access_log_own_response_headers(const struct access_log_format *format,
                                           struct access_log_span *response_headers,
                                           struct access_log_span id, const char *name,
                                           size_t name_len);

/* Formats the entry and writes it in one write(2).  Returns the length of
 * the line (also when the write failed: a full disk must not stop serving). */
size_t serow_access_log_write(struct access_log *log, const struct access_log_entry *entry);

/* The line without writing it (for tests and the fuzzers): into out,
 * which has room for ACCESS_LOG_MAX_LINE bytes. */
size_t serow_access_log_format(char *out, const struct access_log_format *format,
                               const struct access_log_entry *entry);

#endif
