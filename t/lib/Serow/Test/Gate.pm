package Serow::Test::Gate;
use strict;
use warnings;

# gate(): a pipe an app can wait on until the test lets it through, for a
# request that is in flight for as long as the test wants.
#   app:  $gate->wait           (or, in an app file: Serow::Test::Gate->from_fd($ENV{...})->wait)
#   test: $gate->open($n)       (lets $n waiting requests through)
# The read end stays open across exec: pass $gate->fd to an app file.

use Exporter 'import';
use Fcntl ();

our @EXPORT_OK = qw(gate);

sub gate { __PACKAGE__->new }

sub new {
    my ($class) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    my $flags = fcntl($r, Fcntl::F_GETFD(), 0);
    fcntl($r, Fcntl::F_SETFD(), $flags & ~Fcntl::FD_CLOEXEC());
    # wait reads only after select: a read that finds the byte taken by
    # another waiter must not block (see wait).  (The flag is on the pipe,
    # shared with every process that has the descriptor, from_fd's too.)
    $flags = fcntl($r, Fcntl::F_GETFL(), 0);
    fcntl($r, Fcntl::F_SETFL(), $flags | Fcntl::O_NONBLOCK()) or die "fcntl: $!";
    return bless { r => $r, w => $w }, $class;
}

sub from_fd {
    my ($class, $fd) = @_;
    open(my $r, '<&=', $fd) or die "gate fd $fd: $!";
    return bless { r => $r }, $class;
}

sub fd { fileno $_[0]{r} }

# In the app: blocks until the test opens the gate.  A signal does not end
# the wait: a worker ignores the master's signals (the master asks it to
# stop through shared memory, and it does once the request is answered),
# and the handler of any other signal runs and the wait goes on.  Perl runs
# a signal's handler only between statements,
# and a blocking call that a signal interrupts gives it that chance; but a
# signal that lands after the last statement boundary and before the call
# blocks has already been caught, so nothing interrupts the call and the
# handler waits until the gate opens (a test waiting for the handler's log
# line before opening the gate would wait in vain).  So the wait wakes up
# every WAKE_SECONDS: a handler runs at most that late.
use constant WAKE_SECONDS => 0.1;

sub wait {
    my ($self) = @_;
    my $fd = fileno $self->{r};
    for (;;) {
        my $n = sysread($self->{r}, my $byte, 1);
        return 1 if $n;
        return 0 if defined $n; # the write end is closed: the test is gone
        return 0 unless $!{EAGAIN} || $!{EINTR};
        my $readable = '';
        vec($readable, $fd, 1) = 1;
        select($readable, undef, undef, WAKE_SECONDS); # a byte, a signal or the time
    }
}

sub open {
    my ($self, $n) = @_;
    syswrite($self->{w}, 'x' x ($n // 1)) or die "gate: $!";
}

1;
