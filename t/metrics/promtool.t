use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Serow::Test qw(need_debian_packages start_server http_get find_command);

# /metrics through the Prometheus project's own checker (promtool check
# metrics, Debian's prometheus package), after requests that fill every
# histogram: what a Prometheus server scrapes is what it accepts, lint
# included (names, units, HELP, histogram buckets, labels).

need_debian_packages('prometheus');
my $promtool = find_command('promtool') or plan skip_all => 'no promtool';

my $app = sub { [$_[0]{PATH_INFO} eq '/missing' ? 404 : 200, ['Content-Type' => 'text/plain'], ["ok\n"]] };
my $server = start_server(app => $app, options => ['--workers', 2, '--metrics-path', '/metrics']);
http_get($server, $_) for qw(/ /missing /);
my $res = http_get($server, '/metrics');
is $res->{status}, 200, 'scraped';
like $res->{body}, qr/^serow_request_phase_seconds_bucket\{phase="queue",le="\+Inf"\} \d+$/m,
    'with the phase histograms';

my $file = File::Temp->new;
print {$file} $res->{body};
close $file;
my $out = `$promtool check metrics < $file 2>&1`;
is $?, 0, 'promtool check metrics accepts it' or diag $out;
is $out, '', 'without a complaint' or diag $out;

$server->stop;
done_testing;
