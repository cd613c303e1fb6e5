#!/usr/bin/perl
# bench/bench.pl - Serow's benchmark.  Run it through bench/run, which
# installs the tools, builds Serow and the load client, and raises the
# open-file limit first.  See docs/benchmarks.md.
#
# Every server runs with all its processes pinned to CPU 0 (taskset -c 0),
# the load generator on CPU 1 (taskset -c 1, one thread).  Each scenario runs
# every server in turn, round after round, and reports the median over the
# rounds and the ratio to Serow measured in the same run.
#
# This file reads the options and runs the scenarios in order; the rest is in
# bench/lib/Serow/Bench/: Servers (how each server starts), Load (wrk and
# bench/client), Scenarios and Fairness (what each scenario measures), Cpu
# (CPU time and stalls), Results (rounds and medians), Targets, Report and
# Plot (the results), Process and Util (processes and small helpers).
use strict;
use warnings;
use 5.020;

use Config ();
use Cwd ();
use File::Basename ();
use File::Path ();
use Getopt::Long ();
use POSIX ();

my $ROOT;
BEGIN { $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/..') }
use lib "$ROOT/t/lib", "$ROOT/bench/lib";
use Serow::Bench::Config ();
use Serow::Bench::Fairness ();
use Serow::Bench::Plot ();
use Serow::Bench::Report ();
use Serow::Bench::Results ();
use Serow::Bench::Scenarios ();
use Serow::Bench::Servers qw(@SERVERS %TITLE);
use Serow::Bench::Util qw(logf loadavg);
chdir $ROOT or die "$ROOT: $!\n";

# ---- options ---------------------------------------------------------------

my %opt = (rounds => 3, duration => 5, quick => 0, servers => '', out => "$ROOT/bench/results");
Getopt::Long::GetOptions(
    'rounds|r=i'   => \$opt{rounds},
    'duration|d=i' => \$opt{duration},
    'quick|q'      => \$opt{quick},
    'servers|s=s'  => \$opt{servers},
    'peers-lib=s'  => \$opt{peers_lib},
    'out|o=s'      => \$opt{out},
    'record-stalls' => \$opt{record_stalls},
    'list|l'       => \$opt{list},
    'help|h'       => \$opt{help},
) or usage(2);
usage(0) if $opt{help};

# The scenarios, in the order they run.
my @SCENARIOS = (
    [hello_keepalive => 'hello, keep-alive, 16 connections (and worker RSS)', \&Serow::Bench::Scenarios::hello_keepalive],
    [hello_close     => 'hello, Connection: close, 16 connections', \&Serow::Bench::Scenarios::hello_close],
    [body_8k         => '8 KiB body, keep-alive, 16 connections', \&Serow::Bench::Scenarios::body_8k],
    [file_2_4mb      => '2.4 MB file from a file handle, 4 connections', \&Serow::Bench::Scenarios::file_2_4mb],
    [post_64k        => 'POST 64 KiB body, 16 connections', \&Serow::Bench::Scenarios::post_64k],
    [streaming       => 'streamed response (8 writes), 16 connections', \&Serow::Bench::Scenarios::streaming],
    [behind_nginx_unix => 'behind nginx over a UNIX socket, 16 connections', \&Serow::Bench::Scenarios::behind_nginx_unix],
    [idle_10k        => '(a) 10,000 idle keep-alive connections + 32 active', \&Serow::Bench::Fairness::idle_10k],
    [blocking_10ms   => '(b) 10 ms blocking app, 200 clients, 8 workers', \&Serow::Bench::Fairness::blocking_10ms],
    [slow_2pct       => '(c) 2% of requests block 50 ms, 64 clients, 8 workers', \&Serow::Bench::Fairness::slow_2pct],
    [nginx_front     => '(d) nginx in front, upstream keep-alive 32, 64 clients, 4 workers', \&Serow::Bench::Fairness::nginx_front],
);
my %SCENARIO = map { $_->[0] => $_ } @SCENARIOS;

if ($opt{list}) {
    printf "%-18s %s\n", @$_[0, 1] for @SCENARIOS;
    exit 0;
}

my @run = @ARGV ? @ARGV : map { $_->[0] } @SCENARIOS;
for (@run) {
    die "bench: unknown scenario '$_' (bench/run --list shows them)\n" unless $SCENARIO{$_};
}
for (split /,/, $opt{servers}) {
    die "bench: unknown server '$_' (one of: @SERVERS)\n" unless $TITLE{$_};
}
peers_lib($opt{peers_lib}) if defined $opt{peers_lib};
Serow::Bench::Config::setup(opt => \%opt, scenarios => \@SCENARIOS, args => \@ARGV);

# --peers-lib DIR: the peers installed under DIR (cpanm -l DIR) come first in
# PERL5LIB, for the servers and for the check that they are installed.
sub peers_lib {
    my ($dir) = @_;
    die "bench: --peers-lib $dir: no such directory\n" unless -d $dir;
    $dir = Cwd::abs_path($dir);
    my $lib = -d "$dir/lib/perl5" ? "$dir/lib/perl5" : $dir;
    $ENV{PERL5LIB} = join ':', $lib, "$lib/$Config::Config{archname}",
        grep { defined && length } $ENV{PERL5LIB};
}

sub usage {
    print <<'EOF';
Usage: bench/run [--rounds N] [--duration S] [--quick] [--servers a,b] [--peers-lib DIR] [scenario ...]

  --rounds N     rounds per scenario; the median is reported (default 3)
  --duration S   seconds each measurement lasts (default 5)
  --quick        1 round of 1 s with fewer connections: a smoke test, not a measurement
  --servers LIST only these of: serow,starman,uwsgi,hsp,nginx,feersum,feersum1,
                 gazelle,starlet,monoceros (default: all; a server that is not
                 installed is reported as such)
  --peers-lib DIR  Feersum, Gazelle, Starlet and Monoceros (CPAN) installed under
                 DIR (cpanm -l DIR): DIR/lib/perl5 goes first in PERL5LIB;
                 by default they are looked for in perl's @INC
  --out DIR      where the results go (default bench/results)
  --record-stalls  in (a), record the scheduler's switches of both CPUs while
                 wrk runs (perf), to see who else took them; the recording
                 takes CPU 1 from wrk and lengthens its p99, so it is off
                 unless asked for
  --list         list the scenarios

Writes DIR/latest.md and DIR/latest.png (--quick: quick.md and quick.png).
EOF
    exit $_[0];
}

# ---- main ----------------------------------------------------------------------

$SIG{INT} = $SIG{TERM} = sub { logf("bench: interrupted"); exit 130 };
$SIG{PIPE} = 'IGNORE';
my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_start = loadavg();
logf("bench: %d round(s) of %d s, scenarios: %s", $Serow::Bench::Config::ROUNDS,
    $Serow::Bench::Config::DURATION, join(' ', @run));
for my $scenario (@run) {
    logf("== %s: %s", $scenario, $SCENARIO{$scenario}[1]);
    $SCENARIO{$scenario}[2]->();
}
my $finished = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_end = loadavg();

File::Path::make_path($opt{out});
my $base = $opt{quick} ? 'quick' : 'latest';
my $md = Serow::Bench::Report::report($started, $finished, $load_start, $load_end);
open my $out, '>', "$opt{out}/$base.md" or die "$opt{out}/$base.md: $!\n";
print {$out} $md;
close $out;
Serow::Bench::Plot::plot(Cwd::abs_path($opt{out}) . "/$base.png");
print $md;
logf("bench: wrote %s/%s.md and %s.png", $opt{out}, $base, $base);
if (Serow::Bench::Results::any_failure()) {
    logf("bench: some server did not answer (see Failures)");
    exit 1;
}
exit 0;
