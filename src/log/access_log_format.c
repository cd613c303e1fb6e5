/*
 * access_log_format.c - compiles an access log format (an Apache LogFormat
 * string, or combined, common, json) into the list of operations
 * access_log.c runs for each line (see access_log.h).
 *
 * Owns: the directives a format may use, their names and budgets, the named
 * formats, and the messages that refuse a bad format.  Runs at start-up
 * only (the master's check, a worker opening its log): nothing here is on
 * a request's path.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "log/access_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- formats ------------------------------------------------------------ */

static const char COMBINED[] = "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\"";
static const char COMMON[] = "%h %l %u %t \"%r\" %>s %b";

/*
 * The json format's fields, in their order: key, directive.  Its budgets
 * keep the longest line (every field cut) under ACCESS_LOG_MAX_LINE, so that
 * a json line is never cut short of its closing brace.
 */
static const struct {
    const char *key, *directive;
    uint16_t budget;
} JSON_FIELDS[] = {
    {"time", "%t", 0},
    {"remote_addr", "%h", 0},
    {"remote_user", "%u", 128},
    {"request", "%r", 1024},
    {"method", "%m", 32},
    {"path", "%U", 512},
    {"query", "%q", 512},
    {"protocol", "%H", 32},
    {"status", "%>s", 0},
    {"bytes", "%B", 0},
    {"referer", "%{Referer}i", 512},
    {"user_agent", "%{User-Agent}i", 512},
    {"duration_us", "%D", 0},
    {"queue_us", "%{queue_us}x", 0},
    {"app_us", "%{app_us}x", 0},
    {"write_us", "%{write_us}x", 0},
    {"request_id", "%{request_id}x", 160},
    {"pid", "%P", 0},
};

/* The directives: the letter, whether it takes a {NAME}, its kind, and the
 * budget of a text field (0: a number or a field of the server's own). */
static int directive_kind(char letter, const char *name, size_t name_len, int *kind,
                          uint16_t *budget, int *escape_space)
{
    *budget = 0;
    *escape_space = 0;
    if (name == NULL) {
        switch (letter) {
        case 'h': case 'a': *kind = LOG_REMOTE_ADDR; return 0;
        case 'l': *kind = LOG_IDENT; return 0;
        case 'u': *kind = LOG_REMOTE_USER; *budget = ACCESS_LOG_MAX_USER; *escape_space = 1;
            return 0;
        case 't': *kind = LOG_TIME; return 0;
        case 'r': *kind = LOG_REQUEST_LINE; *budget = ACCESS_LOG_MAX_REQUEST_LINE; return 0;
        case 's': *kind = LOG_STATUS; return 0;
        case 'b': *kind = LOG_BYTES_CLF; return 0;
        case 'B': *kind = LOG_BYTES; return 0;
        case 'D': *kind = LOG_TOTAL_US; return 0;
        case 'T': *kind = LOG_TOTAL_S; return 0;
        case 'm': *kind = LOG_METHOD; *budget = 64; return 0;
        case 'U': *kind = LOG_PATH; *budget = 1024; return 0;
        case 'q': *kind = LOG_QUERY; *budget = 1024; return 0;
        case 'H': *kind = LOG_PROTOCOL; *budget = 64; return 0;
        case 'v': case 'V': *kind = LOG_SERVER_NAME; *budget = 256; return 0;
        case 'p': *kind = LOG_SERVER_PORT; return 0;
        case 'P': *kind = LOG_PID; return 0;
        case 'k': *kind = LOG_KEEPALIVE; return 0;
        }
        return -1;
    }
#define NAME_IS(s) (name_len == sizeof(s) - 1 && memcmp(name, s, name_len) == 0)
    switch (letter) {
    case 'i': *kind = LOG_REQUEST_HEADER; *budget = ACCESS_LOG_MAX_HEADER_FIELD; return 0;
    case 'o': *kind = LOG_RESPONSE_HEADER; *budget = ACCESS_LOG_MAX_HEADER_FIELD; return 0;
    case 'e': *kind = LOG_ENV; *budget = ACCESS_LOG_MAX_HEADER_FIELD; return 0;
    case 'T':
        /* Apache 2.4's units of %T */
        if (NAME_IS("us")) { *kind = LOG_TOTAL_US; return 0; }
        if (NAME_IS("ms")) { *kind = LOG_TOTAL_MS; return 0; }
        if (NAME_IS("s")) { *kind = LOG_TOTAL_S; return 0; }
        return -1;
    case 'p':
        if (NAME_IS("local") || NAME_IS("canonical")) { *kind = LOG_SERVER_PORT; return 0; }
        return -1;
    case 'x':
        if (NAME_IS("queue_us")) { *kind = LOG_QUEUE_US; return 0; }
        if (NAME_IS("app_us")) { *kind = LOG_APP_US; return 0; }
        if (NAME_IS("write_us")) { *kind = LOG_WRITE_US; return 0; }
        if (NAME_IS("request_id")) { *kind = LOG_REQUEST_ID; *budget = 160; return 0; }
        return -1;
    }
#undef NAME_IS
    return -1;
}

static int fail(char *error, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *error, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* The index of name in a format's list of names of one kind, added if new. */
static int name_index(struct access_log_name *names, int *count, const char *name, size_t len)
{
    for (int i = 0; i < *count; i++)
        if (names[i].len == len && strncasecmp(names[i].name, name, len) == 0)
            return i;
    if (*count == ACCESS_LOG_MAX_NAMED)
        return -1;
    memcpy(names[*count].name, name, len);
    names[*count].name[len] = '\0';
    names[*count].len = len;
    return (*count)++;
}

static struct access_log_op *new_op(struct access_log_format *f)
{
    if (f->num_ops == ACCESS_LOG_MAX_OPS)
        return NULL;
    struct access_log_op *op = &f->ops[f->num_ops++];
    memset(op, 0, sizeof(*op));
    return op;
}

/* Appends text (kept in the literal store, which has room for it) as a
 * literal, joined to the literal before it when there is one. */
static int add_literal(struct access_log_format *f, char **store, const char *text, size_t len)
{
    if (len == 0)
        return 0;
    struct access_log_op *last = f->num_ops ? &f->ops[f->num_ops - 1] : NULL;
    memcpy(*store, text, len);
    if (last && last->kind == LOG_LITERAL && last->text + last->len == *store) {
        last->len = (uint16_t)(last->len + len);
    } else {
        struct access_log_op *op = new_op(f);
        if (op == NULL)
            return -1;
        op->kind = LOG_LITERAL;
        op->text = *store;
        op->len = (uint16_t)len;
    }
    *store += len;
    return 0;
}

/* One directive, "%..." at *pp: compiled into an op, *pp moved past it. */
static int compile_directive(struct access_log_format *f, const char **pp, char **store,
                             char *error, size_t error_size)
{
    const char *start = *pp, *p = start + 1;
    while (*p == '>' || *p == '<')
        p++; /* Apache's original/final request: one request here, the same */
    const char *name = NULL;
    size_t name_len = 0;
    if (*p == '{') {
        const char *close = strchr(p, '}');
        if (close == NULL)
            return fail(error, error_size, "unterminated %%{ in '%s'", start);
        name = p + 1;
        name_len = (size_t)(close - name);
        if (name_len == 0 || name_len > ACCESS_LOG_MAX_NAME)
            return fail(error, error_size, "directive '%.*s' has %s name", (int)(close + 2 - start),
                        start, name_len ? "too long a" : "an empty");
        p = close + 1;
    }
    if (*p == '\0')
        return fail(error, error_size, "directive '%s' has no letter", start);
    if (*p == '%' && name == NULL && p == start + 1) {
        *pp = p + 1;
        return add_literal(f, store, "%", 1);
    }
    int kind, escape_space;
    uint16_t budget;
    if (directive_kind(*p, name, name_len, &kind, &budget, &escape_space) != 0)
        return fail(error, error_size, "unknown directive '%.*s'", (int)(p + 1 - start), start);
    struct access_log_op *op = new_op(f);
    if (op == NULL)
        return fail(error, error_size, "more than %d directives and literal runs",
                    ACCESS_LOG_MAX_OPS);
    op->kind = (uint8_t)kind;
    op->budget = budget;
    op->escape_space = (uint8_t)escape_space;
    int index = 0;
    if (kind == LOG_REQUEST_HEADER)
        index = name_index(f->request_headers, &f->num_request_headers, name, name_len);
    else if (kind == LOG_RESPONSE_HEADER)
        index = name_index(f->response_headers, &f->num_response_headers, name, name_len);
    else if (kind == LOG_ENV)
        index = name_index(f->env, &f->num_env, name, name_len);
    if (index < 0)
        return fail(error, error_size, "'%.*s': more than %d names of that kind",
                    (int)(p + 1 - start), start, ACCESS_LOG_MAX_NAMED);
    op->index = (uint8_t)index;
    *pp = p + 1;
    return 0;
}

/*
 * Literal text, as Apache reads it in a LogFormat: "\t" is a tab, "\\" and
 * "\"" a backslash and a quote (so a format copied from an Apache
 * configuration means the same); a tab may also be given as it is.  Any other
 * control byte, and "\n", would break the one line a request has.
 */
static int literal_byte(const char **pp, char *byte, char *error, size_t error_size)
{
    const char *p = *pp;
    unsigned char c = (unsigned char)*p;
    if (c == '\\') {
        if (p[1] == 't' || p[1] == '\\' || p[1] == '"') {
            *byte = p[1] == 't' ? '\t' : p[1];
            *pp = p + 2;
            return 0;
        }
        if (p[1] == 'n')
            return fail(error, error_size, "'\\n' in the format would break the line");
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
        return fail(error, error_size, "a control byte (0x%02X) in the format would break the line", c);
    }
    *byte = (char)c;
    *pp = p + 1;
    return 0;
}

static int compile_text(const char *format, struct access_log_format *f, char *error,
                        size_t error_size)
{
    char *store = f->literals;
    const char *p = format;
    while (*p) {
        if (*p == '%') {
            if (compile_directive(f, &p, &store, error, error_size) != 0)
                return -1;
            continue;
        }
        char byte;
        if (literal_byte(&p, &byte, error, error_size) != 0)
            return -1;
        if (add_literal(f, &store, &byte, 1) != 0)
            return fail(error, error_size, "more than %d directives and literal runs",
                        ACCESS_LOG_MAX_OPS);
    }
    return 0;
}

/* The json format: the same directives, between keys, as json values. */
static int compile_json(struct access_log_format *f, char *error, size_t error_size)
{
    char *store = f->literals;
    f->json = 1;
    for (size_t i = 0; i < sizeof(JSON_FIELDS) / sizeof(JSON_FIELDS[0]); i++) {
        char key[48];
        int n = snprintf(key, sizeof(key), "%s\"%s\":", i ? "," : "{", JSON_FIELDS[i].key);
        if (add_literal(f, &store, key, (size_t)n) != 0)
            return fail(error, error_size, "the json format has too many fields");
        const char *d = JSON_FIELDS[i].directive;
        if (compile_directive(f, &d, &store, error, error_size) != 0)
            return -1;
        struct access_log_op *op = &f->ops[f->num_ops - 1];
        op->json = 1;
        op->escape_space = 0;
        if (JSON_FIELDS[i].budget)
            op->budget = JSON_FIELDS[i].budget;
    }
    return add_literal(f, &store, "}", 1);
}

int serow_access_log_compile(const char *format, struct access_log_format *f, char *error,
                             size_t error_size)
{
    memset(f, 0, sizeof(*f));
    if (strcmp(format, "combined") == 0)
        format = COMBINED;
    else if (strcmp(format, "common") == 0)
        format = COMMON;
    /* (no line can hold a longer one, and a literal's length is 16 bits) */
    if (strlen(format) >= ACCESS_LOG_MAX_LINE)
        return fail(error, error_size, "longer than a line may be (%d bytes)", ACCESS_LOG_MAX_LINE);
    int json = strcmp(format, "json") == 0;
    /* Literals are never longer than the format, nor the json keys than 1 KiB;
     * put_literal may read ACCESS_LOG_LITERAL_CHUNK bytes past the last one. */
    f->literals = calloc(1, strlen(format) + 1024 + ACCESS_LOG_LITERAL_CHUNK);
    if (f->literals == NULL)
        return fail(error, error_size, "out of memory");
    int r = json ? compile_json(f, error, error_size) : compile_text(format, f, error, error_size);
    if (r != 0) {
        serow_access_log_format_free(f);
        return -1;
    }
    return 0;
}

void serow_access_log_format_free(struct access_log_format *f)
{
    free(f->literals);
    f->literals = NULL;
    f->num_ops = 0;
}
