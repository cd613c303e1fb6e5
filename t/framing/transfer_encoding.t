# Transfer-Encoding (RFC 9112 6.1, 6.3): chunked must be the final coding and
# appear once, or the length of the body cannot be known (400); a chunked body
# under a coding Serow does not implement is 501; HTTP/1.0 cannot use it.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

my $chunked_body = "5\r\nhello\r\n0\r\n\r\n";
sub post_te { "POST /p HTTP/$_[1]\r\nHost: x\r\nTransfer-Encoding: $_[0]\r\n\r\n$chunked_body" }

subtest 'chunked alone is accepted, in any letter case (the control case)' => sub {
    for my $coding ('chunked', 'Chunked', 'CHUNKED') {
        my $res = parse_response(raw_request($server,
            "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: $coding\r\nConnection: close\r\n\r\n$chunked_body"));
        is $res->{status}, 200, $coding;
        like $res->{body}, qr/"body":"hello"/, "$coding: the body is decoded";
    }
};

rejects($server, post_te('gzip, chunked', '1.1'), 501, '"gzip, chunked": a coding we do not decode');
rejects($server, post_te('chunked, gzip', '1.1'), 400, '"chunked, gzip": chunked is not final');
rejects($server, post_te('gzip', '1.1'), 400, '"gzip" alone: no way to find the end');
rejects($server, post_te('identity', '1.1'), 400, '"identity": not chunked, so no length');
rejects($server, post_te('chunked, chunked', '1.1'), 400, 'chunked twice in one field');
rejects($server,
    "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n$chunked_body",
    400, 'chunked twice in two fields');
rejects($server,
    "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n$chunked_body",
    400, 'a second field puts gzip after chunked');
rejects($server, post_te('', '1.1'), 400, 'an empty Transfer-Encoding');
rejects($server, post_te('chunked;foo=bar', '1.1'), 400, 'parameters on chunked');
rejects($server, post_te('x"chunked"', '1.1'), 400, 'a malformed coding list');
rejects($server, post_te('chunked', '1.0'), 400, 'Transfer-Encoding in an HTTP/1.0 request');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
