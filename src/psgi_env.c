/*
 * psgi_env.c - the PSGI env of a request, built in C from the parsed head.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi_env.h"

#include "XSUB.h"

/* Keys set on every request, made once as shared strings with their hash, so
 * that storing them neither hashes the key nor looks it up in Perl's table
 * of shared keys by content. */
enum env_key {
    KEY_REQUEST_METHOD,
    KEY_PATH_INFO,
    KEY_REQUEST_URI,
    KEY_QUERY_STRING,
    KEY_SERVER_PROTOCOL,
    KEY_SERVER_NAME,
    KEY_SERVER_PORT,
    KEY_REMOTE_ADDR,
    KEY_REMOTE_PORT,
    KEY_CONTENT_LENGTH,
    KEY_CONTENT_TYPE,
    KEY_HTTP_HOST,
    KEY_PSGIX_IO,
    KEY_PSGIX_CLEANUP_HANDLERS,
    KEY_PSGI_INPUT,
    KEY_COUNT
};

static const char *const key_names[KEY_COUNT] = {
    "REQUEST_METHOD", "PATH_INFO",   "REQUEST_URI", "QUERY_STRING",   "SERVER_PROTOCOL",
    "SERVER_NAME",    "SERVER_PORT", "REMOTE_ADDR", "REMOTE_PORT",    "CONTENT_LENGTH",
    "CONTENT_TYPE",   "HTTP_HOST",   "psgix.io",    "psgix.cleanup.handlers", "psgi.input",
};

static SV *keys[KEY_COUNT];

/* Request headers common enough to have their HTTP_* key made once; any
 * other header's key is made (and hashed) per request. */
static const char *const common_headers[] = {
    "Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Authorization",
    "Cache-Control", "Connection", "Cookie", "DNT", "Forwarded", "If-Modified-Since",
    "If-None-Match", "Keep-Alive", "Origin", "Pragma", "Priority", "Range", "Referer",
    "Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Sec-Fetch-User", "TE", "Upgrade",
    "Upgrade-Insecure-Requests", "User-Agent", "Via", "X-Forwarded-For", "X-Forwarded-Host",
    "X-Forwarded-Proto", "X-Real-IP", "X-Request-ID", "X-Requested-With", "Expect",
    "Transfer-Encoding",
};
#define COMMON_HEADER_COUNT (sizeof(common_headers) / sizeof(common_headers[0]))
/* Which common headers a request has sent so far: one bit each. */
typedef uint64_t header_set;
/* The longest header name with a key of its own would make "HTTP_" and it
 * longer than this. */
#define COMMON_HEADER_MAX_LEN 32
static SV *common_header_keys[COMMON_HEADER_COUNT];
typedef char common_headers_fit_in_a_header_set[COMMON_HEADER_COUNT <= 64 ? 1 : -1];

/* psgi.input of a request without a body: one empty in-memory handle the
 * worker opened, rewound here for each request. */
static SV *empty_input;

void psgi_env_set_empty_input(pTHX_ SV *handle)
{
    SV *old = empty_input;
    empty_input = SvOK(handle) ? newSVsv(handle) : NULL;
    SvREFCNT_dec(old);
}

/* The empty handle, rewound, when it is still open (an app may have read,
 * seeked or closed it); NULL when the worker must make another. */
static SV *rewound_empty_input(pTHX)
{
    if (empty_input == NULL || !SvROK(empty_input) || SvTYPE(SvRV(empty_input)) != SVt_PVGV)
        return NULL;
    IO *io = GvIO((GV *)SvRV(empty_input));
    PerlIO *fp = io ? IoIFP(io) : NULL;
    if (fp == NULL || PerlIO_seek(fp, 0, SEEK_SET) != 0)
        return NULL;
    return newRV_inc(SvRV(empty_input));
}

/* The env entries that are the same for every request (psgi.version,
 * psgi.errors...): the key made once, the value copied per request. */
static struct constant_entry {
    SV *key;
    SV *value;
} *constants;
static size_t constant_count;

/* A hash with fewer buckets than this splits (rehashes every key) as the
 * env fills: a plain request has about 25 keys. */
#define ENV_EXPECTED_KEYS 32

static SV *shared_key(pTHX_ const char *name, size_t len)
{
    return newSVpvn_share(name, (I32)len, 0);
}

/* A value of its own for one env.  newSVsv handles anything but costs
 * more than the constructor for the value's type (a reference, an integer,
 * a short byte string: what a template holds). */
static SV *copy_value(pTHX_ SV *value)
{
    if (SvROK(value))
        return newRV_inc(SvRV(value));
    if (SvIOK(value) && !SvPOK(value) && !SvNOK(value) && !SvIsUV(value))
        return newSViv(SvIVX(value));
    if (SvPOK(value) && !SvUTF8(value) && !SvIOK(value) && !SvNOK(value))
        return newSVpvn(SvPVX(value), SvCUR(value));
    return newSVsv(value);
}

void psgi_env_init(pTHX)
{
    for (int i = 0; i < KEY_COUNT; i++)
        if (keys[i] == NULL)
            keys[i] = shared_key(aTHX_ key_names[i], strlen(key_names[i]));
    for (size_t i = 0; i < COMMON_HEADER_COUNT; i++) {
        char key[5 + COMMON_HEADER_MAX_LEN];
        size_t n = strlen(common_headers[i]);
        if (common_header_keys[i] != NULL || n > COMMON_HEADER_MAX_LEN)
            continue;
        memcpy(key, "HTTP_", 5);
        for (size_t k = 0; k < n; k++) {
            char c = common_headers[i][k];
            key[5 + k] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
        }
        common_header_keys[i] = shared_key(aTHX_ key, 5 + n);
    }
}

void psgi_env_set_template(pTHX_ HV *template)
{
    for (size_t i = 0; i < constant_count; i++) {
        SvREFCNT_dec(constants[i].key);
        SvREFCNT_dec(constants[i].value);
    }
    Safefree(constants);
    constants = NULL;
    constant_count = 0;
    if (template == NULL)
        return;
    Newx(constants, HvUSEDKEYS(template) + 1, struct constant_entry);
    hv_iterinit(template);
    HE *he;
    while ((he = hv_iternext(template)) != NULL) {
        I32 len;
        char *name = hv_iterkey(he, &len);
        constants[constant_count].key = shared_key(aTHX_ name, (size_t)len);
        constants[constant_count].value = newSVsv(hv_iterval(template, he));
        constant_count++;
    }
}

static void store(pTHX_ HV *env, enum env_key key, SV *value)
{
    (void)hv_store_ent(env, keys[key], value, SvSHARED_HASH(keys[key]));
}

/* The index of a common header in common_headers, or -1. */
static int common_header_index(const char *name, size_t len)
{
    for (size_t i = 0; i < COMMON_HEADER_COUNT; i++) {
        SV *key = common_header_keys[i];
        if (key != NULL && SvCUR(key) == len + 5 &&
            strncasecmp(common_headers[i], name, len) == 0)
            return (int)i;
    }
    return -1;
}


static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* PATH_INFO is the decoded path; a '%' not followed by two hex digits stays. */
static SV *decode_path(pTHX_ const char *path, size_t len)
{
    SV *sv = newSV(len + 1);
    char *out = SvPVX(sv);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (path[i] == '%' && i + 2 < len && (hi = hex_digit(path[i + 1])) >= 0 &&
            (lo = hex_digit(path[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = path[i];
        }
    }
    out[o] = '\0';
    SvCUR_set(sv, o);
    SvPOK_only(sv);
    return sv;
}

/* ---- psgix.io: the connection's socket as a Perl handle ---------------
 *
 * Duplicating the socket and opening a Perl handle on it costs more than the
 * rest of the env together, and few apps want it.  So psgix.io holds a value
 * with get magic: the handle is made when the app first reads the key.  That
 * also tells the worker whether the app may have used the socket itself.
 */

static struct {
    IV serial;       /* the request whose env is out; 0 between requests */
    int fd;          /* its connection */
    SV *handle;      /* the handle made for it, if the app asked */
} socket_state;
static IV env_serial;
static SV *socket_opener; /* Perl code: fd -> handle (a dup) or undef */

void psgi_env_set_socket_opener(pTHX_ SV *code)
{
    SV *old = socket_opener;
    socket_opener = SvOK(code) ? newSVsv(code) : NULL;
    SvREFCNT_dec(old);
}

static SV *open_socket_handle(pTHX_ int fd)
{
    dSP;
    SV *handle = NULL;
    if (socket_opener == NULL)
        return NULL;
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    mXPUSHi(fd);
    PUTBACK;
    /* No G_EVAL: it would clear the app's $@; the opener does not die. */
    int n = call_sv(socket_opener, G_SCALAR);
    SPAGAIN;
    if (n == 1) {
        SV *result = POPs;
        if (SvROK(result))
            handle = newSVsv(result);
    }
    PUTBACK;
    FREETMPS;
    LEAVE;
    return handle;
}

/* The value starts as the serial of its request; the first read replaces it
 * with the handle, or with undef when that request is over. */
static int socket_handle_get(pTHX_ SV *sv, MAGIC *mg)
{
    if (mg->mg_private)
        return 0; /* resolved: sv holds the handle */
    mg->mg_private = 1;
    IV serial = SvIOKp(sv) ? SvIVX(sv) : 0;
    if (serial == 0 || serial != socket_state.serial) {
        sv_setsv(sv, &PL_sv_undef);
        return 0;
    }
    if (socket_state.handle == NULL)
        socket_state.handle = open_socket_handle(aTHX_ socket_state.fd);
    sv_setsv(sv, socket_state.handle ? socket_state.handle : &PL_sv_undef);
    return 0;
}

static const MGVTBL socket_handle_vtbl = {socket_handle_get, NULL, NULL, NULL, NULL,
                                          NULL, NULL, NULL};

static SV *lazy_socket_handle(pTHX_ int fd)
{
    socket_state.serial = ++env_serial;
    socket_state.fd = fd;
    if (socket_state.handle) {
        SvREFCNT_dec(socket_state.handle);
        socket_state.handle = NULL;
    }
    SV *sv = newSViv(socket_state.serial);
    sv_magicext(sv, NULL, PERL_MAGIC_ext, &socket_handle_vtbl, NULL, 0);
    return sv;
}

int psgi_env_socket_handle_made(void)
{
    return socket_state.handle != NULL;
}

SV *psgi_env_take_socket_handle(pTHX)
{
    SV *handle = socket_state.handle;
    socket_state.handle = NULL;
    return handle;
}

void psgi_env_request_done(pTHX)
{
    socket_state.serial = 0;
    if (socket_state.handle) {
        SvREFCNT_dec(socket_state.handle);
        socket_state.handle = NULL;
    }
}

/* Adds one request header as HTTP_NAME (or CONTENT_TYPE / CONTENT_LENGTH).
 * seen: the common headers stored already, so that the first of each is
 * stored without looking for an earlier one. */
static void store_header(pTHX_ HV *env, const struct http_header *h, header_set *seen)
{
    char name_buffer[5 + 256];
    size_t n = h->name_len;

    if (n == 12 && strncasecmp(h->name, "content-type", 12) == 0) {
        store(aTHX_ env, KEY_CONTENT_TYPE, newSVpvn(h->value, h->value_len));
        return;
    }
    if (n == 14 && strncasecmp(h->name, "content-length", 14) == 0) {
        store(aTHX_ env, KEY_CONTENT_LENGTH, newSVpvn(h->value, h->value_len));
        return;
    }
    /* "X-Foo" and "X_Foo" would both become HTTP_X_FOO: a header with an
     * underscore could pass for one a proxy in front has checked or set.
     * Like nginx and Apache, drop it. */
    if (memchr(h->name, '_', n) != NULL || n > 256)
        return;
    int common = common_header_index(h->name, n);
    const char *name;
    size_t len;
    U32 hash;
    if (common >= 0) {
        SV *key = common_header_keys[common];
        header_set bit = (header_set)1 << common;
        if (!(*seen & bit)) {
            *seen |= bit;
            (void)hv_store_ent(env, key, newSVpvn(h->value, h->value_len), SvSHARED_HASH(key));
            return;
        }
        name = SvPVX(key);
        len = SvCUR(key);
        hash = SvSHARED_HASH(key);
    } else {
        memcpy(name_buffer, "HTTP_", 5);
        for (size_t i = 0; i < n; i++) {
            char c = h->name[i];
            name_buffer[5 + i] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
        }
        name = name_buffer;
        len = 5 + n;
        PERL_HASH(hash, name, len);
    }
    SV **existing = (SV **)hv_common_key_len(env, name, (I32)len, HV_FETCH_JUST_SV, NULL, hash);
    if (existing != NULL) {
        /* Repeated fields join into one list (RFC 9110 5.3); cookies with "; ". */
        int is_cookie = n == 6 && strncasecmp(h->name, "cookie", 6) == 0;
        sv_catpvn(*existing, is_cookie ? "; " : ", ", 2);
        sv_catpvn(*existing, h->value, h->value_len);
        return;
    }
    (void)hv_common_key_len(env, name, (I32)len, HV_FETCH_ISSTORE | HV_FETCH_JUST_SV,
                            newSVpvn(h->value, h->value_len), hash);
}

HV *build_psgi_env(pTHX_ struct worker_loop *loop)
{
    struct connection *conn = loop->current;
    const struct http_request_head *head = &loop->head;
    const struct listener *listener = &loop->listeners[conn->listener_index];
    HV *env = newHV();

    hv_ksplit(env, ENV_EXPECTED_KEYS);
    for (size_t i = 0; i < constant_count; i++)
        (void)hv_store_ent(env, constants[i].key, copy_value(aTHX_ constants[i].value),
                           SvSHARED_HASH(constants[i].key));
    store(aTHX_ env, KEY_REQUEST_METHOD, newSVpvn(head->method, head->method_len));
    store(aTHX_ env, KEY_SERVER_PROTOCOL,
          newSVpvn(head->minor_version ? "HTTP/1.1" : "HTTP/1.0", 8));

    /* REQUEST_URI is origin-form even for an absolute-form target. */
    const char *path = head->path;
    size_t path_len = head->path_len;
    SV *request_uri;
    if (path_len == 0 || path[0] == '?') {
        request_uri = newSVpvn("/", 1);
        sv_catpvn(request_uri, path, path_len);
    } else {
        request_uri = newSVpvn(path, path_len);
    }
    const char *uri = SvPVX(request_uri);
    size_t uri_len = SvCUR(request_uri);
    const char *question = memchr(uri, '?', uri_len);
    size_t path_only = question ? (size_t)(question - uri) : uri_len;
    /* "OPTIONS *" asks about the server, not a path: PSGI wants PATH_INFO
     * empty or starting with "/"; REQUEST_URI keeps the "*". */
    if (uri_len == 1 && uri[0] == '*')
        store(aTHX_ env, KEY_PATH_INFO, newSVpvs(""));
    else
        store(aTHX_ env, KEY_PATH_INFO, decode_path(aTHX_ uri, path_only));
    store(aTHX_ env, KEY_QUERY_STRING,
          question ? newSVpvn(question + 1, uri_len - path_only - 1) : newSVpvs(""));
    store(aTHX_ env, KEY_REQUEST_URI, request_uri);

    store(aTHX_ env, KEY_SERVER_NAME, newSVpv(listener->server_name, 0));
    store(aTHX_ env, KEY_SERVER_PORT, newSViv(listener->server_port));
    store(aTHX_ env, KEY_REMOTE_ADDR, newSVpv(conn->remote_addr, 0));
    store(aTHX_ env, KEY_REMOTE_PORT, newSViv(conn->remote_port));

    store(aTHX_ env, KEY_PSGIX_IO, lazy_socket_handle(aTHX_ conn->fd));
    store(aTHX_ env, KEY_PSGIX_CLEANUP_HANDLERS, newRV_noinc((SV *)newAV()));
    if (head->framing == HTTP_BODY_NONE) {
        SV *input = rewound_empty_input(aTHX);
        if (input)
            store(aTHX_ env, KEY_PSGI_INPUT, input);
    }

    header_set seen = 0;
    for (size_t i = 0; i < head->num_headers; i++)
        store_header(aTHX_ env, &head->headers[i], &seen);
    /* RFC 9112 3.2.2: an absolute-form target's authority is the host. */
    if (head->authority != NULL)
        store(aTHX_ env, KEY_HTTP_HOST, newSVpvn(head->authority, head->authority_len));
    return env;
}
