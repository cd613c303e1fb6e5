package Serow::Bench::Config;
use strict;
use warnings;

# The settings of one run of bench/bench.pl, which sets them once from its
# options (setup) before any scenario runs; every other module of
# Serow::Bench reads them from here.

use Cwd ();
use File::Basename ();
use POSIX ();
use Serow::Bench::Process ();
use Serow::Bench::Util qw(note);

use Exporter 'import';
our @EXPORT_OK = qw($ROOT $BENCH $CLIENT %opt @SCENARIOS %SCENARIO @ARGS
    $QUICK $ROUNDS $DURATION $WARMUP $IDLE $ACTIVE $FD_LIMIT tmpdir);

our $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../../../..');
our $BENCH = "$ROOT/bench";
our $CLIENT = "$BENCH/.build/client";

our %opt;          # bench.pl's options
our @SCENARIOS;    # [name, title, code] in the order they run
our %SCENARIO;     # name => title
our @ARGS;         # the scenarios named on the command line
our ($QUICK, $ROUNDS, $DURATION, $WARMUP, $IDLE, $ACTIVE, $FD_LIMIT);

# A directory for the run's logs, configurations and files, removed at exit:
# the one the servers' logs go to.
sub tmpdir { Serow::Bench::Process::dir() }

sub setup {
    my (%o) = @_;
    %opt = %{ $o{opt} };
    @SCENARIOS = @{ $o{scenarios} };
    %SCENARIO = map { $_->[0] => $_->[1] } @SCENARIOS;
    @ARGS = @{ $o{args} };
    $QUICK = $opt{quick};
    $ROUNDS = $QUICK ? 1 : $opt{rounds};
    $DURATION = $QUICK ? 1 : $opt{duration};
    $WARMUP = 1;
    die "bench: --rounds and --duration must be at least 1\n" if $ROUNDS < 1 || $DURATION < 1;
    # In --quick mode (a CI smoke test, not a measurement) the connection counts
    # are smaller too.
    $IDLE = $QUICK ? 300 : 10_000;
    # (a)'s active connections, beside the idle ones.
    $ACTIVE = $QUICK ? 8 : 32;
    $FD_LIMIT = (POSIX::sysconf(POSIX::_SC_OPEN_MAX()) || 1024) + 0;
    if ($IDLE + 500 > $FD_LIMIT) {
        $IDLE = $FD_LIMIT - 500;
        note("the open-file limit is $FD_LIMIT: the idle scenario holds $IDLE connections, not 10,000");
    }
}

1;
