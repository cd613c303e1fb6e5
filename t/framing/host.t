# Host (RFC 9112 3.2): an HTTP/1.1 request without one, with two, or with one
# that is not a valid uri-host[:port] gets 400 and a closed connection.  An
# empty host is no valid uri-host: an http URI with one is invalid, and its
# recipient must reject it (RFC 9110 4.2.1), as nginx does.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

subtest 'valid hosts are accepted (the control case)' => sub {
    for my $host ('example.com', 'example.com:8080', '127.0.0.1:5000', '[::1]:80') {
        my $res = parse_response(raw_request($server,
            "GET / HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n\r\n"));
        is $res->{status}, 200, "Host: $host";
    }
    my $res = parse_response(raw_request($server, "GET / HTTP/1.0\r\n\r\n"));
    is $res->{status}, 200, 'HTTP/1.0 needs no Host';
};

rejects($server, "GET / HTTP/1.1\r\n\r\n", 400, 'HTTP/1.1 without Host');
rejects($server, "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, 'two Host fields, same value');
rejects($server, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, 'two Host fields, different values');
rejects($server, "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400, 'two Host fields in HTTP/1.0');
rejects($server, "GET / HTTP/1.1\r\nhost: a\r\nHOST: a\r\n\r\n", 400, 'two Host fields in other letter cases');
rejects($server, "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, 'a space inside Host');
rejects($server, "GET / HTTP/1.1\r\nHost:\r\n\r\n", 400, 'an empty Host');
rejects($server, "GET / HTTP/1.1\r\nHost:   \r\n\r\n", 400, 'a Host of whitespace only');
rejects($server, "GET / HTTP/1.0\r\nHost:\r\n\r\n", 400, 'an empty Host in HTTP/1.0');
rejects($server, "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 400, 'a Host with a port and no host');
rejects($server, "GET http://:80/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'an absolute-form target with a port and no host');
rejects($server, "GET / HTTP/1.1\r\nHost: user\@a\r\n\r\n", 400, 'userinfo in Host');
rejects($server, "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, 'a slash in Host');
rejects($server, "GET / HTTP/1.1\r\nHost: <a>\r\n\r\n", 400, 'angle brackets in Host');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
