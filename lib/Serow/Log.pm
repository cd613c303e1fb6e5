package Serow::Log;
use strict;
use warnings;

# (No POSIX for strftime: what the master loads is in every worker.)

# Error log lines: "[2026-11-22 02:20:11] [info] [pid 1234] message" on STDERR.

sub _line {
    my ($level, $message) = @_;
    chomp $message;
    my @t = localtime;
    my $time = sprintf('%04d-%02d-%02d %02d:%02d:%02d', $t[5] + 1900, $t[4] + 1, @t[3, 2, 1, 0]);
    return "[$time] [$level] [pid $$] $message\n";
}

sub error { my ($class, $message) = @_; print STDERR _line('error', $message) }
sub info  { my ($class, $message) = @_; print STDERR _line('info', $message) }

# --error-log: standard error (the log, and whatever the app prints there)
# appended to $path; again on USR1, after logrotate moved the file away.
# False (with $!) when it cannot be opened: standard error is then unchanged.
sub open_file {
    my ($class, $path) = @_;
    open(my $fh, '>>', $path) or return 0;
    open(STDERR, '>&', $fh) or return 0;
    STDERR->autoflush(1);
    return 1;
}

1;
__END__

=head1 NAME

Serow::Log - timestamped error log lines

=head1 DESCRIPTION

C<< Serow::Log->info($message) >> and C<< ->error($message) >> write one line
to standard error (C<--error-log> reopens it on a file, C<< Serow::Log->open_file >>,
and USR1 opens that file again):
C<[2026-11-22 02:20:11] [info] [pid 1234] message>. The C code logs in the
same format (F<src/log.c>).

=cut
