# xs/writer.xsh - the Serow::Writer package's glue, included by Serow.xs: the
# streaming writer's methods (the writer itself is src/psgi/psgi_writer.c's;
# lib/Serow/Writer.pm is its manual).  Glue only, as Serow.xs.

MODULE = Serow    PACKAGE = Serow::Writer    PREFIX = writer_

SV *
writer_new(const char *class, Serow::Loop loop)
  CODE:
    PERL_UNUSED_VAR(class);
    RETVAL = serow_writer_new(aTHX_ REQUEST(loop));
  OUTPUT:
    RETVAL

void
writer_write(SV *self, SV *data)
  CODE:
    /* Once the client has gone, the part is dropped without a word, as
     * other servers do: an app (or the framework around it) that dies
     * there would log a client closing a tab as its own error.  An app that
     * would stop early asks gone. */
    (void)serow_writer_send(aTHX_ self, data);

int
writer_send(SV *self, SV *data)
  CODE:
    RETVAL = serow_writer_send(aTHX_ self, data);
  OUTPUT:
    RETVAL

void
writer_close(SV *self)
  CODE:
    serow_writer_close(aTHX_ self);

int
writer_closed(SV *self)
  CODE:
    RETVAL = serow_writer_closed(aTHX_ self);
  OUTPUT:
    RETVAL

int
writer_gone(SV *self)
  CODE:
    RETVAL = serow_writer_client_gone(aTHX_ self);
  OUTPUT:
    RETVAL

void
writer_abandon(SV *self)
  CODE:
    serow_writer_abandon(aTHX_ self);

double
writer_given(SV *self)
  CODE:
    RETVAL = (double)serow_writer_given(aTHX_ self);
  OUTPUT:
    RETVAL

void
writer_poll_cb(SV *self, SV *cb)
  CODE:
    serow_writer_poll_cb(aTHX_ self, cb);
