# --read-timeout: a body that stops arriving gets 408 (RFC 9110 15.5.9) and a
# closed connection, whether framed by Content-Length or chunked, and also
# when the client asked for 100 Continue and then sent nothing.  The timeout
# expires here on purpose.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close parse_response echo_app);

my $server = start_server(app => echo_app(), options => ['--workers', 1, '--read-timeout', 1]);

for my $case (
    ['a Content-Length body cut short', "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf"],
    ['a chunked body cut inside a chunk', "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nhalf"],
    ['a chunked body without its last chunk', "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nhalf\r\n"],
    ['a chunked body without the end of its trailers', "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: v\r\n"],
    ['a body never sent after 100 Continue', "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"],
) {
    my ($name, $bytes) = @$case;
    subtest $name => sub {
        my $sock = raw_connect($server);
        syswrite $sock, $bytes;
        my ($raw, $closed) = read_until_close($sock);
        $raw =~ s{\AHTTP/1\.1 100 Continue\r\n\r\n}{};
        my @res = parse_response($raw);
        is scalar @res, 1, 'one response';
        is $res[0] && $res[0]{status}, 408, 'status 408';
        is lc(($res[0] && $res[0]{headers}{connection}) // ''), 'close', 'Connection: close';
        ok $closed, 'the server closed';
    };
}

is $server->stop, 0, 'the server stops cleanly';
done_testing;
