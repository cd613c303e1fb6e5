package Serow::Master::Holder;
use strict;
use warnings;

use Serow ();
use Serow::Log ();

# The master's side of the connection holder process (Serow::ConnectionHolder
# is the holder's own): started, stopped last, replaced when it dies.
# Methods of the master object (Serow::Master); the fields they own are
# 'holder' (the Serow::ConnectionHolder, made by new), 'holder_pid' and
# 'holder_stopping'.

# The connection holder (Serow::ConnectionHolder): keeps idle connections.
sub spawn_holder {
    my ($self) = @_;
    $self->{holder_pid} = $self->{fork}->fork_child(sub {
        close $_->{socket} for @{ $self->{listeners} }; # it accepts nothing
        # The master's signals stay blocked until the holder's C loop has
        # its own handlers, and unblocks them: a TERM or USR1 that comes
        # meanwhile waits for them instead of killing it.
        # (it logs the requests it sheds: --max-queue-wait)
        Serow::exit_now($self->{holder}->run($self->{logs}->access_log_fh) == 0 ? 0 : 1);
    }, 'TERM');
}

sub stop_holder {
    my ($self) = @_;
    return if !$self->{holder_pid} || $self->{holder_stopping}++;
    kill 'TERM', $self->{holder_pid};
}

# Whether $pid is the holder's.
sub is_holder {
    my ($self, $pid) = @_;
    return $self->{holder_pid} && $pid == $self->{holder_pid};
}

# The holder has exited (reaped): the main loop starts a new one unless the
# master is stopping.
sub holder_exited {
    my ($self, $pid, $status) = @_;
    $self->{holder_pid} = undef;
    Serow::Log->error("the connection holder $pid exited with status $status; starting a new one")
        unless $self->{stopping};
}

1;
__END__

=head1 NAME

Serow::Master::Holder - the master's side of the connection holder (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: the connection holder process (L<Serow::ConnectionHolder>)
forked, stopped once the workers are gone, and replaced if it dies.

=cut
