package Serow::Master::Logs;
use strict;
use warnings;

use Serow::Log ();

# The logs the master opens for its children: --access-log, opened once and
# inherited, and the master's part of USR1's reopening.

# --access-log FILE is opened here, in the master, and each worker writes on
# a copy of the descriptor: a worker never fails to start for want of the
# right to open the file (as it may after dropping privileges).  The master
# opens it again on USR1, so that workers started after a rotation write to
# the new file; the workers reopen it themselves.
sub new {
    my ($class, %args) = @_;
    return bless {
        options       => $args{options},
        access_log_fh => undef, # the master's handle on --access-log FILE, or undef
    }, $class;
}

# Opens --access-log FILE (again); returns false (with $!) when it cannot.
sub open_access_log {
    my ($self) = @_;
    my $file = $self->{options}{access_log};
    return 1 if !defined $file || $file eq '-' || $file eq 'stderr';
    open(my $fh, '>>', $file) or return 0;
    $self->{access_log_fh} = $fh;
    return 1;
}

# The handle on --access-log FILE, or undef (standard error, or none).
sub access_log_fh { $_[0]{access_log_fh} }

# (path, handle) for a worker, or (undef, undef) for standard error; the
# empty list without --access-log.
sub access_log_for_worker {
    my ($self) = @_;
    my $file = $self->{options}{access_log} // return;
    return (undef, undef) unless $self->{access_log_fh};
    return ($file, $self->{access_log_fh});
}

# In a generation process (Serow::Generation): the access log it inherited
# is not its own; each worker it forks gets the master's current one.
sub close_access_log {
    my ($self) = @_;
    close $self->{access_log_fh} if $self->{access_log_fh};
    $self->{access_log_fh} = undef;
}

# In a worker a generation process forked: the access log is the descriptor
# the master sent with the request for it ($fd undef: none).  False (with
# $!) when the descriptor cannot be used.
sub use_access_log_fd {
    my ($self, $fd) = @_;
    $self->{access_log_fh} = undef;
    return 1 unless defined $fd;
    open(my $fh, '>>&=', $fd) or return 0;
    $self->{access_log_fh} = $fh;
    return 1;
}

# logrotate has moved the logs away: the master opens them again (for the
# workers it starts from now on).  False when there is no log to reopen;
# true when the workers and the holder are to reopen theirs too.
sub reopen {
    my ($self, $sig) = @_;
    my $options = $self->{options};
    my $error_log = Serow::Log->file($options->{error_log}); # (syslog has no file)
    return 0 unless defined $options->{access_log} || defined $error_log;
    if (defined $error_log) {
        Serow::Log->open_file($error_log) or Serow::Log->warn("cannot reopen the "
            . "error log $error_log: $!; still writing to the old file");
    }
    Serow::Log->info("received SIG$sig: the master and the workers reopen their logs");
    if (defined $options->{access_log}) {
        $self->open_access_log or Serow::Log->warn("cannot reopen the access log "
            . "$options->{access_log}: $!; new workers write to the old file");
    }
    return 1;
}

1;
__END__

=head1 NAME

Serow::Master::Logs - the logs the master opens for its children (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: C<--access-log> opened once in the master, each worker
and the holder writing on a copy of its descriptor; on USR1, the master's
logs opened again (the master then tells every worker and the holder to
reopen theirs).

=cut
