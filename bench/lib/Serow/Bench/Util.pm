package Serow::Bench::Util;
use strict;
use warnings;
use 5.020;

# Small helpers of bench/bench.pl and the other bench/ scripts: notes and
# log lines, the median, reading and writing a file, a command's output,
# and what the machine is (load average, CPUs, the commit and the Serow
# measured).

use Cwd ();
use File::Basename ();

use Exporter 'import';
our @EXPORT_OK = qw(note notes logf median slurp write_file capture loadavg load_average cpu_count commit
    serow_version ensure);

# Notes of the run: said on stderr at once, and listed at the end of the report.
my @NOTES;
sub note { push @NOTES, $_[0]; say STDERR "bench: note: $_[0]" }
sub notes { @NOTES }
sub logf { my $fmt = shift; printf STDERR "$fmt\n", @_ }

sub median {
    my @v = sort { $a <=> $b } grep { defined } @_;
    return undef unless @v;
    return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2;
}

sub slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return undef;
    local $/;
    return scalar <$fh>;
}

sub write_file {
    my ($file, $text) = @_;
    open my $fh, '>', $file or die "$file: $!\n";
    print {$fh} $text;
    close $fh or die "$file: $!\n";
}

# What a command printed on its standard output (its stderr passes through).
sub capture {
    my @cmd = @_;
    open my $fh, '-|', @cmd or die "bench: $cmd[0]: $!\n";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return $out;
}

# The load average over 1 minute; load_average(): over 1, 5 and 15 minutes.
sub loadavg { (split ' ', slurp('/proc/loadavg') // '? ? ?')[0] }
sub load_average { join ' ', (split ' ', slurp('/proc/loadavg') // '? ? ?')[0 .. 2] }

sub cpu_count { scalar(() = (slurp('/proc/cpuinfo') // '') =~ /^processor\s*:/mg) }

# The commit of this checkout (with -dirty when it has changes), '' without git.
sub commit {
    my $root = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../../../..');
    my $git = `git -C "$root" describe --always --dirty 2>/dev/null` // '';
    chomp $git;
    return $git;
}

# The Serow built in blib, as a report names it: its version and commit.
sub serow_version {
    my $git = commit();
    return 'Serow ' . (`$^X -Mblib -MSerow -e 'print \$Serow::VERSION' 2>/dev/null` || '?') . ($git ? " ($git)" : '');
}

# Runs $body, then $cleanup, also when $body dies (the error is passed on
# after the cleanup).  Returns what $body returned.
sub ensure {
    my ($body, $cleanup) = @_;
    my $r = eval { $body->() };
    my $e = $@;
    $cleanup->();
    die $e unless $r;
    return $r;
}

1;
