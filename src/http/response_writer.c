/*
 * response_writer.c - response head formatting and framing decisions, the
 * one table of reason phrases, the Date header, and the error pages the
 * worker sends itself (400, 408, 413, 431, 500...).
 *
 * Owns: what a response head says.  No Perl, no I/O and no worker state
 * here: the caller (psgi_response.c for an app's response, worker_output.c
 * for an error page) writes the bytes.  A new response header, or a new
 * page the server answers with itself, belongs here.
 */
#include "http/response_writer.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

const char *serow_http_date_now(void)
{
    static char date[40];
    static time_t formatted_for = -1;
    time_t now = time(NULL);
    if (now != formatted_for) {
        static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
        static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        struct tm tm;
        gmtime_r(&now, &tm);
        snprintf(date, sizeof(date), "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
                 tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                 tm.tm_sec);
        formatted_for = now;
    }
    return date;
}

/* (The worker's error pages once had a table of their own: every phrase it
 * had is here, with the same words.) */
const char *serow_status_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 102: return "Processing";
    case 103: return "Early Hints";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 207: return "Multi-Status";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 418: return "I'm a teapot";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}

static int lower_ascii(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

/* Whether [p, p + len) is lower_word, ignoring ASCII case. */
static int is_word(const char *p, size_t len, const char *lower_word, size_t word_len)
{
    if (len != word_len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (lower_ascii((unsigned char)p[i]) != lower_word[i])
            return 0;
    return 1;
}
#define IS_WORD(p, len, lit) is_word((p), (len), (lit), sizeof(lit) - 1)
#define NAME_IS(h, lit) IS_WORD((h)->name, (h)->name_len, lit)

/* tchar (RFC 9110 5.6.2) */
static int is_token_char(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A value may not end the line early or smuggle a control byte. */
static int is_valid_value(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

static int contains_token(const char *v, size_t len, const char *token)
{
    size_t tlen = strlen(token);
    for (size_t i = 0; i + tlen <= len; i++) {
        if ((i == 0 || v[i - 1] == ',' || v[i - 1] == ' ' || v[i - 1] == '\t')) {
            size_t k = 0;
            while (k < tlen && lower_ascii((unsigned char)v[i + k]) == token[k])
                k++;
            if (k == tlen && (i + tlen == len || v[i + tlen] == ',' || v[i + tlen] == ' ' ||
                              v[i + tlen] == '\t'))
                return 1;
        }
    }
    return 0;
}

static int is_list_space(char c)
{
    return c == ' ' || c == '\t';
}

size_t serow_compression_header_size(const struct response_header *headers, size_t count)
{
    const struct response_header *encoding = NULL;
    for (size_t i = 0; i < count; i++) {
        if (NAME_IS(&headers[i], "content-encoding"))
            encoding = &headers[i];
    }
    if (encoding == NULL)
        return 0;
    const char *start = encoding->value, *end = start + encoding->value_len;
    while (end > start && (is_list_space(end[-1]) || end[-1] == ','))
        end--;
    const char *last = end;
    while (last > start && last[-1] != ',')
        last--;
    while (last < end && is_list_space(*last))
        last++;
    size_t len = (size_t)(end - last);
    if (IS_WORD(last, len, "gzip") || IS_WORD(last, len, "x-gzip"))
        return 10; /* gzip's member header, RFC 1952 2.3 (without its optional fields) */
    return IS_WORD(last, len, "deflate") ? 2 : 0; /* zlib's header, RFC 1950 2.2 */
}

static int ends_with_chunked(const char *v, size_t len)
{
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    if (len < 7)
        return 0;
    for (size_t i = 0; i < 7; i++)
        if (lower_ascii((unsigned char)v[len - 7 + i]) != "chunked"[i])
            return 0;
    return len == 7 || v[len - 8] == ',' || v[len - 8] == ' ' || v[len - 8] == '\t';
}

/* Whether a Transfer-Encoding value is the chunked coding alone: the one
 * coding the server can take off for an HTTP/1.0 client. */
static int only_chunked(const char *v, size_t len)
{
    while (len > 0 && (*v == ' ' || *v == '\t'))
        v++, len--;
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    return len == 7 && ends_with_chunked(v, len);
}

int serow_plan_response(const struct response_facts *facts, const struct response_header *headers,
                  size_t num_headers, struct response_framing *framing, size_t *bad_header)
{
    int app_content_length = 0, app_transfer_encoding = 0, app_chunked = 0, app_close = 0;
    int app_other_coding = 0, app_upgrade = 0;
    size_t transfer_encoding_index = 0;
    uint64_t content_length = 0;

    /* RFC 9110 15: "Values outside the range 100..599 are invalid." */
    if (facts->status < 100 || facts->status > 599)
        return RESPONSE_BAD_STATUS;

    for (size_t i = 0; i < num_headers; i++) {
        const struct response_header *h = &headers[i];
        *bad_header = i;
        if (h->name_len == 0)
            return RESPONSE_BAD_HEADER_NAME;
        for (size_t k = 0; k < h->name_len; k++)
            if (!is_token_char((unsigned char)h->name[k]))
                return RESPONSE_BAD_HEADER_NAME;
        if (!is_valid_value(h->value, h->value_len))
            return RESPONSE_BAD_HEADER_VALUE;
        if (NAME_IS(h, "content-length")) {
            uint64_t n = 0;
            if (app_content_length || h->value_len == 0 || h->value_len > 18)
                return RESPONSE_BAD_CONTENT_LENGTH;
            for (size_t k = 0; k < h->value_len; k++) {
                if (h->value[k] < '0' || h->value[k] > '9')
                    return RESPONSE_BAD_CONTENT_LENGTH;
                n = n * 10 + (uint64_t)(h->value[k] - '0');
            }
            app_content_length = 1;
            content_length = n;
        } else if (NAME_IS(h, "transfer-encoding")) {
            app_transfer_encoding = 1;
            app_chunked = ends_with_chunked(h->value, h->value_len);
            app_other_coding |= !only_chunked(h->value, h->value_len);
            transfer_encoding_index = i;
        } else if (NAME_IS(h, "connection")) {
            if (contains_token(h->value, h->value_len, "close"))
                app_close = 1;
        } else if (NAME_IS(h, "upgrade")) {
            app_upgrade |= h->value_len > 0;
        }
    }
    /* A 101 switches to a protocol the client offered and names it (RFC
     * 9110 7.8, 15.2.2); any other is a client left reading bytes of a
     * protocol it never asked for */
    if (facts->status == 101 && !(facts->request_upgrade && app_upgrade)) {
        *bad_header = num_headers; /* no one header is at fault */
        return RESPONSE_BAD_UPGRADE;
    }

    int status = facts->status;
    int no_body_status = status < 200 || status == 204 || status == 304;
    framing->body_allowed = !facts->is_head_request && !no_body_status;
    framing->chunked = 0;
    framing->has_content_length = 0;
    framing->content_length = 0;
    framing->content_length_from_app = app_content_length;
    framing->app_chunked = 0;
    framing->decode_app_chunks = 0;
    int delimited = 1; /* the client can tell where the response ends */

    if (app_content_length) {
        framing->has_content_length = 1;
        framing->content_length = content_length;
        if (app_transfer_encoding)
            return RESPONSE_BAD_CONTENT_LENGTH; /* the smuggling pair, from our side */
    } else if (no_body_status) {
        /* no body, nothing to add */
    } else if (app_transfer_encoding && app_other_coding && facts->minor_version == 0) {
        /* RFC 9112 6.1: no Transfer-Encoding to an HTTP/1.0 client.  The
         * chunks can be taken off, but not a coding such as gzip: sent without
         * the header that names it, the body would reach the client still
         * coded, with nothing to say so.  Refused (a 500 and the reason in
         * the log) rather than sent wrong.  (A response to HEAD too, so that
         * it says what a GET would get.) */
        *bad_header = transfer_encoding_index;
        return RESPONSE_CODING_FOR_HTTP10;
    } else if (app_transfer_encoding) {
        /* The app framed the body itself (Plack::Middleware::Chunked does):
         * a Content-Length beside Transfer-Encoding is forbidden (RFC 9112
         * 6.2), and would contradict it, even when we know the length.  A
         * response to HEAD has no body to delimit. */
        delimited = facts->is_head_request || (app_chunked && facts->minor_version >= 1);
        /* Framing that does not parse would let the client read what follows
         * it as the next response: it is checked as it goes out.  An
         * HTTP/1.0 client knows no transfer coding (RFC 9112 6.1): it gets
         * the body decoded, ended by the close (delimited is 0 then). */
        framing->app_chunked = app_chunked && framing->body_allowed;
        framing->decode_app_chunks = facts->minor_version == 0;
    } else if (facts->is_head_request) {
        /* Only a length that describes the body a GET would get. */
        if (facts->body_length_known && facts->body_length > 0) {
            framing->has_content_length = 1;
            framing->content_length = facts->body_length;
        }
    } else if (facts->body_length_known) {
        framing->has_content_length = 1;
        framing->content_length = facts->body_length;
    } else if (facts->minor_version >= 1) {
        framing->chunked = 1;
    } else {
        delimited = 0; /* HTTP/1.0: the end of the body is the end of the connection */
    }
    /* A body whose length is known before it is sent (an array, a file) and
     * differs from the app's Content-Length: the client would read the wrong
     * number of bytes as this response, so the connection must close after it. */
    framing->length_mismatch = app_content_length && framing->body_allowed &&
                               facts->body_length_known && facts->body_length != content_length;
    framing->keep_alive = facts->may_keep_alive && !app_close && delimited &&
                          !framing->length_mismatch;
    return RESPONSE_OK;
}

size_t serow_response_head_size(const struct response_header *headers, size_t num_headers)
{
    size_t size = 64 + 64 + 48 + 48 + 40 + 48 + 2; /* status line, Date, framing, Connection */
    for (size_t i = 0; i < num_headers; i++)
        size += headers[i].name_len + headers[i].value_len + 4;
    return size;
}

static char *append(char *p, const char *s, size_t len)
{
    memcpy(p, s, len);
    return p + len;
}
#define APPEND_LITERAL(p, lit) append((p), (lit), sizeof(lit) - 1)

static char *append_decimal(char *p, uint64_t n)
{
    char digits[24];
    size_t i = sizeof(digits);
    do {
        digits[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    return append(p, digits + i, sizeof(digits) - i);
}

size_t serow_format_response_head(char *out, const struct response_facts *facts,
                            const struct response_header *headers, size_t num_headers,
                            const struct response_framing *framing)
{
    char *p = out;
    int status = facts->status;
    int has_date = 0;
    /* 101 Switching Protocols carries the app's own Connection: upgrade. */
    int server_owns_connection = status != 101;

    p = APPEND_LITERAL(p, "HTTP/1.1 ");
    p = append_decimal(p, (uint64_t)status);
    *p++ = ' ';
    const char *reason = serow_status_reason(status);
    p = append(p, reason, strlen(reason));
    p = APPEND_LITERAL(p, "\r\n");

    for (size_t i = 0; i < num_headers; i++) {
        const struct response_header *h = &headers[i];
        if (server_owns_connection && NAME_IS(h, "connection"))
            continue;
        /* A 1xx or 204 has no body, and may not carry the headers that would
         * frame one (RFC 9110 8.6, RFC 9112 6.1), whatever the app says. */
        if ((status < 200 || status == 204) &&
            (NAME_IS(h, "transfer-encoding") || NAME_IS(h, "content-length")))
            continue;
        /* RFC 9112 6.1: no Transfer-Encoding to a client that did not say
         * HTTP/1.1 (the app's chunks are decoded: see serow_plan_response). */
        if (facts->minor_version == 0 && NAME_IS(h, "transfer-encoding"))
            continue;
        if (NAME_IS(h, "date"))
            has_date = 1;
        p = append(p, h->name, h->name_len);
        p = APPEND_LITERAL(p, ": ");
        p = append(p, h->value, h->value_len);
        p = APPEND_LITERAL(p, "\r\n");
    }
    if (!has_date) {
        p = APPEND_LITERAL(p, "Date: ");
        p = append(p, serow_http_date_now(), 29);
        p = APPEND_LITERAL(p, "\r\n");
    }
    if (framing->chunked)
        p = APPEND_LITERAL(p, "Transfer-Encoding: chunked\r\n");
    else if (framing->has_content_length && !framing->content_length_from_app) {
        p = APPEND_LITERAL(p, "Content-Length: ");
        p = append_decimal(p, framing->content_length);
        p = APPEND_LITERAL(p, "\r\n");
    }
    if (server_owns_connection) {
        if (!framing->keep_alive)
            p = APPEND_LITERAL(p, "Connection: close\r\n");
        else if (facts->minor_version == 0)
            p = APPEND_LITERAL(p, "Connection: keep-alive\r\n");
    }
    p = APPEND_LITERAL(p, "\r\n");
    return (size_t)(p - out);
}

const char *serow_continue_response(size_t *len)
{
    static const char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";
    *len = sizeof(continue_line) - 1;
    return continue_line;
}

size_t serow_format_error_response(char *out, size_t size, int status, int omit_body,
                                   const struct response_header *id_header, size_t *body_bytes)
{
    const char *reason = serow_status_reason(status);
    if (*reason == '\0')
        reason = "Error"; /* (no status the server answers itself) */
    size_t body = strlen(reason) + 1;
    /* A 503 is an overload the client (a load balancer) may retry soon,
     * elsewhere or here (RFC 9110 10.2.3): --max-queue-wait, --request-timeout. */
    int n = snprintf(out, size,
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n%s%.*s%s%.*s%sConnection: close\r\n\r\n%s%s",
                     status, reason, serow_http_date_now(), body,
                     status == 503 ? "Retry-After: " SEROW_RETRY_AFTER_SECONDS "\r\n" : "",
                     id_header ? (int)id_header->name_len : 0, id_header ? id_header->name : "",
                     id_header ? ": " : "",
                     id_header ? (int)id_header->value_len : 0, id_header ? id_header->value : "",
                     id_header ? "\r\n" : "",
                     omit_body ? "" : reason, omit_body ? "" : "\n");
    *body_bytes = omit_body ? 0 : body;
    return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

size_t serow_format_chunk_size(char *out, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    char digits[20];
    size_t i = sizeof(digits);
    do {
        digits[--i] = hex[len & 15];
        len >>= 4;
    } while (len > 0);
    size_t n = sizeof(digits) - i;
    memcpy(out, digits + i, n);
    out[n] = '\r';
    out[n + 1] = '\n';
    return n + 2;
}
