# Lines end with CRLF (RFC 9112 2.2).  A bare LF or CR is where parsers
# disagree about where a line, and so a request, ends: 400 and close.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

subtest 'empty lines before the request line are ignored (RFC 9112 2.2)' => sub {
    my $res = parse_response(raw_request($server,
        "\r\n\r\nGET /after-empty-lines HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    is $res->{status}, 200;
    like $res->{body}, qr{"path":"/after-empty-lines"};
};

rejects($server, "GET / HTTP/1.1\nHost: x\n\n", 400, 'bare LF everywhere');
rejects($server, "GET / HTTP/1.1\nHost: x\r\n\r\n", 400, 'bare LF after the request line');
rejects($server, "GET / HTTP/1.1\r\nHost: x\n\r\n", 400, 'bare LF after a field');
rejects($server, "GET / HTTP/1.1\r\nHost: x\r\n\n", 400, 'bare LF as the empty line');
rejects($server, "GET / HTTP/1.1\r\nHost: x\r\nX: y\n\n", 400, 'bare LF as the last two line ends');
rejects($server, "GET / HTTP/1.1\rHost: x\r\n\r\n", 400, 'bare CR after the request line');
rejects($server, "GET / HTTP/1.1\r\nHost: x\r\r\n\r\n", 400, 'CR CR LF after a field');
rejects($server, "GET / HTTP/1.1\r\nHost: x\r\n\r\r\n", 400, 'a bare CR in the empty line');
rejects($server, "\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a bare LF before the request line');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
