package Serow::Writer;
use strict;
use warnings;

use Serow (); # the methods (XS)

# The writer of a response whose body goes out in parts: what a
# psgi.streaming app gets from its responder, and what sends a body handle's
# lines.  It is C: the object and its methods are Serow::Writer in Serow.xs,
# the writer in src/psgi/psgi_writer.c (the bytes go out through
# src/psgi/psgi_response.c): new($loop) for the response the loop has started,
# write, send (as write, but returns false instead of dying when the client
# has gone), close, closed, gone, given (the body bytes written so far),
# abandon (the request is over: the writer does nothing more) and poll_cb.
# Each write goes out at once, in one writev (a chunk of its own for
# HTTP/1.1 when the app gave no Content-Length), with one exception: the
# header of a compressed body written on its own (see
# compression_header_size in src/psgi/psgi_response.c).  CLIENT_GONE, what write
# and poll_cb die with when the client has gone away, is a constant made
# there too.  This file is its manual.

1;
__END__

=head1 NAME

Serow::Writer - the streaming writer of a psgi.streaming response

=head1 METHODS

=over

=item write($data)

Sends C<$data> now, as one chunk when the body is chunked. Dies when the
client has gone away, so that an endless stream ends with it.

One exception: in a response with C<Content-Encoding: gzip> (or C<x-gzip>)
or C<deflate>, first writes that together are no longer than that coding's
header (10 bytes for gzip, 2 for deflate's zlib header) are held and sent
with the next write, or at C<close>. Such bytes cannot be decoded on their
own, so nothing a client could use waits; the head of the response waits
with them. Any other write, small or not, leaves at once: a server-sent
event followed by a pause reaches the client during the pause.

=item close

Ends the body (after sending held bytes).

=item poll_cb($cb)

Calls C<< $cb->($writer) >> again and again until the writer is closed: a
body written from the callback, a part per call, goes out whole. The calls
end when the callback closes the writer, or dies (a write dies when the
client has gone away). After a call that wrote nothing, the next waits up
to 0.05 s, and none comes once the client has closed the connection (or its
sending side): it dies as a write would.

=back

Only the server makes writers: a scalar blessed into Serow::Writer (or a
class derived from it), a copy of a writer's own scalar among them, is not
one, and its methods die with C<not a Serow::Writer>.

=cut
