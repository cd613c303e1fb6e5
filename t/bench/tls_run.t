use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib', 'bench/lib';
use Serow::Test::CProgram ();
use Serow::Test::Process qw(run_command);
use Serow::Bench::Util qw(cpu_count slurp);

# bench/tls-run, short: its client (bench/tls/load.c, built with the
# sanitizers when they work here) against Serow alone, one round of a second
# per measurement, 50 idle connections, a 4 MiB file; the run ends well and
# its report has a figure in every place, every connection answered.  nginx,
# Starman and uWSGI are measured by bench/tls-run itself, not here.  No figure
# is judged: the machine is shared.

plan skip_all => 'bench/tls-run pins the servers to CPU 0 and the client to CPU 1' if cpu_count() < 2;
plan skip_all => 'needs OpenSSL\'s headers (libssl-dev) for the client'
    if system('pkg-config --exists openssl 2>/dev/null') != 0;
plan skip_all => 'needs IO::Socket::SSL (libio-socket-ssl-perl)' unless eval { require IO::Socket::SSL; 1 };
plan skip_all => 'needs openssl to make a certificate' if system('openssl version >/dev/null 2>&1') != 0;
my $wrk = grep { -x "$_/wrk" } split /:/, $ENV{PATH} // '';

my $built = Serow::Test::CProgram::build(name => 'tls-load', sources => ['bench/tls/load.c'], includes => [],
    libs => [split ' ', `pkg-config --libs openssl`]);
plan skip_all => 'no working C compiler' unless exists $built->{status};
ok $built->{binary}, 'bench/tls/load.c builds' or diag $built->{output};
my $client = $built->{binary} or done_testing, exit;

my $out = File::Temp->newdir;
my @scenarios = ('full', 'resumed', 'idle', $wrk ? ('hello', 'file') : ());
local $ENV{ASAN_OPTIONS} = 'detect_leaks=0:abort_on_error=1';
my $run = run_command($^X, 'bench/tls-run.pl', '--servers', 'serow', '--rounds', 1, '--seconds', 1,
    '--file-seconds', 1, '--file-mib', 4, '--idle', 50, '--idle-procs', 2, '--procs', 2,
    '--scenarios', join(',', @scenarios), '--client', $client, '--out', "$out");
is $run->{status}, 0, 'bench/tls-run.pl ran to its end' or diag $run->{output};

my $md = slurp("$out/tls.md") // '';
like $md, qr/Negotiated: Serow TLSv1\.3 TLS_AES_128_GCM_SHA256/, 'TLS 1.3 with AES-128-GCM';
like $md, qr/^\| Serow \| [\d]+ \| - \| \d+ \| - \| 0% \| \d+% \| \d+% \| 0 \|$/m,
    'full handshakes: per second, per server CPU-second, none resumed, CPU shares, no error';
like $md, qr/^\| idle TLS connection in Serow's holder \| .* \| -?\d+ bytes \| \w/m, 'the idle goal';
like $md, qr/^\| Serow \| 50 \| 50 \| \d+ s \| -?\d+ B \/ -?\d+ B \| -?\d+ B \/ -?\d+ B \| -?\d+ B \/ -?\d+ B \|$/m,
    'idle: all 50 held and answered again, memory per connection';
SKIP: {
    skip 'no wrk', 2 unless $wrk;
    like $md, qr/^\| Serow \| \d+ \| - \| [\d.]+ us \| \d+% \| \d+% \| 0 \|$/m, 'hello: req/s, CPU per request, no error';
    like $md, qr/^\| Serow \| \d+ \| - \| [\d.]+ ms \| \d+% \| \d+% \| 0 \|$/m, 'the file: MiB/s, CPU per MiB, no error';
}
unlike $md, qr/## Left out and failures/, 'no failure';

done_testing;
