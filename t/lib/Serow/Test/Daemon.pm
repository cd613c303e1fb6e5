package Serow::Test::Daemon;
use strict;
use warnings;

# What the programs a test starts beside Serow have in common (nginx,
# HAProxy, Chromium: Serow::Test::Nginx, ::HAProxy, ::Chromium are its
# subclasses): a temp dir for their files, a process group of their own,
# a stop the test asks for, and a kill of the group should the test end
# first.
#
#   my $self = $class->new('nginx');   # in a subclass: its dir made
#   $self->{pid} = fork_group(sub { ... exec ... });
#   $self->stop;                  # ask_to_stop, then waited for (or killed)
#
# A subclass says how it is asked to stop (ask_to_stop: a signal, a
# command); the object holds the process's pid, port and exit status.

use File::Temp ();
use Serow::Test::Common qw(STOP_TIMEOUT);
use Serow::Test::Process qw(wait_for_exit kill_group);

sub new {
    my ($class, $name) = @_;
    # owner: a process forked later from the test inherits this object and
    # must not stop this program when it exits.
    return bless { dir => File::Temp->newdir("serow-$name-XXXXXX", TMPDIR => 1), owner => $$ }, $class;
}

sub port { $_[0]{port} }
sub pid { $_[0]{pid} }
sub dir { "$_[0]{dir}" }

# The text of a file in its dir, '' when there is none.
sub _slurp {
    my ($self, $name) = @_;
    open my $fh, '<', "$self->{dir}/$name" or return '';
    local $/;
    return scalar <$fh>;
}

# Asked to stop, then waited for STOP_TIMEOUT, then killed with its group.
# Returns its wait status.
sub stop {
    my ($self) = @_;
    return $self->{exit_status} if defined $self->{exit_status} || !$self->{pid};
    $self->ask_to_stop;
    return $self->{exit_status} = wait_for_exit($self->{pid}, STOP_TIMEOUT) // kill_group($self->{pid});
}

sub DESTROY {
    my ($self) = @_;
    local ($?, $@, $!);
    return unless $self->{pid} && !defined $self->{exit_status} && $self->{owner} == $$;
    kill_group($self->{pid});
}

1;
