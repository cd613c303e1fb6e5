# xs/holding.xsh - Serow::Holding: held connections from Perl (GRIP,
# docs/holding.md): publishing (src/psgi/psgi_hold.c), and the worker's
# set-up of --grip.

MODULE = Serow    PACKAGE = Serow::Holding

PROTOTYPES: DISABLE

int
publish(HV *item)
  CODE:
    const char *error = serow_psgi_publish(aTHX_ item);
    if (error != NULL)
        croak("Serow::Holding::publish: %s\n", error);
    RETVAL = 1;
  OUTPUT:
    RETVAL

void
_setup(int on, int channel)
  CODE:
    serow_psgi_hold_setup(on, channel);
