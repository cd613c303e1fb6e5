# xs/tls_socket.xsh - the Serow::TLSSocket::Tie package's glue, included by
# Serow.xs: psgix.io on a TLS connection, the calls its tied handle makes
# (src/psgi/psgi_tls_socket.c decides; lib/Serow/TLSSocket.pm is the Perl
# side).  Glue only, as Serow.xs.  The tie object is a reference to the
# C struct's address, 0 once it is freed.

MODULE = Serow    PACKAGE = Serow::TLSSocket::Tie    PREFIX = tls_socket_

SV *
tls_socket__read(SV *self, size_t len)
  CODE:
    struct serow_tls_socket *s = TLS_SOCKET(self);
    RETVAL = newSV(len + 1);
    ssize_t n = s ? serow_tls_socket_read(s, SvPVX(RETVAL), len) : (errno = EBADF, -1);
    if (n < 0) {
        SvREFCNT_dec(RETVAL);
        RETVAL = &PL_sv_undef;
    } else {
        SvPOK_only(RETVAL);
        SvCUR_set(RETVAL, (STRLEN)n);
        SvPVX(RETVAL)[n] = '\0';
    }
  OUTPUT:
    RETVAL

SV *
tls_socket__write(SV *self, SV *data)
  CODE:
    struct serow_tls_socket *s = TLS_SOCKET(self);
    STRLEN len;
    const char *p = SvPVbyte(data, len);
    ssize_t n = s ? serow_tls_socket_write(s, p, len) : (errno = EBADF, -1);
    RETVAL = n < 0 ? &PL_sv_undef : newSViv(n);
  OUTPUT:
    RETVAL

int
tls_socket__close(SV *self)
  CODE:
    struct serow_tls_socket *s = TLS_SOCKET(self);
    RETVAL = s && serow_tls_socket_close(s) == 0;
  OUTPUT:
    RETVAL

UV
tls_socket_PENDING(SV *self)
  CODE:
    struct serow_tls_socket *s = TLS_SOCKET(self);
    RETVAL = s ? serow_tls_socket_pending(s) : 0;
  OUTPUT:
    RETVAL

SV *
tls_socket_FILENO(SV *self)
  CODE:
    struct serow_tls_socket *s = TLS_SOCKET(self);
    int fd = s ? serow_tls_socket_fileno(s) : -1;
    RETVAL = fd < 0 ? &PL_sv_undef : newSViv(fd);
  OUTPUT:
    RETVAL

void
tls_socket_DESTROY(SV *self)
  CODE:
    struct serow_tls_socket *s = TLS_SOCKET(self);
    if (s) {
        sv_setiv(SvRV(self), 0);
        serow_tls_socket_free(s);
    }
