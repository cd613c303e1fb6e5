# A small body (Content-Length up to 64 KiB, or the first 64 KiB of a chunked
# one) is read in the worker's event loop before the app sees the request
# (PREREAD_BODY_MAX in src/worker/worker_request_body.c): clients that
# send their bodies slowly hold connections, not the worker, and a normal
# client is answered meanwhile.  --read-timeout still bounds the wait for
# each piece of such a body (408).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response answered_and_closed http_get echo_app);

my $SLOW_CLIENTS = 5; # more than the one worker

# [framing, the head's framing field, the first half of the body, the rest for client $i]
for my $case (
    ['Content-Length', 'Content-Length: 10', 'half', sub { "-body$_[0]" }],
    ['chunked', 'Transfer-Encoding: chunked', "4\r\nhalf\r\n", sub { "6\r\n-body$_[0]\r\n0\r\n\r\n" }],
) {
    my ($framing, $field, $first, $rest) = @$case;
    subtest "slow $framing bodies do not hold the only worker" => sub {
        my $server = start_server(app => echo_app(), options => ['--workers', 1]);
        my @slow;
        for my $i (1 .. $SLOW_CLIENTS) {
            my $sock = raw_connect($server);
            syswrite $sock, "POST /slow$i HTTP/1.1\r\nHost: x\r\n$field\r\n\r\n$first";
            push @slow, $sock;
        }
        # Before the fix the worker waited in the first slow body's read for
        # --read-timeout (60 s): this request then got no answer in read_response's 30 s.
        my $res = http_get($server, '/normal');
        is $res && $res->{status}, 200, 'a normal request is answered while the bodies trickle in';
        like $res && $res->{body}, qr{"path":"/normal"}, '  by the app';
        for my $i (1 .. $SLOW_CLIENTS) {
            syswrite $slow[$i - 1], $rest->($i);
            my $r = read_response($slow[$i - 1]);
            is $r && $r->{status}, 200, "slow client $i is answered once its body is complete";
            like $r && $r->{body}, qr/"body":"half-body$i"/, '  and the app read the whole body';
        }
        is $server->stop, 0;
    };
}

subtest 'Expect: 100-continue: the loop sends 100 Continue, then waits for the body' => sub {
    my $server = start_server(app => echo_app(), options => ['--workers', 1]);
    my $sock = raw_connect($server);
    syswrite $sock, "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";
    my $continue = read_response($sock);
    is $continue && $continue->{status}, 100, '100 Continue';
    is http_get($server, '/normal')->{status}, 200, 'another client is served meanwhile';
    syswrite $sock, "hello";
    my $r = read_response($sock);
    is $r && $r->{status}, 200, 'then the request is served';
    like $r && $r->{body}, qr/"body":"hello"/, '  with its body';
    is $server->stop, 0;
};

subtest 'a small body that stops arriving gets 408 from the loop; the worker lives' => sub {
    my $server = start_server(app => sub { [200, [], ["pid $$"]] },
        options => ['--workers', 1, '--read-timeout', 1]);
    my $before = http_get($server, '/')->{body};
    my $sock = raw_connect($server);
    syswrite $sock, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf";
    answered_and_closed($sock, 408);
    is http_get($server, '/')->{body}, $before, 'the same worker serves the next request';
    is $server->stop, 0;
};

done_testing;
