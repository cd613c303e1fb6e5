use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib', 'bench/lib';
use Serow::Test::CProgram ();
use Serow::Test::Process qw(run_command);
use Serow::Bench::Util qw(cpu_count slurp);

# bench/websocket, short: its client (bench/websocket-client.c, built with
# the sanitizers when they work here) against Serow alone with 50
# connections; the run ends well and its report has a figure in every
# place, with every publish delivered and every connection answering after.
# Pushpin and Mojolicious are measured by bench/websocket itself, not here.
# No figure is judged: the machine is shared.

plan skip_all => 'bench/websocket pins the servers to CPU 0 and the client to CPU 1' if cpu_count() < 2;
my $built = Serow::Test::CProgram::build(name => 'websocket-client', sources => ['bench/websocket-client.c', 'bench/client_common.c'],
    includes => []);
plan skip_all => 'no working C compiler' unless exists $built->{status};
ok $built->{binary}, 'bench/websocket-client.c builds' or diag $built->{output};
my $client = $built->{binary} or done_testing, exit;

my $out = File::Temp->newdir;
local $ENV{ASAN_OPTIONS} = 'detect_leaks=0:abort_on_error=1';
my $run = run_command($^X, 'bench/websocket.pl', '--servers', 'serow', '--rounds', 1, '--connections', 50,
    '--echo-clients', 5, '--seconds', 1, '--fanouts', 2, '--client', $client, '--out', "$out");
is $run->{status}, 0, 'bench/websocket.pl ran to its end' or diag $run->{output};

my $md = slurp("$out/websocket.md") // '';
like $md, qr/^\| Serow \| -?[\d.]+ (?:bytes|KB) \| connection holder -?[\d.]+ (?:bytes|KB) \| [\d.]+ MB \|$/m,
    'memory per connection: all the processes, the holder';
like $md, qr/^\| Serow \| [\d,]+ \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ us \| \d+% \/ \d+% \|$/m,
    'echoes: rate, p50, p99, server CPU per echo, what others took';
like $md, qr/^\| Serow \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ ms \| 50 of 50 \| [\d.]+ us \|$/m,
    'one publish to all: p50, p99, max, every connection reached';
like $md, qr/^\| Serow \| 50 of 50 \| 0 \|$/m, 'every connection still answering after, none lost';
like $md, qr/^\| Serow \| 1 \| [\d.]+ \| 50 \| /m, 'every round: all 50 connections held';
unlike $md, qr/error:/, 'no round failed';

done_testing;
