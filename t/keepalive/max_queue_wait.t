use strict;
use warnings;
use Test::More;
use IO::Select ();
use File::Temp ();
use Time::HiRes ();
use JSON::PP ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect get_on read_response read_until_close gate gated_app
    wait_until);
use Serow::Test::Prometheus qw(parse value);

# --max-queue-wait: a request the connection holder has had ready for longer
# than the limit, with no worker free to take it, is answered 503 by the
# holder (Retry-After, Connection: close) and its connection closed, instead
# of waiting as long as the busy workers take.  One worker, held on a gate
# by a first request: a second, kept-alive connection (which the holder
# takes from the busy worker) sends a request that no worker can serve until
# the gate opens.  Every wait is bounded and waits for an outcome.

# serow_requests_shed_total, scraped on a connection already open ($sock,
# kept alive): a new one could wait in the listen backlog and be shed itself.
# -1 when the scrape failed.
sub shed_on {
    my ($sock) = @_;
    my $res = get_on($sock, '/metrics');
    my $m = $res && $res->{status} == 200 && eval { parse($res->{body}) } or return -1;
    return value($m, 'serow_requests_shed_total');
}

# The one worker serves the second connection once (so that it is kept
# alive and parked), then gets stuck in /slow on the first.  That first
# request is a scrape: the sheds counted so far, returned last.  They may
# not be none: wait_until_serving sends its first probes while the worker
# starts, and on a slow machine (the sanitized build, loaded) they wait in
# the listen backlog longer than --max-queue-wait and are rightly shed.
sub one_worker_held {
    my (@options) = @_;
    my $gate = gate();
    my $server = start_server(app => gated_app($gate),
        options => ['--workers', 1, '--metrics-path', '/metrics', @options]);
    ok $server->wait_until_serving, 'the worker serves' or diag $server->log;
    my $kept = raw_connect($server);
    my $shed_before = shed_on($kept);
    ok $shed_before >= 0, 'the second connection is served once and kept';
    my $held = raw_connect($server);
    syswrite $held, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/slow request in worker/), 'the one worker is held in the app';
    syswrite $kept, "GET /queued HTTP/1.1\r\nHost: x\r\n\r\n";
    return ($server, $gate, $held, $kept, $shed_before);
}

subtest 'with --max-queue-wait: 503 from the holder while the worker is held' => sub {
    my $dir = File::Temp->newdir;
    my $log = "$dir/access.log";
    my ($server, $gate, $held, $kept, $shed_before) = one_worker_held('--max-queue-wait', 300,
        '--access-log', $log);
    my $res = read_response($kept, timeout => 15);
    is $res && $res->{status}, 503, 'the queued request: 503 without the gate opening'
        or diag $server->log;
    is $res && $res->{headers}{'retry-after'}, 1, '... with Retry-After: 1';
    is $res && $res->{headers}{connection}, 'close', '... and Connection: close';
    is read_until_close($kept), '', '... and the connection closes';

    $gate->open(1);
    $res = read_response($held);
    is $res && $res->{status}, 200, 'the held request completes once the gate opens';
    is shed_on($held) - $shed_before, 1, 'serow_requests_shed_total counts it';
    ok wait_until(sub { slurp($log) =~ m{^127\.0\.0\.1 - - \[[^]]+\] "GET /queued HTTP/1.1" 503 \d+ "-" "-"$}m }, 10),
        'the access log has the 503 (the holder writes it)' or diag slurp($log);
    is $server->stop, 0, 'clean stop';
};

subtest "the holder's 503 line is in the format asked for (json)" => sub {
    my $dir = File::Temp->newdir;
    my $log = "$dir/access.log";
    my ($server, $gate, $held, $kept) = one_worker_held('--max-queue-wait', 300, '--access-log', $log,
        '--access-log-format', 'json');
    my $res = read_response($kept, timeout => 15);
    is $res && $res->{status}, 503, 'the queued request: 503';
    my $line;
    ok wait_until(sub { ($line) = grep { /queued/ } split /\n/, slurp($log); defined $line }, 10),
        'the holder wrote its line' or diag slurp($log);
    my $entry = eval { JSON::PP->new->decode($line // '') };
    is ref $entry, 'HASH', 'a JSON object' or diag "$line: $@";
    is $entry->{status}, 503, 'its status';
    is $entry->{request}, 'GET /queued HTTP/1.1', 'its request line';
    # Its times as a worker's rejected line has them: when it was answered
    # (not the epoch: it had none), and a total from the arrival of its bytes.
    my ($first) = map { JSON::PP->new->decode($_) } grep { m{"GET / HTTP} } split /\n/, slurp($log);
    ok $first && $entry->{time} ge $first->{time},
        "its time is when it was answered, not before the worker's line before it"
        or diag "$line\n" . slurp($log);
    ok $entry->{duration_us} > 0, 'it has a duration' or diag $line;
    $gate->open(1);
    is read_response($held)->{status}, 200, 'the held request completes';
    is $server->stop, 0, 'clean stop';
};

subtest 'without it (the default): the request waits for the worker' => sub {
    my ($server, $gate, $held, $kept, $shed_before) = one_worker_held();
    # Nothing comes while the gate is shut (a wait for a non-event: long
    # enough that a shed at the 300 ms of the case above would show).
    ok !IO::Select->new($kept)->can_read(1.5), 'no answer while the worker is held';
    $gate->open(1);
    my $res = read_response($held);
    is $res && $res->{status}, 200, 'the held request completes once the gate opens';
    $res = read_response($kept);
    is $res && $res->{status}, 200, 'then the queued one is answered' or diag $server->log;
    is shed_on($held) - $shed_before, 0, 'nothing shed';
    is $server->stop, 0, 'clean stop';
};

# A new connection waits in the listen backlog while every worker is busy:
# the wait is bounded there too.  The one worker is held; a new client sends
# its request, which sits in the backlog until the client has waited longer
# than the limit (its own clock: time only grows, so this is no race); then
# the gate opens, the worker finishes and accepts it, and answers 503 instead
# of serving it late.  A client that connected before, but sends only now,
# has not waited: it is served.  The access log has the 503.
subtest 'with --max-queue-wait: 503 for a request that waited in the listen backlog' => sub {
    my $dir = File::Temp->newdir;
    my $log = "$dir/access.log";
    # (long enough that a client served at once is never judged late, even
    # on a machine so busy that the worker takes a while to accept it)
    my $limit_ms = 1000;
    my $gate = gate();
    my $server = start_server(app => gated_app($gate),
        options => ['--workers', 1, '--metrics-path', '/metrics', '--max-queue-wait', $limit_ms,
                    '--access-log', $log, '--log-level', 'debug']);
    ok $server->wait_until_serving, 'the worker serves' or diag $server->log;
    my $held = raw_connect($server);
    # (the sheds so far: see one_worker_held)
    my $shed_before = shed_on($held);
    ok $shed_before >= 0, 'the sheds before';
    syswrite $held, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/slow request in worker/), 'the one worker is held in the app';

    my $silent = raw_connect($server);  # connected, sends later
    my $late = raw_connect($server);
    syswrite $late, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n";
    my $sent = Time::HiRes::time();
    ok wait_until(sub { Time::HiRes::time() - $sent > 2 * $limit_ms / 1000 }, 10),
        'the request has waited twice the limit in the backlog';
    $gate->open(1);
    my $res = read_response($held);
    is $res && $res->{status}, 200, 'the held request completes once the gate opens';

    $res = read_response($late, timeout => 15);
    is $res && $res->{status}, 503, 'the request that waited in the backlog: 503'
        or diag $server->log;
    is $res && $res->{headers}{'retry-after'}, 1, '... with Retry-After: 1';
    is $res && $res->{headers}{connection}, 'close', '... and Connection: close';
    is read_until_close($late), '', '... and the connection closes';

    syswrite $silent, "GET /now HTTP/1.1\r\nHost: x\r\n\r\n";
    $res = read_response($silent, timeout => 15);
    is $res && $res->{status}, 200, 'a client that connected early but sent only now: served';
    $res = get_on($held, '/again');
    is $res && $res->{status}, 200, 'a kept-alive connection is not judged by its age';

    is shed_on($held) - $shed_before, 1, 'serow_requests_shed_total counts the backlog\'s 503';
    ok wait_until(sub { -s $log && slurp($log) =~ m{"GET /late HTTP/1.1" 503 } }, 10),
        'the access log has the 503' or diag slurp($log);
    ok $server->wait_for_log(qr/\[debug\].* worker \d+: a request waited \d+ ms in the listen backlog, longer than --max-queue-wait $limit_ms ms: answered 503/),
        'the error log says so at the debug level' or diag $server->log;
    is $server->stop, 0, 'clean stop';
};

sub slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return '';
    local $/;
    return scalar <$fh>;
}

done_testing;
