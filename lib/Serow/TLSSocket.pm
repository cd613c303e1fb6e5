package Serow::TLSSocket;
use strict;
use warnings;
use IO::Handle ();

# psgix.io on a TLS connection: a handle opened on a duplicate of the
# socket (so that fileno, select, poll and event loops see the socket) and
# tied to the TLS transport (src/psgi/psgi_tls_socket.c), whose reads give
# the plaintext the client sent and whose writes are sealed into records.
# Made by the worker (lib/Serow/Worker.pm) when the app first reads
# psgix.io.  docs/psgi.md says what an app may do with it.

our @ISA = ('IO::Handle');

# Bytes opened and not read yet, which a read gives at once and select
# cannot see: as IO::Socket::SSL's pending.
sub pending {
    my ($self) = @_;
    my $tie = tied *$self;
    return $tie ? $tie->PENDING : 0;
}

package Serow::TLSSocket::Tie;
use strict;
use warnings;

# The tie object comes made (a reference to its C struct): TIEHANDLE takes it.
sub TIEHANDLE { my ($class, $made) = @_; return $made }

# sysread and read: $_[1] gets what was read at $offset, as sysread does.
sub READ {
    my ($self, undef, $len, $offset) = @_;
    my $got = $self->_read($len);
    return undef unless defined $got;
    $_[1] //= '';
    $offset //= 0;
    $offset += length $_[1] if $offset < 0;
    $_[1] .= "\0" x ($offset - length $_[1]) if $offset > length $_[1];
    substr($_[1], $offset) = $got;
    return length $got;
}

# syswrite: up to $len bytes from $offset; the count sent.
sub WRITE {
    my ($self, $data, $len, $offset) = @_;
    $offset //= 0;
    $offset += length $data if $offset < 0;
    return $self->_write(substr($data, $offset, $len // length($data) - $offset));
}

# print and printf: all of it, or false.
sub PRINT {
    my ($self, @list) = @_;
    my $data = join($, // '', @list) . ($\ // '');
    while (length $data) {
        my $n = $self->_write($data);
        return 0 unless $n;
        substr($data, 0, $n, '');
    }
    return 1;
}

sub PRINTF {
    my ($self, $format, @list) = @_;
    local $\;
    return $self->PRINT(sprintf $format, @list);
}

# readline: a byte at a time, so that nothing is read past the line (a
# line protocol before an upgrade: what follows is read with sysread).
sub READLINE {
    my ($self) = @_;
    return $self->_all_lines if wantarray;
    my $line = '';
    for (;;) {
        my $c = $self->_read(1);
        return length $line ? $line : undef if !defined $c || $c eq '';
        $line .= $c;
        return $line if defined $/ && length $/ && substr($line, -length $/) eq $/;
    }
}

sub _all_lines {
    my ($self) = @_;
    my @lines;
    while (defined(my $line = $self->READLINE)) { push @lines, $line }
    return @lines;
}

sub GETC {
    my ($self) = @_;
    my $c = $self->_read(1);
    return defined $c && length $c ? $c : undef;
}

sub CLOSE   { my ($self) = @_; return $self->_close }
sub BINMODE { return 1 }
sub EOF     { return 0 } # (cannot be known without a read that may wait)

1;
