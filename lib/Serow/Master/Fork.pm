package Serow::Master::Fork;
use strict;
use warnings;

use Serow ();
use Serow::Log ();
use Serow::Master::Signals ();

# How the master forks a child, whichever it is (a worker, the connection
# holder, a generation process): its signals blocked across the fork, the
# master's descriptors that are not the child's closed, privileges dropped,
# the parent-death signal set.

sub new {
    my ($class, %args) = @_;
    return bless {
        master_pid => $$,
        privileges => $args{privileges}, # Serow::Privileges: dropped in every child, or undef
        in_child   => sub {}, # closes the master's own descriptors in a child
        on_failure => sub {}, # called when fork fails
    }, $class;
}

# The master's pid: a child whose parent is another has lost its master.
sub master_pid { $_[0]{master_pid} }

# What closes, in every child, the descriptors that are the master's alone
# (the workers' doorbells, the generations' channels, systemd's socket).
sub in_child {
    my ($self, $callback) = @_;
    $self->{in_child} = $callback;
}

# What to do when a fork fails (the master holds off new workers).
sub on_failure {
    my ($self, $callback) = @_;
    $self->{on_failure} = $callback;
}

# Forks a child that runs $child_main (which never returns); returns the pid,
# or undef when fork failed.  The kernel sends the child $death_signal when
# the master dies.
sub fork_child {
    my ($self, $child_main, $death_signal) = @_;
    # Signals stay blocked across fork so that the child never runs the
    # master's handlers; the child unblocks them once its own are set.
    my $old = Serow::block_signals(Serow::Master::Signals->names);
    my $pid = fork;
    if (!defined $pid) {
        Serow::set_signal_mask($old);
        Serow::Log->error("cannot fork: $!");
        $self->{on_failure}->();
        return undef;
    }
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for Serow::Master::Signals->names;
        $self->{in_child}->();
        if ($self->{privileges} && !eval { $self->{privileges}->drop }) {
            Serow::Log->error("cannot drop privileges: $@");
            Serow::exit_now(1);
        }
        # A child whose master is gone finishes its work and leaves; the
        # master may have died before this line, leaving nobody to signal it.
        # (After dropping privileges: a change of uid clears this setting.)
        Serow::set_parent_death_signal(Serow::signal_number($death_signal));
        Serow::exit_now(0) if getppid() != $self->{master_pid};
        $child_main->($old);
    }
    Serow::set_signal_mask($old);
    return $pid;
}

1;
__END__

=head1 NAME

Serow::Master::Fork - how the master forks its children (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: every child (worker, connection holder, generation
process) is forked by C<fork_child>, with the master's signals blocked
across the fork, the master's descriptors that are not the child's closed,
C<--user>/C<--group> applied, and the parent-death signal set.

=cut
