use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use JSON::PP ();
use Serow::Test qw(start_server raw_connect get_on read_response read_until_close http_get wait_until);
use Serow::Test::Prometheus qw(parse value);
use Serow::Options ();

# --request-timeout (uWSGI's --harakiri): an app that runs too long gets a
# die inside it, and the client a 503 with Connection: close; an app the die
# does not end is killed by the master after --request-timeout-grace, and
# the idle connections its worker had are not lost.  Each case waits for its
# outcome (a response, a log line); none depends on how long anything took.

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/loop') {
        push @{ $env->{'psgix.cleanup.handlers'} }, sub { print STDERR "cleanup ran for /loop\n" };
        1 while 1; # THE LOOP
    }
    if ($path eq '/caught') {
        # A framework that turns every die into its own error page.
        eval { 1 while 1 };
        return [500, ['Content-Type' => 'text/plain'], ["the framework's page: $@"]];
    }
    if ($path eq '/stuck') {
        # What the die cannot end: SIGALRM ignored (as a blocking C call
        # would defer it forever).
        local $SIG{ALRM} = 'IGNORE';
        sleep 1 while 1;
    }
    if ($path eq '/stuck-after-body') {
        # Reads its body (a 100 Continue goes out first), then gets stuck.
        $env->{'psgi.input'}->read(my $body, 100);
        local $SIG{ALRM} = 'IGNORE';
        sleep 1 while 1;
    }
    if ($path eq '/stuck-after-103') {
        # Sends 103 Early Hints (an interim response), then gets stuck for good.
        $env->{'psgix.informational'}->(103, [Link => '</style.css>; rel=preload']);
        local $SIG{ALRM} = 'IGNORE';
        sleep 1 while 1;
    }
    if ($path eq '/spin') {
        # Computes, and catches every die to go on computing.
        for (;;) { eval { 1 while 1 } }
    }
    if ($path eq '/stuck-after-bytes') {
        # Some of its response is out when it gets stuck for good.
        return sub {
            my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
            $writer->write("first part\n");
            local $SIG{ALRM} = 'IGNORE';
            sleep 1 while 1;
        };
    }
    if ($path eq '/stream-before-responder') {
        return sub { 1 while 1 };
    }
    if ($path eq '/stream-before-write') {
        return sub {
            my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
            1 while 1;
        };
    }
    if ($path eq '/stream-after-write') {
        return sub {
            my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
            $writer->write("first part\n");
            1 while 1;
        };
    }
    if ($path eq '/alarm') {
        # The app's own alarm, with its own handler.
        my $caught = eval {
            local $SIG{ALRM} = sub { die "the app's alarm\n" };
            alarm 1;
            1 while 1;
        } // $@;
        alarm 0;
        return [200, ['Content-Type' => 'text/plain'], [$caught]];
    }
    return [200, ['Content-Type' => 'text/plain'], [$$]];
};

# The line of THE LOOP in this file, which the stack trace must name.
open(my $self_fh, '<', __FILE__) or die "open: $!";
my $loop_line;
while (my $line = <$self_fh>) {
    next unless $line =~ /# THE LOOP$/;
    $loop_line = $.;
    last;
}
close $self_fh;

sub timeouts_counted {
    my ($server) = @_;
    my $res = http_get($server, '/metrics') or return -1;
    my $m = eval { parse($res->{body}) } or return -1;
    return value($m, 'serow_request_timeouts_total');
}

subtest 'an app the die reaches: 503, logged with a stack trace, the worker goes on' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
        '--request-timeout-grace', 600, '--metrics-path', '/metrics']);
    my $pid = http_get($server, '/')->{body};

    my $sock = raw_connect($server);
    my $res = get_on($sock, '/loop');
    is $res && $res->{status}, 503, 'a looping app: 503' or diag $server->log;
    is $res && $res->{headers}{connection}, 'close', '... with Connection: close';
    is $res && $res->{headers}{'retry-after'}, 1, '... and Retry-After: 1';
    is read_until_close($sock), '', '... and the connection closes';

    my $line = $server->wait_for_log(qr/\[error\].*GET \/loop: the app ran \S+s, longer than --request-timeout 1s, in worker \d+: interrupted at .*/);
    ok $line, 'the log says which request timed out' or diag $server->log;
    my ($ran, $worker, $file, $at) = ($line // '') =~ /ran ([\d.]+)s, .* in worker (\d+): interrupted at (\S+) line (\d+)/;
    ok $ran && $ran >= 1, '... how long it ran';
    is $worker, $pid, '... in which worker';
    like $file, qr/request_timeout\.t\z/, '... and where the app was: its file';
    is $at, $loop_line, '... and line';
    ok $server->wait_for_log(qr/cleanup ran for \/loop/, undef, 0), 'the psgix.cleanup handlers ran';

    $res = get_on(raw_connect($server), '/caught');
    is $res && $res->{status}, 503, "an app that catches the die: 503 all the same, not its own page";

    is http_get($server, '/')->{body}, $pid, 'the same worker answers the next request';
    is wait_until(sub { timeouts_counted($server) == 2 }), 1, 'serow_request_timeouts_total counts both';
    is $server->stop, 0, 'clean stop';
};

# The master kills the worker; the client of the stuck request gets the
# 503 (the master took its connection before the kill), and a kept-alive
# connection parked in that worker is served by the next one (the holder
# took it, idle, before the kill), whether the stuck app sleeps or computes.
for my $case (['/stuck', 'SIGALRM ignored, sleeping'], ['/spin', 'every die caught, computing']) {
    my ($path, $what) = @$case;
    subtest "an app the die does not end ($what): killed after the grace, its client answered 503, its idle connections kept" => sub {
        my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
            '--request-timeout-grace', 1, '--metrics-path', '/metrics']);
        my $idle = raw_connect($server);
        my $res = get_on($idle, '/');
        my $pid = $res && $res->{body};
        ok $pid, 'a keep-alive connection served by the only worker';

        my $stuck = raw_connect($server);
        syswrite $stuck, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
        my $killed = $server->wait_for_log(qr/worker (\d+) ran GET \Q$path\E for [\d.]+s, past --request-timeout 1s and --request-timeout-grace 1s.*: killed/);
        ok $killed, 'the master kills the worker' or diag $server->log;
        like $killed // '', qr/worker $pid /, '... the one that was stuck';
        $res = read_response($stuck, timeout => 30);
        is $res && $res->{status}, 503, "the stuck request's client gets 503" or diag $server->log;
        is $res && $res->{headers}{connection}, 'close', '... with Connection: close';
        is $res && $res->{headers}{'retry-after'}, 1, '... and Retry-After: 1';
        is read_until_close($stuck), '', '... and the connection closes';

        $res = get_on($idle, '/');
        is $res && $res->{status}, 200, 'the idle connection of that worker is answered by its replacement'
            or diag $server->log;
        isnt $res && $res->{body}, $pid, '... a new worker';
        is wait_until(sub { timeouts_counted($server) == 1 }), 1, 'serow_request_timeouts_total counts it';
        is $server->stop, 0, 'clean stop';
    };
}

# The master's 503 has its access log line, as a worker's answer has: in
# the format chosen, written by the access log's own writer, with the
# request's line and fields as the worker read them, the id the 503
# carried, and the killed worker's pid.
subtest "the master's 503 is in the access log, in each format" => sub {
    my $dir = File::Temp->newdir;
    my $custom = '%h|%>s|%b|%r|%m|%U|%q|%H|%{X-Request-Id}i|%{request_id}x|%{X-Request-Id}o|'
        . '%{User-Agent}i|%P|%k|%u';
    my $n = 0;
    for my $format ('combined', 'common', 'json', $custom) {
        $n++;
        my $file = "$dir/access-$n.log";
        my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
            '--request-timeout-grace', 1, '--request-id-header', 'X-Request-Id',
            '--access-log', $file, '--access-log-format', $format]);
        my $sock = raw_connect($server);
        my $first = get_on($sock, '/');
        is $first && $first->{status}, 200, "$format: a first request on the connection";
        syswrite $sock, "GET /stuck?n=$n HTTP/1.1\r\nHost: x\r\nUser-Agent: stuck agent\r\n"
            . "Referer: http://example/from\r\nX-Request-Id: stuck-$n\r\n\r\n";
        my $res = read_response($sock, timeout => 30);
        is $res && $res->{status}, 503, "$format: the master's 503" or diag $server->log;
        my ($worker) = ($server->wait_for_log(qr/worker \d+ ran GET \/stuck/) // '') =~ /worker (\d+)/;
        my $bytes = length($res ? $res->{body} : '');
        my $line;
        ok wait_until(sub {
            open(my $fh, '<', $file) or return 0;
            ($line) = grep { m{/stuck\?n=$n} } <$fh>;
            defined $line;
        }), "$format: its access log line" or diag $server->log;
        $line //= '';
        chomp $line;
        my $request = "GET /stuck?n=$n HTTP/1.1";
        my $common = qr{\A127\.0\.0\.1 - - \[[^]]+\] "\Q$request\E" 503 $bytes};
        if ($format eq 'combined') {
            like $line, qr{$common "http://example/from" "stuck agent"\z}, "$format: the line";
        } elsif ($format eq 'common') {
            like $line, qr{$common\z}, "$format: the line";
        } elsif ($format eq 'json') {
            my $e = eval { JSON::PP->new->decode($line) } // {};
            is_deeply [@$e{qw(remote_addr request method path query protocol status bytes referer
                              user_agent request_id pid)}],
                ['127.0.0.1', $request, 'GET', '/stuck', '?n=' . $n, 'HTTP/1.1', 503, $bytes,
                 'http://example/from', 'stuck agent', "stuck-$n", $worker], "$format: the line"
                or diag $line;
            ok $e->{duration_us} > 0, "$format: a duration";
        } else {
            is $line, join('|', '127.0.0.1', 503, $bytes, $request, 'GET', '/stuck', "?n=$n",
                'HTTP/1.1', ("stuck-$n") x 3, 'stuck agent', $worker, 1, '-'), 'a custom format: the line';
        }
        is $server->stop, 0, 'clean stop';
    }
};

# A 100 Continue is no part of the response: it does not stop the 503.
subtest 'killed after a 100 Continue (an interim response): the client still gets 503' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
        '--request-timeout-grace', 1]);
    my $sock = raw_connect($server);
    syswrite $sock, "POST /stuck-after-body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        . "Expect: 100-continue\r\n\r\n";
    my $continue = Serow::Test::read_until_match($sock, qr/\r\n\r\n/);
    like $continue, qr{\AHTTP/1.1 100 Continue\r\n\r\n\z}, 'the app asks for the body: 100 Continue';
    syswrite $sock, 'hello';
    my $got = read_until_close($sock, timeout => 30);
    like $got, qr{\AHTTP/1.1 503 }, 'the worker killed, the client gets 503' or diag $server->log;
    is $server->stop, 0, 'clean stop';
};

# Nor is a 1xx the app sends (psgix.informational): the master's 503
# follows it, with its access log line.
subtest 'killed after a 103 Early Hints (an interim response): the client gets 103, then 503' => sub {
    my $dir = File::Temp->newdir;
    my $file = "$dir/access.log";
    my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
        '--request-timeout-grace', 1, '--access-log', $file, '--access-log-format', '%r|%>s']);
    my $sock = raw_connect($server);
    syswrite $sock, "GET /stuck-after-103 HTTP/1.1\r\nHost: x\r\n\r\n";
    my $hints = Serow::Test::read_until_match($sock, qr/\r\n\r\n/);
    like $hints, qr{\AHTTP/1.1 103 Early Hints\r\n.*Link: </style.css>; rel=preload\r\n}s,
        'the app sends 103 Early Hints';
    my $got = $hints . read_until_close($sock, timeout => 30);
    like $got, qr{\AHTTP/1.1 103 [^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\nHTTP/1.1 503 },
        'the worker killed, the client gets 503 after it' or diag $got, $server->log;
    ok $server->wait_for_log(qr/ran GET \/stuck-after-103 for .*: killed/), 'the master killed the worker';
    my $line;
    ok wait_until(sub {
        open(my $fh, '<', $file) or return 0;
        ($line) = grep { m{/stuck-after-103} } <$fh>;
        defined $line;
    }), "the 503's access log line" or diag $server->log;
    is $line, "GET /stuck-after-103 HTTP/1.1|503\n", '... with its request and status';
    unlike $server->log, qr/had begun its response/, 'the log does not say the response was cut';
    is $server->stop, 0, 'clean stop';
};

subtest 'killed after bytes of its response went out: the connection closes, the log says so' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
        '--request-timeout-grace', 1]);
    my $stuck = raw_connect($server);
    syswrite $stuck, "GET /stuck-after-bytes HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/ran GET \/stuck-after-bytes for .*: killed/), 'the master kills the worker'
        or diag $server->log;
    my $got = read_until_close($stuck);
    like $got, qr{\AHTTP/1.1 200 .*first part}s, 'the client has the start of the response';
    unlike $got, qr/ 503 /, '... and no 503 after it';
    ok $server->wait_for_log(qr/worker \d+: its stuck request had begun its response: the client's connection is closed/),
        'the log says the response was cut' or diag $server->log;
    is http_get($server, '/')->{status}, 200, 'a new worker serves';
    is $server->stop, 0, 'clean stop';
};

# A streaming response's callback is timed too.  Until its first bytes go
# out (the head waits for them), the client gets the 503; after, the
# response is cut: the connection closes, and the log says so.
subtest 'a streaming response: timed in its callback' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
        '--request-timeout-grace', 600]);
    for my $path ('/stream-before-responder', '/stream-before-write') {
        my $sock = raw_connect($server);
        my $res = get_on($sock, $path);
        is $res && $res->{status}, 503, "$path: 503" or diag $server->log;
        is $res && $res->{headers}{connection}, 'close', '... with Connection: close';
        is read_until_close($sock), '', '... and the connection closes';
        ok $server->wait_for_log(qr/GET \Q$path\E: the app ran \S+s, longer than --request-timeout 1s/),
            '... and the log says which request timed out';
    }
    my $sock = raw_connect($server);
    syswrite $sock, "GET /stream-after-write HTTP/1.1\r\nHost: x\r\n\r\n";
    my $got = read_until_close($sock, timeout => 30);
    like $got, qr{\AHTTP/1.1 200 .*first part}s, '/stream-after-write: the start of the response';
    unlike $got, qr{\r\n0\r\n\r\n}, '... not ended as if complete';
    unlike $got, qr/ 503 /, '... and no 503 after it';
    ok $server->wait_for_log(qr{GET /stream-after-write: .*its response had begun: the connection is closed, the response cut}),
        '... and the log says the response was cut' or diag $server->log;
    is http_get($server, '/')->{status}, 200, 'the same worker serves the next request';
    is $server->stop, 0, 'clean stop';
};

subtest "an app's own alarm keeps working, with the option on and off" => sub {
    for my $on (1, 0) {
        my $server = start_server(app => $app, options => ['--workers', 1,
            ($on ? ('--request-timeout', 600) : ())]);
        my $res = http_get($server, '/alarm');
        is $res && $res->{body}, "the app's alarm\n", ($on ? 'on' : 'off') . ": the app's handler ran";
        is $server->stop, 0, 'clean stop';
        unlike $server->log, qr/request-timeout/, '... and nothing was said of a timeout';
    }
};

subtest 'with the option off, a long request is left alone' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--metrics-path', '/metrics']);
    my $pid = http_get($server, '/')->{body};
    my $worker_status = do { local $/; open(my $fh, '<', "/proc/$pid/status") or die; <$fh> };
    my ($caught) = $worker_status =~ /^SigCgt:\s*([0-9a-f]+)/m;
    ok !(hex(substr($caught, -4)) & (1 << 13)), 'the worker does not catch SIGALRM';
    is timeouts_counted($server), 0, 'serow_request_timeouts_total is there, at 0';
    is $server->stop, 0, 'clean stop';
};

subtest 'bad values' => sub {
    for my $case (['--request-timeout', 'abc', qr/\A--request-timeout: 'abc' is not a whole number/],
                  ['--harakiri', '-1', qr/\A--request-timeout: '-1' is not a whole number/],
                  ['--request-timeout-grace', '0', qr/\A--request-timeout-grace: '0' is not a positive number of seconds/]) {
        my ($flag, $value, $error) = @$case;
        eval { Serow::Options->from_argv($flag, $value, 'app.psgi') };
        like $@, $error, "$flag $value";
    }
    my ($o) = Serow::Options->from_argv('--harakiri', 30, '--harakiri-graceful-timeout', 2, 'app.psgi');
    is_deeply [@$o{qw(request_timeout request_timeout_grace)}], [30, 2], "uWSGI's names";
    is(Serow::Options->defaults->{request_timeout}, 0, 'off by default');
};

done_testing;
