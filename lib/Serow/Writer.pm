package Serow::Writer;
use strict;
use warnings;

# The writer of a response whose body goes out in parts: what a
# psgi.streaming app gets from its responder, and what sends a body handle's
# lines.  Each write goes out at once (a chunk of its own for HTTP/1.1 when
# the app gave no Content-Length), with one exception: the header of a
# compressed body written on its own (see compression_header_size).

# The header a compressed body starts with: the gzip member header (RFC 1952
# 2.3, 10 bytes without its optional fields) and the zlib header of deflate
# (RFC 1950 2.2, 2 bytes).  First writes that together are no longer than
# this hold nothing a client could decode, so holding them until the next
# write (or the end of the body) delays nothing, and saves the header a
# chunk (and a packet) of its own.  Every other write goes out at once: a
# server-sent event or a long-poll answer is never held.
my %COMPRESSION_HEADER_SIZE = (gzip => 10, 'x-gzip' => 10, deflate => 2);

# How many first bytes of a body with these response headers may be held:
# the header size of its outermost Content-Encoding, 0 for any other body.
sub compression_header_size {
    my ($headers) = @_;
    my $encoding = '';
    for (my $i = 0; $i + 1 < @$headers; $i += 2) {
        $encoding = $headers->[$i + 1] if lc $headers->[$i] eq 'content-encoding';
    }
    # "gzip, identity" style lists: the coding applied last comes last.
    my ($outermost) = reverse grep { length } split /\s*,\s*/, lc($encoding) =~ s/\A\s+|\s+\z//gr;
    return $COMPRESSION_HEADER_SIZE{ $outermost // '' } // 0;
}

# What write (and poll_cb) die with when the client has gone away.
use constant CLIENT_GONE => "Serow: the client has gone away\n";

# How long poll_cb waits for the client to hang up after a call of its
# callback that wrote nothing, before it calls it again.
use constant POLL_IDLE_SECONDS => 0.05;

# new($loop, hold => BYTES): BYTES from compression_header_size.
sub new {
    my ($class, $loop, %opts) = @_;
    return bless { loop => $loop, closed => 0, hold => $opts{hold} // 0, held => '' }, $class;
}

# Dies when the client has gone away: an app streaming without end (server-
# sent events, say) would otherwise keep the worker forever.
sub write {
    my ($self, $data) = @_;
    return if $self->{closed} || !defined $data || !length $data;
    return if $self->send($data);
    die CLIENT_GONE;
}

# As write, but returns false instead of dying when the client has gone.
sub send {
    my ($self, $data) = @_;
    return 1 if $self->{closed} || !length $data;
    if ($self->{hold}) {
        if (length($self->{held}) + length($data) <= $self->{hold}) {
            $self->{held} .= $data;
            return 1;
        }
        $data = $self->{held} . $data;
        $self->{held} = '';
        $self->{hold} = 0; # one body byte has gone: nothing more is held
    }
    return 1 if $self->{loop}->write_body($data);
    $self->{gone} = $self->{closed} = 1;
    return 0;
}

sub close {
    my ($self) = @_;
    return if $self->{closed};
    if (length $self->{held}) {
        $self->{hold} = 0;
        $self->send($self->{held}) or return;
    }
    $self->{closed} = 1;
    $self->{loop}->finish_body;
    return;
}

sub closed { $_[0]{closed} }
sub gone { $_[0]{gone} }

# The body bytes written so far, held here or given to the response: asked
# only by poll_cb, so that a write costs no count of its own.
sub given {
    my ($self) = @_;
    return $self->{loop}->body_given + length $self->{held};
}

# The request is over: this writer does nothing more.
sub abandon { $_[0]{closed} = 1 }

# psgi.nonblocking is false: there is no event loop to call back from, and
# the writer can always take more (a write waits until it has gone).  So
# the callback runs here, again and again while the writer is open, as a
# server with an event loop would call it each time the socket can take more:
# a stream written from it goes on until it closes the writer.  A client
# that goes away ends it: a write dies then; and a call that wrote nothing
# waits up to POLL_IDLE_SECONDS for the client to hang up before the next
# one, so that a callback with nothing to send neither spins the CPU nor
# outlives its client.
sub poll_cb {
    my ($self, $cb) = @_;
    until ($self->{closed}) {
        my $given = $self->given;
        $cb->($self);
        next if $self->{closed} || $self->given != $given;
        if ($self->{loop}->client_hung_up(POLL_IDLE_SECONDS)) {
            $self->{gone} = $self->{closed} = 1;
            die CLIENT_GONE;
        }
    }
    return;
}

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

=cut
