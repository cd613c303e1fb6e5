package Serow::Notify;
use strict;
use warnings;

# systemd's notification protocol (sd_notify(3)), for Type=notify units:
# datagrams of "KEY=VALUE" lines to the UNIX socket $NOTIFY_SOCKET names.
# A few lines with Socket rather than a library: the master loads nothing
# it can do without, every worker carrying what it loaded (Serow::Listener).
use Socket qw(AF_UNIX SOCK_DGRAM MSG_DONTWAIT pack_sockaddr_un);
use Time::HiRes ();

use Serow::Log ();

# What systemd sets for the service's main process, and nobody else may act
# on: taken out of the environment before the app loads, so that neither
# the app nor a process it starts talks to systemd as if it were the service.
my @VARIABLES = qw(NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID);

# A Serow::Notify for the socket $NOTIFY_SOCKET names, or undef when it is
# unset (not under systemd, or not Type=notify).  Takes the variables out of
# %ENV either way.
sub from_env {
    my ($class) = @_;
    my %env = map { $_ => delete $ENV{$_} } @VARIABLES;
    my $path = $env{NOTIFY_SOCKET};
    return undef if !defined $path || $path eq '';
    # "@name" is a name in the abstract namespace: a leading NUL on the wire.
    (my $address = $path) =~ s/\A@/\0/;
    my $socket;
    if (!socket($socket, AF_UNIX, SOCK_DGRAM, 0)) {
        Serow::Log->error("NOTIFY_SOCKET: cannot make a socket: $!; systemd is not told");
        return undef;
    }
    my $self = bless { socket => $socket, path => $path, address => pack_sockaddr_un($address),
                       watchdog_interval => undef, watchdog_next => undef }, $class;
    # WATCHDOG_PID names the process the watchdog is for: not this one, none.
    my $usec = $env{WATCHDOG_USEC};
    if (defined $usec && $usec =~ /\A[0-9]+\z/ && $usec > 0
            && (!defined $env{WATCHDOG_PID} || $env{WATCHDOG_PID} eq $$)) {
        # Twice per period, as sd_watchdog_enabled(3) advises: a late wake-up
        # of the master must not miss one.
        $self->{watchdog_interval} = $usec / 2 / 1e6;
        $self->{watchdog_next} = Time::HiRes::time;
    }
    return $self;
}

# The master's children (workers, holder) do not speak for the service.
sub close_in_child { close $_[0]{socket} }

sub ready { $_[0]->message("READY=1") }
sub stopping { $_[0]->message("STOPPING=1") }

# With the time systemd (253 and later, Type=notify-reload) wants beside it
# to match the reload to the one it asked for.
sub reloading {
    my ($self) = @_;
    my $usec = int(Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) * 1e6);
    $self->message("RELOADING=1\nMONOTONIC_USEC=$usec");
}

# STATUS= (what systemctl status shows), only when it changed.
sub status {
    my ($self, $text) = @_;
    return if defined $self->{status} && $self->{status} eq $text;
    $self->{status} = $text;
    $self->message("STATUS=$text");
}

# WATCHDOG=1 when it is due; the seconds until the next one (undef: no
# watchdog), for the master's sleep.
sub watchdog {
    my ($self) = @_;
    my $interval = $self->{watchdog_interval} // return undef;
    my $now = Time::HiRes::time;
    if ($now >= $self->{watchdog_next}) {
        $self->message("WATCHDOG=1");
        $self->{watchdog_next} = $now + $interval;
    }
    return $self->{watchdog_next} - $now;
}

# Never blocks the master: a message systemd has no room for is dropped (as
# sd_notify's would fail).  A failure is logged once, not every second.
sub message {
    my ($self, $message) = @_;
    return 1 if defined CORE::send($self->{socket}, "$message\n", MSG_DONTWAIT, $self->{address});
    Serow::Log->error("cannot notify systemd at NOTIFY_SOCKET $self->{path}: $!")
        unless $self->{failed}++;
    return 0;
}

1;
__END__

=head1 NAME

Serow::Notify - tell systemd (Type=notify) the server's state

=head1 DESCRIPTION

Under a C<Type=notify> unit systemd sets C<NOTIFY_SOCKET>; the master sends
C<READY=1> once every worker of a generation has started and the connection
holder runs, C<RELOADING=1> (with C<MONOTONIC_USEC=>) on HUP and C<READY=1>
again once the new workers are up, C<STOPPING=1> on a stop, C<STATUS=>
(workers busy and idle, connections queued and idle) when it changes, and
C<WATCHDOG=1> twice per C<WATCHDOG_USEC> when systemd set it (and
C<WATCHDOG_PID>, if set, is the master). C<from_env> removes
C<NOTIFY_SOCKET>, C<WATCHDOG_USEC> and C<WATCHDOG_PID> from the
environment, so that the app and its children do not see them. See
F<docs/operations.md>.

=cut
