use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib', 'bench/lib';
use Serow::Test::CProgram ();
use Serow::Test::Process qw(run_command);
use Serow::Bench::Util qw(cpu_count slurp);

# bench/holding, short: its client (bench/holding-client.c, built with the
# sanitizers when they work here) against Serow alone with 50 subscribers;
# the run ends well and its report has a figure in every place, with every
# publish delivered to every subscriber.  Nchan and Pushpin are measured by
# bench/holding itself, not here.  No figure is judged: the machine is shared.

plan skip_all => 'bench/holding pins the servers to CPU 0 and the client to CPU 1' if cpu_count() < 2;
my $built = Serow::Test::CProgram::build(name => 'holding-client', sources => ['bench/holding-client.c', 'bench/client_common.c'],
    includes => []);
plan skip_all => 'no working C compiler' unless exists $built->{status};
ok $built->{binary}, 'bench/holding-client.c builds' or diag $built->{output};
my $client = $built->{binary} or done_testing, exit;

my $out = File::Temp->newdir;
local $ENV{ASAN_OPTIONS} = 'detect_leaks=0:abort_on_error=1';
my $run = run_command($^X, 'bench/holding.pl', '--servers', 'serow', '--rounds', 1, '--subscribers', 50,
    '--rate-subscribers', 50, '--fanouts', 2, '--seconds', 1, '--client', $client, '--out', "$out");
is $run->{status}, 0, 'bench/holding.pl ran to its end' or diag $run->{output};

my $md = slurp("$out/holding.md") // '';
like $md, qr/^\| Serow: connection holder \| -?\d+ bytes \| -?\d+ bytes \| [\d.]+ MB \|$/m,
    "the holder's memory per subscriber";
like $md, qr/^\| Serow: whole server \(master, holder, workers\) \| -?[\d.]+ (?:bytes|KB) \(-?[\d.]+x\) \|/m,
    "the whole server's, with its ratio to the holder's";
like $md, qr/^\| Serow \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ us \| 0 \|$/m,
    "one publish to all: p50, p99, max, the server's CPU per delivery, and nothing missing";
like $md, qr/^\| Serow \| [\d,]+ \| [\d.]+ us \| [\d,]+ \| 0 \|$/m,
    'deliveries per second, CPU per delivery, publishes, nothing missing';
like $md, qr/^\| Serow \| 1 \| [\d.]+ \| 50 \| /m, 'every round: all 50 subscribers held';
like $md, qr/^\| every subscriber received every message \| .* \| 0 missing \| PASS \|$/m,
    'the goal that every subscriber gets every message';
unlike $md, qr/error:/, 'no round failed';

done_testing;
