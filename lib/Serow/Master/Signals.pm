package Serow::Master::Signals;
use strict;
use warnings;

# The master's signals: which it handles, what each asks of it, and the
# queue its handlers fill and the main loop empties (Serow::Master, run).
# What a request does is the master's to carry out (Serow::Master,
# handle_signals), with the component it concerns.

my @SIGNALS = qw(TERM INT QUIT HUP TTIN TTOU USR1 CHLD);

# What each signal asks of the master (CHLD only wakes it up to reap): the
# name of a method of Serow::Master.
my %ON_SIGNAL = (
    TERM => 'stop',
    INT  => 'stop',
    QUIT => 'stop',
    HUP  => 'restart_workers',
    TTIN => 'add_worker',
    TTOU => 'remove_worker',
    USR1 => 'reopen_logs',
);

# Signals that came before run set the master's handlers (while the app
# loads, the sockets open, the pid file is written): without a handler, TERM,
# INT, QUIT, HUP and USR1 would kill the process (leaving the pid file
# behind) and TTIN, TTOU stop it.  The handlers early_signal_handlers
# returns (name => handler), set from the start, queue them instead, and the
# master handles them before anything else (take_early): a stop that came
# early stops the master before it has started any process.  USR2 (the
# workers' parent-death signal, which is nothing to the master) is ignored
# from the start.
my @EARLY_SIGNALS;

sub early_signal_handlers {
    my ($class) = @_;
    return (USR2 => 'IGNORE', map { $_ => \&_early_signal } grep { $_ ne 'CHLD' } @SIGNALS);
}

sub _early_signal { push @EARLY_SIGNALS, $_[0] }

# The signals the master handles (and blocks across its forks).
sub names { @SIGNALS }

sub new {
    my ($class) = @_;
    return bless { pending => [] }, $class; # signals received, in order
}

# The master's handlers while it runs, one for each of names (in that
# order): each queues its signal.
sub handlers {
    my ($self) = @_;
    return map { my $sig = $_; sub { push @{ $self->{pending} }, $sig } } @SIGNALS;
}

# Once the master's own handlers are set: the signals that came early go
# first in the queue.
sub take_early {
    my ($self) = @_;
    unshift @{ $self->{pending} }, splice(@EARLY_SIGNALS);
}

# Whether a signal waits in the queue.
sub pending {
    my ($self) = @_;
    return scalar @{ $self->{pending} };
}

# The next signal that asks something of the master, as (method, signal);
# the empty list once the queue is empty.
sub next_request {
    my ($self) = @_;
    while (defined(my $sig = shift @{ $self->{pending} })) {
        my $method = $ON_SIGNAL{$sig} or next;
        return ($method, $sig);
    }
    return;
}

1;
__END__

=head1 NAME

Serow::Master::Signals - the signals of the master (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: which signals it handles, what each asks of it, and
the queue the main loop handles them from. The signals themselves are
described in L<Serow::Master>.

=cut
