package Serow::Log;
use strict;
use warnings;

use POSIX ();

# Error log lines: "[2026-11-22 02:20:11] [info] [pid 1234] message" on STDERR.

sub _line {
    my ($level, $message) = @_;
    chomp $message;
    my $time = POSIX::strftime('%Y-%m-%d %H:%M:%S', localtime);
    return "[$time] [$level] [pid $$] $message\n";
}

sub error { my ($class, $message) = @_; print STDERR _line('error', $message) }
sub info  { my ($class, $message) = @_; print STDERR _line('info', $message) }

1;
__END__

=head1 NAME

Serow::Log - timestamped error log lines

=head1 DESCRIPTION

C<< Serow::Log->info($message) >> and C<< ->error($message) >> write one line
to standard error (C<--error-log> reopens it on a file):
C<[2026-11-22 02:20:11] [info] [pid 1234] message>. The C code logs in the
same format (F<src/log.c>).

=cut
