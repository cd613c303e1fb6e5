/*
 * psgi_writer.c - the streaming writer, Serow::Writer: what a
 * psgi.streaming app's responder returns (lib/Serow/Writer.pm is its
 * manual).
 *
 * Owns: a writer's state (in ext magic only this file adds), the one kept
 * writer scalar reused from response to response, and its methods.  It
 * may not decide how bytes go out (psgi_response.c: serow_write_psgi_body
 * and its kin) nor when a request ends (psgi_request.c, which makes a
 * writer for a stream and abandons it at the request's end).
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_request.h"

#include "XSUB.h"

#include "psgi/psgi_response.h"
#include "request/request.h"
#include "worker/worker_loop.h"

/* ---- the streaming writer: Serow::Writer -----------------------------------
 *
 * What a psgi.streaming app's responder returns, and what sends a body
 * handle's lines (lib/Serow/Writer.pm is its manual).  Its state is a
 * struct in ext magic of the scalar the object refers to, magic that only
 * this file can add (its vtable's address is the mark): no hash to look up,
 * no method of Perl's per write, and no scalar of Perl's taken for a writer
 * (a string blessed into Serow::Writer, a copy of a writer's scalar).
 * Each write is one chunk with its framing (the head before the first),
 * gathered with the writes that follow while the app goes on writing, and
 * sent by the worker's flusher thread within a millisecond or two when it
 * stops (worker_output.c: serow_worker_loop_write_soon); close sends at
 * once.  The first bytes of a compressed body wait for the next write (see
 * serow_compression_header_size). */

struct serow_writer {
    struct serow_request *req; /* NULL once abandoned */
    int closed; /* closed, or abandoned when its request ended: writes do nothing */
    int gone;   /* a write found the client gone */
    int told_gone; /* the app asked (gone) and was told the client had hung up */
};

static HV *writer_stash;

/* The mark of a writer's magic: no callbacks (the struct is the magic's
 * own copy, freed with it), only this address, which Perl code cannot
 * give a magic of its own. */
static const MGVTBL writer_vtbl = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

/* The writer of a scalar, or NULL when it is none of ours.  (Every method
 * call asks: ours is looked at first, the only magic of a writer the app
 * did not weaken or tie, before a walk of them all.) */
static inline struct serow_writer *writer_state(pTHX_ SV *state)
{
    PERL_UNUSED_CONTEXT;
    if (!SvMAGICAL(state))
        return NULL;
    MAGIC *mg = SvMAGIC(state);
    if (mg->mg_virtual != &writer_vtbl || mg->mg_type != PERL_MAGIC_ext)
        mg = mg_findext(state, PERL_MAGIC_ext, &writer_vtbl);
    return mg ? (struct serow_writer *)mg->mg_ptr : NULL;
}

/* The scalar of the last writer made, kept for the next response while
 * nothing but this holds it (a blessed scalar made and freed per response
 * cost a few hundred instructions, its free a look for a DESTROY).  One
 * the app kept, even weakly (a backreference is magic besides ours), is
 * left to it (abandoned when its request ended) and another is made. */
static SV *kept_writer;

SV *serow_writer_new(pTHX_ struct serow_request *req)
{
    if (kept_writer != NULL &&
        (SvREFCNT(kept_writer) != 1 || SvMAGIC(kept_writer)->mg_moremagic != NULL)) {
        SvREFCNT_dec(kept_writer);
        kept_writer = NULL;
    }
    if (kept_writer == NULL) {
        if (writer_stash == NULL)
            writer_stash = gv_stashpvs("Serow::Writer", GV_ADD);
        struct serow_writer fresh = {NULL, 0, 0, 0};
        kept_writer = newSV_type(SVt_PVMG);
        /* (namlen > 0: Perl keeps a copy of the struct, freed with the magic) */
        sv_magicext(kept_writer, NULL, PERL_MAGIC_ext, &writer_vtbl, (const char *)&fresh,
                    sizeof(fresh));
        sv_bless(sv_2mortal(newRV_inc(kept_writer)), writer_stash);
        SvREADONLY_on(kept_writer); /* (after the bless, which would refuse it) */
    }
    struct serow_writer *writer = (struct serow_writer *)SvMAGIC(kept_writer)->mg_ptr;
    writer->req = req;
    writer->closed = 0;
    writer->gone = writer->told_gone = 0;
    return newRV_inc(kept_writer);
}

/* The writer an object holds; dies on anything else. */
static struct serow_writer *writer_of(pTHX_ SV *self)
{
    struct serow_writer *writer = SvROK(self) ? writer_state(aTHX_ SvRV(self)) : NULL;
    if (writer == NULL)
        croak("not a Serow::Writer: a writer is made by the server (the responder, "
              "Serow::Writer->new), not blessed");
    return writer;
}

int serow_writer_send(pTHX_ SV *self, SV *data)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    if (writer->closed)
        return !writer->gone;
    SvGETMAGIC(data);
    if (!SvOK(data))
        return 1;
    STRLEN len;
    const char *p = serow_psgi_bytes(aTHX_ data, &len);
    if (p == NULL)
        serow_response_result(aTHX_ RESPONSE_WIDE_CHARACTER, NULL); /* dies */
    if (len == 0)
        return 1;
    if (serow_write_psgi_body(aTHX_ writer->req, p, len) == RESPONSE_OK)
        return 1;
    writer->gone = writer->closed = 1;
    return 0;
}

void serow_writer_close(pTHX_ SV *self)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    if (writer->closed)
        return;
    writer->closed = 1;
    /* (the held bytes first: a client gone then is one a write found) */
    if (serow_flush_held_psgi_body(aTHX_ writer->req) != RESPONSE_OK) {
        writer->gone = 1;
        return;
    }
    serow_finish_psgi_body(aTHX_ writer->req);
}

int serow_writer_closed(pTHX_ SV *self)
{
    return writer_of(aTHX_ self)->closed;
}

int serow_writer_gone(pTHX_ SV *self)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    return writer->gone || writer->told_gone;
}

int serow_writer_client_gone(pTHX_ SV *self)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    if (writer->gone || writer->req == NULL)
        return 1;
    /* Only asked: a client that shut its sending side may still read, and
     * its response goes on; one that closed fails the next write or two.
     * But what the app was told is remembered: an app that dies of it has
     * died of its client's leaving, as after a failed write (a 499, no
     * error), whichever of the two saw the client leave first. */
    if (writer->closed || !serow_worker_loop_client_hung_up(writer->req, 0))
        return 0;
    writer->told_gone = 1;
    /* (its writes go at once from now: the next one or two find it gone,
     * as they did before the writes were gathered) */
    serow_psgi_response_at_once(writer->req);
    return 1;
}

void serow_writer_abandon(pTHX_ SV *self)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    writer->closed = 1;
    writer->req = NULL;
}

uint64_t serow_writer_given(pTHX_ SV *self)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    return writer->req ? serow_psgi_body_given(writer->req) : 0;
}

/* How long poll_cb waits for the client to hang up after a call of its
 * callback that wrote nothing, before it calls it again. */
#define POLL_IDLE_SECONDS 0.05

/*
 * psgi.nonblocking is false: there is no event loop to call back from, and
 * the writer can always take more (a write waits until it has gone).  So
 * the callback runs here, again and again while the writer is open, as a
 * server with an event loop would call it each time the socket can take
 * more: a stream written from it goes on until it closes the writer.  A
 * client that goes away ends it: a write that finds it gone closes the
 * writer; and a call that wrote nothing waits up to POLL_IDLE_SECONDS for
 * the client to hang up before the next one, so that a callback with
 * nothing to send neither spins the CPU nor outlives its client.  The
 * callback's die goes through.
 */
void serow_writer_poll_cb(pTHX_ SV *self, SV *cb)
{
    struct serow_writer *writer = writer_of(aTHX_ self);
    /* Held while the callback runs: the app may drop its own references. */
    SV *state = SvREFCNT_inc_simple_NN(SvRV(self));
    ENTER;
    SAVEFREESV(state);
    SV *object = sv_2mortal(newRV_inc(state));
    while (!writer->closed) {
        uint64_t given = serow_psgi_body_given(writer->req);
        dSP;
        ENTER;
        SAVETMPS;
        PUSHMARK(SP);
        XPUSHs(object);
        PUTBACK;
        call_sv(cb, G_VOID | G_DISCARD);
        FREETMPS;
        LEAVE;
        if (writer->closed || serow_psgi_body_given(writer->req) != given)
            continue;
        if (serow_worker_loop_client_hung_up(writer->req, POLL_IDLE_SECONDS)) {
            writer->gone = writer->closed = 1;
            serow_psgi_response_client_gone(writer->req);
        }
    }
    LEAVE;
}
