use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server http_get raw_request);

# --slow-request-log MS: a request that took MS or more is logged to the
# error log with where its time went, its worker, its status and request
# line (and its id), with no access log configured.

my $app = sub {
    my ($env) = @_;
    select(undef, undef, undef, 1.2) if $env->{PATH_INFO} eq '/slow';
    return [$env->{PATH_INFO} eq '/slow' ? 202 : 200, ['Content-Type' => 'text/plain'], ["ok\n"]];
};
my $server = start_server(app => $app, options => ['--workers', 1, '--slow-request-log', 1000,
    '--request-id-header', 'X-Request-Id']);

is http_get($server, '/fast')->{status}, 200, 'a fast request';
my $res = http_get($server, '/slow?x=1');
is $res->{status}, 202, 'a request whose app takes 1.2 s';
my $line = $server->wait_for_log(qr/^.*slow request:.*$/m);
ok $line, 'is logged' or diag $server->log;
my ($total, $queue, $app_ms, $write, $pid, $status, $request, $id) = ($line // '') =~
    /slow request: (\d+) ms \(queue (\d+) ms, app (\d+) ms, write (\d+) ms\) worker (\d+) status (\d+) "([^"]*)" id (\S+)/;
ok defined $total, 'with its parts' or diag $line;
cmp_ok $total, '>=', 1200, 'its total';
cmp_ok $app_ms, '>=', 1200, 'the time was the app\'s';
cmp_ok $queue + $app_ms + $write, '<=', $total, 'the parts within the total';
is $pid, ($server->worker_pids)[0], 'its worker';
is $status, 202, 'its status';
is $request, 'GET /slow?x=1 HTTP/1.1', 'its request line';
is $id, $res->{headers}{'x-request-id'}, 'its id';
unlike $server->log, qr/slow request:.*\/fast/, 'the fast one is not';

$server->stop;
done_testing;
