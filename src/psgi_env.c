/*
 * psgi_env.c - the PSGI env of a request, built in C from the parsed head.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi_env.h"

#include "XSUB.h"

/* Keys set on every request, made once as shared strings so that storing them
 * skips hashing. */
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
    KEY_COUNT
};

static const char *const key_names[KEY_COUNT] = {
    "REQUEST_METHOD", "PATH_INFO",   "REQUEST_URI", "QUERY_STRING",   "SERVER_PROTOCOL",
    "SERVER_NAME",    "SERVER_PORT", "REMOTE_ADDR", "REMOTE_PORT",    "CONTENT_LENGTH",
    "CONTENT_TYPE",   "HTTP_HOST",   "psgix.io",
};

static SV *keys[KEY_COUNT];

void psgi_env_init(pTHX)
{
    for (int i = 0; i < KEY_COUNT; i++)
        if (keys[i] == NULL)
            keys[i] = newSVpvn_share(key_names[i], (I32)strlen(key_names[i]), 0);
}

static void store(pTHX_ HV *env, enum env_key key, SV *value)
{
    (void)hv_store_ent(env, keys[key], value, SvSHARED_HASH(keys[key]));
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

/* Adds one request header as HTTP_NAME (or CONTENT_TYPE / CONTENT_LENGTH). */
static void store_header(pTHX_ HV *env, const struct http_header *h)
{
    char key[5 + 256];
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
    memcpy(key, "HTTP_", 5);
    for (size_t i = 0; i < n; i++) {
        char c = h->name[i];
        key[5 + i] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
    }
    SV **existing = hv_fetch(env, key, (I32)(5 + n), 0);
    if (existing != NULL) {
        /* Repeated fields join into one list (RFC 9110 5.3); cookies with "; ". */
        int is_cookie = n == 6 && strncasecmp(h->name, "cookie", 6) == 0;
        sv_catpvn(*existing, is_cookie ? "; " : ", ", 2);
        sv_catpvn(*existing, h->value, h->value_len);
        return;
    }
    (void)hv_store(env, key, (I32)(5 + n), newSVpvn(h->value, h->value_len), 0);
}

HV *build_psgi_env(pTHX_ struct worker_loop *loop, HV *template)
{
    struct connection *conn = loop->current;
    const struct http_request_head *head = &loop->head;
    const struct listener *listener = &loop->listeners[conn->listener_index];
    HV *env = newHVhv(template);

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

    for (size_t i = 0; i < head->num_headers; i++)
        store_header(aTHX_ env, &head->headers[i]);
    /* RFC 9112 3.2.2: an absolute-form target's authority is the host. */
    if (head->authority != NULL)
        store(aTHX_ env, KEY_HTTP_HOST, newSVpvn(head->authority, head->authority_len));
    return env;
}
