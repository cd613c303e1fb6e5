package Serow::Writer;
use strict;
use warnings;

use Serow (); # the methods (XS)

# The writer of a response whose body goes out in parts: what a
# psgi.streaming app gets from its responder, and what sends a body handle's
# lines.  It is C: the object and its methods are Serow::Writer in Serow.xs,
# the writer in src/psgi/psgi_writer.c (the bytes go out through
# src/psgi/psgi_response.c): new($loop) for the response the loop has started,
# write (dropped once the client has gone), send (as write, but returns false
# once the client has gone), close, closed, gone (whether the client has gone
# or hung up), given (the body bytes written so far), abandon (the request is
# over: the writer does nothing more) and poll_cb.  Each write is a chunk
# of its own for HTTP/1.1 when the app gave no Content-Length, gathered with
# the next ones while the app goes on writing and sent within a millisecond
# or two when it stops (serow_worker_loop_write_soon in
# src/worker/worker_output.c); the header of a compressed body written on
# its own waits for the next write (see compression_header_size in
# src/psgi/psgi_response.c).  This file is its manual.

1;
__END__

=head1 NAME

Serow::Writer - the streaming writer of a psgi.streaming response

=head1 METHODS

=over

=item write($data)

Sends C<$data>, as one chunk when the body is chunked. Writes that follow
each other closely leave together (one system call, one TLS record);
when the app stops writing (it sleeps, blocks in a call or computes)
without closing, what it wrote reaches the client within about two
milliseconds all the same, sent by a thread of the worker's. A write is
never cut by this: it waits whole, or goes whole. Once the client
has gone away (a write failed: it closed the connection, or read nothing
for C<--write-timeout>), writes are dropped without a word, as Starman and
nginx drop them: a client closing a tab is no error of the app's. The
access log shows the response with status 499 (nginx's "client closed
request"), and C<serow_requests_total{code="499"}> in C</metrics> counts
it. An app that would stop early (an endless stream, costly parts) asks
C<gone>.

One exception: in a response with C<Content-Encoding: gzip> (or C<x-gzip>)
or C<deflate>, first writes that together are no longer than that coding's
header (10 bytes for gzip, 2 for deflate's zlib header) are held and sent
with the next write, or at C<close>. Such bytes cannot be decoded on their
own, so nothing a client could use waits; the head of the response waits
with them. Any other write, small or not, leaves as above: a server-sent
event followed by a pause reaches the client during the pause.

=item gone

True when the client has gone: a write found it gone, or by now it has
closed the connection (or only its sending side: a client may do that and
still read, so the writer goes on writing; if it has closed, the next
write finds it gone). It asks the kernel (a C<poll> with no wait), so it
costs a system call; writes themselves never ask. An endless stream
written with C<write> must ask, or it runs until C<--request-timeout>:

    while (!$writer->gone) {
        $writer->write(next_event());
    }

=item send($data)

As C<write>, but returns false once the client has gone.

=item close

Ends the body: what is held goes out at once, with the end.

=item poll_cb($cb)

Calls C<< $cb->($writer) >> again and again until the writer is closed: a
body written from the callback, a part per call, goes out whole. The calls
end when the callback closes the writer, when it dies (the die goes
through), and when the client has gone away: a write that finds it gone
closes the writer; after a call that wrote nothing, the next waits up to
0.05 s, and none comes once the client has closed the connection (or its
sending side). C<poll_cb> then returns.

=back

Only the server makes writers: a scalar blessed into Serow::Writer (or a
class derived from it), a copy of a writer's own scalar among them, is not
one, and its methods die with C<not a Serow::Writer>.

=cut
