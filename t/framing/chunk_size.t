# The chunked decoder (RFC 9112 7.1): chunk-size is 1*HEXDIG and nothing
# else, every chunk's data ends with CRLF.  A decoder that tolerates more
# than the grammar may find a different end of the body than a proxy in
# front of it: 400 and a closed connection.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

sub chunked { "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n$_[0]" }

subtest 'a well-formed body is accepted (the control case)' => sub {
    my $res = parse_response(raw_request($server,
        chunked("5\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n") =~ s/Host: x/Host: x\r\nConnection: close/r));
    is $res->{status}, 200;
    like $res->{body}, qr/"body":"hello0123456789"/;
};

subtest 'leading zeros do not count against the size limit' => sub {
    # chunk-size = 1*HEXDIG (RFC 9112 7.1): "0000000000000005" is 5
    for my $zeros (15, 4000) {
        my $res = parse_response(raw_request($server,
            chunked(('0' x $zeros) . "5\r\nhello\r\n" . ('0' x $zeros) . "0\r\n\r\n")
                =~ s/Host: x/Host: x\r\nConnection: close/r));
        is $res && $res->{status}, 200, "$zeros zeros, then 5";
        like $res && $res->{body}, qr/"body":"hello"/, "$zeros zeros: the body";
    }
};
rejects($server, chunked(('0' x 5000) . "5\r\nhello\r\n0\r\n\r\n"), 400,
    'a size line of 5000 zeros: longer than a size line may be (4 KB)');
rejects($server, chunked("000010000000000000005\r\nhello\r\n0\r\n\r\n"), 400,
    'leading zeros before a size that overflows 64 bits');

rejects($server, chunked("g\r\nhello\r\n0\r\n\r\n"), 400, 'a size that is not hex');
rejects($server, chunked("5g\r\nhello\r\n0\r\n\r\n"), 400, 'a size with a non-hex suffix');
rejects($server, chunked(" 5\r\nhello\r\n0\r\n\r\n"), 400, 'whitespace before the size');
rejects($server, chunked("5 \r\nhello\r\n0\r\n\r\n"), 400, 'whitespace after the size, no extension');
rejects($server, chunked("5 5\r\nhello\r\n0\r\n\r\n"), 400, 'whitespace inside the size');
rejects($server, chunked("0x5\r\nhello\r\n0\r\n\r\n"), 400, 'a 0x prefix');
rejects($server, chunked("-5\r\nhello\r\n0\r\n\r\n"), 400, 'a negative size');
rejects($server, chunked("+5\r\nhello\r\n0\r\n\r\n"), 400, 'a size with a sign');
rejects($server, chunked("\r\nhello\r\n0\r\n\r\n"), 400, 'an empty size');
rejects($server, chunked("10000000000000005\r\nhello\r\n0\r\n\r\n"), 400,
    'a size that overflows 64 bits (2**64 + 5)');
rejects($server, chunked("ffffffffffffffffffffffff\r\nhello\r\n0\r\n\r\n"), 400,
    'a size far beyond 64 bits');
rejects($server, chunked("5\r\nhelloXX0\r\n\r\n"), 400, 'data not followed by CRLF');
rejects($server, chunked("5\r\nhello\n0\r\n\r\n"), 400, 'data followed by a bare LF');
rejects($server, chunked("3\r\nhello\r\n0\r\n\r\n"), 400, 'data longer than its size');
rejects($server, chunked("5\nhello\r\n0\r\n\r\n"), 400, 'a size line ended by a bare LF');
rejects($server, chunked("5\rhello\r\n0\r\n\r\n"), 400, 'a size line ended by a bare CR');
rejects($server, chunked("5;a=\"b\0c\"\r\nhello\r\n0\r\n\r\n"), 400, 'a NUL in a chunk extension');
rejects($server, chunked("5\r\nhello\r\n0\r\nX-Trailer: a\r\n folded\r\n\r\n"), 400,
    'an obs-folded trailer line');
rejects($server, chunked("5\r\nhello\r\n0\r\nX-Trailer: a\n\r\n"), 400,
    'a trailer line ended by a bare LF');

rejects($server, chunked("5;ext=" . ('e' x 5000) . "\r\nhello\r\n0\r\n\r\n"), 400,
    'a chunk extension longer than a size line may be (4 KB)');
rejects($server, chunked("5\r\nhello\r\n0\r\n" . join('', map { "X-T$_: " . ('t' x 1000) . "\r\n" } 1 .. 20) . "\r\n"),
    400, 'a trailer section over 16 KB');
rejects($server, chunked("5;a\nb\r\nhello\r\n0\r\n\r\n"), 400, 'a bare LF in a chunk extension');
rejects($server, chunked("5\r\nhello\r\n0\r\nNo-Colon\r\n\r\n"), 400, 'a trailer line without a colon');
rejects($server, chunked("5\r\nhello\r\n0\r\nX-T : v\r\n\r\n"), 400, 'whitespace before a trailer colon');
rejects($server, chunked("5\r\nhello\r\n0\r\n: v\r\n\r\n"), 400, 'a trailer with an empty name');
rejects($server, chunked("5\r\nhello\r\n0\r\nX(T): v\r\n\r\n"), 400, 'a trailer name that is no token');
rejects($server, chunked("5\r\nhello\r\n0\r\nX"), 400,
    'a request where the final CRLF should be (as a trailer line it has no colon)');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
