use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get need_debian_packages find_command run_command wait_until);

# Prometheus' own checker on /metrics: promtool (Debian's prometheus
# package, installed by the test when it runs as root) reads the whole
# exposition, the process metrics of a server with busy workers included,
# and finds nothing to say.

need_debian_packages('prometheus');
my $promtool = find_command('promtool') or plan skip_all => 'the prometheus package has no promtool';

my $app = sub { [200, ['Content-Type' => 'text/plain'], ["ok\n"]] };
my $server = start_server(app => $app, options => ['--workers', 2, '--metrics-path', '/metrics']);
is http_get($server, '/')->{status}, 200, 'a request, so that the counters have something';
is http_get($server, '/other')->{status}, 200, 'and another';

my $res;
ok wait_until(sub {
    $res = http_get($server, '/metrics');
    return $res && $res->{body} =~ /^serow_process_resident_memory_bytes\{role="worker"/m;
}), 'the metrics have the workers\' process series';
like $res->{body}, qr/^process_cpu_seconds_total /m, 'and the server\'s';

my $file = File::Temp->new;
print $file $res->{body};
close $file;
# (promtool reads the metrics on its standard input)
my $run = run_command('sh', '-c', '"$0" check metrics < "$1"', $promtool, $file->filename);
is $run->{status}, 0, 'promtool check metrics exits 0' or diag $run->{output};
is $run->{output}, '', 'and finds nothing to say (no lint warning)';

is $server->stop, 0;
done_testing;
