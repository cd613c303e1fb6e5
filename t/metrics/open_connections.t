use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect get_on http_get wait_until gate process_alive read_response);
use Serow::Test::Prometheus qw(parse value);

# serow_connections_open counts the client connections open now, wherever
# they are.  A worker killed while the holder had taken idle connections from
# it (it was busy in a request, so it had not yet dropped its copies) must
# take away only the connections that died with it: the ones the holder took
# stay open, and the gauge with them; once the clients close them it comes
# back to what is really open.
#
# The worker killed is the one in /block, whichever it is: the holder may
# have taken the blocked connection from the worker that served it before
# (idle for half a second, or that worker busy a few ms on a loaded machine)
# and passed its request to the other worker.  Killing the worker the
# connections were last served by would then leave the blocked connection
# open in a worker stuck in the app, which never reads its client's close:
# one open connection more, rightly counted.

my $N = 4;
my $gate = gate();
my $app = sub {
    my ($env) = @_;
    $gate->wait if $env->{PATH_INFO} eq '/block';
    return [200, ['Content-Type' => 'text/plain'], [$$]];
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app, path => '/status',
    allow => ['127.0.0.0/8']), options => ['--workers', 2, '--metrics-path', '/metrics', '--keepalive-timeout', 600]);

# The gauge as a scrape on a connection of its own sees it (that connection counts).
sub open_now {
    my $res = http_get($server, '/metrics') or return -1;
    my $m = eval { parse($res->{body}) } or return -1;
    return value($m, 'serow_connections_open') - 1;
}
# The status page's numbers (Plack::Middleware::SerowStatus), or {}.
sub status {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /status HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nConnection: close\r\n\r\n";
    my $res = read_response($sock) or return {};
    return eval { JSON::PP::decode_json($res->{body}) } || {};
}

# $N + 1 kept-alive connections last served by the same worker.
my (%by_worker, $group);
for (1 .. 100) {
    my $sock = raw_connect($server);
    my $res = get_on($sock, '/') or BAIL_OUT('no response: ' . $server->log);
    push @{ $by_worker{ $res->{body} } }, $sock;
    ($group) = grep { @{ $by_worker{$_} } > $N } keys %by_worker and last;
}
ok $group, "$N + 1 connections served by one worker" or BAIL_OUT('no worker kept that many');
my ($blocked, @kept) = @{ $by_worker{$group} }[0 .. $N];
# the others go: only the ones counted below stay open
for my $other (grep { $_ ne $group } keys %by_worker) { close $_ for @{ $by_worker{$other} } }
splice @{ $by_worker{$group} }, 0, $N + 1;
close $_ for @{ $by_worker{$group} };
ok wait_until(sub { open_now() == $N + 1 }), "the gauge: $N + 1 open";

syswrite $blocked, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n";
# The holder takes the idle connections of a worker stuck in a request (or
# already had them: it takes any idle for half a second, which the setup
# above may take on a slow machine).  The worker in /block is known by its
# request: "busy" alone is also the worker serving this very status request.
my ($status, $pid);
ok wait_until(sub {
    $status = status();
    my ($worker) = grep { $_->{busy} && ($_->{request} // '') eq 'GET /block' } @{ $status->{workers} || [] };
    $pid = $worker && $worker->{pid};
    return $worker && $worker->{idle_connections} == 0 && $status->{held_by_holder} == $N;
}), "the holder has the $N idle connections, the worker in /block none" or diag explain $status;
$pid or BAIL_OUT('no worker in /block'); # (kill 0 would signal our own process group)

kill 'KILL', $pid;
ok wait_until(sub { !process_alive($pid) && grep { $_ != $pid } $server->worker_pids }),
    'the worker is killed';
ok wait_until(sub { my @w = $server->worker_pids; @w == 2 && !grep { $_ == $pid } @w }),
    'and replaced';
close $blocked;

my $seen;
ok wait_until(sub { ($seen = open_now()) == $N }),
    "the gauge: the $N connections the holder took are still open" or diag "gauge: $seen";
my $answered = grep { my $r = get_on($_, '/'); $r && $r->{status} == 200 } @kept;
is $answered, $N, 'and they are: each is answered';

close $_ for @kept;
ok wait_until(sub { ($seen = open_now()) == 0 }), 'closed: the gauge comes back to 0'
    or diag "gauge: $seen";

$gate->open(1);
is $server->stop, 0, 'clean stop';
done_testing;
