/*
 * http_parser.h - a strict HTTP/1.x request parser (RFC 9112) for Serow.
 *
 * Two pieces, both free of Perl and of I/O so that they can be fuzzed and
 * tested on their own:
 *
 *   serow_parse_request_head()  parses the request line and the header section and
 *                         decides how the body is framed (Content-Length,
 *                         chunked or none).  It never allocates: names and
 *                         values point into the caller's buffer.
 *
 *   serow_decode_chunked()      removes chunked transfer coding from a body, in
 *                         place, a buffer at a time.
 *
 * Anything that could let two parsers disagree about where a message ends
 * (the request-smuggling family) is rejected rather than repaired.
 */
#ifndef SEROW_HTTP_PARSER_H
#define SEROW_HTTP_PARSER_H

#include <stddef.h>
#include <string.h>
#include <stdint.h>

/* Return values of serow_parse_request_head() besides "bytes consumed" (> 0). */
#define HTTP_PARSE_INCOMPLETE (-2) /* need more bytes; limits still enforced */
#define HTTP_PARSE_ERROR      (-1) /* see head->error_status */

struct http_header {
    const char *name;
    size_t name_len;
    const char *value; /* leading and trailing whitespace removed */
    size_t value_len;
};

struct http_limits {
    size_t max_request_line; /* longer request line: 414 */
    size_t max_header_size;  /* longer header section: 431 */
    size_t max_headers;      /* more header fields: 431 (<= headers_capacity) */
};

enum http_body_framing {
    HTTP_BODY_NONE = 0,
    HTTP_BODY_LENGTH,
    HTTP_BODY_CHUNKED
};

struct http_request_head {
    /* filled by the caller */
    struct http_header *headers;
    size_t headers_capacity;

    /* filled by the parser */
    const char *method;
    size_t method_len;
    const char *target; /* as sent: origin-form, absolute-form or "*" */
    size_t target_len;
    const char *path;   /* origin-form part of target (absolute-form and any
                         * "#fragment" stripped) */
    size_t path_len;
    const char *authority; /* host from an absolute-form target, else NULL */
    size_t authority_len;
    int minor_version;  /* 0 or 1 (HTTP/1.2 and above count as 1) */
    size_t num_headers;

    enum http_body_framing framing;
    uint64_t content_length; /* when framing == HTTP_BODY_LENGTH */
    int keep_alive;          /* what the client asked for (version + Connection) */
    int expect_continue;     /* Expect: 100-continue */
    int upgrade;             /* an HTTP/1.1 request with Upgrade: a 101 may answer it */
    int error_status;        /* on HTTP_PARSE_ERROR: 400, 414, 417, 431, 501, 505 */
};

/*
 * Parses buf[0..len).  Returns the length of the request head (request line,
 * fields and the empty line) when it is complete, HTTP_PARSE_INCOMPLETE when
 * more bytes are needed, or HTTP_PARSE_ERROR with head->error_status set.
 * Empty lines before the request line are skipped (RFC 9112 section 2.2) and
 * counted in the returned length.  An incomplete head that already breaks a
 * limit or the grammar is reported as an error at once, so a caller never
 * buffers more than the limits allow.
 */
int serow_parse_request_head(const char *buf, size_t len, struct http_request_head *head,
                       const struct http_limits *limits);

/* Whether head (NULL: nothing parsed) has the method HEAD: a response to it
 * has no content (RFC 9110 9.3.2).  A request that failed before its method
 * was read has method_len 0. */
static inline int serow_is_head_request(const struct http_request_head *head)
{
    return head != NULL && head->method_len == 4 && memcmp(head->method, "HEAD", 4) == 0;
}

/* Finds a header by name (case-insensitive); NULL when absent. */
const struct http_header *serow_find_header(const struct http_request_head *head,
                                      const char *name, size_t name_len);

/* Decodes %XX escapes in place (a '%' not followed by two hex digits
 * stays); returns the decoded length, never more than len. */
size_t serow_percent_decode(char *s, size_t len);

/* ---- chunked transfer coding ------------------------------------------- */

#define CHUNKED_DONE       0  /* last chunk and trailers consumed */
#define CHUNKED_NEED_MORE  1  /* all input used, body not finished */
#define CHUNKED_ERROR     (-1)
#define CHUNKED_TOO_LARGE (-2) /* a size line took the body over max_body */

/* Longest chunk-size line (with extensions) and trailer section accepted. */
#define CHUNKED_MAX_SIZE_LINE 4096
#define CHUNKED_MAX_TRAILERS  16384

struct chunked_decoder {
    int state;
    uint64_t chunk_remaining; /* data bytes left in the current chunk */
    uint64_t chunk_size;      /* being parsed */
    size_t line_len;          /* bytes of the current size line or trailer section */
    int digits;               /* significant digits of chunk_size so far */
    uint64_t max_body;        /* 0: no limit; set after serow_chunked_decoder_init */
    uint64_t body_announced;  /* sum of the chunk sizes so far (<= max_body) */
    uint64_t max_extension_bytes; /* 0: no limit; set after serow_chunked_decoder_init */
    uint64_t extension_bytes; /* of the chunk extensions so far: every byte
                               * between a chunk-size and its line's CR */
};

/*
 * Chunk extensions (RFC 9112 7.1.1) are checked against their grammar and
 * then ignored:
 *
 *   chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
 *   chunk-ext-name = token;  chunk-ext-val = token / quoted-string
 *
 * Anything else is an error, in particular a quoted-string left open at the
 * line's end (a parser that honours the quote would read on past the CRLF),
 * a bare ";", "=" without a value, a name with a space inside, and
 * whitespace before the CRLF.  A quoted-string holds qdtext and quoted-pairs
 * of HTAB, SP, VCHAR and obs-text: never a CR, LF, NUL or other control.
 */

/* A decoder with no limit; set max_body to refuse a larger body, and
 * max_extension_bytes to refuse more bytes of chunk extensions in it. */
void serow_chunked_decoder_init(struct chunked_decoder *decoder);

/*
 * Decodes buf[0..*len) in place.  On return *len holds the number of decoded
 * body bytes now at buf[0..*len), and *consumed the number of input bytes
 * used (the rest, after CHUNKED_DONE, belongs to the next request).
 * CHUNKED_TOO_LARGE comes at the end of the size line that announces the
 * chunk taking the body past max_body, before any of its data: a client
 * gets its answer without sending the data first.
 */
int serow_decode_chunked(struct chunked_decoder *decoder, char *buf, size_t *len, size_t *consumed);

#endif
