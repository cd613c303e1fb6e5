/*
 * psgi_response.c - Perl values of a PSGI response to bytes on the socket.
 *
 * Owns: the response part of a request (struct serow_response in
 * request.h: its progress and the buffer its head is formatted in) and the
 * iovec buffer of array bodies.  What a head says is
 * response_writer.c's; writing goes through worker_output.c (a streamed
 * body's pieces gathered there: write_soon); when the request ends is
 * psgi_request.c's.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_response.h"

#include "XSUB.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http_parser.h"
#include "psgi/psgi_app_chunks.h"
#include "psgi/psgi_hold.h"
#include "psgi/psgi_input.h"
#include "request/request_accounting.h"
#include "http/response_writer.h"
#include "connection/connection.h"
#include "request/request.h"
#include "worker/worker_loop.h"

/* Headers taken from the app's array without allocating; more go to the heap. */
#define STACK_HEADERS 64
/* An array body with more parts than one writev takes (IOV_MAX, the head
 * included) has its last parts copied into one buffer so that it still
 * leaves in one writev, when those parts are at most this large.  More than
 * that would not fit in a socket buffer anyway: it goes out in several
 * writevs of IOV_MAX parts, without a copy. */
#define COALESCE_MAX_BYTES (4 * 1024 * 1024)

/* The iovecs of an array body (the head in [0]), grown to the most parts
 * seen, and kept for the next response up to KEPT_IOVECS: a per-process
 * cache, filled and written within one call. */
#define KEPT_IOVECS 4096
static struct iovec *body_iov;
static size_t body_iov_size;

void serow_reset_psgi_response(struct serow_request *req)
{
    struct serow_response *response = &req->response;
    response->active = 0;
    response->head_len = 0;
    response->body_given = 0;
    response->body_sent = 0;
    response->failed = 0;
    response->at_once = 0;
    response->app_framing_error = NULL;
    response->hold = 0;
    response->held_len = 0;
    response->grip_hold = 0;
}

const char *serow_psgi_bytes(pTHX_ SV *sv, STRLEN *len)
{
    const char *p = SvPV_nomg(sv, *len);
    if (!SvUTF8(sv))
        return p;
    /* A character string goes out as Latin-1, as print to a raw handle would
     * send it; the app's own string is left as it is. */
    SV *copy = sv_2mortal(newSVpvn_flags(p, *len, SVf_UTF8));
    if (!sv_utf8_downgrade(copy, TRUE))
        return NULL;
    return SvPV_nomg(copy, *len);
}

/* Header values that are integers (Content-Length => length $body) are
 * formatted here, up to this many per response: perl's SvPV would turn the
 * app's integer into a string too (an upgrade and an allocation, freed with
 * the response). */
#define INTEGER_VALUES 4
/* Digits of an IV, its sign included. */
#define INTEGER_DIGITS 24

struct header_list {
    struct response_header stack[STACK_HEADERS];
    struct response_header *items;
    size_t count;
    char integers[INTEGER_VALUES][INTEGER_DIGITS];
    size_t integers_used;
};

/* Whether an SV holds an integer and nothing else (no string, number,
 * reference or unsigned flag): its decimal digits are its string. */
static int only_integer(SV *sv)
{
    return (SvFLAGS(sv) & (SVf_IOK | SVf_POK | SVf_NOK | SVf_ROK | SVf_IVisUV)) == SVf_IOK;
}

/* n in decimal, at the end of buffer (INTEGER_DIGITS bytes). */
static const char *integer_digits(IV n, char *buffer, STRLEN *len)
{
    char *end = buffer + INTEGER_DIGITS, *p = end;
    UV u = n < 0 ? (UV)0 - (UV)n : (UV)n;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (n < 0)
        *--p = '-';
    *len = (STRLEN)(end - p);
    return p;
}

static void free_header_list(struct header_list *list)
{
    if (list->items != list->stack)
        free(list->items);
    list->items = list->stack;
}

/* The header a plan refused, as the error message names it: its name, and
 * its value too when that is what is wrong with it (a transfer coding an
 * HTTP/1.0 client cannot get).  NULL when no header is at fault. */
static SV *header_at_fault(pTHX_ const struct header_list *list, size_t index, int r)
{
    if (index >= list->count)
        return NULL;
    const struct response_header *h = &list->items[index];
    if (r == RESPONSE_CODING_FOR_HTTP10)
        return newSVpvf("%.*s: %.*s", (int)h->name_len, h->name, (int)h->value_len, h->value);
    return newSVpvn(h->name, h->name_len);
}

/* Names the header at index for the error message (NULL if it has no name). */
static void report_bad_header(pTHX_ SV *name, SV **bad)
{
    if (bad && name && SvOK(name))
        *bad = newSVsv(name);
}

/*
 * Reads the app's [name => value, ...] array into list.  The strings stay
 * owned by Perl.  RESPONSE_OK, or why the list cannot be sent (an undefined
 * name or value, wide characters); the names and values themselves are
 * checked by serow_plan_response().
 */
static int collect_headers(pTHX_ SV *headers, struct header_list *list, SV **bad)
{
    list->items = list->stack;
    list->count = 0;
    list->integers_used = 0;
    SvGETMAGIC(headers);
    if (!SvROK(headers) || SvTYPE(SvRV(headers)) != SVt_PVAV)
        return RESPONSE_BAD_HEADER_LIST;
    AV *av = (AV *)SvRV(headers);
    SSize_t n = av_len(av) + 1;
    if (n % 2 != 0)
        return RESPONSE_BAD_HEADER_LIST;
    size_t pairs = (size_t)n / 2;
    /* (+1: room for the server's own request id header, see prepare_head) */
    if (pairs + 1 > STACK_HEADERS) {
        list->items = malloc(sizeof(struct response_header) * (pairs + 1));
        if (list->items == NULL) {
            list->items = list->stack;
            return RESPONSE_CLIENT_GONE;
        }
    }
    for (size_t i = 0; i < pairs; i++) {
        SV **name = av_fetch(av, (SSize_t)(2 * i), 0);
        SV **value = av_fetch(av, (SSize_t)(2 * i + 1), 0);
        struct response_header *h = &list->items[i];
        STRLEN len;
        int r = RESPONSE_OK;
        if (name)
            SvGETMAGIC(*name);
        if (value)
            SvGETMAGIC(*value);
        if (!name || !SvOK(*name))
            r = RESPONSE_BAD_HEADER_NAME;
        else if ((h->name = serow_psgi_bytes(aTHX_ *name, &len)) == NULL)
            r = RESPONSE_WIDE_CHARACTER;
        else if ((h->name_len = len, !value || !SvOK(*value)))
            r = RESPONSE_BAD_HEADER_VALUE; /* PSGI: values MUST be defined */
        else if (only_integer(*value) && list->integers_used < INTEGER_VALUES)
            h->value = integer_digits(SvIVX(*value), list->integers[list->integers_used++], &len);
        else if ((h->value = serow_psgi_bytes(aTHX_ *value, &len)) == NULL)
            r = RESPONSE_WIDE_CHARACTER;
        if (r != RESPONSE_OK) {
            report_bad_header(aTHX_ name ? *name : NULL, bad);
            free_header_list(list);
            return r;
        }
        h->value_len = len;
    }
    list->count = pairs;
    return RESPONSE_OK;
}

/* The status as a number; -1 unless it is three digits (200 or "200"). */
static int status_of(pTHX_ SV *status)
{
    STRLEN len;
    SvGETMAGIC(status);
    if (!SvOK(status))
        return -1;
    if (only_integer(status)) /* 200: no string made of it */
        return SvIVX(status) >= 100 && SvIVX(status) <= 999 ? (int)SvIVX(status) : -1;
    const char *p = SvPV_nomg(status, len);
    if (len != 3)
        return -1;
    int n = 0;
    for (int i = 0; i < 3; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        n = n * 10 + (p[i] - '0');
    }
    return n;
}

/* ---- a body the app framed itself -----------------------------------------
 *
 * Its chunk lines are checked as they go out (psgi_app_chunks.c says why and
 * how); here they are sent. */

static int write_all(struct serow_request *req, struct iovec *iov, int count);
static int write_soon(struct serow_request *req, struct iovec *iov, int count);
static int send_held(struct serow_request *req);
static int flush_head(struct serow_request *req, int more_follows);

/* The head still waiting, as the first iovec of the next write (returns 1),
 * so that it leaves with the body bytes that follow it; 0 when it is out. */
static int take_head(struct serow_response *response, struct iovec *iov)
{
    if (response->head_len == 0)
        return 0;
    iov->iov_base = response->head;
    iov->iov_len = response->head_len;
    response->head_len = 0;
    return 1;
}

/* Sends the next len bytes of a body the app framed itself (the head first if
 * it has not gone): as they are, or decoded for HTTP/1.0, up to an error in
 * them or the end of the last chunk. */
static int send_app_chunks(struct serow_request *req, const char *data, size_t len)
{
    struct serow_response *response = &req->response;
    char block[APP_CHUNKS_BLOCK];
    response->body_given += len;
    while (len > 0 && response->app_framing_error == NULL) {
        size_t n = len < APP_CHUNKS_BLOCK ? len : APP_CHUNKS_BLOCK, decoded;
        size_t valid = serow_read_app_chunks(&response->app_chunks, &response->app_chunks_done,
                                             data, n, block, &decoded,
                                             &response->app_framing_error);
        struct iovec iov[2];
        int count = 0;
        if (response->head_len) {
            iov[count].iov_base = response->head;
            iov[count++].iov_len = response->head_len;
        }
        iov[count].iov_base = response->framing.decode_app_chunks ? block : (char *)data;
        iov[count].iov_len = response->framing.decode_app_chunks ? decoded : valid;
        if (iov[count].iov_len > 0) {
            response->body_sent += iov[count++].iov_len;
            response->head_len = 0;
            int r = write_soon(req, iov, count);
            if (r != RESPONSE_OK)
                return r;
        }
        data += n;
        len -= n;
    }
    return RESPONSE_OK;
}

/* The app's body has ended: one that stopped before its last chunk is cut. */
static void end_app_chunks(struct serow_response *response)
{
    if (response->framing.app_chunked && !response->app_chunks_done &&
        response->app_framing_error == NULL)
        response->app_framing_error = "ends before its last chunk";
}

/* ---- the header of a compressed body ------------------------------------
 *
 * A compressed body starts with its coding's header: gzip's member header
 * (RFC 1952 2.3, 10 bytes without its optional fields), deflate's zlib
 * header (RFC 1950 2.2, 2 bytes).  First writes of a streamed body that
 * together are no longer than that hold nothing a client could decode, so
 * they are held until the next write (or the end of the body): that delays
 * nothing, and saves the header a chunk of its own.  Every other write is a
 * chunk of its own, as the app wrote it (gathered with the next ones into
 * one writev while the app goes on writing, and sent within a tick of the
 * flusher's when it stops: worker_output.c), so a server-sent event or a
 * long-poll answer is never cut or kept back. */

/* Plans and formats the head into the response's head buffer.  parts: the
 * whole body when it is known (an array), else NULL. */
static int prepare_head(pTHX_ struct serow_request *req, SV *status_sv, SV *headers,
                        int length_known, uint64_t length, const struct iovec *parts,
                        size_t num_parts, SV **bad_header)
{
    struct serow_response *response = &req->response;
    struct header_list list;
    struct response_facts facts;
    size_t bad_index = 0;

    serow_reset_psgi_response(req);
    facts.status = status_of(aTHX_ status_sv);
    /* 1xx are interim: a client would wait on for the final response.
     * Only 101 ends the exchange (the connection then leaves HTTP). */
    if (facts.status >= 100 && facts.status < 200 && facts.status != 101)
        return RESPONSE_BAD_STATUS;
    int r = collect_headers(aTHX_ headers, &list, bad_header);
    if (r != RESPONSE_OK)
        return r;
    /* the request id joins the app's headers */
    list.count = serow_request_accounting_add_id_header(req, list.items, list.count);
    facts.is_head_request = serow_is_head_request(&req->head);
    facts.minor_version = req->head.minor_version;
    facts.request_upgrade = req->head.upgrade;
    facts.may_keep_alive = serow_worker_loop_may_keep_alive(req);
    facts.body_length_known = length_known;
    facts.body_length = length;

    r = serow_plan_response(&facts, list.items, list.count, &response->framing, &bad_index);
    if (r != RESPONSE_OK) {
        if (bad_header)
            *bad_header = header_at_fault(aTHX_ &list, bad_index, r);
        free_header_list(&list);
        return r;
    }
    /* The app's part ends here (not at a head refused: the app may give
     * another), and the log keeps the headers it names. */
    serow_request_accounting_response_head(req, list.items, list.count);
    /* After a 101 the bytes are no longer HTTP: no next request to read. */
    if (facts.status == 101)
        response->framing.keep_alive = 0;
    if (response->framing.app_chunked) {
        serow_chunked_decoder_init(&response->app_chunks);
        response->app_chunks_done = 0;
        if (parts && !serow_app_chunks_valid(parts, num_parts))
            response->framing.keep_alive = 0;
    }
    size_t need = serow_response_head_size(list.items, list.count);
    if (need > response->head_size) {
        char *grown = realloc(response->head, need);
        if (grown == NULL) {
            free_header_list(&list);
            return RESPONSE_CLIENT_GONE;
        }
        response->head = grown;
        response->head_size = need;
    }
    response->head_len = serow_format_response_head(response->head, &facts, list.items, list.count,
                                             &response->framing);
    /* (an array body is whole: nothing of it is held) */
    size_t hold = parts == NULL ? serow_compression_header_size(list.items, list.count) : 0;
    free_header_list(&list);
    response->status = facts.status;
    response->hold = hold;
    response->active = 1;
    serow_socket_back_to_server(req);
    return RESPONSE_OK;
}

int serow_psgi_response_at_once(struct serow_request *req)
{
    req->response.at_once = 1;
    return send_held(req);
}

void serow_psgi_response_client_gone(struct serow_request *req)
{
    struct serow_response *response = &req->response;
    response->failed = 1;
    response->status = SEROW_STATUS_CLIENT_GONE;
}

static int write_all(struct serow_request *req, struct iovec *iov, int count)
{
    if (serow_worker_loop_write(req, iov, count) != 0) {
        serow_psgi_response_client_gone(req);
        return RESPONSE_CLIENT_GONE;
    }
    return RESPONSE_OK;
}

/* A piece of a streamed body: gathered with the pieces that follow while
 * the app goes on writing (worker_output.c's serow_worker_loop_write_soon). */
static int write_soon(struct serow_request *req, struct iovec *iov, int count)
{
    if (req->response.at_once)
        return write_all(req, iov, count);
    if (serow_worker_loop_write_soon(req, iov, count) != 0) {
        serow_psgi_response_client_gone(req);
        return RESPONSE_CLIENT_GONE;
    }
    return RESPONSE_OK;
}

/* What write_soon holds, sent: the body has ended. */
static int send_held(struct serow_request *req)
{
    if (serow_worker_loop_send_held(req) != 0) {
        serow_psgi_response_client_gone(req);
        return RESPONSE_CLIENT_GONE;
    }
    return RESPONSE_OK;
}

/* How much of len more body bytes may go out: all of them, unless that
 * would pass the Content-Length announced (the rest is dropped, and the
 * connection closes after the response: see psgi_response_keeps_alive). */
static size_t allowed_body_bytes(struct serow_response *response, size_t len)
{
    response->body_given += len;
    if (!response->framing.has_content_length)
        return len;
    uint64_t room = response->framing.content_length - response->body_sent;
    return (uint64_t)len > room ? (size_t)room : len;
}

static int grow_body_iov(size_t count)
{
    if (count <= body_iov_size)
        return 0;
    struct iovec *grown = realloc(body_iov, sizeof(*grown) * count);
    if (grown == NULL)
        return -1;
    body_iov = grown;
    body_iov_size = count;
    return 0;
}

/* After an array body: the iovecs of one of very many parts are not kept for
 * good. */
static void release_body_iov(void)
{
    if (body_iov_size > KEPT_IOVECS) {
        free(body_iov);
        body_iov = NULL;
        body_iov_size = 0;
    }
}

/* Writes iov[0..count) (the head and the body parts), in one writev when
 * the parts are more than one writev takes but their tail can be copied. */
static int write_head_and_parts(struct serow_request *req, struct iovec *iov, size_t count)
{
    if (count <= IOV_MAX)
        return write_all(req, iov, (int)count);
    size_t tail = 0;
    for (size_t i = IOV_MAX - 1; i < count; i++)
        tail += iov[i].iov_len;
    if (tail > COALESCE_MAX_BYTES)
        return write_all(req, iov, (int)count); /* serow_worker_loop_write batches it */
    char *copy = malloc(tail);
    if (copy == NULL)
        return write_all(req, iov, (int)count);
    char *p = copy;
    for (size_t i = IOV_MAX - 1; i < count; i++) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    iov[IOV_MAX - 1].iov_base = copy;
    iov[IOV_MAX - 1].iov_len = tail;
    int r = write_all(req, iov, IOV_MAX);
    free(copy);
    return r;
}

int serow_send_psgi_response(pTHX_ struct serow_request *req, SV *status, SV *headers, AV *body,
                       SV **bad_header)
{
    struct serow_response *response = &req->response;
    SSize_t parts = av_len(body) + 1;
    size_t count = 1; /* iov[0] is the head */
    uint64_t length = 0;

    /* --grip: a response that asks to be held goes its own way (psgi_hold.c);
     * off, this is one load and a branch. */
    if (__builtin_expect(serow_grip_on, 0)) {
        int r = serow_psgi_hold_response(aTHX_ req, status, headers, body, bad_header);
        if (r != RESPONSE_NOT_HELD)
            return r;
    }
    if (response->active || req->response_started)
        return RESPONSE_TOO_LATE;
    if (grow_body_iov((size_t)parts + 1) != 0)
        return RESPONSE_CLIENT_GONE;
    /* Each part is read once (a tied or overloaded part may change between
     * reads): its bytes go to the iovecs and its length to the total. */
    for (SSize_t i = 0; i < parts; i++) {
        SV **part = av_fetch(body, i, 0);
        if (!part)
            continue;
        SvGETMAGIC(*part);
        if (!SvOK(*part))
            continue;
        STRLEN len;
        const char *data = serow_psgi_bytes(aTHX_ *part, &len);
        if (data == NULL)
            return RESPONSE_WIDE_CHARACTER;
        if (len == 0)
            continue;
        body_iov[count].iov_base = (char *)data;
        body_iov[count++].iov_len = len;
        length += len;
    }
    int r = prepare_head(aTHX_ req, status, headers, 1, length, body_iov + 1, count - 1,
                         bad_header);
    if (r != RESPONSE_OK)
        return r;
    if (response->framing.app_chunked) {
        for (size_t i = 1; i < count && r == RESPONSE_OK; i++)
            r = send_app_chunks(req, body_iov[i].iov_base, body_iov[i].iov_len);
        end_app_chunks(response);
        release_body_iov();
        return r == RESPONSE_OK ? flush_head(req, 0) : r;
    }
    if (!response->framing.body_allowed) {
        count = 1;
    } else {
        /* Never more than the Content-Length announced. */
        size_t allowed = (size_t)allowed_body_bytes(response, (size_t)length);
        size_t kept = 1;
        while (kept < count && allowed > 0) {
            if (body_iov[kept].iov_len > allowed)
                body_iov[kept].iov_len = allowed;
            allowed -= body_iov[kept].iov_len;
            response->body_sent += body_iov[kept].iov_len;
            kept++;
        }
        count = kept;
    }
    body_iov[0].iov_base = response->head;
    body_iov[0].iov_len = response->head_len;
    response->head_len = 0;
    r = write_head_and_parts(req, body_iov, count);
    release_body_iov();
    return r;
}

int serow_start_psgi_response(pTHX_ struct serow_request *req, SV *status, SV *headers,
                        int64_t length, SV **bad_header)
{
    struct serow_response *response = &req->response;
    if (response->active || req->response_started)
        return RESPONSE_TOO_LATE;
    /* --grip, as in serow_send_psgi_response, for a head whose body is
     * streamed (psgi_hold.c calls back here with the Grip-* headers gone) */
    if (__builtin_expect(serow_grip_on, 0) && length < 0) {
        int r = serow_psgi_hold_start(aTHX_ req, status, headers, bad_header);
        if (r != RESPONSE_NOT_HELD)
            return r;
    }
    return prepare_head(aTHX_ req, status, headers, length >= 0,
                        length >= 0 ? (uint64_t)length : 0, NULL, 0, bad_header);
}

/* A write while the body's first bytes may be held (response->hold): held
 * while they fit, else sent after what was held, in one write. */
static int write_held_and(pTHX_ struct serow_request *req, const char *data, size_t len)
{
    struct serow_response *response = &req->response;
    if (response->held_len + len <= response->hold) {
        memcpy(response->held + response->held_len, data, len);
        response->held_len += len;
        return RESPONSE_OK;
    }
    response->hold = 0; /* a body byte goes now: nothing more is held */
    size_t held = response->held_len;
    if (held == 0)
        return serow_write_psgi_body(aTHX_ req, data, len);
    char *joined = malloc(held + len);
    if (joined == NULL) {
        response->failed = 1;
        return RESPONSE_CLIENT_GONE;
    }
    memcpy(joined, response->held, held);
    memcpy(joined + held, data, len);
    response->held_len = 0;
    int r = serow_write_psgi_body(aTHX_ req, joined, held + len);
    free(joined);
    return r;
}

int serow_flush_held_psgi_body(pTHX_ struct serow_request *req)
{
    struct serow_response *response = &req->response;
    char held[SEROW_MAX_HELD_BODY];
    size_t n = response->held_len;
    response->hold = 0;
    if (n == 0)
        return RESPONSE_OK;
    memcpy(held, response->held, n);
    response->held_len = 0;
    return serow_write_psgi_body(aTHX_ req, held, n);
}

int serow_write_psgi_body(pTHX_ struct serow_request *req, const char *data, size_t len)
{
    struct serow_response *response = &req->response;
    struct iovec iov[4];
    int count;
    char size_line[24];

    if (!response->active || response->failed)
        return RESPONSE_CLIENT_GONE;
    if (response->hold && len > 0)
        return write_held_and(aTHX_ req, data, len);
    if (!response->framing.body_allowed || len == 0)
        return RESPONSE_OK; /* HEAD, 204, 304: the body is dropped; "" would end a chunked body */
    if (response->framing.app_chunked)
        return send_app_chunks(req, data, len);
    len = allowed_body_bytes(response, len);
    if (len == 0)
        return RESPONSE_OK;
    count = take_head(response, iov);
    if (response->framing.chunked) {
        iov[count].iov_base = size_line;
        iov[count++].iov_len = serow_format_chunk_size(size_line, len);
    }
    iov[count].iov_base = (void *)data;
    iov[count++].iov_len = len;
    if (response->framing.chunked) {
        iov[count].iov_base = (void *)CHUNK_END;
        iov[count++].iov_len = 2;
    }
    response->body_sent += len;
    return write_soon(req, iov, count);
}

int serow_flush_psgi_head(pTHX_ struct serow_request *req)
{
    int r = serow_flush_held_psgi_body(aTHX_ req);
    return r == RESPONSE_OK ? flush_head(req, 0) : r;
}

static int flush_head(struct serow_request *req, int more_follows)
{
    struct serow_response *response = &req->response;
    if (response->head_len == 0)
        return RESPONSE_OK;
    struct iovec iov = {response->head, response->head_len};
    response->head_len = 0;
    if (more_follows) {
        /* MSG_MORE: the head waits for the file's first bytes, one packet. */
        serow_worker_loop_response_starts(req);
        ssize_t n = serow_transport_send(&req->conn->carried, req->conn->fd, iov.iov_base, iov.iov_len,
                                         MSG_MORE);
        if (n == (ssize_t)iov.iov_len)
            return RESPONSE_OK;
        if (n > 0) {
            iov.iov_base = (char *)iov.iov_base + n;
            iov.iov_len -= (size_t)n;
        }
    }
    return write_all(req, &iov, 1);
}

/* A file whose bytes are chunked framing the app wrote: read, not sent with
 * sendfile, since each byte is checked (see send_app_chunks). */
static int send_file_app_chunks(struct serow_request *req, int fd, uint64_t offset, uint64_t len)
{
    struct serow_response *response = &req->response;
    char data[APP_CHUNKS_BLOCK];
    while (len > 0 && response->app_framing_error == NULL) {
        ssize_t n = pread(fd, data, len < sizeof(data) ? (size_t)len : sizeof(data), (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* as when sendfile finds the file shorter than it said */
            response->failed = 1;
            return RESPONSE_CLIENT_GONE;
        }
        int r = send_app_chunks(req, data, (size_t)n);
        if (r != RESPONSE_OK)
            return r;
        offset += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return RESPONSE_OK;
}

int serow_sendfile_psgi_body(pTHX_ struct serow_request *req, int fd, uint64_t offset, uint64_t len)
{
    struct serow_response *response = &req->response;
    if (!response->active || response->failed || req->conn == NULL)
        return RESPONSE_CLIENT_GONE;
    if (!response->framing.body_allowed || len == 0)
        return RESPONSE_OK;
    if (response->framing.app_chunked)
        return send_file_app_chunks(req, fd, offset, len);
    response->body_given += len;
    if (response->framing.has_content_length &&
        len > response->framing.content_length - response->body_sent)
        len = response->framing.content_length - response->body_sent;
    if (len == 0)
        return RESPONSE_OK;
    int r;
    if (response->framing.chunked) {
        char size_line[24];
        struct iovec iov[2] = {{response->head, response->head_len},
                               {size_line, serow_format_chunk_size(size_line, (size_t)len)}};
        response->head_len = 0;
        if ((r = write_all(req, iov, 2)) != RESPONSE_OK)
            return r;
    } else if ((r = flush_head(req, 1)) != RESPONSE_OK) {
        return r;
    }
    if ((r = serow_worker_loop_sendfile(req, fd, offset, len)) != 0) {
        if (r == -1)
            serow_psgi_response_client_gone(req);
        else
            response->failed = 1; /* the file is short: cut, its status kept */
        return RESPONSE_CLIENT_GONE;
    }
    response->body_sent += len;
    if (response->framing.chunked) {
        struct iovec end = {(void *)CHUNK_END, 2};
        return write_all(req, &end, 1);
    }
    return RESPONSE_OK;
}

uint64_t serow_psgi_body_given(const struct serow_request *req)
{
    const struct serow_response *response = &req->response;
    return response->active ? response->body_given + response->held_len : 0;
}

int serow_finish_psgi_body(pTHX_ struct serow_request *req)
{
    struct serow_response *response = &req->response;
    if (!response->active || response->failed)
        return RESPONSE_CLIENT_GONE;
    int r = serow_flush_held_psgi_body(aTHX_ req);
    if (r != RESPONSE_OK)
        return r;
    if (response->grip_hold)
        return flush_head(req, 0); /* held: the body stays open (psgi_hold.c) */
    if (response->framing.chunked && response->framing.body_allowed) {
        struct iovec iov[2];
        int count = take_head(response, iov);
        iov[count].iov_base = (void *)LAST_CHUNK;
        iov[count++].iov_len = sizeof(LAST_CHUNK) - 1;
        return write_all(req, iov, count);
    }
    end_app_chunks(response);
    r = flush_head(req, 0);
    return r == RESPONSE_OK ? send_held(req) : r;
}

int serow_send_informational_response(pTHX_ struct serow_request *req, SV *status_sv, SV *headers,
                                SV **bad_header)
{
    struct serow_response *response = &req->response;
    struct header_list list;
    size_t bad_index = 0;
    int status = status_of(aTHX_ status_sv);
    if (status < 100 || status > 199 || status == 101)
        return RESPONSE_BAD_STATUS;
    if (response->active || req->response_started)
        return RESPONSE_TOO_LATE;
    if (req->head.minor_version == 0)
        return RESPONSE_OK; /* HTTP/1.0 clients do not expect 1xx responses */
    int r = collect_headers(aTHX_ headers, &list, bad_header);
    if (r != RESPONSE_OK)
        return r;
    /* The request id joins its headers.  (The app's part goes on after a
     * 1xx, and the log names the final response's headers: neither is noted
     * here.) */
    list.count = serow_request_accounting_add_id_header(req, list.items, list.count);
    struct response_facts facts = {.status = status, .minor_version = 1, .may_keep_alive = 1};
    struct response_framing framing;
    r = serow_plan_response(&facts, list.items, list.count, &framing, &bad_index);
    if (r != RESPONSE_OK) {
        if (bad_header)
            *bad_header = header_at_fault(aTHX_ &list, bad_index, r);
        free_header_list(&list);
        return r;
    }
    char *buffer = malloc(serow_response_head_size(list.items, list.count));
    if (buffer == NULL) {
        free_header_list(&list);
        return RESPONSE_CLIENT_GONE;
    }
    /* keep_alive=1 so that no Connection header is added to a 1xx */
    framing.keep_alive = 1;
    serow_socket_back_to_server(req);
    size_t n = serow_format_response_head(buffer, &facts, list.items, list.count, &framing);
    free_header_list(&list);
    struct iovec iov = {buffer, n};
    /* (the final response has not started: a 1xx does not count) */
    r = serow_worker_loop_write_interim(req, &iov, 1) == 0 ? RESPONSE_OK : RESPONSE_CLIENT_GONE;
    free(buffer);
    return r;
}
