/*
 * psgi_input.c - the handles a request lends the app: psgi.input, and
 * psgix.io (the connection's socket as a Perl handle).
 *
 * Owns: the two in-memory psgi.input handles reused from request to
 * request (the empty one, and the one refilled with a small body that came
 * whole with its head, or reading it where it lies: the connection's buffer
 * lent, and given back), the reads of a body into a Perl string, and the
 * lending of the socket: the psgix.io value's magic, the handle made on
 * first read, the socket made blocking for it and non-blocking again.  The
 * handles are per-process caches; what was lent for a request is in its
 * struct serow_request (request.socket).  It builds no env
 * (psgi_env.c puts these handles in it) and ends no request: the end
 * (psgi_request.c) calls serow_psgi_env_request_done.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_input.h"

#include "XSUB.h"
#include "perliol.h" /* the layer of an in-memory handle (in_memory_scalar) */

#include <fcntl.h>

#include "connection/connection.h"
#include "psgi/psgi_tls_socket.h"
#include "request/request.h"
#include "worker/worker_loop.h"

/* ---- psgi.input ----------------------------------------------------------- */

/* *kept becomes a copy of value (NULL for undef), the worker's setting of a
 * handle or code kept here; the one before goes. */
static void keep_copy(pTHX_ SV **kept, SV *value)
{
    SV *old = *kept;
    *kept = SvOK(value) ? newSVsv(value) : NULL;
    SvREFCNT_dec(old);
}

/* psgi.input of a request without a body: one empty in-memory handle the
 * worker opened, rewound here for each request. */
static SV *empty_input;

void serow_psgi_env_set_empty_input(pTHX_ SV *handle)
{
    keep_copy(aTHX_ &empty_input, handle);
}

/* psgi.input of a request whose body came whole with its head (a form, a
 * JSON document, an upload of up to 64 KiB): one in-memory handle the worker
 * opened, filled with the body and rewound for each such request, so that
 * the common POST neither opens a handle nor goes through the Perl worker to
 * read its body.  Kept: the handle (a reference to its glob) and the scalar
 * it reads. */
static SV *body_input;
static SV *body_input_scalar;
static size_t body_input_max;

/* The largest body the handle takes. */
#define BODY_INPUT_MAX (64 * 1024)

/*
 * A body of at least LEND_MIN bytes is not copied into the scalar: the
 * scalar reads it where it lies, in the connection's buffer, which the
 * connection lends (serow_worker_loop_lend_body) until the next body takes
 * its place or the scalar is let go.  The app's read is then the one copy of
 * the body (two before: into the scalar, then out of it, each 41% of the
 * instructions of a 64 KiB POST).  The scalar borrows: its string is the body
 * (SvLEN 0: perl frees nothing of it, and anything that would change its
 * size makes it a copy of its own first), and its own buffer waits aside.
 * (perl's ithreads clone such a string as the same pointer: a thread the
 * app starts that reads its copy of the handle after the next body took the
 * buffer reads that body.)  Smaller bodies are
 * copied: the trade (the head copied into the connection's other buffer)
 * costs what copying them does, a 162-byte body counts the same either way,
 * and the connection keeps reading into the one buffer.
 *
 * The lending is the handle's, not a request's: the handle, and an env
 * holding it, may outlive the request whose body it reads, so the buffer
 * goes back only when the handle takes its next body (or is let go); and
 * one request at a time has the handle (refillable_body_input), so this
 * per-process state is all that the one cached handle reads.
 */
#define LEND_MIN 1024
static char *lent_buffer; /* the connection's buffer the scalar reads, or NULL */
static size_t lent_size;
static char *own_pv;      /* meanwhile, the scalar's own buffer (SvLEN own_len) */
static STRLEN own_len;

/* The body scalar reads its own string again and the lent buffer goes back
 * to the connections' spares.  keep: something besides us may still read the
 * scalar, which gets a copy of the body it read (a handle the app kept must
 * not change under it).  Only the handle reads the scalar (Perl code cannot
 * reach it: PerlIO::get_layers does not give it); if anything else changed
 * it, it has a string of its own by then, and keeps it. */
static void end_lending(pTHX_ SV *scalar, int keep)
{
    if (lent_buffer == NULL)
        return;
    char *pv = SvPVX(scalar);
    if (!SvROK(scalar) && SvLEN(scalar) == 0 && pv >= lent_buffer &&
        pv < lent_buffer + lent_size) {
        STRLEN len = keep && SvPOKp(scalar) ? SvCUR(scalar) : 0;
        SvPV_set(scalar, own_pv);
        SvLEN_set(scalar, own_len);
        SvCUR_set(scalar, 0);
        *own_pv = '\0';
        if (len)
            sv_setpvn(scalar, pv, len);
    } else {
        Safefree(own_pv);
    }
    own_pv = NULL;
    own_len = 0;
    serow_connection_give_back_buffer(lent_buffer, lent_size);
    lent_buffer = NULL;
}

/* The body scalar, which nothing but the handle and us holds and which
 * reads no lent buffer, reads the body of len bytes (NUL after it) at body in
 * the buffer lent. */
static void read_lent(pTHX_ SV *scalar, char *body, size_t len, char *buffer, size_t size)
{
    /* Its own buffer is set aside as it is: a plain one (not a reference,
     * copy-on-write or offset; made one if it is not, as nothing but a
     * refill ever sets it). */
    if (SvTHINKFIRST(scalar) || SvOOK(scalar) || SvLEN(scalar) == 0) {
        sv_setpvs(scalar, "");
        (void)SvGROW(scalar, 1);
    }
    own_pv = SvPVX(scalar);
    own_len = SvLEN(scalar);
    SvPV_set(scalar, body);
    SvLEN_set(scalar, 0);
    SvCUR_set(scalar, len);
    SvPOK_only(scalar);
    lent_buffer = buffer;
    lent_size = size;
}

/* The scalar an in-memory handle reads (a new reference), or NULL when the
 * handle is not open on one alone: closed, another layer on top, or
 * characters (:utf8) instead of bytes. */
static SV *in_memory_scalar(pTHX_ PerlIO *fp)
{
    if (fp == NULL || !PerlIOValid(fp) || PerlIO_isutf8(fp))
        return NULL;
    PerlIO_funcs *layer = PerlIOBase(fp)->tab;
    if (layer == NULL || strcmp(layer->name, "scalar") != 0 || layer->Getarg == NULL)
        return NULL;
    SV *ref = layer->Getarg(aTHX_ fp, NULL, 0); /* a reference to the scalar */
    if (ref == NULL || !SvROK(ref)) {
        SvREFCNT_dec(ref);
        return NULL;
    }
    SV *scalar = SvREFCNT_inc_simple_NN(SvRV(ref));
    SvREFCNT_dec(ref);
    return scalar;
}

void serow_psgi_env_set_body_input(pTHX_ SV *handle, size_t max)
{
    SV *old = body_input, *old_scalar = body_input_scalar;
    if (old_scalar != NULL)
        end_lending(aTHX_ old_scalar, SvREFCNT(old_scalar) > 1);
    body_input = NULL;
    body_input_scalar = NULL;
    body_input_max = max < BODY_INPUT_MAX ? max : BODY_INPUT_MAX;
    if (SvROK(handle) && SvTYPE(SvRV(handle)) == SVt_PVGV) {
        IO *io = GvIO((GV *)SvRV(handle));
        body_input_scalar = io ? in_memory_scalar(aTHX_ IoIFP(io)) : NULL;
        if (body_input_scalar != NULL) {
            body_input = newSVsv(handle);
            /* a string of its own (not a copy-on-write one), for read_lent
             * to set aside */
            (void)SvPV_force_nolen(body_input_scalar);
            (void)SvGROW(body_input_scalar, LEND_MIN);
        }
    }
    SvREFCNT_dec(old);
    SvREFCNT_dec(old_scalar);
}

int serow_psgi_env_has_body_input(void)
{
    return body_input != NULL;
}

/* The glob of the body handle when it can take the next body: nothing but
 * us holds it (an app that kept it, or kept an env with it, would see its
 * contents change), and it still reads its own scalar, as bytes.  A handle
 * the app closed, pushed a layer on or opened again is let go (the worker
 * makes another); one it holds is only passed over. */
static GV *refillable_body_input(pTHX)
{
    if (body_input == NULL)
        return NULL;
    GV *gv = (GV *)SvRV(body_input);
    IO *io = GvIO(gv);
    if (SvREFCNT(gv) != 1 || GvGP(gv) == NULL || GvGP(gv)->gp_refcnt != 1 || io == NULL ||
        SvREFCNT(io) != 1)
        return NULL;
    SV *scalar = in_memory_scalar(aTHX_ IoIFP(io));
    SvREFCNT_dec(scalar); /* (only compared: the handle holds it) */
    if (scalar != body_input_scalar || SvREFCNT(scalar) != 2 || SvTYPE(scalar) >= SVt_PVMG ||
        SvREADONLY(scalar)) {
        /* (2: the handle's and ours) */
        serow_psgi_env_set_body_input(aTHX_ &PL_sv_undef, body_input_max);
        return NULL;
    }
    return gv;
}

/* The body handle filled with req's body, rewound, when the
 * body is all buffered and small enough, and the handle free; else NULL (the
 * Perl worker reads the body).  Reads the body: the request has none left. */
SV *serow_input_filled(pTHX_ struct serow_request *req)
{
    if (!serow_worker_loop_body_buffered(req, body_input_max))
        return NULL;
    GV *gv = refillable_body_input(aTHX);
    if (gv == NULL)
        return NULL;
    /* Rewound first: once the body is read, nothing may fail (the Perl
     * worker would find no body left to read). */
    if (PerlIO_seek(IoIFP(GvIO(gv)), 0, SEEK_SET) != 0)
        return NULL;
    size_t len = (size_t)req->head.content_length, got = 0;
    SV *scalar = body_input_scalar;
    if (len >= LEND_MIN) {
        char *buffer;
        size_t size;
        /* (the last body lent goes back first: the connection may take it) */
        end_lending(aTHX_ scalar, 0);
        char *body = serow_worker_loop_lend_body(req, &buffer, &size);
        if (body != NULL) {
            read_lent(aTHX_ scalar, body, len, buffer, size);
            return (SV *)gv;
        }
    }
    end_lending(aTHX_ scalar, 0);
    sv_setpvs(scalar, "");
    char *p = SvGROW(scalar, len + 1);
    /* (all of it is buffered: one call takes it whole, without waiting) */
    (void)serow_worker_loop_read_body(req, p, len, &got);
    p[got] = '\0';
    SvCUR_set(scalar, got);
    return (SV *)gv;
}

SV *serow_input_empty_glob(void)
{
    return empty_input != NULL && SvROK(empty_input) ? SvRV(empty_input) : NULL;
}

/* The glob of the empty handle, rewound, when it is still open (an app may
 * have read, seeked or closed it); NULL when the worker must make another. */
SV *serow_input_empty(pTHX)
{
    if (empty_input == NULL || !SvROK(empty_input) || SvTYPE(SvRV(empty_input)) != SVt_PVGV)
        return NULL;
    IO *io = GvIO((GV *)SvRV(empty_input));
    PerlIO *fp = io ? IoIFP(io) : NULL;
    if (fp == NULL || PerlIO_seek(fp, 0, SEEK_SET) != 0)
        return NULL;
    return SvRV(empty_input);
}

/* ---- reading a body into a Perl string ------------------------------------ */

int serow_input_read_body(pTHX_ struct serow_request *req, SV *buffer, size_t max)
{
    size_t got = 0;
    STRLEN cur;
    if (!SvOK(buffer))
        sv_setpvs(buffer, "");
    (void)SvPV_force(buffer, cur);
    /* Room for what can still come, not max more each call: a body read
     * in several calls then grows the string once, not once per call (each
     * growth a copy of all that was read). */
    max = serow_worker_loop_body_read_size(req, max);
    char *p = SvGROW(buffer, cur + max + 1);
    int r = serow_worker_loop_read_body(req, p + cur, max, &got);
    if (r != 0)
        return r < 0 ? READ_BODY_CLIENT_GONE : -r;
    SvCUR_set(buffer, cur + got);
    p[cur + got] = '\0';
    return (int)got;
}

/* ---- psgix.io: the connection's socket as a Perl handle ---------------
 *
 * Duplicating the socket and opening a Perl handle on it costs more than the
 * rest of the env together, and few apps want it.  So psgix.io holds a value
 * with get magic: the handle is made when the app first reads the key.  That
 * also tells the worker whether the app may have used the socket itself.
 */

/* Perl code: fd -> handle (a dup) or undef; the worker's setting. */
static SV *socket_opener;

void serow_psgi_env_set_socket_opener(pTHX_ SV *code)
{
    keep_copy(aTHX_ &socket_opener, code);
}

SV *serow_call_socket_opener(pTHX_ SV *opener, int fd, SV *extra)
{
    dSP;
    SV *handle = NULL;
    if (opener == NULL)
        return NULL;
    ENTER;
    SAVETMPS;
    PUSHMARK(SP);
    mXPUSHi(fd);
    if (extra != NULL)
        XPUSHs(extra);
    PUTBACK;
    /* No G_EVAL: it would clear the app's $@; the opener does not die. */
    int n = call_sv(opener, G_SCALAR);
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

static int set_nonblocking(int fd, int on)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0)
        return -1;
    return fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

/* The value's magic points at its request (mg_ptr) while that request
 * lives; the first read replaces the value with the handle, or with undef
 * when the request is over. */
static int socket_handle_get(pTHX_ SV *sv, MAGIC *mg)
{
    if (mg->mg_private)
        return 0; /* resolved: sv holds the handle */
    mg->mg_private = 1;
    struct serow_request *req = (struct serow_request *)mg->mg_ptr;
    if (req == NULL) {
        sv_setsv(sv, &PL_sv_undef);
        return 0;
    }
    struct serow_socket_lending *sock = &req->socket;
    if (sock->handle == NULL) {
        /* (TLS: a handle tied to the transport, which reads and writes the
         * plaintext: psgi_tls_socket.c) */
        sock->handle = req->conn->carried.transport == SEROW_TRANSPORT_TLS
                           ? serow_tls_socket_make(aTHX_ req)
                           : serow_call_socket_opener(aTHX_ socket_opener, sock->fd, NULL);
        /* The handle is blocking, as Starman's is: an app written for it (a
         * WebSocket handler's plain sysread and print) would otherwise fail
         * with EAGAIN.  The duplicate shares the server's file description,
         * O_NONBLOCK included: serow_socket_back_to_server undoes it. */
        if (sock->handle)
            serow_worker_loop_socket_lent(req); /* it may answer on it itself */
        if (sock->handle && set_nonblocking(sock->fd, 0) == 0)
            sock->lent = 1;
    }
    sv_setsv(sv, sock->handle ? sock->handle : &PL_sv_undef);
    return 0;
}

const MGVTBL serow_socket_handle_vtbl = {socket_handle_get, NULL, NULL, NULL, NULL,
                                          NULL, NULL, NULL};

void serow_socket_lend(pTHX_ struct serow_request *req, SV *value)
{
    struct serow_socket_lending *sock = &req->socket;
    MAGIC *mg = mg_findext(value, PERL_MAGIC_ext, &serow_socket_handle_vtbl);
    sock->fd = req->conn->fd;
    if (sock->handle) {
        SvREFCNT_dec(sock->handle);
        sock->handle = NULL;
    }
    mg->mg_ptr = (char *)req; /* (mg_len 0: perl frees nothing of it) */
    mg->mg_private = 0;
    sock->value = SvREFCNT_inc_simple_NN(value);
}

void serow_socket_back_to_server(struct serow_request *req)
{
    struct serow_socket_lending *sock = &req->socket;
    if (sock->lent) {
        set_nonblocking(sock->fd, 1);
        sock->lent = 0;
    }
}

int serow_psgi_env_socket_handle_made(const struct serow_request *req)
{
    return req->socket.handle != NULL;
}

/* The env's psgix.io no longer reaches the request: read from now on, it
 * is undef; and the request no longer holds it (nor the handle it may hold). */
static void unhook_value(pTHX_ struct serow_socket_lending *sock)
{
    SV *value = sock->value;
    if (value == NULL)
        return;
    MAGIC *mg = mg_findext(value, PERL_MAGIC_ext, &serow_socket_handle_vtbl);
    if (mg != NULL)
        mg->mg_ptr = NULL;
    sock->value = NULL;
    SvREFCNT_dec(value);
}

SV *serow_psgi_env_take_socket_handle(pTHX_ struct serow_request *req)
{
    SV *handle = req->socket.handle;
    req->socket.handle = NULL;
    unhook_value(aTHX_ &req->socket);
    return handle;
}

void serow_psgi_env_request_done(pTHX_ struct serow_request *req)
{
    struct serow_socket_lending *sock = &req->socket;
    if (sock->tls != NULL)
        serow_tls_socket_detach(req);
    /* (a connection that is over, or the app's now: left as it is) */
    sock->lent = 0;
    if (sock->handle) {
        SvREFCNT_dec(sock->handle);
        sock->handle = NULL;
    }
    unhook_value(aTHX_ sock);
}
