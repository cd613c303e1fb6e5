# Content-Length must be one plain decimal number (RFC 9112 6.3, RFC 9110
# 8.6): anything two parsers could read differently is a smuggling vector and
# gets 400 and a closed connection.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

sub post_with { "POST /p HTTP/1.1\r\nHost: x\r\n" . join('', map { "$_\r\n" } @_) . "\r\nhello" }

subtest 'a plain Content-Length is accepted (the control case)' => sub {
    my $res = parse_response(raw_request($server,
        "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"));
    is $res->{status}, 200;
    like $res->{body}, qr/"body":"hello"/;
};

subtest 'leading zeros are valid digits (1*DIGIT) and do not count against the bound' => sub {
    for my $zeros (1, 18, 200) {
        my $res = parse_response(raw_request($server,
            "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: " . ('0' x $zeros)
            . "5\r\nConnection: close\r\n\r\nhello"));
        is $res && $res->{status}, 200, "$zeros zeros, then 5";
        like $res && $res->{body}, qr/"body":"hello"/, "$zeros zeros: the body";
    }
    my $res = parse_response(raw_request($server,
        "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 0000\r\nConnection: close\r\n\r\n"));
    is $res && $res->{status}, 200, 'zeros only: an empty body';
};
rejects($server, post_with('Content-Length: 0000018446744073709551621'), 400,
    'leading zeros before a Content-Length that overflows 64 bits');

rejects($server, post_with('Content-Length: 5', 'Transfer-Encoding: chunked'), 400,
    'Content-Length with Transfer-Encoding (CL.TE)');
rejects($server, post_with('Transfer-Encoding: chunked', 'Content-Length: 5'), 400,
    'Transfer-Encoding with Content-Length (TE.CL)');
rejects($server, post_with('Content-Length: 5', 'Content-Length: 5'), 400,
    'two Content-Length fields with the same value');
rejects($server, post_with('Content-Length: 5', 'Content-Length: 6'), 400,
    'two Content-Length fields with different values');
rejects($server, post_with('Content-Length: 5, 5'), 400, 'a Content-Length list "5, 5"');
rejects($server, post_with('Content-Length: 5,5'), 400, 'a Content-Length list "5,5"');
rejects($server, post_with('Content-Length: five'), 400, 'a Content-Length that is not a number');
rejects($server, post_with('Content-Length: 5x'), 400, 'a Content-Length with a suffix');
rejects($server, post_with('Content-Length: 0x5'), 400, 'a hexadecimal Content-Length');
rejects($server, post_with('Content-Length: +5'), 400, 'a Content-Length with a sign');
rejects($server, post_with('Content-Length: -5'), 400, 'a negative Content-Length');
rejects($server, post_with('Content-Length: 5 5'), 400, 'a Content-Length with inner space');
rejects($server, post_with('Content-Length:'), 400, 'an empty Content-Length');
rejects($server, post_with('Content-Length: 18446744073709551621'), 400,
    'a Content-Length that overflows 64 bits (2**64 + 5)');
rejects($server, post_with('Content-Length: 99999999999999999999999999'), 400,
    'a Content-Length far beyond 64 bits');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
