# Expect: 100-continue (RFC 9110 10.1.1, 15.2.1): the server answers
# "HTTP/1.1 100 Continue" before the body is sent, so a client may wait for it
# before sending; the value is case-insensitive; any other expectation gets
# 417 and a close; an HTTP/1.0 request's expectation is ignored.
use strict;
use warnings;
use Test::More;
use IO::Select;
use JSON::PP ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1, '--keepalive-timeout', 30]);

# Sends $head, waits for the 100 (the client sends nothing until it comes),
# sends $body; returns the interim and the final response.
sub wait_then_send {
    my ($sock, $head, $body, $buf) = @_;
    syswrite $sock, $head;
    my $interim = read_response($sock, buffer => $buf);
    syswrite $sock, $body if $interim && $interim->{status} == 100;
    return ($interim, read_response($sock, buffer => $buf));
}

for my $value ('100-continue', '100-Continue', '100-CONTINUE') {
    subtest "Expect: $value with Content-Length" => sub {
        my $sock = raw_connect($server);
        my $buf = '';
        my ($interim, $final) = wait_then_send($sock,
            "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: $value\r\n\r\n", 'hello', \$buf);
        is $interim && $interim->{status}, 100, '100 Continue came before the body was sent';
        is $final && $final->{status}, 200, 'then the final response';
        is $final && JSON::PP::decode_json($final->{body})->{body}, 'hello', 'the app read the body';
    };
}

subtest 'Expect: 100-continue with a body of 20 KiB, then the next request' => sub {
    # (a body that psgi.input reads where it lies in the connection's buffer)
    my $sock = raw_connect($server);
    my $buf = '';
    my $body = join '', map { sprintf '%07d;', $_ } 1 .. 2560;
    my ($interim, $final) = wait_then_send($sock,
        "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($body)
        . "\r\nExpect: 100-continue\r\n\r\n", $body . "GET /next HTTP/1.1\r\nHost: x\r\n\r\n", \$buf);
    is $interim && $interim->{status}, 100, '100 Continue came before the body was sent';
    ok $final && JSON::PP::decode_json($final->{body})->{body} eq $body, 'the app read the body';
    my $next = read_response($sock, buffer => \$buf);
    is $next && JSON::PP::decode_json($next->{body})->{path}, '/next', 'the request after it';
};

subtest 'the interim response is exactly a 100 status line and an empty line' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
    my $got = '';
    my $sel = IO::Select->new($sock);
    while (length $got < 25 && $sel->can_read(Serow::Test::READ_TIMEOUT)) {
        sysread($sock, $got, 25 - length $got, length $got) or last;
    }
    is $got, "HTTP/1.1 100 Continue\r\n\r\n";
    syswrite $sock, 'abc';
    my $final = read_response($sock);
    is $final && $final->{status}, 200;
};

subtest 'Expect: 100-continue with a chunked body, then the next request' => sub {
    my $sock = raw_connect($server);
    my $buf = '';
    my ($interim, $final) = wait_then_send($sock,
        "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
        "3\r\nabc\r\n0\r\n\r\n", \$buf);
    is $interim && $interim->{status}, 100;
    is $final && JSON::PP::decode_json($final->{body})->{body}, 'abc';
    syswrite $sock, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    my $next = read_response($sock, buffer => \$buf);
    is $next && JSON::PP::decode_json($next->{body})->{path}, '/next', 'the connection is reused';
};

subtest 'a client that sends the body without waiting' => sub {
    my $sock = raw_connect($server);
    my $buf = '';
    syswrite $sock, "POST /eager HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello"
        . "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    my $res = read_response($sock, buffer => \$buf);
    $res = read_response($sock, buffer => \$buf) if $res && $res->{status} == 100; # allowed, not needed
    is $res && JSON::PP::decode_json($res->{body})->{body}, 'hello';
    my $next = read_response($sock, buffer => \$buf);
    is $next && JSON::PP::decode_json($next->{body})->{path}, '/next', 'the next request follows';
};

subtest 'Expect: 100-continue without a body needs no 100' => sub {
    my $sock = raw_connect($server);
    my $buf = '';
    syswrite $sock, "GET /nobody HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n";
    my $res = read_response($sock, buffer => \$buf);
    $res = read_response($sock, buffer => \$buf) if $res && $res->{status} == 100;
    is $res && $res->{status}, 200, 'answered without waiting for a body';
};

subtest 'HTTP/1.0: the expectation is ignored, no 100' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "POST /old HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";
    # Nothing may come until the body has been sent: give a wrongly sent 100
    # a second to show up (an expiry on purpose, no synchronisation).
    ok !IO::Select->new($sock)->can_read(1), 'no interim response';
    syswrite $sock, 'hello';
    my $res = read_response($sock);
    is $res && $res->{status}, 200;
    is $res && JSON::PP::decode_json($res->{body})->{body}, 'hello';
};

rejects($server, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: something-else\r\n\r\nhello",
    417, 'another expectation gets 417');
rejects($server, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue, foo\r\n\r\nhello",
    417, 'an expectation list with an unknown member gets 417');
rejects($server, "GET / HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", 417, '417 also without a body');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
