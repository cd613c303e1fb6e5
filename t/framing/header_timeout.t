# --header-timeout is the time a client has for a whole request head, not
# for each read: a client that trickles its head in (one byte or one field at
# a time, each well within the timeout) still gets 408 (RFC 9110 15.5.9) and
# a closed connection once the total is spent.  The timeouts here expire on
# purpose; the waits are bounded by READ_TIMEOUT, never paced by it.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close echo_app);

my $server = start_server(app => echo_app(),
    # --max-headers: a trickle of fields meets the timeout, never the count
    options => ['--workers', 1, '--header-timeout', 1, '--keepalive-timeout', 30, '--max-headers', 1000]);

# Sends $first, then one of @drip every $pace seconds (cycling) until the
# server answers; returns the answer and whether the server then closed.
sub trickle {
    my ($sock, $first, $pace, @drip) = @_;
    syswrite $sock, $first if length $first;
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + Serow::Test::READ_TIMEOUT;
    my $i = 0;
    until ($sel->can_read($pace)) {
        last if Time::HiRes::time > $deadline;
        syswrite $sock, $drip[$i++ % @drip];
    }
    my ($raw, $closed) = read_until_close($sock);
    return ($raw, $closed);
}

sub is_408_and_closed {
    my ($raw, $closed) = @_;
    like $raw, qr{\AHTTP/1\.1 408 Request Timeout\r\n}, 'status 408';
    like $raw, qr{\r\nConnection: close\r\n}i, 'Connection: close';
    ok $closed, 'the server closed the connection';
}

subtest 'a head that stops arriving' => sub {
    is_408_and_closed(trickle(raw_connect($server), "GET / HTTP/1.1\r\nHost: x\r\n", Serow::Test::READ_TIMEOUT, ''));
};

subtest 'a head trickled in one byte every 0.1 s' => sub {
    is_408_and_closed(trickle(raw_connect($server), "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ", 0.1, 'v'));
};

subtest 'a head trickled in one complete field every 0.2 s' => sub {
    is_408_and_closed(trickle(raw_connect($server), "GET / HTTP/1.1\r\nHost: x\r\n", 0.2, "X-Slow: v\r\n"));
};

subtest 'a request line trickled in one byte every 0.1 s' => sub {
    is_408_and_closed(trickle(raw_connect($server), "GET /", 0.1, 'a'));
};

subtest 'a HEAD request whose head never ends: the 408 has no body' => sub {
    my ($raw, $closed) = trickle(raw_connect($server), "HEAD / HTTP/1.1\r\nHost: x\r\n",
        Serow::Test::READ_TIMEOUT, '');
    like $raw, qr{\AHTTP/1\.1 408 [^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n\z}, 'a head and nothing else';
    ok $closed, 'the server closed the connection';
};

subtest 'the next head on a kept-alive connection has the same limit' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock)->{status}, 200, 'the first request is answered';
    is_408_and_closed(trickle($sock, "GET /second HTTP/1.1\r\n", 0.1, 'X', ': v', "\r\n"));
};

subtest 'a pipelined head that never ends' => sub {
    my $sock = raw_connect($server);
    my $buf = '';
    syswrite $sock, "GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\n";
    is read_response($sock, buffer => \$buf)->{status}, 200, 'the first request is answered';
    my ($raw, $closed) = read_until_close($sock, buffer => \$buf);
    is_408_and_closed($raw, $closed);
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
