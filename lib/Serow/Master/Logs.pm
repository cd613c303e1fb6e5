package Serow::Master::Logs;
use strict;
use warnings;

use Serow::Log ();

# The logs the master opens for its children: --access-log, opened once
# and inherited, and USR1's reopening of every process's logs.  Methods of
# the master object (Serow::Master); the field they own is 'access_log_fh'.

# --access-log FILE is opened here, in the master, and each worker writes on
# a copy of the descriptor: a worker never fails to start for want of the
# right to open the file (as it may after dropping privileges).  The master
# opens it again on USR1, so that workers started after a rotation write to
# the new file; the workers reopen it themselves.  Returns false (with $!)
# when it cannot be opened.
sub open_access_log {
    my ($self) = @_;
    my $file = $self->{options}{access_log};
    return 1 if !defined $file || $file eq '-' || $file eq 'stderr';
    open(my $fh, '>>', $file) or return 0;
    $self->{access_log_fh} = $fh;
    return 1;
}

# (path, handle) for a worker, or (undef, undef) for standard error.
sub access_log_for_worker {
    my ($self) = @_;
    my $file = $self->{options}{access_log} // return;
    return (undef, undef) unless $self->{access_log_fh};
    return ($file, $self->{access_log_fh});
}

# logrotate has moved the logs away: the master opens them again (for the
# workers it starts from now on), and so does every worker, and the
# connection holder.
sub reopen_logs {
    my ($self, $sig) = @_;
    my $options = $self->{options};
    my $error_log = Serow::Log->file($options->{error_log}); # (syslog has no file)
    return unless defined $options->{access_log} || defined $error_log;
    if (defined $error_log) {
        Serow::Log->open_file($error_log) or Serow::Log->warn("cannot reopen the "
            . "error log $error_log: $!; still writing to the old file");
    }
    Serow::Log->info("received SIG$sig: the master and the workers reopen their logs");
    if (defined $options->{access_log}) {
        $self->open_access_log or Serow::Log->warn("cannot reopen the access log "
            . "$options->{access_log}: $!; new workers write to the old file");
    }
    $self->ask_worker($_, 'reopen_logs') for keys %{ $self->{workers} };
    kill 'USR1', $self->{holder_pid} if $self->{holder_pid};
}

1;
__END__

=head1 NAME

Serow::Master::Logs - the logs the master opens for its children (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: C<--access-log> opened once in the master, each worker
and the holder writing on a copy of its descriptor; on USR1, the master's
logs opened again and every worker and the holder told to reopen theirs.

=cut
