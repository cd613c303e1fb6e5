# xs/publish.xsh - the Serow::Publish::Items package's glue, included by
# Serow.xs: the one rule for a channel name and an item id
# (src/http/grip_instruct.h), for the names and ids that come with a publish
# over HTTP.  Glue only, as Serow.xs.

MODULE = Serow    PACKAGE = Serow::Publish::Items    PREFIX = items_

int
items_channel_name_ok(SV *name)
  CODE:
    STRLEN len;
    const char *p = SvPVbyte(name, len);
    RETVAL = serow_grip_channel_name_ok(p, len);
  OUTPUT:
    RETVAL

int
items_id_ok(SV *id)
  CODE:
    STRLEN len;
    const char *p = SvPVbyte(id, len);
    RETVAL = serow_grip_id_ok(p, len);
  OUTPUT:
    RETVAL
