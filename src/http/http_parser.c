/*
 * http_parser.c - strict HTTP/1.x request head parser and chunked decoder.
 * See http_parser.h for the interface.  References are to RFC 9112 (message
 * syntax) and RFC 9110 (semantics).
 *
 * Owns: the grammar and the framing decision.  No I/O, no allocation, no
 * Perl: it reads the bytes it is given and writes only the structs it is
 * handed, so it is fuzzed on its own (fuzz/).
 */
#include "http/http_parser.h"

#include <string.h>

/* tchar (RFC 9110 5.6.2): the characters of a token. */
static const unsigned char token_char[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1,
    ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,
    ['~'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,
    ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,
    ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,
    ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1,
    ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,
    ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/* field-vchar, SP and HTAB: what a field value may hold (obs-text included). */
static inline int is_field_value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static inline int is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static inline int lower_ascii(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

static int equals_ignoring_case(const char *a, size_t a_len, const char *b, size_t b_len)
{
    if (a_len != b_len)
        return 0;
    for (size_t i = 0; i < a_len; i++)
        if (lower_ascii((unsigned char)a[i]) != lower_ascii((unsigned char)b[i]))
            return 0;
    return 1;
}

#define EQUALS_LITERAL(ptr, len, lit) equals_ignoring_case((ptr), (len), (lit), sizeof(lit) - 1)

static int fail(struct http_request_head *head, int status)
{
    head->error_status = status;
    return HTTP_PARSE_ERROR;
}

/* ---- request line ------------------------------------------------------ */

/*
 * A request line still arriving: reject it early if it already holds a byte
 * that no request line may contain, or if it is already over the limit.
 */
static int check_partial_request_line(const char *line, size_t len,
                                      struct http_request_head *head,
                                      const struct http_limits *limits)
{
    size_t line_len = len;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c == '\r' && i == len - 1) {
            line_len = i; /* the LF may be on its way; the CR is no part of the line */
            break;
        }
        if (c < 0x20 || c >= 0x7f)
            return fail(head, 400);
    }
    /* Measured as the complete line is: a line of exactly the limit whose CRLF
     * arrives split between two reads must not turn into a 414. */
    if (line_len > limits->max_request_line)
        return fail(head, 414);
    return HTTP_PARSE_INCOMPLETE;
}

/* uri-host [ ":" port ]: the characters an authority may hold, no userinfo,
 * and a host before any port: an http URI with an empty host is invalid and
 * its recipient must reject it (RFC 9110 4.2.1), so "Host:" with an empty
 * value, or ":80", names no resource. */
static int is_valid_host(const char *v, size_t len)
{
    if (len == 0 || v[0] == ':')
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("-._~%!$&'()*+,;=:[]", c) != NULL) || c == 0)
            return 0;
    }
    return 1;
}

/*
 * '#' cannot appear in a request-target (RFC 9112 3.2): a client that sends
 * a fragment anyway has left it from the URI reference it requested.  Like
 * nginx and HTTP::Parser::XS, serve the URI without it (the fragment is for
 * the client alone, RFC 9110 4.2.5) rather than refuse the request: the path
 * ends at the first '#', and no app sees a fragment in its path or query.
 */
static void strip_fragment(struct http_request_head *head)
{
    const char *hash = memchr(head->path, '#', head->path_len);
    if (hash != NULL)
        head->path_len = (size_t)(hash - head->path);
}

/* Splits the request target into path and authority (RFC 9112 3.2). */
static int parse_request_target(struct http_request_head *head)
{
    const char *t = head->target;
    size_t n = head->target_len;

    head->authority = NULL;
    head->authority_len = 0;
    if (t[0] == '/') { /* origin-form */
        head->path = t;
        head->path_len = n;
        strip_fragment(head);
        return 0;
    }
    if (n == 1 && t[0] == '*') { /* asterisk-form, OPTIONS only */
        if (!EQUALS_LITERAL(head->method, head->method_len, "OPTIONS"))
            return fail(head, 400);
        head->path = t;
        head->path_len = n;
        return 0;
    }
    if (head->method_len == 7 && memcmp(head->method, "CONNECT", 7) == 0)
        return fail(head, 501); /* authority-form: Serow is no tunnel */

    /* absolute-form: scheme "://" authority [path-abempty] [ "?" query ] */
    size_t scheme_len;
    if (n > 7 && equals_ignoring_case(t, 7, "http://", 7))
        scheme_len = 7;
    else if (n > 8 && equals_ignoring_case(t, 8, "https://", 8))
        scheme_len = 8;
    else
        return fail(head, 400);
    size_t end = scheme_len;
    while (end < n && t[end] != '/' && t[end] != '?' && t[end] != '#')
        end++;
    for (size_t i = scheme_len; i < end; i++)
        if (t[i] == '@')
            return fail(head, 400); /* userinfo is deprecated and a spoofing tool */
    /* The authority stands in for Host (RFC 9112 3.2.2): held to the same rules. */
    if (!is_valid_host(t + scheme_len, end - scheme_len))
        return fail(head, 400);
    head->authority = t + scheme_len;
    head->authority_len = end - scheme_len;
    head->path = t + end; /* may be empty or start with '?': the caller adds "/" */
    head->path_len = n - end;
    strip_fragment(head);
    return 0;
}

/* method SP request-target SP HTTP-version, without the CRLF. */
static int parse_request_line(const char *line, size_t len, struct http_request_head *head)
{
    size_t i = 0;

    while (i < len && token_char[(unsigned char)line[i]])
        i++;
    if (i == 0 || i == len || line[i] != ' ')
        return fail(head, 400);
    head->method = line;
    head->method_len = i;
    i++;

    size_t target_start = i;
    while (i < len && (unsigned char)line[i] > 0x20 && (unsigned char)line[i] < 0x7f)
        i++;
    if (i == target_start || i == len || line[i] != ' ')
        return fail(head, 400);
    head->target = line + target_start;
    head->target_len = i - target_start;
    i++;

    /* HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive (RFC 9112 2.3) */
    const char *v = line + i;
    if (len - i != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' ||
        v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9')
        return fail(head, 400);
    if (v[5] != '1')
        return fail(head, 505);
    /* RFC 9112 2.3: a higher minor version is processed as the highest one
     * the server supports: HTTP/1.2 is served (and answered) as HTTP/1.1. */
    head->minor_version = v[7] == '0' ? 0 : 1;

    return parse_request_target(head);
}

/* ---- framing ----------------------------------------------------------- */

/* 1*DIGIT, nothing else: no sign, no list, no whitespace.  "0005" is 5:
 * only significant digits count against the bound (leading zeros are
 * bounded by --max-header-size), as for a chunk size. */
static int parse_content_length(const char *v, size_t len, uint64_t *out)
{
    uint64_t n = 0;
    int digits = 0;
    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        if ((n != 0 || v[i] != '0') && ++digits > 18) /* 18 digits cannot overflow 63 bits */
            return -1;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    *out = n;
    return 0;
}

struct transfer_codings {
    int count;
    int chunked_count;
    int last_is_chunked;
    int malformed;
};

/* Adds the codings of one Transfer-Encoding field (a comma list). */
static void add_transfer_codings(struct transfer_codings *tc, const char *v, size_t len)
{
    size_t i = 0;
    while (i <= len) {
        while (i < len && is_ows((unsigned char)v[i]))
            i++;
        size_t start = i;
        while (i < len && token_char[(unsigned char)v[i]])
            i++;
        size_t name_len = i - start;
        int has_params = 0;
        if (i < len && (v[i] == ';' || is_ows((unsigned char)v[i]))) {
            while (i < len && v[i] != ',')
                i++; /* transfer-parameters: kept opaque */
            has_params = 1;
        }
        if (i < len && v[i] != ',') {
            tc->malformed = 1;
            return;
        }
        if (name_len > 0) {
            int chunked = EQUALS_LITERAL(v + start, name_len, "chunked");
            tc->count++;
            if (chunked) {
                tc->chunked_count++;
                if (has_params) {
                    /* only whitespace may follow a bare "chunked" */
                    for (size_t k = start + name_len; k < i; k++)
                        if (!is_ows((unsigned char)v[k]))
                            tc->malformed = 1;
                }
            }
            tc->last_is_chunked = chunked;
        } else if (has_params) {
            tc->malformed = 1; /* parameters without a coding */
            return;
        }
        i++; /* past the comma (or the end) */
    }
}

/* Connection is a comma list of tokens; only "close" and "keep-alive" matter. */
static void apply_connection_options(struct http_request_head *head, const char *v, size_t len,
                                     int *saw_close, int *saw_keep_alive)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (is_ows((unsigned char)v[i]) || v[i] == ','))
            i++;
        size_t start = i;
        while (i < len && v[i] != ',' && !is_ows((unsigned char)v[i]))
            i++;
        if (EQUALS_LITERAL(v + start, i - start, "close"))
            *saw_close = 1;
        else if (EQUALS_LITERAL(v + start, i - start, "keep-alive"))
            *saw_keep_alive = 1;
    }
    (void)head;
}

/* RFC 9112 6.3: decide how the body is delimited, rejecting every ambiguity. */
static int decide_framing(struct http_request_head *head)
{
    int content_length_count = 0, host_count = 0;
    int saw_close = 0, saw_keep_alive = 0, saw_transfer_encoding = 0;
    struct transfer_codings tc = {0, 0, 0, 0};

    head->framing = HTTP_BODY_NONE;
    head->content_length = 0;
    head->expect_continue = 0;
    head->upgrade = 0;

    for (size_t i = 0; i < head->num_headers; i++) {
        const struct http_header *h = &head->headers[i];
        switch (h->name_len) {
        case 4:
            if (EQUALS_LITERAL(h->name, 4, "host")) {
                host_count++;
                if (!is_valid_host(h->value, h->value_len))
                    return fail(head, 400);
            }
            break;
        case 6:
            if (EQUALS_LITERAL(h->name, 6, "expect")) {
                if (!EQUALS_LITERAL(h->value, h->value_len, "100-continue"))
                    return fail(head, 417);
                /* RFC 9110 10.1.1: ignored in an HTTP/1.0 request */
                head->expect_continue = head->minor_version >= 1;
            }
            break;
        case 7:
            /* RFC 9110 7.8: a server ignores Upgrade in an HTTP/1.0 request */
            if (EQUALS_LITERAL(h->name, 7, "upgrade") && h->value_len > 0)
                head->upgrade = head->minor_version >= 1;
            break;
        case 10:
            if (EQUALS_LITERAL(h->name, 10, "connection"))
                apply_connection_options(head, h->value, h->value_len, &saw_close,
                                         &saw_keep_alive);
            break;
        case 14:
            if (EQUALS_LITERAL(h->name, 14, "content-length")) {
                if (++content_length_count > 1)
                    return fail(head, 400);
                if (parse_content_length(h->value, h->value_len, &head->content_length) != 0)
                    return fail(head, 400);
            }
            break;
        case 17:
            if (EQUALS_LITERAL(h->name, 17, "transfer-encoding")) {
                saw_transfer_encoding = 1;
                add_transfer_codings(&tc, h->value, h->value_len);
            }
            break;
        }
    }

    if (head->minor_version >= 1 ? host_count != 1 : host_count > 1)
        return fail(head, 400);

    if (saw_transfer_encoding) {
        /* Either framing could be believed: the smuggling vector (CL.TE / TE.CL). */
        if (content_length_count > 0)
            return fail(head, 400);
        /* RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing. */
        if (head->minor_version == 0)
            return fail(head, 400);
        if (tc.malformed || tc.count == 0 || tc.chunked_count > 1 ||
            (tc.chunked_count == 1 && !tc.last_is_chunked))
            return fail(head, 400);
        if (!tc.last_is_chunked)
            return fail(head, 400); /* length cannot be determined */
        if (tc.count > 1)
            return fail(head, 501); /* e.g. "gzip, chunked": a coding we do not decode */
        head->framing = HTTP_BODY_CHUNKED;
    } else if (content_length_count == 1) {
        head->framing = HTTP_BODY_LENGTH;
    }

    if (saw_close)
        head->keep_alive = 0;
    else if (head->minor_version >= 1)
        head->keep_alive = 1;
    else
        head->keep_alive = saw_keep_alive;
    return 0;
}

/* ---- the head ---------------------------------------------------------- */

int serow_parse_request_head(const char *buf, size_t len, struct http_request_head *head,
                       const struct http_limits *limits)
{
    size_t pos = 0;

    head->num_headers = 0;
    head->error_status = 0;
    head->method = NULL; /* set once the request line is parsed */
    head->method_len = 0;

    /* RFC 9112 2.2: ignore empty lines before the request line. */
    while (pos < len && buf[pos] == '\r') {
        if (pos + 1 == len)
            return HTTP_PARSE_INCOMPLETE;
        if (buf[pos + 1] != '\n')
            return fail(head, 400);
        pos += 2;
        if (pos > limits->max_request_line)
            return fail(head, 400);
    }
    if (pos == len)
        return HTTP_PARSE_INCOMPLETE;

    const char *line = buf + pos;
    const char *lf = memchr(line, '\n', len - pos);
    if (lf == NULL)
        return check_partial_request_line(line, len - pos, head, limits);
    size_t line_len = (size_t)(lf - line);
    if (line_len == 0 || line[line_len - 1] != '\r')
        return fail(head, 400); /* bare LF */
    line_len--;
    if (line_len > limits->max_request_line)
        return fail(head, 414);
    if (parse_request_line(line, line_len, head) != 0)
        return HTTP_PARSE_ERROR;
    pos += line_len + 2;

    size_t fields_start = pos;
    for (;;) {
        if (pos - fields_start > limits->max_header_size)
            return fail(head, 431);
        if (pos == len)
            return HTTP_PARSE_INCOMPLETE;
        unsigned char c = (unsigned char)buf[pos];
        if (c == '\r') { /* the empty line that ends the head */
            if (pos + 1 == len)
                return HTTP_PARSE_INCOMPLETE;
            if (buf[pos + 1] != '\n')
                return fail(head, 400);
            pos += 2;
            break;
        }
        if (is_ows(c))
            return fail(head, 400); /* obs-fold, or whitespace before the first field */

        /* field-name ":" OWS field-value OWS CRLF */
        size_t name_start = pos;
        while (pos < len && token_char[(unsigned char)buf[pos]])
            pos++;
        if (pos == len)
            continue; /* incomplete: the size check above runs again */
        if (buf[pos] != ':' || pos == name_start)
            return fail(head, 400); /* includes whitespace before the colon */
        size_t name_len = pos - name_start;
        pos++;
        while (pos < len && is_ows((unsigned char)buf[pos]))
            pos++;
        size_t value_start = pos;
        while (pos < len && is_field_value_char((unsigned char)buf[pos]))
            pos++;
        if (pos == len)
            continue;
        if (buf[pos] != '\r')
            return fail(head, 400); /* NUL, bare LF or another control character */
        if (pos + 1 == len) {
            pos++;
            continue;
        }
        if (buf[pos + 1] != '\n')
            return fail(head, 400);
        size_t value_end = pos;
        while (value_end > value_start && is_ows((unsigned char)buf[value_end - 1]))
            value_end--;
        if (head->num_headers >= limits->max_headers ||
            head->num_headers >= head->headers_capacity)
            return fail(head, 431);
        struct http_header *h = &head->headers[head->num_headers++];
        h->name = buf + name_start;
        h->name_len = name_len;
        h->value = buf + value_start;
        h->value_len = value_end - value_start;
        pos += 2;
    }
    if (pos - fields_start > limits->max_header_size + 2)
        return fail(head, 431);

    if (decide_framing(head) != 0)
        return HTTP_PARSE_ERROR;
    return (int)pos;
}

const struct http_header *serow_find_header(const struct http_request_head *head,
                                      const char *name, size_t name_len)
{
    for (size_t i = 0; i < head->num_headers; i++)
        if (equals_ignoring_case(head->headers[i].name, head->headers[i].name_len, name,
                                 name_len))
            return &head->headers[i];
    return NULL;
}

/* ---- chunked transfer coding (RFC 9112 section 7.1) --------------------- */

enum chunked_state {
    CHUNK_SIZE_FIRST,  /* expecting the first hex digit */
    CHUNK_SIZE,        /* hex digits */
    CHUNK_SIZE_BWS,    /* whitespace after the size: only ';' may follow */
    CHUNK_EXT_NAME_START, /* after ';' (BWS, then a token) */
    CHUNK_EXT_NAME,       /* in a chunk-ext-name */
    CHUNK_EXT_NAME_BWS,   /* whitespace after a name: '=' or ';' follows */
    CHUNK_EXT_VALUE_START,/* after '=' (BWS, then a token or a quoted-string) */
    CHUNK_EXT_TOKEN,      /* in a token value */
    CHUNK_EXT_QUOTED,     /* inside a quoted-string value */
    CHUNK_EXT_QUOTED_PAIR,/* after a backslash inside it */
    CHUNK_EXT_VALUE_END,  /* after a value: ';', or CR ends the line */
    CHUNK_EXT_VALUE_BWS,  /* whitespace after a value: only ';' may follow */
    CHUNK_SIZE_LF,     /* CR seen at the end of the size line */
    CHUNK_DATA,
    CHUNK_DATA_CR,
    CHUNK_DATA_LF,
    CHUNK_TRAILER_START, /* at the start of a trailer line (or the final CRLF) */
    CHUNK_TRAILER_NAME,  /* field-name, up to its colon */
    CHUNK_TRAILER_VALUE, /* after the colon until CR */
    CHUNK_TRAILER_LF,
    CHUNK_END_LF,
    CHUNK_FINISHED
};

/* Sizes of more significant hex digits than this are refused: no body limit
 * could be that large, and the bound keeps the arithmetic far from overflow. */
#define CHUNK_SIZE_MAX_DIGITS 15

void serow_chunked_decoder_init(struct chunked_decoder *decoder)
{
    memset(decoder, 0, sizeof(*decoder));
    decoder->state = CHUNK_SIZE_FIRST;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (unsigned char)lower_ascii(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

size_t serow_percent_decode(char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < len && (hi = hex_value((unsigned char)s[i + 1])) >= 0 &&
            (lo = hex_value((unsigned char)s[i + 2])) >= 0) {
            s[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            s[o++] = s[i];
        }
    }
    return o;
}

int serow_decode_chunked(struct chunked_decoder *d, char *buf, size_t *len, size_t *consumed)
{
    size_t in = 0, out = 0, n = *len;
    int result = CHUNKED_NEED_MORE;

    while (in < n) {
        unsigned char c = (unsigned char)buf[in];
        switch (d->state) {
        case CHUNK_SIZE_FIRST:
        case CHUNK_SIZE: {
            int h = hex_value(c);
            if (h >= 0) {
                /* "0005" is 5 (1*HEXDIG): only significant digits count;
                 * leading zeros are bounded by CHUNKED_MAX_SIZE_LINE */
                if ((d->chunk_size != 0 || h != 0) && ++d->digits > CHUNK_SIZE_MAX_DIGITS)
                    goto error;
                d->chunk_size = d->chunk_size * 16 + (uint64_t)h;
                d->state = CHUNK_SIZE;
            } else if (d->state == CHUNK_SIZE_FIRST) {
                goto error; /* no digits, or leading whitespace */
            } else if (c == '\r') {
                d->state = CHUNK_SIZE_LF;
            } else if (c == ';') {
                d->state = CHUNK_EXT_NAME_START;
            } else if (is_ows(c)) {
                d->state = CHUNK_SIZE_BWS;
            } else {
                goto error;
            }
            break;
        }
        case CHUNK_SIZE_BWS:
        case CHUNK_EXT_VALUE_BWS:
            /* BWS belongs to the ";" after it: it may not end the line */
            if (c == ';')
                d->state = CHUNK_EXT_NAME_START;
            else if (!is_ows(c))
                goto error;
            break;
        case CHUNK_EXT_NAME_START:
            if (token_char[c])
                d->state = CHUNK_EXT_NAME;
            else if (!is_ows(c))
                goto error; /* a bare ";", a quoted name, garbage */
            break;
        case CHUNK_EXT_NAME:
            if (c == '=')
                d->state = CHUNK_EXT_VALUE_START;
            else if (c == ';')
                d->state = CHUNK_EXT_NAME_START;
            else if (c == '\r')
                d->state = CHUNK_SIZE_LF;
            else if (is_ows(c))
                d->state = CHUNK_EXT_NAME_BWS;
            else if (!token_char[c])
                goto error;
            break;
        case CHUNK_EXT_NAME_BWS:
            if (c == '=')
                d->state = CHUNK_EXT_VALUE_START;
            else if (c == ';')
                d->state = CHUNK_EXT_NAME_START;
            else if (!is_ows(c))
                goto error; /* a name with a space inside, or BWS before CR */
            break;
        case CHUNK_EXT_VALUE_START:
            if (c == '"')
                d->state = CHUNK_EXT_QUOTED;
            else if (token_char[c])
                d->state = CHUNK_EXT_TOKEN;
            else if (!is_ows(c))
                goto error; /* "=" and no value */
            break;
        case CHUNK_EXT_TOKEN:
            if (token_char[c])
                break;
            /* the value has ended: this byte is what follows it */
            __attribute__((fallthrough));
        case CHUNK_EXT_VALUE_END:
            if (c == ';')
                d->state = CHUNK_EXT_NAME_START;
            else if (c == '\r')
                d->state = CHUNK_SIZE_LF;
            else if (is_ows(c))
                d->state = CHUNK_EXT_VALUE_BWS;
            else
                goto error;
            break;
        case CHUNK_EXT_QUOTED:
            /* qdtext or a quoted-pair up to the closing DQUOTE: never a CR,
             * LF or other control byte, so that a quote left open cannot
             * carry the line past its end (the line ends where a parser that
             * honours the quote would say it does, or the request is refused) */
            if (c == '"')
                d->state = CHUNK_EXT_VALUE_END;
            else if (c == '\\')
                d->state = CHUNK_EXT_QUOTED_PAIR;
            else if (!is_field_value_char(c))
                goto error;
            break;
        case CHUNK_EXT_QUOTED_PAIR:
            if (!is_field_value_char(c))
                goto error;
            d->state = CHUNK_EXT_QUOTED;
            break;
        case CHUNK_SIZE_LF:
            if (c != '\n')
                goto error;
            if (d->max_body) {
                /* (body_announced <= max_body: the subtraction cannot wrap) */
                if (d->chunk_size > d->max_body - d->body_announced) {
                    result = CHUNKED_TOO_LARGE;
                    goto done;
                }
                d->body_announced += d->chunk_size;
            }
            d->line_len = 0;
            d->digits = 0;
            if (d->chunk_size == 0) {
                d->state = CHUNK_TRAILER_START;
            } else {
                d->chunk_remaining = d->chunk_size;
                d->chunk_size = 0;
                d->state = CHUNK_DATA;
            }
            in++;
            continue;
        case CHUNK_DATA: {
            size_t take = n - in;
            if ((uint64_t)take > d->chunk_remaining)
                take = (size_t)d->chunk_remaining;
            if (out != in)
                memmove(buf + out, buf + in, take);
            out += take;
            in += take;
            d->chunk_remaining -= take;
            if (d->chunk_remaining == 0)
                d->state = CHUNK_DATA_CR;
            continue;
        }
        case CHUNK_DATA_CR:
            if (c != '\r')
                goto error;
            d->state = CHUNK_DATA_LF;
            break;
        case CHUNK_DATA_LF:
            if (c != '\n')
                goto error;
            d->state = CHUNK_SIZE_FIRST;
            in++;
            continue;
        case CHUNK_TRAILER_START:
            if (c == '\r')
                d->state = CHUNK_END_LF;
            else if (token_char[c])
                d->state = CHUNK_TRAILER_NAME;
            else
                goto error; /* obs-fold, an empty name or garbage */
            break;
        case CHUNK_TRAILER_NAME:
            /* a trailer is a field line (RFC 9112 7.1.2): a line without a
             * colon, or with whitespace before it, is no trailer; taking it
             * for one would let a request pass as a trailer */
            if (c == ':')
                d->state = CHUNK_TRAILER_VALUE;
            else if (!token_char[c])
                goto error;
            break;
        case CHUNK_TRAILER_VALUE:
            if (c == '\r')
                d->state = CHUNK_TRAILER_LF;
            else if (!is_field_value_char(c))
                goto error;
            break;
        case CHUNK_TRAILER_LF:
            if (c != '\n')
                goto error;
            d->state = CHUNK_TRAILER_START;
            break;
        case CHUNK_END_LF:
            if (c != '\n')
                goto error;
            d->state = CHUNK_FINISHED;
            in++;
            result = CHUNKED_DONE;
            goto done;
        default:
            goto error;
        }
        /* every byte of a size line, extension or trailer counts against a
         * bound; the extensions also against the body's total (RFC 9112
         * 7.1.1: they carry no data, so a body of one-byte chunks could
         * otherwise make the server read without end) */
        if (d->state < CHUNK_DATA) {
            if (++d->line_len > CHUNKED_MAX_SIZE_LINE)
                goto error;
            if (d->state >= CHUNK_SIZE_BWS && d->state <= CHUNK_EXT_VALUE_BWS &&
                ++d->extension_bytes > d->max_extension_bytes && d->max_extension_bytes)
                goto error;
        } else if (d->state >= CHUNK_TRAILER_START) {
            if (++d->line_len > CHUNKED_MAX_TRAILERS)
                goto error;
        }
        in++;
    }
    if (d->state == CHUNK_FINISHED)
        result = CHUNKED_DONE;
done:
    *len = out;
    *consumed = in;
    return result;
error:
    *len = out;
    *consumed = in;
    return CHUNKED_ERROR;
}
