# HTTP-version (RFC 9112 2.3, RFC 9110 15.6.6): a well-formed version that
# is not 1.0 or 1.1 gets 505; anything not of the form HTTP/DIGIT.DIGIT
# (lower case, extra digits, HTTP/0.9's version-less line) is no HTTP/1.x
# request line at all: 400.  Either way the connection is closed.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

rejects($server, "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, 'HTTP/2.0');
rejects($server, "GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505, 'HTTP/1.2');
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
