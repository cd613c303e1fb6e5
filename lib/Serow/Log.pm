package Serow::Log;
use strict;
use warnings;

# (No POSIX for strftime: what the master loads is in every worker.)

# Error log lines: "[2026-11-22 02:20:11] [pid 1234] message" on STDERR.

sub _line {
    my ($level, $message) = @_;
    chomp $message;
    my @t = localtime;
    my $time = sprintf('%04d-%02d-%02d %02d:%02d:%02d', $t[5] + 1900, $t[4] + 1, @t[3, 2, 1, 0]);
    return "[$time] [$level] [pid $$] $message\n";
}

sub error { my ($class, $message) = @_; print STDERR _line('error', $message) }
sub info  { my ($class, $message) = @_; print STDERR _line('info', $message) }

1;
__END__

=head1 NAME

Serow::Log - timestamped error log lines

=cut
