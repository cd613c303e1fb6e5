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

UV
item_bytes(HV *item)
  CODE:
    size_t size;
    const char *error = serow_psgi_item_bytes(aTHX_ item, &size);
    if (error != NULL)
        croak("Serow::Holding::item_bytes: %s\n", error);
    RETVAL = size;
  OUTPUT:
    RETVAL

void
_setup(int on, int channel, unsigned max_channels, UV max_item)
  CODE:
    serow_psgi_hold_setup(on, channel, max_channels, (size_t)max_item);

# --websocket-psgix-io: the path prefixes whose upgrades stay the app's.
void
_websocket_psgix_io(...)
  CODE:
    for (I32 i = 0; i < items; i++) {
        STRLEN len;
        const char *p = SvPV(ST(i), len);
        if (serow_websocket_psgix_io_add(p, len) != 0)
            croak("--websocket-psgix-io: more than %d path prefixes\n", SEROW_WEBSOCKET_MAX_PSGIX_IO);
    }

# The bounds of --hold-max-channels and --publish-max-item (Serow::Holding->check_options).
UV
MAX_CHANNELS()
  CODE:
    RETVAL = SEROW_GRIP_MAX_CHANNELS;
  OUTPUT:
    RETVAL

UV
MAX_ITEM()
  CODE:
    RETVAL = SEROW_HOLDING_MAX_ITEM;
  OUTPUT:
    RETVAL
