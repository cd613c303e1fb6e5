package Serow::PidFile;
use strict;
use warnings;


# --pid-file: the master's pid, for init scripts and logrotate.

# Dies when FILE names a Serow that still runs: two servers must not share
# one pid file (the second would overwrite the first's, and whichever stops
# first would remove it).  A pid file of a process that is gone is stale.
sub check {
    my ($class, $path) = @_;
    my $pid = _read_pid($path) // return;
    return if $pid == $$;
    return unless _is_running_serow($pid);
    my $hint = defined $ENV{SERVER_STARTER_PORT}
        ? " (under start_server, give start_server the --pid-file: each new Serow would find the old one's)"
        : '';
    die "--pid-file: $path belongs to a running Serow (pid $pid): stop it first, or give another --pid-file$hint\n";
}

# Writes our pid: to a temp file beside FILE first, then renamed over it, so
# that a reader never sees an empty or half-written file.
sub write {
    my ($class, $path) = @_;
    $class->check($path);
    my $temp = "$path.$$.tmp";
    my $fh;
    my $ok = open($fh, '>', $temp) && print({$fh} "$$\n") && close($fh) && rename($temp, $path);
    if (!$ok) {
        my $error = $!;
        unlink $temp;
        die "--pid-file: cannot write $path: $error\n";
    }
    return bless { path => $path, pid => $$ }, $class;
}

# Removes the file, if this process wrote it and it still holds our pid:
# a worker (a fork of the master) or a newer server's file is left alone.
sub remove {
    my ($self) = @_;
    return if $self->{removed} || $$ != $self->{pid};
    $self->{removed} = 1;
    my $pid = _read_pid($self->{path}) // return;
    unlink $self->{path} if $pid == $$;
}

sub DESTROY { $_[0]->remove }

sub _read_pid {
    my ($path) = @_;
    open(my $fh, '<', $path) or return undef;
    my $line = <$fh> // '';
    return $line =~ /\A\s*(\d+)\s*\z/ ? $1 : undef;
}

# Whether $pid runs and is a Serow: the number of a process that died may
# by now belong to another program (after a reboot, say).
sub _is_running_serow {
    my ($pid) = @_;
    return 0 unless kill(0, $pid) || $!{EPERM};
    open(my $fh, '<', "/proc/$pid/cmdline") or return 1; # cannot tell: assume it is
    local $/;
    my $cmdline = <$fh> // '';
    return 0 if $cmdline eq ''; # a zombie
    return $cmdline =~ /serow/i ? 1 : 0;
}

1;
__END__

=head1 NAME

Serow::PidFile - the --pid-file of a Serow master

=head1 DESCRIPTION

C<< Serow::PidFile->check($path) >> dies if C<$path> holds the pid of a
Serow that still runs (so a second server is refused with a message that
says so); a pid file left by a process that is gone is replaced.

C<< Serow::PidFile->write($path) >> writes the pid atomically (a temp file in
the same directory, then a rename). C<< ->remove >> (also run when the object
goes away) unlinks it only in the process that wrote it and only while it
still holds that pid.

=cut
