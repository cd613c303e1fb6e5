/*
 * request_id.c - the ids of --request-id-header (see request_id.h): taking
 * a client's, making ours, and finding one in a head that was not parsed
 * (a request the holder answers 503 without parsing it).
 *
 * Owns: the id rules (what is acceptable, the made ids' shape).  It may not
 * keep any process's state: each caller owns its struct serow_id_maker (the
 * worker's loop, the holder).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "log/request_id.h"

#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int serow_request_id_acceptable(const char *p, size_t len)
{
    if (len == 0 || len >= REQUEST_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)p[i] < 0x21 || (unsigned char)p[i] > 0x7e)
            return 0;
    return 1;
}

/*
 * 16 hex digits of a random number the process draws once (getrandom) and 16
 * of a count of the ids it made.  Unique across processes and restarts
 * without any coordination (two processes draw the same 64 bits once in 2^32
 * pairs), and an id costs a few stores only.
 */
size_t serow_request_id_make(struct serow_id_maker *m, char *out)
{
    static const char hex[] = "0123456789abcdef";
    if (!m->prefix_drawn) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            r = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec * 1000000000ULL ^ (uint64_t)ts.tv_nsec;
        }
        for (int i = 15; i >= 0; i--, r >>= 4)
            m->prefix[i] = hex[r & 15];
        m->prefix_drawn = 1;
    }
    memcpy(out, m->prefix, 16);
    uint64_t n = ++m->made;
    for (int i = 31; i >= 16; i--, n >>= 4)
        out[i] = hex[n & 15];
    return 32;
}

/* The value of field line [line, end) if it is named name, trimmed of
 * whitespace and the CR before its LF; NULL if it is another field. */
static const char *field_value(const char *line, const char *end, const char *name,
                               size_t name_len, size_t *len)
{
    if ((size_t)(end - line) <= name_len || line[name_len] != ':' ||
        strncasecmp(line, name, name_len) != 0)
        return NULL;
    const char *v = line + name_len + 1;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    *len = (size_t)(end - v);
    return v;
}

size_t serow_request_id_of_raw_head(struct serow_id_maker *maker, const char *head, size_t len,
                                    const char *name, size_t name_len, char *out)
{
    const char *end = head + len;
    const char *lf = memchr(head, '\n', len); /* the request line is not a field */
    while (lf && lf + 1 < end) {
        const char *line = lf + 1;
        lf = memchr(line, '\n', (size_t)(end - line));
        if (lf == NULL || line == lf || (line + 1 == lf && *line == '\r'))
            break; /* an unfinished line, or the end of the head */
        size_t value_len;
        const char *value = field_value(line, lf, name, name_len, &value_len);
        if (value) {
            if (!serow_request_id_acceptable(value, value_len))
                break;
            memcpy(out, value, value_len);
            return value_len;
        }
    }
    return serow_request_id_make(maker, out);
}
