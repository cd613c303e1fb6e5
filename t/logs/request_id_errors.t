use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Time::HiRes ();
use Serow::Test qw(start_server raw_connect raw_request get_on read_response read_until_close
    parse_response gate gated_app wait_until);

# --request-id-header X-Request-Id: the responses Serow writes itself carry
# the id too, and their access log line has it, so that a failed request can
# be followed from a proxy's log: the client's id when the bytes of its head
# received carry a sane one, else one made for it (a malformed request line,
# a head that never ended).  The worker's rejections (400, 408, 413, 414, 431,
# a 503 after the listen backlog), its 500 when the app dies, the holder's
# 503 (--max-queue-wait), and the master's 503 for a worker it killed
# (--request-timeout).  t/logs/request_id.t has the app's responses.
#
# Every line logs the id three ways, which must agree: %{X-Request-Id}i (the
# request's id, sent or made), %{request_id}x, and %{X-Request-Id}o, the
# header of the response Serow wrote.  The client's id is taken only from a
# field line the parser accepted: none of a request line it refused (414, a
# malformed one), none after a field line it refused.

my $MADE = qr/\A[0-9a-f]{32}\z/;
my $FORMAT = '%{X-Request-Id}i %{request_id}x %{X-Request-Id}o %>s "%r"';

sub lines_of {
    my ($file) = @_;
    open(my $fh, '<', $file) or return ();
    return <$fh>;
}

# The log line whose request line matches $line_re: (its %{X-Request-Id}i,
# its %{request_id}x, its %{X-Request-Id}o, its status).
sub logged {
    my ($file, $line_re) = @_;
    my @found;
    wait_until(sub {
        @found = map { /\A(\S+) (\S+) (\S+) (\d+) "/ ? [$1, $2, $3, $4] : () } grep { $_ =~ $line_re } lines_of($file);
        @found;
    });
    return $found[0] || [];
}

# The response's id and the log's three are one, and the status is right.
sub same_id {
    my ($res, $file, $line_re, $status, $name) = @_;
    my $id = $res && $res->{headers}{'x-request-id'};
    is $res && $res->{status}, $status, "$name: $status";
    ok defined $id, "$name: the response carries the id" or return undef;
    my $log = logged($file, $line_re);
    is_deeply $log, [$id, $id, $id, $status], "$name: the access log line has it" or diag explain [lines_of($file)];
    return $id;
}

subtest 'the worker\'s own answers' => sub {
    my $dir = File::Temp->newdir;
    my $file = "$dir/access.log";
    my $app = sub {
        my ($env) = @_;
        die "the app died\n" if $env->{PATH_INFO} eq '/die';
        return [200, ['Content-Type' => 'text/plain'], ['ok']];
    };
    my $server = start_server(app => $app, options => ['--workers', 1,
        '--request-id-header', 'X-Request-Id', '--access-log', $file, '--access-log-format', $FORMAT,
        '--header-timeout', 1, '--max-body-size', 10, '--max-request-line', 100,
        '--max-header-size', 200]);

    my $res = parse_response(raw_request($server, "NOT A REQUEST LINE\r\n\r\n"));
    like same_id($res, $file, qr/NOT A REQUEST/, 400, 'a malformed request line'), $MADE, 'a made id';

    $res = parse_response(raw_request($server, "NOT A REQUEST LINE EITHER\r\nX-Request-Id: forged-1\r\n\r\n"));
    like same_id($res, $file, qr/NOT A REQUEST LINE EITHER/, 400, 'a malformed request line, an id after it'),
        $MADE, 'a made id: the field line after it is not read';

    $res = parse_response(raw_request($server, "GET /bad-before HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n"
        . "X-Request-Id: after-bad-1\r\n\r\n"));
    like same_id($res, $file, qr{/bad-before}, 400, 'a malformed field line before the id'), $MADE,
        'a made id: nothing after the refused line is read';

    $res = parse_response(raw_request($server, "GET /bad-after HTTP/1.1\r\nHost: h\r\n"
        . "X-Request-Id: before-bad-1\r\nBad Name: x\r\n\r\n"));
    is same_id($res, $file, qr{/bad-after}, 400, 'a malformed field line after the id'), 'before-bad-1',
        'the client\'s id: its line was accepted';

    $res = parse_response(raw_request($server, "GET /dup HTTP/1.1\r\nHost: h\r\nX-Request-Id: dup-1\r\n"
        . "Content-Length: 1\r\nContent-Length: 2\r\n\r\n"));
    is same_id($res, $file, qr{/dup}, 400, 'a malformed head with an id'), 'dup-1', 'the client\'s id';

    $res = parse_response(raw_request($server, "GET /bad-id HTTP/1.1\r\nHost: h\r\nX-Request-Id: a b\r\n"
        . "Content-Length: x\r\n\r\n"));
    like same_id($res, $file, qr{/bad-id}, 400, 'a malformed head with an id not taken'), $MADE,
        'a made id';

    $res = parse_response(raw_request($server, "GET /slow HTTP/1.1\r\nX-Request-Id: slow-1\r\nHost: h\r\n"));
    is same_id($res, $file, qr{/slow}, 408, 'a head that never ends'), 'slow-1', 'the client\'s id';

    $res = parse_response(raw_request($server, "GET /never"));
    like same_id($res, $file, qr{/never}, 408, 'a request line that never ends'), $MADE, 'a made id';

    $res = parse_response(raw_request($server, "POST /big HTTP/1.1\r\nHost: h\r\nX-Request-Id: big-1\r\n"
        . "Content-Length: 1000\r\n\r\n"));
    is same_id($res, $file, qr{/big}, 413, 'a body over --max-body-size'), 'big-1', 'the client\'s id';

    $res = parse_response(raw_request($server, 'GET /' . ('l' x 200) . " HTTP/1.1\r\nX-Request-Id: long-1\r\n\r\n"));
    like same_id($res, $file, qr{/lll}, 414, 'a request line over --max-request-line'), $MADE,
        'a made id: the field line after a refused request line is not read';

    $res = parse_response(raw_request($server, 'GET /' . ('m' x 200)));
    like same_id($res, $file, qr{/mmm}, 414, 'a request line over the limit, still arriving'), $MADE,
        'a made id';

    $res = parse_response(raw_request($server, "GET /fields HTTP/1.1\r\nX-Request-Id: fields-1\r\n"
        . 'X-Big: ' . ('b' x 300) . "\r\n\r\n"));
    is same_id($res, $file, qr{/fields}, 431, 'fields over --max-header-size'), 'fields-1',
        'the client\'s id (its line came first)';

    $res = parse_response(raw_request($server, "GET /die HTTP/1.1\r\nHost: h\r\nX-Request-Id: die-1\r\n"
        . "Connection: close\r\n\r\n"));
    is same_id($res, $file, qr{/die}, 500, 'the app died'), 'die-1', 'the client\'s id';

    $res = parse_response(raw_request($server, "HEAD /die HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
    like same_id($res, $file, qr{HEAD /die}, 500, 'the app died, no id sent'), $MADE, 'a made id';

    is $server->stop, 0, 'clean stop';
};

subtest 'the holder\'s 503 (--max-queue-wait)' => sub {
    my $dir = File::Temp->newdir;
    my $file = "$dir/access.log";
    my $gate = gate();
    my $server = start_server(app => gated_app($gate), options => ['--workers', 1,
        '--max-queue-wait', 300, '--request-id-header', 'X-Request-Id', '--access-log', $file,
        '--access-log-format', $FORMAT]);
    # (once it serves: a request that waited through its start would be shed)
    ok $server->wait_until_serving, 'the worker serves' or diag $server->log;
    my @kept = map { raw_connect($server) } 1 .. 2;
    for my $kept (@kept) {
        my $res = get_on($kept, '/');
        is $res && $res->{status}, 200, 'a connection served once and kept';
    }
    my $held = raw_connect($server);
    syswrite $held, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/slow request in worker/), 'the one worker is held in the app';
    syswrite $kept[0], "GET /queued HTTP/1.1\r\nHost: x\r\nX-Request-Id: queued-1\r\n\r\n";
    syswrite $kept[1], "GET /queued-without HTTP/1.1\r\nHost: x\r\n\r\n";
    my $res = read_response($kept[0], timeout => 15);
    is same_id($res, $file, qr{/queued HTTP}, 503, 'shed with an id'), 'queued-1', 'the client\'s id';
    $res = read_response($kept[1], timeout => 15);
    like same_id($res, $file, qr{/queued-without}, 503, 'shed without'), $MADE, 'a made id';
    $gate->open(1);
    is read_response($held)->{status}, 200, 'the held request completes';
    is $server->stop, 0, 'clean stop';
};

subtest 'the worker\'s 503 for a request that waited in the listen backlog' => sub {
    my $dir = File::Temp->newdir;
    my $file = "$dir/access.log";
    my $limit_ms = 1000;
    my $gate = gate();
    my $server = start_server(app => gated_app($gate), options => ['--workers', 1,
        '--max-queue-wait', $limit_ms, '--request-id-header', 'X-Request-Id', '--access-log', $file,
        '--access-log-format', $FORMAT]);
    # (once it serves: a request that waited through its start would be shed)
    ok $server->wait_until_serving, 'the worker serves' or diag $server->log;
    my $held = raw_connect($server);
    syswrite $held, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/slow request in worker/), 'the one worker is held in the app';
    my $late = raw_connect($server);
    syswrite $late, "GET /late HTTP/1.1\r\nHost: x\r\nX-Request-Id: late-1\r\n\r\n";
    my $sent = Time::HiRes::time();
    ok wait_until(sub { Time::HiRes::time() - $sent > 2 * $limit_ms / 1000 }, 10),
        'the request has waited twice the limit in the backlog';
    $gate->open(1);
    is read_response($held)->{status}, 200, 'the held request completes';
    my $res = read_response($late, timeout => 15);
    is same_id($res, $file, qr{/late}, 503, 'shed after the backlog'), 'late-1', 'the client\'s id';
    is $server->stop, 0, 'clean stop';
};

subtest 'the master\'s 503 for the request of a worker it killed (--request-timeout)' => sub {
    my $dir = File::Temp->newdir;
    my $file = "$dir/access.log";
    my $app = sub {
        my ($env) = @_;
        if ($env->{PATH_INFO} eq '/stuck') {
            local $SIG{ALRM} = 'IGNORE';
            sleep 1 while 1;
        }
        return [200, ['Content-Type' => 'text/plain'], ['ok']];
    };
    my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
        '--request-timeout-grace', 1, '--request-id-header', 'X-Request-Id', '--access-log', $file,
        '--access-log-format', $FORMAT]);
    my $n = 0;
    for my $sent (['stuck-1', 'an id sent'], [undef, 'none sent']) {
        my ($id, $what) = @$sent;
        $n++;
        my $stuck = raw_connect($server);
        syswrite $stuck, "GET /stuck?n=$n HTTP/1.1\r\nHost: x\r\n" . ($id ? "X-Request-Id: $id\r\n" : '') . "\r\n";
        my $killed = $server->wait_for_log(qr/ran GET \/stuck\?n=$n \(request id (\S+)\) for .*: killed/);
        ok $killed, "$what: the master kills the worker, its log line names the id" or diag $server->log;
        my ($logged) = ($killed // '') =~ /\(request id (\S+)\)/;
        my $res = read_response($stuck, timeout => 30);
        my $answered = same_id($res, $file, qr{/stuck\?n=$n HTTP}, 503, $what);
        if ($id) {
            is $answered, $id, "$what: with the client's id";
        } else {
            like $answered // '', $MADE, "$what: with the id made for it";
        }
        is $logged, $answered, "$what: the one the error log names";
    }
    is $server->stop, 0, 'clean stop';
};

done_testing;
