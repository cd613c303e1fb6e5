use strict;
use warnings;
use Test::More;
use IO::Select ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect get_on read_response read_until_close http_get gate gated_app);
use Serow::Test::Prometheus qw(parse value);

# --max-queue-wait: a request the connection holder has had ready for longer
# than the limit, with no worker free to take it, is answered 503 by the
# holder (Retry-After, Connection: close) and its connection closed, instead
# of waiting as long as the busy workers take.  One worker, held on a gate
# by a first request: a second, kept-alive connection (which the holder
# takes from the busy worker) sends a request that no worker can serve until
# the gate opens.  Every wait is bounded and waits for an outcome.

sub shed_total {
    my ($server) = @_;
    my $res = http_get($server, '/metrics') or return -1;
    my $m = eval { parse($res->{body}) } or return -1;
    return value($m, 'serow_requests_shed_total');
}

# The one worker serves the second connection once (so that it is kept
# alive and parked), then gets stuck in /slow on the first.
sub one_worker_held {
    my (@options) = @_;
    my $gate = gate();
    my $server = start_server(app => gated_app($gate),
        options => ['--workers', 1, '--metrics-path', '/metrics', @options]);
    my $kept = raw_connect($server);
    my $res = get_on($kept, '/');
    is $res && $res->{status}, 200, 'the second connection is served once and kept';
    my $held = raw_connect($server);
    syswrite $held, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/slow request in worker/), 'the one worker is held in the app';
    syswrite $kept, "GET /queued HTTP/1.1\r\nHost: x\r\n\r\n";
    return ($server, $gate, $held, $kept);
}

subtest 'with --max-queue-wait: 503 from the holder while the worker is held' => sub {
    my ($server, $gate, $held, $kept) = one_worker_held('--max-queue-wait', 300);
    my $res = read_response($kept, timeout => 15);
    is $res && $res->{status}, 503, 'the queued request: 503 without the gate opening'
        or diag $server->log;
    is $res && $res->{headers}{'retry-after'}, 1, '... with Retry-After: 1';
    is $res && $res->{headers}{connection}, 'close', '... and Connection: close';
    is read_until_close($kept), '', '... and the connection closes';

    $gate->open(1);
    $res = read_response($held);
    is $res && $res->{status}, 200, 'the held request completes once the gate opens';
    is shed_total($server), 1, 'serow_requests_shed_total counts it';
    is $server->stop, 0, 'clean stop';
};

subtest 'without it (the default): the request waits for the worker' => sub {
    my ($server, $gate, $held, $kept) = one_worker_held();
    # Nothing comes while the gate is shut (a wait for a non-event: long
    # enough that a shed at the 300 ms of the case above would show).
    ok !IO::Select->new($kept)->can_read(1.5), 'no answer while the worker is held';
    $gate->open(1);
    my $res = read_response($held);
    is $res && $res->{status}, 200, 'the held request completes once the gate opens';
    $res = read_response($kept);
    is $res && $res->{status}, 200, 'then the queued one is answered' or diag $server->log;
    is shed_total($server), 0, 'nothing shed';
    is $server->stop, 0, 'clean stop';
};

done_testing;
