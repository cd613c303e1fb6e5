# Every error response the server makes itself closes the connection, also
# on a connection that was kept alive before: after a malformed request, a
# body that breaks the framing, an app that dies or returns a broken
# response, nothing more is read from it (a pipelined request is not
# answered).  An error status the app chose is an ordinary response.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close parse_response);

my $server = start_server(app => sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    die "on purpose\n" if $path eq '/die';
    return [200, ['Bad Name' => 'x'], ['broken']] if $path eq '/bad-header';
    return "not a response" if $path eq '/bad-response';
    return [404, [], ['no such thing']] if $path eq '/missing';
    return sub { my $w = $_[0]->([200, []]); $w->write('partial'); die "mid-stream\n" }
        if $path eq '/die-mid-stream';
    return sub { $_[0]->([200, []]); die "before writing\n" } if $path eq '/die-before-writing';
    return [200, [], ["ok $path"]];
}, options => ['--workers', 1, '--keepalive-timeout', 30]);

my $after = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";

# A good request, then $bad with a request behind it, on one connection.
sub after_a_good_one {
    my ($bad) = @_;
    my $sock = raw_connect($server);
    my $buf = '';
    syswrite $sock, "GET /good HTTP/1.1\r\nHost: x\r\n\r\n";
    my $good = read_response($sock, buffer => \$buf);
    is $good && $good->{body}, 'ok /good', 'the first request is answered and kept';
    syswrite $sock, $bad . $after;
    my ($raw, $closed) = read_until_close($sock, buffer => \$buf);
    my @res = parse_response($raw);
    is scalar @res, 1, 'one response to the rest';
    ok $closed, 'then the server closed';
    unlike $raw, qr{ok /after}, 'the request behind it was not answered';
    return $res[0];
}

my @cases = (
    ['a malformed request', "GET / HTTP/1.1\r\nHost: x\r\nBad Name: x\r\n\r\n", 400],
    ['an unsupported version', "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505],
    ['a broken chunked body', "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400],
    ['an unknown transfer coding', "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br, chunked\r\n\r\n0\r\n\r\n", 501],
    ['an app that dies', "GET /die HTTP/1.1\r\nHost: x\r\n\r\n", 500],
    ['an app that returns an invalid header', "GET /bad-header HTTP/1.1\r\nHost: x\r\n\r\n", 500],
    ['an app that returns no response', "GET /bad-response HTTP/1.1\r\nHost: x\r\n\r\n", 500],
    ['a streaming app that dies before its first write', "GET /die-before-writing HTTP/1.1\r\nHost: x\r\n\r\n", 500],
);
for my $case (@cases) {
    my ($name, $bad, $status) = @$case;
    subtest $name => sub {
        my $res = after_a_good_one($bad);
        is $res && $res->{status}, $status, "status $status";
        is lc(($res && $res->{headers}{connection}) // ''), 'close', 'Connection: close';
    };
}

subtest 'a streaming app that dies after its first write: the body is cut, the connection closed' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /die-mid-stream HTTP/1.1\r\nHost: x\r\n\r\n$after";
    my ($raw, $closed) = read_until_close($sock);
    like $raw, qr{\AHTTP/1\.1 200 OK\r\n.*\r\n\r\n7\r\npartial\r\n\z}s,
        'the head and the chunk sent, no last chunk: the client can tell the body is cut';
    ok $closed, 'the server closed';
};

subtest "the app's own 404 keeps the connection" => sub {
    my $sock = raw_connect($server);
    my $buf = '';
    syswrite $sock, "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n$after";
    is read_response($sock, buffer => \$buf)->{status}, 404;
    is read_response($sock, buffer => \$buf)->{body}, 'ok /after';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
