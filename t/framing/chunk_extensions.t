# Chunk extensions (RFC 9112 7.1.1) are parsed to their grammar, then ignored:
#
#   chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
#   chunk-ext-name = token;  chunk-ext-val = token / quoted-string
#
# A decoder that ends the size line at the first CRLF whatever came before it
# and one that follows an open quoted-string past it find different ends of
# the body: the bytes one takes for chunk data the other runs as a request
# (the shape of CVE-2026-2332 in Jetty and CVE-2026-33870 in Netty).  So
# anything outside the grammar is refused with 400 and the connection closed,
# and nothing sent after it is answered.  Their total per body is bounded
# (--max-chunk-extensions): they carry no data, so a body of tiny chunks
# could otherwise keep a worker reading without end.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

sub chunked { "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n$_[0]" }

sub accepted {
    my ($server, $body, $name, $expected) = @_;
    my $res = parse_response(raw_request($server,
        chunked($body) =~ s/Host: x/Host: x\r\nConnection: close/r));
    is $res && $res->{status}, 200, "accepted: $name";
    like $res && $res->{body}, qr/"body":"\Q$expected\E"/, "$name: the body";
}

# Extensions the grammar allows: the control cases.
for (
    ['5;a=b',                    'a name and a token value'],
    ['5;a',                      'a name without a value'],
    ['5;a;b=c;d',                'several extensions'],
    ['5 ;a=b',                   'BWS before the ";"'],
    ["5\t; \ta=b",               'BWS around the ";"'],
    ['5;a = b',                  'BWS around the "="'],
    ['5;a=b ;c',                 'BWS after a value, before the next ";"'],
    ['5;a="quoted value"',       'a quoted-string value'],
    ['5;a=""',                   'an empty quoted-string'],
    ['5;a="x\"y"',               'an escaped quote inside a quoted-string'],
    ['5;a="x\\\\"',              'an escaped backslash just before the closing quote'],
    ["5;a=\"\x80\xff\"",         'obs-text inside a quoted-string'],
    ['5;a="s;=,x";b',            'separators inside a quoted-string'],
    ["5;!#\$%&'*+-.^_`|~=v",     'every tchar in a name'],
) {
    my ($line, $name) = @$_;
    accepted($server, "$line\r\nhello\r\n0;last\r\n\r\n", $name, 'hello');
}

# The smuggling shape: a quoted-string left open at the line's end.  A
# decoder that ends the line at this CRLF reads one byte of data and then
# the rest as the next request; one that honours the quote reads on.
my $unterminated = "1;a=\"\r\nX\r\n0\r\n\r\n";
rejects($server, chunked($unterminated), 400, 'an unterminated quoted-string');
rejects($server, chunked("1;a=\"\\\"\r\nX\r\n0\r\n\r\n"), 400,
    'a quoted-string whose only closing quote is escaped');
rejects($server, chunked("1;a=\"x\\\r\nX\r\n0\r\n\r\n"), 400,
    'a backslash escaping the CR');
rejects($server, chunked("5;a=\"b\nc\"\r\nhello\r\n0\r\n\r\n"), 400, 'a bare LF inside a quoted-string');
rejects($server, chunked("5;a=\"b\rc\"\r\nhello\r\n0\r\n\r\n"), 400, 'a bare CR inside a quoted-string');
rejects($server, chunked("5;a=\"b\x01c\"\r\nhello\r\n0\r\n\r\n"), 400, 'a control byte inside a quoted-string');
rejects($server, chunked("5;a=\"b\x7fc\"\r\nhello\r\n0\r\n\r\n"), 400, 'DEL inside a quoted-string');

# Whatever else is not the grammar.
for (
    ['5;',            'a bare ";"'],
    ['5;;a',          'an empty extension between two ";"'],
    ['5;a;',          'a trailing ";"'],
    ['5;"abc"',       'a bare quoted-string'],
    ['5;=b',          'a value without a name'],
    ['5;a=',          'a name with "=" and no value'],
    ['5;a= ',         'a name with "=" and only whitespace'],
    ['5;a b',         'a name with a space inside'],
    ['5;a b=c',       'a name with a space inside, then a value'],
    ['5;a@b',         'a non-token byte in a name'],
    ['5;a(b)=c',      'parentheses in a name'],
    ['5;a=b@c',       'a non-token byte in a token value'],
    ['5;a=b c',       'a token value with a space inside'],
    ['5;a=b"c"',      'a token value running into a quote'],
    ['5;a="b"c',      'bytes after a closing quote'],
    ['5;a ',          'whitespace after a name, before the CRLF'],
    ['5;a=b ',        'whitespace after a value, before the CRLF'],
    ['5;a="b" ',      'whitespace after a quoted-string, before the CRLF'],
    ["5;a=b\x00",     'a NUL after a value'],
    ["5;a\x01",       'a control byte in a name'],
    ["5;a=\xe9",      'obs-text in a token value'],
) {
    my ($line, $name) = @$_;
    rejects($server, chunked("$line\r\nhello\r\n0\r\n\r\n"), 400, $name);
}

rejects($server, chunked("5\r\nhello\r\n0;a=\"\r\n\r\n"), 400,
    'an unterminated quoted-string on the last chunk');
rejects($server, chunked(('x' x 70_000) =~ s/^/11170;a=b\r\n/r . "\r\n5;a b\r\nhello\r\n0\r\n\r\n"), 400,
    'a bad extension after 64 KiB of data (read while the app runs, not ahead)');

# The bound on a body's extensions in all: every byte between a chunk's size
# and its CR counts.
subtest 'the default bound: 16 KiB of extensions in one body' => sub {
    my $ext = ';e=' . ('v' x 497); # 500 bytes
    accepted($server, join('', map { "1$ext\r\nx\r\n" } 1 .. 32) . "0\r\n\r\n",
        '32 chunks with 500 bytes of extensions each (16,000 bytes)', 'x' x 32);
    rejects($server, chunked(join('', map { "1$ext\r\nx\r\n" } 1 .. 40) . "0\r\n\r\n"), 400,
        '40 chunks with 500 bytes of extensions each (20,000 bytes)');
};

subtest '--max-chunk-extensions' => sub {
    my $small = start_server(app => echo_app(), options => ['--workers', 1, '--max-chunk-extensions', 100]);
    my $ext = ';e=' . ('v' x 22); # 25 bytes
    accepted($small, "1$ext\r\na\r\n1$ext\r\nb\r\n1$ext\r\nc\r\n0$ext\r\n\r\n",
        'exactly the limit (4 x 25 bytes)', 'abc');
    rejects($small, chunked("1$ext\r\na\r\n1$ext\r\nb\r\n1$ext\r\nc\r\n0$ext;\r\n\r\n"), 400,
        'one byte over the limit');
    rejects($small, chunked("1$ext\r\na\r\n1$ext\r\nb\r\n1$ext\r\nc\r\n1$ext\r\nd\r\n1;e\r\ne\r\n0\r\n\r\n"), 400,
        'over the limit before the last chunk');
    is $small->stop, 0, 'that server stops cleanly';

    my $unbounded = start_server(app => echo_app(), options => ['--workers', 1, '--max-chunk-extensions', 0]);
    my $long = ';e=' . ('v' x 3000);
    accepted($unbounded, join('', map { "1$long\r\nx\r\n" } 1 .. 10) . "0\r\n\r\n",
        '0: no bound (30 KB of extensions)', 'x' x 10);
    is $unbounded->stop, 0, 'that server stops cleanly';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
