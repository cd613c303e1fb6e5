/*
 * psgi_hold.c - a held response from the worker's side, and publishing
 * from Perl (psgi_hold.h, docs/holding.md).
 *
 * Owns: the hold message of the request being served (a per-process
 * buffer: one request at a time is answered here, and its message is sent
 * at its end), --grip's flag and the channel to the holder.  What a Grip-*
 * header means is grip_instruct.c's, the bytes sent holder_message.c's;
 * the head and body go out through psgi_response.c.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_hold.h"

#include "XSUB.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/grip_instruct.h"
#include "psgi/psgi_response.h"
#include "request/request.h"
#include "shared/holder_message.h"
#include "shared/holding_channel.h"
#include "worker/worker_loop.h"

int serow_grip_on;
static int holding_channel = -1;
static unsigned max_channels = SEROW_GRIP_MAX_CHANNELS; /* --hold-max-channels */
static size_t max_item = SIZE_MAX;                      /* --publish-max-item */

/* The hold message of the request being answered (its end sends it). */
static char *hold_message;
static size_t hold_message_len, hold_message_size;

void serow_psgi_hold_setup(int on, int channel, unsigned channels, size_t item)
{
    serow_grip_on = on;
    holding_channel = channel;
    serow_websocket_to_holder = on && channel >= 0;
    max_channels = channels && channels < SEROW_GRIP_MAX_CHANNELS ? channels : SEROW_GRIP_MAX_CHANNELS;
    max_item = item ? item : SIZE_MAX;
}

/* Whether a name of the app's header array is Grip-*: cheap, before any
 * parsing (most responses have none). */
static int has_grip_header(pTHX_ AV *av)
{
    SSize_t n = av_len(av) + 1;
    for (SSize_t i = 0; i + 1 < n; i += 2) {
        SV **name = av_fetch(av, i, 0);
        if (name && SvOK(*name)) {
            STRLEN len;
            const char *p = SvPV(*name, len);
            if (serow_grip_is_header(p, len))
                return 1;
        }
    }
    return 0;
}

/* The app's headers as the parser's, and a copy of the array without the
 * Grip-* ones (without Content-Length and Transfer-Encoding too, for a
 * stream: its framing is the server's).  -1 on an undefined name or value
 * (the ordinary path reports it). */
static int split_headers(pTHX_ AV *av, struct http_header **out, size_t *count, AV *kept)
{
    SSize_t n = av_len(av) + 1;
    struct http_header *h = calloc((size_t)(n / 2) + 1, sizeof(*h));
    if (h == NULL)
        return -1;
    size_t k = 0;
    for (SSize_t i = 0; i + 1 < n; i += 2) {
        SV **name = av_fetch(av, i, 0), **value = av_fetch(av, i + 1, 0);
        if (!name || !value || !SvOK(*name) || !SvOK(*value)) {
            free(h);
            return -1;
        }
        STRLEN nl, vl;
        h[k].name = SvPV(*name, nl);
        h[k].value = SvPV(*value, vl);
        h[k].name_len = nl;
        h[k].value_len = vl;
        if (!serow_grip_is_header(h[k].name, nl)) {
            av_push(kept, newSVsv(*name));
            av_push(kept, newSVsv(*value));
        }
        k++;
    }
    *out = h;
    *count = k;
    return 0;
}

static AV *without(pTHX_ AV *headers, const char *a, const char *b)
{
    AV *kept = (AV *)sv_2mortal((SV *)newAV());
    SSize_t n = av_len(headers) + 1;
    for (SSize_t i = 0; i + 1 < n; i += 2) {
        STRLEN len;
        const char *name = SvPV(*av_fetch(headers, i, 0), len);
        if ((strlen(a) == len && strncasecmp(name, a, len) == 0) ||
            (strlen(b) == len && strncasecmp(name, b, len) == 0))
            continue;
        av_push(kept, newSVsv(*av_fetch(headers, i, 0)));
        av_push(kept, newSVsv(*av_fetch(headers, i + 1, 0)));
    }
    return kept;
}

static int keep_message(const struct serow_grip_instruct *instruct, const struct serow_hold_extra *extra)
{
    size_t need = serow_hold_encode(instruct, extra, NULL, 0);
    if (need == 0 || need + sizeof(struct serow_holding_head) > SEROW_HOLDING_MAX_MESSAGE)
        return -1;
    if (need > hold_message_size) {
        char *grown = realloc(hold_message, need);
        if (grown == NULL)
            return -1;
        hold_message = grown;
        hold_message_size = need;
    }
    hold_message_len = serow_hold_encode(instruct, extra, hold_message, hold_message_size);
    return hold_message_len ? 0 : -1;
}

/* The body parts' bytes, joined (a response hold's answer at its timeout). */
static SV *joined_body(pTHX_ AV *body)
{
    SV *all = sv_2mortal(newSVpvs(""));
    SSize_t n = av_len(body) + 1;
    for (SSize_t i = 0; i < n; i++) {
        SV **part = av_fetch(body, i, 0);
        if (part && SvOK(*part)) {
            STRLEN len;
            const char *p = serow_psgi_bytes(aTHX_ *part, &len);
            if (p == NULL)
                return NULL;
            sv_catpvn(all, p, len);
        }
    }
    return all;
}

static int hold_stream(pTHX_ struct serow_request *req, struct serow_grip_instruct *instruct,
                       SV *status, AV *kept, AV *body, SV **bad_header)
{
    AV *headers = without(aTHX_ kept, "Content-Length", "Transfer-Encoding");
    int r = serow_start_psgi_response(aTHX_ req, status, sv_2mortal(newRV_inc((SV *)headers)), -1,
                                      bad_header);
    if (r != RESPONSE_OK)
        return r;
    SSize_t n = av_len(body) + 1;
    for (SSize_t i = 0; i < n && r == RESPONSE_OK; i++) {
        SV **part = av_fetch(body, i, 0);
        if (!part || !SvOK(*part))
            continue;
        STRLEN len;
        const char *p = serow_psgi_bytes(aTHX_ *part, &len);
        if (p == NULL)
            return RESPONSE_WIDE_CHARACTER;
        r = serow_write_psgi_body(aTHX_ req, p, len);
    }
    if (r == RESPONSE_OK)
        r = serow_flush_psgi_head(aTHX_ req);
    if (r != RESPONSE_OK)
        return r; /* the client left: nothing to hold */
    if (!req->response.framing.body_allowed)
        return RESPONSE_OK; /* HEAD, 204, 304: no body to stream, the response is whole */
    struct serow_hold_extra extra = {.chunked = (uint8_t)req->response.framing.chunked};
    if (keep_message(instruct, &extra) != 0) {
        *bad_header = newSVpvs("the hold does not fit a message to the holder");
        return RESPONSE_BAD_GRIP;
    }
    req->response.grip_hold = 1;
    req->response.grip_keep_alive = 0; /* a stream ends with its connection */
    return RESPONSE_OK;
}

static int hold_response(pTHX_ struct serow_request *req, struct serow_grip_instruct *instruct,
                         SV *status, AV *kept, AV *body, SV **bad_header)
{
    SV *all = joined_body(aTHX_ body);
    if (all == NULL)
        return RESPONSE_WIDE_CHARACTER;
    if (instruct->status)
        status = sv_2mortal(newSVuv(instruct->status));
    AV *headers = without(aTHX_ kept, "Content-Length", "Transfer-Encoding");
    /* The head is planned and formatted as if it went now, then kept as
     * the answer at the timeout with the body. */
    int r = serow_start_psgi_response(aTHX_ req, status, sv_2mortal(newRV_inc((SV *)headers)),
                                      (int64_t)SvCUR(all), bad_header);
    if (r != RESPONSE_OK)
        return r;
    struct serow_response *response = &req->response;
    SV *answer = sv_2mortal(newSVpvn(response->head, response->head_len));
    if (response->framing.body_allowed)
        sv_catsv(answer, all);
    response->head_len = 0; /* nothing goes now */
    response->body_given = SvCUR(all); /* (none of it sent: the log says so) */
    struct serow_hold_extra extra = {.chunked = 0};
    extra.timeout_response.p = SvPVX(answer);
    extra.timeout_response.len = (uint32_t)SvCUR(answer);
    if (keep_message(instruct, &extra) != 0) {
        *bad_header = newSVpvs("the hold (its answer at the timeout) does not fit a message to the holder");
        return RESPONSE_BAD_GRIP;
    }
    response->grip_hold = 1;
    response->grip_keep_alive = response->framing.keep_alive;
    return RESPONSE_OK;
}

/* Reads the app's Grip-* headers into instruct, with *kept the headers
 * without them.  RESPONSE_NOT_HELD when there is none; RESPONSE_BAD_GRIP
 * (with *bad_header) when the instruction is refused or cannot be held;
 * else RESPONSE_OK. */
static int read_instruction(pTHX_ SV *headers, struct serow_grip_instruct *instruct, AV **kept,
                            SV **bad_header)
{
    SvGETMAGIC(headers);
    if (!SvROK(headers) || SvTYPE(SvRV(headers)) != SVt_PVAV || SvRMAGICAL(SvRV(headers)) ||
        !has_grip_header(aTHX_ (AV *)SvRV(headers)))
        return RESPONSE_NOT_HELD;
    *kept = (AV *)sv_2mortal((SV *)newAV());
    struct http_header *parsed;
    size_t count;
    if (split_headers(aTHX_ (AV *)SvRV(headers), &parsed, &count, *kept) != 0)
        return RESPONSE_NOT_HELD; /* (the ordinary path says what is wrong) */
    int g = serow_grip_parse(parsed, count, instruct);
    free(parsed);
    if (g == SEROW_GRIP_ERROR) {
        *bad_header = newSVpv(instruct->error, 0);
        return RESPONSE_BAD_GRIP;
    }
    if (instruct->hold != SEROW_GRIP_NO_HOLD && holding_channel < 0) {
        *bad_header = newSVpvs("no connection holder to hold the connection");
        return RESPONSE_BAD_GRIP;
    }
    /* (the holder's channel store has the same limit: it would refuse) */
    if (instruct->num_channels > max_channels) {
        *bad_header = newSVpvf("Grip-Channel: %u channels, more than --hold-max-channels %u",
                               (unsigned)instruct->num_channels, max_channels);
        return RESPONSE_BAD_GRIP;
    }
    return RESPONSE_OK;
}

int serow_psgi_hold_response(pTHX_ struct serow_request *req, SV *status, SV *headers, AV *body,
                             SV **bad_header)
{
    static struct serow_grip_instruct instruct; /* (22 KiB: not on the stack) */
    AV *kept;
    int r = read_instruction(aTHX_ headers, &instruct, &kept, bad_header);
    if (r != RESPONSE_OK)
        return r;
    if (instruct.hold == SEROW_GRIP_NO_HOLD) /* Grip-* without a hold: stripped, sent */
        return serow_send_psgi_response(aTHX_ req, status, sv_2mortal(newRV_inc((SV *)kept)), body,
                                        bad_header);
    if (instruct.hold == SEROW_GRIP_HOLD_STREAM)
        return hold_stream(aTHX_ req, &instruct, status, kept, body, bad_header);
    return hold_response(aTHX_ req, &instruct, status, kept, body, bad_header);
}

int serow_psgi_hold_start(pTHX_ struct serow_request *req, SV *status, SV *headers, SV **bad_header)
{
    static struct serow_grip_instruct instruct;
    AV *kept;
    int r = read_instruction(aTHX_ headers, &instruct, &kept, bad_header);
    if (r != RESPONSE_OK)
        return r;
    if (instruct.hold == SEROW_GRIP_HOLD_RESPONSE) {
        /* its answer at the timeout is a whole response: the app gives it whole */
        *bad_header = newSVpvs("Grip-Hold: response needs the whole response ([status, headers, "
                               "body]), not a streaming writer");
        return RESPONSE_BAD_GRIP;
    }
    AV *open_ended = instruct.hold == SEROW_GRIP_HOLD_STREAM
                         ? without(aTHX_ kept, "Content-Length", "Transfer-Encoding")
                         : kept;
    r = serow_start_psgi_response(aTHX_ req, status, sv_2mortal(newRV_inc((SV *)open_ended)), -1,
                                  bad_header);
    if (r != RESPONSE_OK || instruct.hold == SEROW_GRIP_NO_HOLD || !req->response.framing.body_allowed)
        return r; /* (HEAD, 204, 304: no body to stream, an ordinary response) */
    struct serow_hold_extra extra = {.chunked = (uint8_t)req->response.framing.chunked};
    if (keep_message(&instruct, &extra) != 0) {
        *bad_header = newSVpvs("the hold does not fit a message to the holder");
        return RESPONSE_BAD_GRIP;
    }
    /* The writer's bytes go out as they come; its close hands the connection
     * over instead of ending the body (serow_finish_psgi_body). */
    req->response.grip_hold = 1;
    req->response.grip_keep_alive = 0;
    return RESPONSE_OK;
}

void serow_psgi_hold_hand_over(struct serow_request *req)
{
    serow_worker_loop_hold_request(req, hold_message, hold_message_len, req->response.grip_keep_alive);
}

/* ---- Serow::Holding::publish ---------------------------------------------- */

static const char *bytes_of(pTHX_ HV *hv, const char *key, struct serow_bytes *out)
{
    SV **v = hv_fetch(hv, key, (I32)strlen(key), 0);
    out->p = NULL;
    out->len = 0;
    if (v == NULL || !SvOK(*v))
        return NULL;
    STRLEN len;
    const char *p = serow_psgi_bytes(aTHX_ *v, &len);
    if (p == NULL)
        return "wide character (publish bytes: encode them)";
    out->p = p;
    out->len = (uint32_t)len;
    return NULL;
}

static HV *hash_of(pTHX_ HV *hv, const char *key)
{
    SV **v = hv_fetch(hv, key, (I32)strlen(key), 0);
    return v && SvROK(*v) && SvTYPE(SvRV(*v)) == SVt_PVHV ? (HV *)SvRV(*v) : NULL;
}

static const char *item_from_hash(pTHX_ HV *hv, struct serow_publish_item *item)
{
    const char *e;
    memset(item, 0, sizeof(*item));
    if ((e = bytes_of(aTHX_ hv, "channel", &item->channel)) || (e = bytes_of(aTHX_ hv, "id", &item->id)) ||
        (e = bytes_of(aTHX_ hv, "prev_id", &item->prev_id)))
        return e;
    if (item->channel.len == 0)
        return "no channel";
    HV *f;
    if ((f = hash_of(aTHX_ hv, "http_stream"))) {
        item->formats |= SEROW_FORMAT_HTTP_STREAM;
        SV **close = hv_fetchs(f, "close", 0);
        if (close && SvTRUE(*close))
            item->stream.action = SEROW_ACTION_CLOSE;
        else if ((e = bytes_of(aTHX_ f, "content", &item->stream.content)))
            return e;
    }
    if ((f = hash_of(aTHX_ hv, "http_response"))) {
        item->formats |= SEROW_FORMAT_HTTP_RESPONSE;
        SV **code = hv_fetchs(f, "code", 0);
        item->response.code = code && SvOK(*code) ? (uint16_t)SvUV(*code) : 200;
        if ((e = bytes_of(aTHX_ f, "reason", &item->response.reason)) ||
            (e = bytes_of(aTHX_ f, "body", &item->response.body)))
            return e;
        SV **headers = hv_fetchs(f, "headers", 0);
        if (headers && SvROK(*headers) && SvTYPE(SvRV(*headers)) == SVt_PVAV) {
            AV *list = (AV *)SvRV(*headers);
            SSize_t n = av_len(list) + 1;
            if (n > SEROW_PUBLISH_MAX_HEADERS)
                return "too many http_response headers";
            for (SSize_t i = 0; i < n; i++) {
                SV **pair = av_fetch(list, i, 0);
                if (!pair || !SvROK(*pair) || SvTYPE(SvRV(*pair)) != SVt_PVAV)
                    return "http_response headers: not [[name, value], ...]";
                AV *nv = (AV *)SvRV(*pair);
                SV **name = av_fetch(nv, 0, 0), **value = av_fetch(nv, 1, 0);
                if (!name || !value)
                    return "http_response headers: not [[name, value], ...]";
                STRLEN nl, vl;
                item->response.header_names[i].p = SvPV(*name, nl);
                item->response.header_names[i].len = (uint32_t)nl;
                item->response.header_values[i].p = SvPV(*value, vl);
                item->response.header_values[i].len = (uint32_t)vl;
            }
            item->response.num_headers = (uint16_t)n;
        }
    }
    if ((f = hash_of(aTHX_ hv, "ws_message"))) {
        item->formats |= SEROW_FORMAT_WS_MESSAGE;
        SV **type = hv_fetchs(f, "type", 0);
        item->ws.type = type && SvOK(*type) && strEQ(SvPV_nolen(*type), "binary") ? SEROW_WS_BINARY
                                                                                  : SEROW_WS_TEXT;
        if ((e = bytes_of(aTHX_ f, "content", &item->ws.content)))
            return e;
    }
    return NULL;
}

const char *serow_psgi_publish(pTHX_ HV *hv)
{
    static struct serow_publish_item item; /* (1 KiB of header slots) */
    const char *e = item_from_hash(aTHX_ hv, &item);
    if (e != NULL)
        return e;
    if (item.formats == 0)
        return "no format (http_stream, http_response or ws_message)";
    if (holding_channel < 0)
        return "no connection holder here (publish from a worker of a server with --grip)";
    /* Said here: past this the holder's channel store would refuse it,
     * after the app was told it was published. */
    size_t size = serow_publish_item_bytes(&item);
    if (size > max_item)
        return SvPVX(sv_2mortal(newSVpvf("the item is %zu bytes, more than --publish-max-item %zu",
                                         size, max_item)));
    size_t need = serow_publish_encode(&item, NULL, 0);
    if (need == 0)
        return "the item breaks a rule of GRIP's (a channel name, an id, a header)";
    char *message = malloc(need);
    if (message == NULL)
        return "out of memory";
    serow_publish_encode(&item, message, need);
    struct serow_holding_head head;
    memset(&head, 0, sizeof(head));
    head.tag = SEROW_HOLDING_TAG;
    int r = serow_holding_send(holding_channel, &head, -1, message, need, NULL, 1000);
    int saved = errno;
    free(message);
    if (r != 0)
        return saved == EMSGSIZE ? "the item is too large" : "the connection holder did not take it";
    return NULL;
}

const char *serow_psgi_item_bytes(pTHX_ HV *hv, size_t *size)
{
    static struct serow_publish_item item;
    const char *e = item_from_hash(aTHX_ hv, &item);
    if (e != NULL)
        return e;
    *size = serow_publish_item_bytes(&item);
    return NULL;
}
