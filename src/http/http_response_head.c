/*
 * http_response_head.c - an HTTP/1.x response's head (http_response_head.h).
 */
#include "http/http_response_head.h"

#include <string.h>
#include <strings.h>

static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The end of the line starting at p (its CR), or NULL when buf ends first;
 * *bad when a CR is not followed by LF, or a bare LF or NUL comes. */
static const char *line_end(const char *p, const char *end, int *bad)
{
    for (; p < end; p++) {
        if (*p == '\r') {
            if (p + 1 == end)
                return NULL;
            if (p[1] != '\n')
                break;
            return p;
        }
        if (*p == '\n' || *p == '\0')
            break;
    }
    *bad = p < end;
    return NULL;
}

long serow_parse_response_head(const char *buf, size_t len, struct serow_response_head *head)
{
    const char *p = buf, *end = buf + len;
    int bad = 0;
    head->num_headers = 0;
    const char *eol = line_end(p, end, &bad);
    if (eol == NULL)
        return bad ? -1 : 0;
    /* HTTP/1.x NNN[ reason] */
    if (eol - p < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
        p[9] < '1' || p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (eol - p > 12 && p[12] != ' '))
        return -1;
    head->minor_version = p[7] - '0';
    head->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    for (p = eol + 2;;) {
        eol = line_end(p, end, &bad);
        if (eol == NULL)
            return bad ? -1 : 0;
        if (eol == p)
            return (long)(eol + 2 - buf);
        const char *colon = p;
        while (colon < eol && is_tchar((unsigned char)*colon))
            colon++;
        if (colon == p || colon == eol || *colon != ':' ||
            head->num_headers == SEROW_RESPONSE_MAX_HEADERS)
            return -1;
        const char *v = colon + 1, *v_end = eol;
        while (v < v_end && (*v == ' ' || *v == '\t'))
            v++;
        while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
            v_end--;
        struct http_header *h = &head->headers[head->num_headers++];
        h->name = p;
        h->name_len = (size_t)(colon - p);
        h->value = v;
        h->value_len = (size_t)(v_end - v);
        p = eol + 2;
    }
}

const struct http_header *serow_response_header(const struct serow_response_head *head,
                                                const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < head->num_headers; i++)
        if (head->headers[i].name_len == n && strncasecmp(head->headers[i].name, name, n) == 0)
            return &head->headers[i];
    return NULL;
}
