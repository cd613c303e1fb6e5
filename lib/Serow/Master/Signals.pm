package Serow::Master::Signals;
use strict;
use warnings;

# The master's signals: which it handles, what each asks of it, the queue
# its handlers fill and the main loop empties (Serow::Master, run).  Methods
# of the master object; the field they own is 'pending'.  What a signal
# does is its method, with the concern it belongs to: stop (Serow::Master),
# restart_workers (Serow::Master::Generations), add_worker and remove_worker
# (Serow::Master::Workers), reopen_logs (Serow::Master::Logs).

my @SIGNALS = qw(TERM INT QUIT HUP TTIN TTOU USR1 CHLD);

# What each signal asks of the master (CHLD only wakes it up to reap).
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
# returns (name => handler), set from the start, queue them instead, and run
# handles them before anything else: a stop that came early stops the master
# before it has started any process.  USR2 (the workers' parent-death
# signal, which is nothing to the master) is ignored from the start.
my @EARLY_SIGNALS;

sub early_signal_handlers {
    my ($class) = @_;
    return (USR2 => 'IGNORE', map { $_ => \&_early_signal } grep { $_ ne 'CHLD' } @SIGNALS);
}

sub _early_signal { push @EARLY_SIGNALS, $_[0] }

# The signals the master handles (and blocks across its forks).
sub signal_names { @SIGNALS }

# The master's handlers while it runs, one for each of signal_names (in
# that order): each queues its signal for the main loop.
sub queueing_signal_handlers {
    my ($self) = @_;
    return map { my $sig = $_; sub { push @{ $self->{pending} }, $sig } } @SIGNALS;
}

# Once the master's own handlers are set: the signals that came early go
# first in the queue.
sub take_early_signals {
    my ($self) = @_;
    unshift @{ $self->{pending} }, splice(@EARLY_SIGNALS);
}

sub handle_signals {
    my ($self) = @_;
    while (defined(my $sig = shift @{ $self->{pending} })) {
        my $method = $ON_SIGNAL{$sig} or next;
        # Once stopping, only the exit is left: a HUP or TTIN must not start
        # workers that nobody would stop.
        next if $self->{stopping};
        $self->$method($sig);
    }
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
