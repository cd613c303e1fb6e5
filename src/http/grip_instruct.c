/*
 * grip_instruct.c - the Grip-* headers of a response read into one struct
 * (grip_instruct.h).  Owns the grammar of those headers and the rule for a
 * channel name and an item id; no I/O, no allocation, no server state.
 */
#include "http/grip_instruct.h"

#include <string.h>

/* Parameters of one list element beyond which the element is refused:
 * Grip-Channel's are prev-id and up to five filters. */
#define MAX_PARAMS 8

struct param {
    const char *name;
    size_t name_len;
    const char *value; /* inside the quotes when quoted; NULL when no '=' */
    size_t value_len;
    int quoted;
};

/* One element of a comma-separated header value: its first token, then
 * its `; name=value` parameters. */
struct element {
    struct param first; /* name only, unless the first token is itself name=value */
    size_t num_params;
    struct param params[MAX_PARAMS];
};

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int name_is(const struct http_header *h, const char *name)
{
    size_t len = strlen(name);
    if (h->name_len != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (lower((unsigned char)h->name[i]) != lower((unsigned char)name[i]))
            return 0;
    return 1;
}

static int token_is(const char *p, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(p, word, len) == 0;
}

static void trim(const char **p, size_t *len)
{
    while (*len && (**p == ' ' || **p == '\t'))
        (*p)++, (*len)--;
    while (*len && ((*p)[*len - 1] == ' ' || (*p)[*len - 1] == '\t'))
        (*len)--;
}

int serow_grip_is_header(const char *name, size_t len)
{
    static const char prefix[] = "grip-";
    if (len <= sizeof prefix - 1)
        return 0;
    for (size_t i = 0; i < sizeof prefix - 1; i++)
        if (lower((unsigned char)name[i]) != prefix[i])
            return 0;
    return 1;
}

int serow_grip_channel_name_ok(const char *name, size_t len)
{
    if (len == 0 || len > SEROW_GRIP_MAX_NAME)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x21 || c > 0x7e || c == '"' || c == ',' || c == ';' || c == '=' || c == '\\')
            return 0;
    }
    return 1;
}

int serow_grip_id_ok(const char *id, size_t len)
{
    if (len == 0 || len > SEROW_GRIP_MAX_ID)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

/* The end of the list element starting at p: the next comma outside a
 * quoted string, or end.  NULL for a quote left open (or a backslash with
 * nothing after it inside one). */
static const char *element_end(const char *p, const char *end)
{
    int quoted = 0;
    for (; p < end; p++) {
        if (quoted) {
            if (*p == '\\') {
                if (++p == end)
                    return NULL;
            } else if (*p == '"') {
                quoted = 0;
            }
        } else if (*p == '"') {
            quoted = 1;
        } else if (*p == ',') {
            return p;
        }
    }
    return quoted ? NULL : end;
}

/* A `name[=value]` parameter from p, up to the next ';' outside quotes.
 * Returns where the next one starts, or NULL when malformed. */
static const char *read_param(const char *p, const char *end, struct param *param)
{
    const char *s = p;
    while (p < end && *p != '=' && *p != ';')
        p++;
    param->name = s;
    param->name_len = (size_t)(p - s);
    trim(&param->name, &param->name_len);
    param->value = NULL;
    param->value_len = 0;
    param->quoted = 0;
    if (p == end || *p == ';')
        return p < end ? p + 1 : p;
    p++; /* '=' */
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p < end && *p == '"') {
        const char *v = ++p;
        while (p < end && *p != '"') {
            if (*p == '\\' && ++p == end)
                return NULL;
            p++;
        }
        if (p == end)
            return NULL;
        param->value = v;
        param->value_len = (size_t)(p - v);
        param->quoted = 1;
        p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p < end && *p != ';')
            return NULL; /* bytes after the closing quote */
        return p < end ? p + 1 : p;
    }
    const char *v = p;
    while (p < end && *p != ';')
        p++;
    param->value = v;
    param->value_len = (size_t)(p - v);
    trim(&param->value, &param->value_len);
    return p < end ? p + 1 : p;
}

/* One list element.  With first_is_param the first token is read as a
 * parameter (Grip-Set-Meta's `key=value`); otherwise it is everything up
 * to the first ';'.  0, or -1 when malformed or with too many parameters. */
static int read_element(const char *p, const char *end, int first_is_param, struct element *el)
{
    memset(el, 0, sizeof *el);
    if (first_is_param) {
        p = read_param(p, end, &el->first);
        if (p == NULL)
            return -1;
    } else {
        const char *s = p;
        while (p < end && *p != ';')
            p++;
        el->first.name = s;
        el->first.name_len = (size_t)(p - s);
        trim(&el->first.name, &el->first.name_len);
        if (p < end)
            p++;
    }
    while (p < end) {
        const char *q = p;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if (q == end)
            break;
        if (el->num_params == MAX_PARAMS)
            return -1;
        p = read_param(p, end, &el->params[el->num_params]);
        if (p == NULL)
            return -1;
        if (el->params[el->num_params].name_len == 0)
            return -1;
        el->num_params++;
    }
    return 0;
}

static const struct param *find_param(const struct element *el, const char *name)
{
    for (size_t i = 0; i < el->num_params; i++)
        if (token_is(el->params[i].name, el->params[i].name_len, name))
            return &el->params[i];
    return NULL;
}

/* Room for len more bytes in the instruction, or NULL. */
static char *reserve(struct serow_grip_instruct *in, size_t len, struct serow_grip_str *s)
{
    if (len > (size_t)(SEROW_GRIP_BYTES - in->bytes_used))
        return NULL;
    s->off = in->bytes_used;
    s->len = (uint16_t)len;
    in->bytes_used += (uint16_t)len;
    return in->bytes + s->off;
}

/* Copies a parameter's value (a quoted string's escapes removed). */
static int copy_value(struct serow_grip_instruct *in, const char *v, size_t len, int quoted,
                      struct serow_grip_str *s)
{
    char *out = reserve(in, len, s);
    if (out == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (quoted && v[i] == '\\')
            i++; /* read_param saw that a byte follows */
        out[n++] = v[i];
    }
    in->bytes_used -= (uint16_t)(len - n);
    s->len = (uint16_t)n;
    return 0;
}

static int copy_param(struct serow_grip_instruct *in, const struct param *p, struct serow_grip_str *s)
{
    return copy_value(in, p->value, p->value_len, p->quoted, s);
}

/* A number of seconds: digits only, at most SEROW_GRIP_MAX_SECONDS. */
static int read_seconds(const char *p, size_t len, uint32_t *out)
{
    uint32_t n = 0;
    if (len == 0 || len > 9)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        n = n * 10 + (uint32_t)(p[i] - '0');
    }
    if (n > SEROW_GRIP_MAX_SECONDS)
        return -1;
    *out = n;
    return 0;
}

static int hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Grip-Keep-Alive's format=cstring: \\, \r, \n and \xHH.  Another escaped
 * byte is dropped with its backslash, as Pushpin does. */
static int decode_cstring(const char *v, size_t len, char *out, size_t *out_len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] != '\\') {
            out[n++] = v[i];
            continue;
        }
        if (++i == len)
            return -1;
        if (v[i] == '\\')
            out[n++] = '\\';
        else if (v[i] == 'r')
            out[n++] = '\r';
        else if (v[i] == 'n')
            out[n++] = '\n';
        else if (v[i] == 'x') {
            if (len - i < 3)
                return -1;
            int hi = hex((unsigned char)v[i + 1]), lo = hex((unsigned char)v[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            out[n++] = (char)(hi << 4 | lo);
            i += 2;
        }
    }
    *out_len = n;
    return 0;
}

static int base64_value(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Standard base64, padding optional; any other byte refused. */
static int decode_base64(const char *v, size_t len, char *out, size_t *out_len)
{
    while (len && v[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int d = base64_value((unsigned char)v[i]);
        if (d < 0)
            return -1;
        acc = acc << 6 | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (char)(acc >> bits & 0xff);
        }
    }
    *out_len = n;
    return 0;
}

static int fail(struct serow_grip_instruct *in, const char *why)
{
    in->error = why;
    return SEROW_GRIP_ERROR;
}

static int read_channels(struct serow_grip_instruct *in, const char *p, const char *end)
{
    while (p < end) {
        const char *e = element_end(p, end);
        if (e == NULL)
            return fail(in, "Grip-Channel has an unterminated quoted string");
        struct element el;
        if (read_element(p, e, 0, &el) < 0)
            return fail(in, "Grip-Channel is malformed");
        p = e < end ? e + 1 : e;
        if (el.first.name_len == 0 && el.num_params == 0)
            continue; /* an empty list element, as in "a,,b" */
        if (!serow_grip_channel_name_ok(el.first.name, el.first.name_len))
            return fail(in, "Grip-Channel names a channel with an invalid name");
        if (in->num_channels == SEROW_GRIP_MAX_CHANNELS)
            return fail(in, "Grip-Channel names too many channels");
        struct serow_grip_channel *c = &in->channels[in->num_channels];
        memset(c, 0, sizeof *c);
        if (copy_value(in, el.first.name, el.first.name_len, 0, &c->name) < 0)
            return fail(in, "Grip-* headers too large");
        for (size_t i = 0; i < el.num_params; i++) {
            const struct param *pa = &el.params[i];
            if (token_is(pa->name, pa->name_len, "prev-id")) {
                if (pa->value == NULL || c->has_prev_id)
                    return fail(in, "Grip-Channel has an invalid prev-id");
                if (copy_param(in, pa, &c->prev_id) < 0)
                    return fail(in, "Grip-* headers too large");
                if (!serow_grip_id_ok(serow_grip_str_ptr(in, c->prev_id), c->prev_id.len))
                    return fail(in, "Grip-Channel has an invalid prev-id");
                c->has_prev_id = 1;
            } else if (token_is(pa->name, pa->name_len, "filter")) {
                if (pa->value == NULL || pa->value_len == 0)
                    return fail(in, "Grip-Channel has an empty filter");
                if (c->num_filters == SEROW_GRIP_MAX_FILTERS)
                    return fail(in, "Grip-Channel has too many filters for one channel");
                if (copy_param(in, pa, &c->filters[c->num_filters]) < 0)
                    return fail(in, "Grip-* headers too large");
                c->num_filters++;
                in->saw |= SEROW_GRIP_SAW_FILTERS;
            }
            /* another parameter is ignored, as Pushpin ignores it */
        }
        in->num_channels++;
    }
    return SEROW_GRIP_OK;
}

static int read_keep_alive(struct serow_grip_instruct *in, const char *p, const char *end)
{
    struct element el;
    if (read_element(p, end, 0, &el) < 0)
        return fail(in, "Grip-Keep-Alive is malformed");
    if (el.first.name_len == 0)
        return fail(in, "Grip-Keep-Alive cannot be empty");
    const struct param *mode = find_param(&el, "mode");
    if (mode == NULL || mode->value_len == 0 || token_is(mode->value, mode->value_len, "idle"))
        in->keep_alive_mode = SEROW_GRIP_KEEP_ALIVE_IDLE;
    else if (token_is(mode->value, mode->value_len, "interval"))
        in->keep_alive_mode = SEROW_GRIP_KEEP_ALIVE_INTERVAL;
    else
        return fail(in, "Grip-Keep-Alive has an unknown mode");

    in->keep_alive_timeout = SEROW_GRIP_DEFAULT_KEEP_ALIVE_TIMEOUT;
    const struct param *timeout = find_param(&el, "timeout");
    if (timeout != NULL && read_seconds(timeout->value, timeout->value_len, &in->keep_alive_timeout) < 0)
        return fail(in, "Grip-Keep-Alive has an invalid timeout");
    if (in->keep_alive_timeout < SEROW_GRIP_MIN_KEEP_ALIVE_TIMEOUT)
        in->keep_alive_timeout = SEROW_GRIP_MIN_KEEP_ALIVE_TIMEOUT;

    /* Each format decodes to at most as many bytes as it reads. */
    const char *v = el.first.name;
    size_t len = el.first.name_len;
    if (len > SEROW_GRIP_MAX_KEEP_ALIVE * 4)
        return fail(in, "Grip-Keep-Alive data too large");
    char *out = reserve(in, len, &in->keep_alive_data);
    if (out == NULL)
        return fail(in, "Grip-* headers too large");
    size_t n = len;
    const struct param *format = find_param(&el, "format");
    if (format == NULL || format->value_len == 0 || token_is(format->value, format->value_len, "raw")) {
        memcpy(out, v, len);
    } else if (token_is(format->value, format->value_len, "cstring")) {
        if (decode_cstring(v, len, out, &n) < 0)
            return fail(in, "Grip-Keep-Alive is not a valid cstring");
    } else if (token_is(format->value, format->value_len, "base64")) {
        if (decode_base64(v, len, out, &n) < 0)
            return fail(in, "Grip-Keep-Alive is not valid base64");
    } else {
        return fail(in, "Grip-Keep-Alive has an unknown format");
    }
    if (n == 0 || n > SEROW_GRIP_MAX_KEEP_ALIVE)
        return fail(in, n ? "Grip-Keep-Alive data too large" : "Grip-Keep-Alive cannot be empty");
    in->bytes_used -= (uint16_t)(len - n);
    in->keep_alive_data.len = (uint16_t)n;
    return SEROW_GRIP_OK;
}

/* "CODE" or "CODE REASON", the code three digits. */
static int read_status(struct serow_grip_instruct *in, const char *p, size_t len)
{
    if (len < 3 || (len > 3 && p[3] != ' '))
        return fail(in, "Grip-Status has an invalid status code");
    for (int i = 0; i < 3; i++)
        if (p[i] < '0' || p[i] > '9')
            return fail(in, "Grip-Status has an invalid status code");
    in->status = (uint16_t)((p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0'));
    if (in->status < 100)
        return fail(in, "Grip-Status has an invalid status code");
    const char *r = len > 3 ? p + 4 : p + len;
    size_t rlen = len > 3 ? len - 4 : 0;
    for (size_t i = 0; i < rlen; i++) {
        unsigned char c = (unsigned char)r[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return fail(in, "Grip-Status has an invalid reason");
    }
    if (copy_value(in, r, rlen, 0, &in->reason) < 0)
        return fail(in, "Grip-* headers too large");
    return SEROW_GRIP_OK;
}

static int read_meta(struct serow_grip_instruct *in, const char *p, const char *end)
{
    while (p < end) {
        const char *e = element_end(p, end);
        struct element el;
        if (e == NULL || read_element(p, e, 1, &el) < 0)
            return fail(in, "Grip-Set-Meta is malformed");
        p = e < end ? e + 1 : e;
        if (el.first.name_len == 0)
            return fail(in, "Grip-Set-Meta cannot be empty");
        if (in->num_meta == SEROW_GRIP_MAX_META)
            return fail(in, "Grip-Set-Meta has too many keys");
        if (copy_value(in, el.first.name, el.first.name_len, 0, &in->meta_keys[in->num_meta]) < 0
            || copy_param(in, &el.first, &in->meta_values[in->num_meta]) < 0)
            return fail(in, "Grip-* headers too large");
        in->num_meta++;
    }
    in->saw |= SEROW_GRIP_SAW_SET_META;
    return SEROW_GRIP_OK;
}

static int read_expose(struct serow_grip_instruct *in, const char *p, const char *end)
{
    while (p < end) {
        const char *e = element_end(p, end);
        if (e == NULL)
            return fail(in, "Grip-Expose-Headers is malformed");
        const char *name = p;
        size_t len = (size_t)(e - p);
        trim(&name, &len);
        p = e < end ? e + 1 : e;
        if (len == 0)
            continue;
        if (in->num_expose == SEROW_GRIP_MAX_EXPOSE)
            return fail(in, "Grip-Expose-Headers names too many headers");
        if (copy_value(in, name, len, 0, &in->expose[in->num_expose]) < 0)
            return fail(in, "Grip-* headers too large");
        in->num_expose++;
    }
    in->saw |= SEROW_GRIP_SAW_EXPOSE;
    return SEROW_GRIP_OK;
}

/* Grip-Link: <URI>; rel=next[; timeout=N] or <URI>; rel=gone.  An element
 * without parameters is ignored, as Pushpin ignores it. */
static int read_link(struct serow_grip_instruct *in, const char *p, const char *end)
{
    while (p < end) {
        const char *e = element_end(p, end);
        struct element el;
        if (e == NULL || read_element(p, e, 0, &el) < 0)
            return fail(in, "Grip-Link is malformed");
        p = e < end ? e + 1 : e;
        if (el.num_params == 0)
            continue;
        const char *uri = el.first.name;
        size_t len = el.first.name_len;
        if (len <= 2 || uri[0] != '<' || uri[len - 1] != '>')
            return fail(in, "Grip-Link is malformed");
        const struct param *rel = find_param(&el, "rel");
        struct serow_grip_str *target = NULL;
        if (rel != NULL && token_is(rel->value, rel->value_len, "next")) {
            target = &in->next_link;
            in->next_link_timeout = SEROW_GRIP_DEFAULT_LINK_TIMEOUT;
            const struct param *t = find_param(&el, "timeout");
            if (t != NULL && read_seconds(t->value, t->value_len, &in->next_link_timeout) < 0)
                return fail(in, "Grip-Link has an invalid timeout");
        } else if (rel != NULL && token_is(rel->value, rel->value_len, "gone")) {
            target = &in->gone_link;
        }
        if (target != NULL && copy_value(in, uri + 1, len - 2, 0, target) < 0)
            return fail(in, "Grip-* headers too large");
        in->saw |= SEROW_GRIP_SAW_LINK;
    }
    return SEROW_GRIP_OK;
}

int serow_grip_parse(const struct http_header *headers, size_t num_headers,
                     struct serow_grip_instruct *in)
{
    /* Everything but the bytes, which are written before they are read. */
    memset(in, 0, offsetof(struct serow_grip_instruct, bytes));
    int seen = 0, hold_seen = 0, timeout_seen = 0, keep_alive_seen = 0, status_seen = 0;

    for (size_t i = 0; i < num_headers; i++) {
        const struct http_header *h = &headers[i];
        if (!serow_grip_is_header(h->name, h->name_len))
            continue;
        seen = 1;
        const char *v = h->value, *end = h->value + h->value_len;
        size_t len = h->value_len;
        trim(&v, &len);
        end = v + len;
        int r = SEROW_GRIP_OK;
        if (name_is(h, "Grip-Hold")) {
            if (hold_seen++)
                continue;
            if (token_is(v, len, "response"))
                in->hold = SEROW_GRIP_HOLD_RESPONSE;
            else if (token_is(v, len, "stream"))
                in->hold = SEROW_GRIP_HOLD_STREAM;
            else
                return fail(in, "Grip-Hold must be either 'response' or 'stream'");
        } else if (name_is(h, "Grip-Channel")) {
            r = read_channels(in, v, end);
        } else if (name_is(h, "Grip-Timeout")) {
            if (timeout_seen++)
                continue;
            if (read_seconds(v, len, &in->timeout) < 0)
                return fail(in, "Grip-Timeout is not a valid number of seconds");
            in->timeout_given = 1;
        } else if (name_is(h, "Grip-Keep-Alive")) {
            if (keep_alive_seen++)
                continue;
            r = read_keep_alive(in, v, end);
        } else if (name_is(h, "Grip-Status")) {
            if (status_seen++)
                continue;
            r = read_status(in, v, len);
        } else if (name_is(h, "Grip-Set-Meta")) {
            r = read_meta(in, v, end);
        } else if (name_is(h, "Grip-Expose-Headers")) {
            r = read_expose(in, v, end);
        } else if (name_is(h, "Grip-Link")) {
            r = read_link(in, v, end);
        }
        /* Another Grip-* header (Grip-Sig is a request header, Grip-Last
         * and Grip-Feature are Pushpin's to the origin) is stripped and
         * otherwise ignored. */
        if (r != SEROW_GRIP_OK)
            return r;
    }
    if (!seen)
        return SEROW_GRIP_NONE;
    if (in->hold != SEROW_GRIP_NO_HOLD && in->num_channels == 0)
        return fail(in, "Grip-Hold needs at least one Grip-Channel");
    if (!in->timeout_given)
        in->timeout = SEROW_GRIP_DEFAULT_TIMEOUT;
    if (in->timeout < SEROW_GRIP_MIN_TIMEOUT)
        in->timeout = SEROW_GRIP_MIN_TIMEOUT;
    return SEROW_GRIP_OK;
}
