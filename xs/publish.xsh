# xs/publish.xsh - the Serow::Publish::Items package's glue, included by
# Serow.xs: the one rule for a channel name and an item id
# (src/http/grip_instruct.h), for the names and ids that come with a publish
# over HTTP; and Serow::Publish::Redis's: the rule for --publish-redis's
# prefix (src/holder/redis_link.h).  Glue only, as Serow.xs.

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

MODULE = Serow    PACKAGE = Serow::Publish::Redis    PREFIX = redis_

int
redis_prefix_ok(SV *prefix)
  CODE:
    STRLEN len;
    const char *p = SvPVbyte(prefix, len);
    RETVAL = serow_redis_prefix_ok(p, len);
  OUTPUT:
    RETVAL
