use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get gate);
use Serow::Test::Prometheus qw(parse value);

# --max-worker-rss MiB: the master reads each worker's resident memory and
# asks one over the limit to stop.  The request it is answering gets its
# whole response, a new worker takes its place, and the kept-alive
# connection goes on through the holder to the new worker.

use constant LIMIT_MIB => 40;     # a worker with this test's modules starts near 18
use constant BIG_MIB   => 48;     # what /big keeps, on top of that
use constant BODY      => 256 * 1024;

my $gate = gate();
my $KEPT;
my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/big') {
        my $n = BIG_MIB * 1024 * 1024;
        $KEPT = 'x' x $n; # kept: the worker stays large after the request
        $gate->wait;      # until the master has asked this worker to stop
        return [200, ['Content-Type' => 'text/plain'], ["pid $$\n", 'y' x BODY]];
    }
    return [200, ['Content-Type' => 'text/plain'], ["pid $$\n"]];
};

sub pid_of { ($_[0] && $_[0]{body} // '') =~ /\Apid (\d+)/ ? $1 : undef }

my $server = start_server(app => $app, options => ['--workers', 1, '--max-worker-rss', LIMIT_MIB,
    '--metrics-path', '/metrics']);
my ($first) = $server->wait_for_log(qr/worker \d+ started/) =~ /(\d+)/;

my $sock = raw_connect($server);
syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
is pid_of(read_response($sock)), $first, 'the first worker answers';

syswrite $sock, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
my $limit = LIMIT_MIB;
my $line = $server->wait_for_log(qr/worker $first uses \d+ MiB, over --max-worker-rss $limit: replaced/);
ok $line, 'the master says the worker is over the limit and replaced' or diag $server->log;
my ($mib) = ($line // '') =~ /uses (\d+) MiB/;
cmp_ok $mib // 0, '>', LIMIT_MIB, "it counted $mib MiB";
my ($second) = ($server->wait_for_log(qr/worker \d+ started/) // '') =~ /(\d+)/;
ok $second && $second != $first, 'a new worker started while the old one was in its request';

$gate->open;
my $res = read_response($sock);
is $res->{status}, 200, 'the request in flight is answered';
is length($res->{body} // ''), length("pid $first\n") + BODY, 'with its whole body';
is pid_of($res), $first, 'by the worker that grew';
isnt lc($res->{headers}{connection} // ''), 'close', 'and the connection is kept';

ok $server->wait_for_log(qr/worker $first exited with status 0/), 'the large worker exits';
syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
is pid_of(read_response($sock)), $second, 'the next request on that connection: the new worker, through the holder';

my $m = parse(http_get($server, '/metrics')->{body});
is value($m, 'serow_worker_recycled_total', reason => 'rss'), 1, 'counted: serow_worker_recycled_total{reason="rss"}';
is value($m, 'serow_worker_restarts_total'), 1, 'and as a restart';
is $server->stop, 0;

done_testing;
