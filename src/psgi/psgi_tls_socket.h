/*
 * psgi_tls_socket.h - psgix.io on a TLS connection: a handle whose reads
 * give the plaintext the client sent and whose writes are sealed into
 * records (see psgi_tls_socket.c; the Perl side is lib/Serow/TLSSocket.pm).
 */
#ifndef SEROW_PSGI_TLS_SOCKET_H
#define SEROW_PSGI_TLS_SOCKET_H

#include <stddef.h>
#include <sys/types.h>

#include "EXTERN.h"
#include "perl.h"

struct serow_request;
struct serow_tls_socket;

/* The Perl code that makes the handle: it gets a duplicate's descriptor
 * and the tie object (Serow::TLSSocket::Tie), and returns the handle. */
void serow_tls_socket_set_opener(pTHX_ SV *code);

/* psgix.io for req's TLS connection (a new reference), or NULL. */
SV *serow_tls_socket_make(pTHX_ struct serow_request *req);

/* The handle's operations, as the system calls (-1 with errno).  They wait
 * when the socket is blocking (the handle's default) and not when the app
 * made it non-blocking.  read's 0 is the end (close_notify, or the
 * connection's end); write's count may be short only when non-blocking;
 * close sends close_notify; pending is the plaintext in the process that a
 * read gives at once (select cannot see it). */
ssize_t serow_tls_socket_read(struct serow_tls_socket *s, void *into, size_t len);
ssize_t serow_tls_socket_write(struct serow_tls_socket *s, const void *data, size_t len);
int serow_tls_socket_close(struct serow_tls_socket *s);
size_t serow_tls_socket_pending(struct serow_tls_socket *s);
/* The handle's descriptor for select and poll: the Perl handle's own
 * duplicate of the socket, the same for its whole life (-1 once closed). */
int serow_tls_socket_fileno(struct serow_tls_socket *s);
/* The tie object is freed: the connection, if it is the handle's, ends. */
void serow_tls_socket_free(struct serow_tls_socket *s);

/* req ends with the app keeping its handle: the connection becomes the
 * handle's, and the worker forgets it without a close_notify.  0, or -1
 * (the handle is then cut off and the connection lost). */
int serow_tls_socket_take_connection(struct serow_request *req);
/* req ends otherwise: the handle no longer reaches its connection. */
void serow_tls_socket_detach(struct serow_request *req);

#endif
