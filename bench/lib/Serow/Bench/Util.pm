package Serow::Bench::Util;
use strict;
use warnings;
use 5.020;

# Small helpers of bench/bench.pl and the other bench/ scripts: notes and
# log lines, the median, reading a file, and what the machine is (load
# average, CPUs, the commit measured).

use Cwd ();
use File::Basename ();

use Exporter 'import';
our @EXPORT_OK = qw(note notes logf median slurp loadavg load_average cpu_count commit ensure);

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
