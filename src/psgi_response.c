/*
 * psgi_response.c - Perl values of a PSGI response to bytes on the socket.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi_response.h"

#include "XSUB.h"

#include <stdlib.h>
#include <sys/socket.h>

#include "response_writer.h"

/* Headers taken from the app's array without allocating; more go to the heap. */
#define STACK_HEADERS 64
/* Body parts per writev batch when sending an array body. */
#define BODY_IOVECS 256

/* One response at a time per worker: its framing and what has gone out. */
static struct {
    int active;
    struct response_framing framing;
    uint64_t body_sent;
    int failed;
    char *head;           /* formatted head not yet written: it goes out with */
    size_t head_len;      /* the first body bytes, in the same writev */
    size_t head_size;
} response;

void reset_psgi_response(void)
{
    response.active = 0;
    response.head_len = 0;
    response.body_sent = 0;
    response.failed = 0;
}

struct header_list {
    struct response_header stack[STACK_HEADERS];
    struct response_header *items;
    size_t count;
};

static void free_header_list(struct header_list *list)
{
    if (list->items != list->stack)
        free(list->items);
}

/* Reads the app's [name => value, ...] array.  0, or -1 if it is no array. */
static int collect_headers(pTHX_ SV *headers, struct header_list *list)
{
    list->items = list->stack;
    list->count = 0;
    if (!SvROK(headers) || SvTYPE(SvRV(headers)) != SVt_PVAV)
        return -1;
    AV *av = (AV *)SvRV(headers);
    SSize_t n = av_len(av) + 1;
    if (n % 2 != 0)
        return -1;
    size_t pairs = (size_t)n / 2;
    if (pairs > STACK_HEADERS) {
        list->items = malloc(sizeof(struct response_header) * pairs);
        if (list->items == NULL)
            return -1;
    }
    for (size_t i = 0; i < pairs; i++) {
        SV **name = av_fetch(av, (SSize_t)(2 * i), 0);
        SV **value = av_fetch(av, (SSize_t)(2 * i + 1), 0);
        STRLEN name_len = 0, value_len = 0;
        struct response_header *h = &list->items[i];
        h->name = name && SvOK(*name) ? SvPV(*name, name_len) : "";
        h->name_len = name_len;
        h->value = value && SvOK(*value) ? SvPV(*value, value_len) : "";
        h->value_len = value_len;
    }
    list->count = pairs;
    return 0;
}

static int status_of(pTHX_ SV *status)
{
    if (!SvOK(status) || !looks_like_number(status))
        return -1;
    return (int)SvIV(status);
}

static void report_bad_header(pTHX_ const struct header_list *list, size_t index, SV **bad)
{
    if (bad && index < list->count)
        *bad = newSVpvn(list->items[index].name, list->items[index].name_len);
}

/* Plans and formats the head into response.head. */
static int prepare_head(pTHX_ struct worker_loop *loop, SV *status_sv, SV *headers,
                        int length_known, uint64_t length, SV **bad_header)
{
    struct header_list list;
    struct response_facts facts;
    size_t bad_index = 0;

    reset_psgi_response();
    if (collect_headers(aTHX_ headers, &list) != 0)
        return RESPONSE_BAD_HEADER_NAME;
    facts.status = status_of(aTHX_ status_sv);
    facts.is_head_request = loop->head.method_len == 4 && memcmp(loop->head.method, "HEAD", 4) == 0;
    facts.minor_version = loop->head.minor_version;
    facts.may_keep_alive = worker_loop_may_keep_alive(loop);
    facts.body_length_known = length_known;
    facts.body_length = length;

    int r = plan_response(&facts, list.items, list.count, &response.framing, &bad_index);
    if (r != RESPONSE_OK) {
        report_bad_header(aTHX_ &list, bad_index, bad_header);
        free_header_list(&list);
        return r;
    }
    size_t need = response_head_size(list.items, list.count);
    if (need > response.head_size) {
        char *grown = realloc(response.head, need);
        if (grown == NULL) {
            free_header_list(&list);
            return RESPONSE_CLIENT_GONE;
        }
        response.head = grown;
        response.head_size = need;
    }
    response.head_len = format_response_head(response.head, &facts, list.items, list.count,
                                             &response.framing);
    free_header_list(&list);
    response.active = 1;
    return RESPONSE_OK;
}

static int write_all(struct worker_loop *loop, struct iovec *iov, int count)
{
    if (worker_loop_write(loop, iov, count) != 0) {
        response.failed = 1;
        return RESPONSE_CLIENT_GONE;
    }
    return RESPONSE_OK;
}

/*
 * How many of len more body bytes may go out: never more than a declared
 * Content-Length (RFC 9110 8.6), or the client reads the excess as the next
 * response.  Counts all len in body_sent, so that psgi_response_keeps_alive()
 * closes the connection after a body of the wrong length.
 */
static uint64_t take_body_bytes(uint64_t len)
{
    uint64_t fits = len;
    if (response.framing.has_content_length) {
        uint64_t room = response.body_sent < response.framing.content_length
                            ? response.framing.content_length - response.body_sent
                            : 0;
        if (fits > room)
            fits = room;
    }
    response.body_sent += len;
    return fits;
}

int send_psgi_response(pTHX_ struct worker_loop *loop, SV *status, SV *headers, AV *body,
                       SV **bad_header)
{
    SSize_t parts = av_len(body) + 1;
    uint64_t length = 0;
    for (SSize_t i = 0; i < parts; i++) {
        SV **part = av_fetch(body, i, 0);
        if (part && SvOK(*part)) {
            STRLEN len;
            (void)SvPV(*part, len);
            length += len;
        }
    }
    int r = prepare_head(aTHX_ loop, status, headers, 1, length, bad_header);
    if (r != RESPONSE_OK)
        return r;
    if (!response.framing.body_allowed)
        parts = 0;

    /* The head and the first BODY_IOVECS - 1 parts leave in one writev. */
    struct iovec iov[BODY_IOVECS];
    int count = 0;
    iov[count].iov_base = response.head;
    iov[count++].iov_len = response.head_len;
    for (SSize_t i = 0; i < parts; i++) {
        SV **part = av_fetch(body, i, 0);
        if (!part || !SvOK(*part))
            continue;
        STRLEN len;
        char *data = SvPV(*part, len);
        len = (STRLEN)take_body_bytes(len);
        if (len == 0)
            continue;
        if (count == BODY_IOVECS) {
            if ((r = write_all(loop, iov, count)) != RESPONSE_OK)
                return r;
            count = 0;
        }
        iov[count].iov_base = data;
        iov[count++].iov_len = len;
    }
    r = write_all(loop, iov, count);
    response.head_len = 0;
    return r;
}

int start_psgi_response(pTHX_ struct worker_loop *loop, SV *status, SV *headers,
                        int64_t length, SV **bad_header)
{
    return prepare_head(aTHX_ loop, status, headers, length >= 0,
                        length >= 0 ? (uint64_t)length : 0, bad_header);
}

int write_psgi_body(pTHX_ struct worker_loop *loop, const char *data, size_t len)
{
    struct iovec iov[4];
    int count = 0;
    char size_line[24];

    if (!response.active || response.failed)
        return RESPONSE_CLIENT_GONE;
    if (!response.framing.body_allowed || len == 0)
        return RESPONSE_OK; /* HEAD, 204, 304: the body is dropped; "" would end a chunked body */
    if ((len = (size_t)take_body_bytes(len)) == 0)
        return RESPONSE_OK; /* past its Content-Length: dropped */
    if (response.head_len) {
        iov[count].iov_base = response.head;
        iov[count++].iov_len = response.head_len;
    }
    if (response.framing.chunked) {
        iov[count].iov_base = size_line;
        iov[count++].iov_len = format_chunk_size(size_line, len);
    }
    iov[count].iov_base = (void *)data;
    iov[count++].iov_len = len;
    if (response.framing.chunked) {
        iov[count].iov_base = (void *)CHUNK_END;
        iov[count++].iov_len = 2;
    }
    response.head_len = 0;
    return write_all(loop, iov, count);
}

static int flush_head(struct worker_loop *loop, int more_follows)
{
    if (response.head_len == 0)
        return RESPONSE_OK;
    struct iovec iov = {response.head, response.head_len};
    response.head_len = 0;
    if (more_follows) {
        /* MSG_MORE: the head waits for the file's first bytes, one packet. */
        ssize_t n = send(loop->current->fd, iov.iov_base, iov.iov_len, MSG_MORE | MSG_NOSIGNAL);
        if (n == (ssize_t)iov.iov_len)
            return RESPONSE_OK;
        if (n > 0) {
            iov.iov_base = (char *)iov.iov_base + n;
            iov.iov_len -= (size_t)n;
        }
    }
    return write_all(loop, &iov, 1);
}

int sendfile_psgi_body(pTHX_ struct worker_loop *loop, int fd, uint64_t offset, uint64_t len)
{
    if (!response.active || response.failed || loop->current == NULL)
        return RESPONSE_CLIENT_GONE;
    if (!response.framing.body_allowed || len == 0)
        return RESPONSE_OK;
    if ((len = take_body_bytes(len)) == 0)
        return RESPONSE_OK; /* past its Content-Length: dropped */
    int r;
    if (response.framing.chunked) {
        char size_line[24];
        struct iovec iov[2] = {{response.head, response.head_len},
                               {size_line, format_chunk_size(size_line, (size_t)len)}};
        response.head_len = 0;
        if ((r = write_all(loop, iov, 2)) != RESPONSE_OK)
            return r;
    } else if ((r = flush_head(loop, 1)) != RESPONSE_OK) {
        return r;
    }
    if (worker_loop_sendfile(loop, fd, offset, len) != 0) {
        response.failed = 1;
        return RESPONSE_CLIENT_GONE;
    }
    if (response.framing.chunked) {
        struct iovec end = {(void *)CHUNK_END, 2};
        return write_all(loop, &end, 1);
    }
    return RESPONSE_OK;
}

int finish_psgi_body(pTHX_ struct worker_loop *loop)
{
    if (!response.active || response.failed)
        return RESPONSE_CLIENT_GONE;
    if (response.framing.chunked && response.framing.body_allowed) {
        struct iovec iov[2];
        int count = 0;
        if (response.head_len) {
            iov[count].iov_base = response.head;
            iov[count++].iov_len = response.head_len;
        }
        iov[count].iov_base = (void *)LAST_CHUNK;
        iov[count++].iov_len = sizeof(LAST_CHUNK) - 1;
        response.head_len = 0;
        return write_all(loop, iov, count);
    }
    return flush_head(loop, 0);
}

int psgi_response_keeps_alive(void)
{
    if (!response.active || response.failed || !response.framing.keep_alive)
        return 0;
    /* A body shorter or longer than its Content-Length desynchronises the
     * connection: close it rather than let the next response be misread. */
    if (response.framing.body_allowed && response.framing.has_content_length &&
        response.body_sent != response.framing.content_length)
        return 0;
    return 1;
}

int send_informational_response(pTHX_ struct worker_loop *loop, SV *status_sv, SV *headers,
                                SV **bad_header)
{
    struct header_list list;
    size_t bad_index = 0;
    int status = status_of(aTHX_ status_sv);
    if (status < 100 || status > 199 || status == 101)
        return RESPONSE_BAD_STATUS;
    if (loop->head.minor_version == 0)
        return RESPONSE_OK; /* HTTP/1.0 clients do not expect 1xx responses */
    if (collect_headers(aTHX_ headers, &list) != 0)
        return RESPONSE_BAD_HEADER_NAME;
    struct response_facts facts = {status, 0, 1, 1, 0, 0};
    struct response_framing framing;
    int r = plan_response(&facts, list.items, list.count, &framing, &bad_index);
    if (r != RESPONSE_OK) {
        report_bad_header(aTHX_ &list, bad_index, bad_header);
        free_header_list(&list);
        return r;
    }
    char *buffer = malloc(response_head_size(list.items, list.count));
    if (buffer == NULL) {
        free_header_list(&list);
        return RESPONSE_CLIENT_GONE;
    }
    /* keep_alive=1 so that no Connection header is added to a 1xx */
    framing.keep_alive = 1;
    size_t n = format_response_head(buffer, &facts, list.items, list.count, &framing);
    free_header_list(&list);
    struct iovec iov = {buffer, n};
    r = worker_loop_write(loop, &iov, 1) == 0 ? RESPONSE_OK : RESPONSE_CLIENT_GONE;
    free(buffer);
    return r;
}
