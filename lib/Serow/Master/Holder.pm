package Serow::Master::Holder;
use strict;
use warnings;

use Serow ();
use Serow::ConnectionHolder ();
use Serow::Log ();

# The master's side of the connection holder process (Serow::ConnectionHolder
# is the holder's own): started, stopped last, replaced when it dies.

# $fork: Serow::Master::Fork; $logs: Serow::Master::Logs (the holder logs
# the requests it sheds, --max-queue-wait, on the master's access log).
sub new {
    my ($class, %args) = @_;
    return bless {
        fork      => $args{fork},
        logs      => $args{logs},
        listeners => $args{listeners},
        # its channels, made before any worker is forked
        holder    => Serow::ConnectionHolder->new(shared => $args{shared}, options => $args{options}),
        pid       => undef, # the running holder's
        term_sent => 0,
    }, $class;
}

# The ends of the holder's channels each worker takes.
sub worker_channels {
    my ($self) = @_;
    return $self->{holder}->worker_channels;
}

# The holder's pid while it runs, or undef.
sub pid { $_[0]{pid} }

# Forks the holder.
sub spawn {
    my ($self) = @_;
    $self->{pid} = $self->{fork}->fork_child(sub {
        close $_->{socket} for @{ $self->{listeners} }; # it accepts nothing
        # The master's signals stay blocked until the holder's C loop has
        # its own handlers, and unblocks them: a TERM or USR1 that comes
        # meanwhile waits for them instead of killing it.
        Serow::exit_now($self->{holder}->run($self->{logs}->access_log_fh) == 0 ? 0 : 1);
    }, 'TERM');
}

# The stop, once the workers have handed their idle connections over: the
# holder closes them and goes.
sub stop {
    my ($self) = @_;
    return if !$self->{pid} || $self->{term_sent}++;
    kill 'TERM', $self->{pid};
}

# USR1: the holder reopens its logs.
sub reopen_logs {
    my ($self) = @_;
    kill 'USR1', $self->{pid} if $self->{pid};
}

# Whether $pid is the holder's.
sub is_holder {
    my ($self, $pid) = @_;
    return $self->{pid} && $pid == $self->{pid};
}

# The holder has exited (reaped): the main loop starts a new one unless the
# master is $stopping.
sub exited {
    my ($self, $pid, $status, $stopping) = @_;
    $self->{pid} = undef;
    Serow::Log->error("the connection holder $pid exited with status $status; starting a new one")
        unless $stopping;
}

1;
__END__

=head1 NAME

Serow::Master::Holder - the master's side of the connection holder (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: the connection holder process (L<Serow::ConnectionHolder>)
forked, stopped once the workers are gone, and replaced if it dies.

=cut
