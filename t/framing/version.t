# HTTP-version (RFC 9112 2.3, RFC 9110 15.6.6): a higher minor version of
# HTTP/1 is served as HTTP/1.1, the highest Serow supports (RFC 9112 2.3);
# another well-formed major version gets 505; anything not of the form
# HTTP/DIGIT.DIGIT (lower case, extra digits, HTTP/0.9's version-less line)
# is no HTTP/1.x request line at all: 400.  Either way the connection is
# closed.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

subtest 'HTTP/1.2 and HTTP/1.9 are served as HTTP/1.1' => sub {
    for my $minor (2, 9) {
        # Two requests in one write: kept alive as HTTP/1.1 is, and a Host
        # is required as in HTTP/1.1.
        my @res = parse_response(raw_request($server,
            "POST /a HTTP/1.$minor\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            . "3\r\nabc\r\n0\r\n\r\n"
            . "GET /b HTTP/1.$minor\r\nHost: x\r\nConnection: close\r\n\r\n"));
        is scalar @res, 2, "HTTP/1.$minor: both requests answered";
        is_deeply [map { "$_->{version} $_->{status}" } @res], ['HTTP/1.1 200', 'HTTP/1.1 200'],
            "HTTP/1.$minor: answered as HTTP/1.1";
        like $res[0]{body}, qr/"body":"abc".*"protocol":"HTTP\/1.1"/,
            "HTTP/1.$minor: a chunked body, SERVER_PROTOCOL HTTP/1.1";
        like $res[1]{body}, qr/"path":"\/b"/, "HTTP/1.$minor: the second request";
    }
};
rejects($server, "GET / HTTP/1.2\r\n\r\n", 400, 'HTTP/1.2 without a Host, as HTTP/1.1');

rejects($server, "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, 'HTTP/2.0');
rejects($server, "GET / HTTP/2.1\r\nHost: x\r\n\r\n", 505, 'HTTP/2.1');
rejects($server, "GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505, 'HTTP/3.0');
rejects($server, "GET / HTTP/0.9\r\nHost: x\r\n\r\n", 505, 'HTTP/0.9 spelled as a version');
rejects($server, "GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505, 'HTTP/9.9');
rejects($server, "GET /\r\n\r\n", 400, 'an HTTP/0.9-style request line without a version');
rejects($server, "GET /\r\n", 400, 'an HTTP/0.9 request (one line)', smuggle => 0);
rejects($server, "GET / http/1.1\r\nHost: x\r\n\r\n", 400, 'a lower-case version');
rejects($server, "GET / HTTP/1.10\r\nHost: x\r\n\r\n", 400, 'HTTP/1.10');
rejects($server, "GET / HTTP/11\r\nHost: x\r\n\r\n", 400, 'HTTP/11');
rejects($server, "GET / HTTP/1\r\nHost: x\r\n\r\n", 400, 'HTTP/1');
rejects($server, "GET / HTTP/1.x\r\nHost: x\r\n\r\n", 400, 'HTTP/1.x');
rejects($server, "GET / HTTPS/1.1\r\nHost: x\r\n\r\n", 400, 'HTTPS/1.1');
rejects($server, "GET / PRI/1.1\r\nHost: x\r\n\r\n", 400, 'another protocol');
rejects($server, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, 'the HTTP/2 connection preface', smuggle => 0);

is $server->stop, 0, 'the server stops cleanly';
done_testing;
