package Serow::Writer;
use strict;
use warnings;

# The writer a psgi.streaming app gets from its responder.  Each write goes
# out at once (chunked for HTTP/1.1 when the app gave no Content-Length).

sub new {
    my ($class, $loop) = @_;
    return bless { loop => $loop, closed => 0 }, $class;
}

# Dies when the client has gone away: an app streaming without end (server-
# sent events, say) would otherwise keep the worker forever.
sub write {
    my ($self, $data) = @_;
    return if $self->{closed} || !defined $data || !length $data;
    if (!$self->{loop}->write_body($data)) {
        $self->{gone} = $self->{closed} = 1;
        die "Serow: the client has gone away\n";
    }
    return;
}

sub close {
    my ($self) = @_;
    return if $self->{closed};
    $self->{closed} = 1;
    $self->{loop}->finish_body;
    return;
}

sub closed { $_[0]{closed} }
sub gone { $_[0]{gone} }

# The request is over: this writer does nothing more.
sub abandon { $_[0]{closed} = 1 }

# psgi.nonblocking is false: the callback can be run at once.
sub poll_cb {
    my ($self, $cb) = @_;
    $cb->($self);
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

=item close

Ends the body.

=back

=cut
