# Chunked request bodies (RFC 9112 7.1): decoded before the app runs; chunk
# extensions and trailer fields are accepted (and dropped); the app sees the
# decoded body in psgi.input, its length in CONTENT_LENGTH and no
# Transfer-Encoding (the body it gets is no longer chunked).
use strict;
use warnings;
use Test::More;
use JSON::PP ();
use lib 't/lib';
use Serow::Test qw(start_server raw_request raw_connect read_response parse_response echo_app send_all);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

sub seen {
    my ($chunks, %opts) = @_;
    my $res = parse_response(raw_request($server,
        "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n$chunks"));
    return $res && $res->{status} == 200 ? JSON::PP::decode_json($res->{body}) : { status => $res && $res->{status} };
}

subtest 'one chunk' => sub {
    my $seen = seen("5\r\nhello\r\n0\r\n\r\n");
    is $seen->{body}, 'hello';
    is $seen->{content_length}, 5, 'CONTENT_LENGTH is the decoded length';
    is $seen->{transfer_encoding}, undef, 'no HTTP_TRANSFER_ENCODING';
};

subtest 'several chunks, hex sizes in both cases, leading zeros' => sub {
    my $seen = seen("3\r\nabc\r\na\r\n0123456789\r\nA\r\nABCDEFGHIJ\r\n0001\r\n!\r\n0\r\n\r\n");
    is $seen->{body}, 'abc0123456789ABCDEFGHIJ!';
    is $seen->{content_length}, 24;
};

subtest 'an empty body' => sub {
    my $seen = seen("0\r\n\r\n");
    is $seen->{body}, '';
    is $seen->{content_length}, 0, 'CONTENT_LENGTH 0';
};

subtest 'chunk extensions are accepted and ignored' => sub {
    my $seen = seen("5;name=value\r\nhello\r\n6;a;b=\"quoted; string\"\r\n world\r\n"
        . "1 ; spaced = ext\r\n!\r\n0;last=yes\r\n\r\n");
    is $seen->{body}, 'hello world!';
};

subtest 'trailer fields are accepted' => sub {
    my $seen = seen("5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n");
    is $seen->{body}, 'hello';
    is $seen->{content_length}, 5;
};

subtest 'data holding CRLF, "0\r\n\r\n" and a request is data' => sub {
    my $data = "0\r\n\r\nGET /evil HTTP/1.1\r\nHost: x\r\n\r\n";
    my $seen = seen(sprintf("%x\r\n%s\r\n0\r\n\r\n", length $data, $data));
    is $seen->{body}, $data;
};

subtest 'a body sent one byte per write' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    syswrite $sock, $_ for split //, "5;e=1\r\nhello\r\n1\r\n!\r\n0\r\nT: v\r\n\r\n";
    my $res = read_response($sock);
    is JSON::PP::decode_json($res->{body})->{body}, 'hello!';
};

subtest 'a body larger than the memory limit (spooled to a file)' => sub {
    my $big = 'x' x (3 * 1024 * 1024);
    my $sock = raw_connect($server);
    my $buf = '';
    send_all($sock, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        . join('', map { sprintf("%x\r\n", length $_) . "$_\r\n" } unpack '(a70000)*', $big) . "0\r\n\r\n",
        buffer => \$buf);
    my $res = read_response($sock, buffer => \$buf);
    my $seen = JSON::PP::decode_json($res->{body});
    is length $seen->{body}, length $big;
    is $seen->{content_length}, length $big;
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
