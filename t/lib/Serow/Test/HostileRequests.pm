package Serow::Test::HostileRequests;
use strict;
use warnings;
use Test::More ();
use Serow::Test::Client qw(parse_response);

# The hostile requests of the differential checks against nginx
# (t/differential/nginx.t in plain HTTP, t/differential/nginx_tls.t over
# TLS), and what each server answers: [name, bytes, serow, nginx, why].
# serow: the status Serow answers (200: accepted, without desync); nginx:
# the status of nginx's first response ('0.9': an HTTP/0.9 answer, a body
# without a status line); why: where the two differ, the RFC section that
# makes Serow's answer right.  Below the table, how both tests judge what
# a server sent back, over either transport.

my $POST = "POST / HTTP/1.1\r\nHost: x\r\n";
my $CHUNKED = "5\r\nhello\r\n0\r\n\r\n";
sub te { "${POST}Transfer-Encoding: $_[0]\r\n\r\n$CHUNKED" }
sub chunks { "${POST}Transfer-Encoding: chunked\r\n\r\n$_[0]" }

our @TABLE = (
    # [name, bytes, serow, nginx, why]
    ['GET (control)', "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 200, 200],
    ['Content-Length body (control)', "${POST}Content-Length: 5\r\n\r\nhello", 200, 200],
    ['chunked body (control)', te('chunked'), 200, 200],

    # CL.TE and TE.CL: both framings in one request (RFC 9112 6.1, 6.3, 11.2)
    ['CL.TE: Content-Length, then Transfer-Encoding',
        "${POST}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", 400, 400],
    ['TE.CL: Transfer-Encoding, then Content-Length',
        "${POST}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n", 400, 400],

    # TE.TE: obfuscated Transfer-Encoding
    ['TE: xchunked', te('xchunked'), 400, 501,
        'chunked is not the final coding: the length cannot be known, and RFC 9112 6.3 says '
        . 'MUST 400 and close (nginx sends the 501 of RFC 9112 6.1 for an unknown coding; it closes too)'],
    ['TE: two spaces, chunked', te(' chunked'), 200, 200],
    ['TE: tab, chunked', te("\tchunked"), 200, 501,
        'HTAB is OWS like SP (RFC 9110 5.6.3, 5.5): the value is "chunked"; nginx skips only spaces'],
    ['TE: chunked, trailing space', te('chunked '), 200, 200],
    ['TE: vertical tab, chunked', te("\x0bchunked"), 400, 501,
        'VT is no OWS, so "\x0bchunked" is no token: a malformed field (RFC 9110 5.5, 10.1.4), 400'],
    ['TE: chunked, identity', te('chunked, identity'), 400, 501,
        'chunked is not final: RFC 9112 6.3 item 4, MUST 400 and close'],
    ['TE: identity, chunked', te('identity, chunked'), 501, 501],
    ['TE: obs-folded value', "${POST}Transfer-Encoding:\r\n chunked\r\n\r\n$CHUNKED", 400, 400],
    ['TE: field line starting with a space', "${POST} Transfer-Encoding: chunked\r\n\r\n$CHUNKED", 400, 400],
    ['TE: space before the colon', "${POST}Transfer-Encoding : chunked\r\n\r\n$CHUNKED", 400, 400],
    ['TE: chunked twice', "${POST}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n$CHUNKED",
        400, 400],
    ['TE: chunked, then a second field x',
        "${POST}Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n$CHUNKED", 400, 400],
    ['TE in HTTP/1.0', "POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n$CHUNKED",
        400, 400],
    ['TE: CHUNKED (letter case)', te('CHUNKED'), 200, 200],
    ['TE: chunked;q=1', te('chunked;q=1'), 400, 501,
        'chunked defines no parameters, and their presence SHOULD be treated as an error '
        . '(RFC 9112 7); so the final coding is no plain chunked: RFC 9112 6.3, 400'],
    ['TE: identity, with a Content-Length',
        "${POST}Content-Length: 5\r\nTransfer-Encoding: identity\r\n\r\nhello", 400, 501,
        'Transfer-Encoding whose final coding is not chunked: RFC 9112 6.3 item 4, MUST 400 and '
        . 'close; Content-Length does not count next to it (6.3 item 3)'],

    # Content-Length
    ['CL: +5', "${POST}Content-Length: +5\r\n\r\nhello", 400, 400],
    ['CL: -1', "${POST}Content-Length: -1\r\n\r\n", 400, 400],
    ['CL: 0x5', "${POST}Content-Length: 0x5\r\n\r\nhello", 400, 400],
    ['CL: 005', "${POST}Content-Length: 005\r\n\r\nhello", 200, 200],
    ['CL: 5, trailing space', "${POST}Content-Length: 5 \r\n\r\nhello", 200, 200],
    ['CL:5, no space', "${POST}Content-Length:5\r\n\r\nhello", 200, 200],
    ['GET with a Content-Length body', "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        200, 200],
    ['CL: 5,5 (a list of equal values)', "${POST}Content-Length: 5,5\r\n\r\nhello", 400, 400],
    ['CL: 5, 6', "${POST}Content-Length: 5, 6\r\n\r\nhello", 400, 400],
    ['CL twice, equal', "${POST}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400, 400],
    ['CL twice, different', "${POST}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400, 400],
    ['CL: beyond 64 bits', "${POST}Content-Length: 99999999999999999999\r\n\r\nhello", 400, 400],

    # line ends (RFC 9112 2.2)
    ['bare LF line ends', "GET / HTTP/1.1\nHost: x\n\n", 400, 200,
        'RFC 9112 2.2 lets a recipient accept a bare LF (MAY), but a proxy in front that does not '
        . 'sees a different end of line, and so of request: Serow takes only CRLF'],
    ['bare LF after the request line', "GET / HTTP/1.1\nHost: x\r\n\r\n", 400, 200,
        'as above (RFC 9112 2.2)'],
    ['bare CR line end', "GET / HTTP/1.1\rHost: x\r\n\r\n", 400, 400],
    ['bare CR in a field value', "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", 400, 400],
    ['obs-fold', "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400, 400],
    ['space before the colon', "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, 400],
    ['space inside a field name', "GET / HTTP/1.1\r\nHost: x\r\nX Y: z\r\n\r\n", 400, 400],
    ['empty field name', "GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", 400, 400],
    ['DEL (0x7f) in a field value', "GET / HTTP/1.1\r\nHost: x\r\nX: a\x7fb\r\n\r\n", 400, 200,
        'field-vchar = VCHAR / obs-text, and DEL is neither (RFC 9110 5.5): a CTL that a '
        . 'recipient may treat in any way'],
    ['obs-text (0xff) in a field value', "GET / HTTP/1.1\r\nHost: x\r\nX: a\xffb\r\n\r\n", 200, 200],
    ['space inside the target', "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400, 400],
    ['lower-case method', "get / HTTP/1.1\r\nHost: x\r\n\r\n", 200, 400,
        'method = token and is case-sensitive (RFC 9110 9.1): "get" is a valid, unknown method '
        . 'for the app to answer; the framing is not in doubt'],
    ['OPTIONS *', "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 200, 400,
        'asterisk-form is a valid target for OPTIONS (RFC 9112 3.2.4)'],
    ['CONNECT authority-form', "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 501, 400,
        'a valid request (RFC 9112 3.2.3) for a method Serow does not implement: 501 (RFC 9110 15.6.2)'],
    ['two spaces in the request line', "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 200,
        'request-line = method SP request-target SP HTTP-version (RFC 9112 3); parsing on '
        . 'whitespace is a MAY that Serow leaves out'],

    # chunked bodies (RFC 9112 7.1)
    ['chunk size, trailing space', chunks("5 \r\nhello\r\n0\r\n\r\n"), 400, 200,
        'chunk-size = 1*HEXDIG, and BWS is allowed only before a ";" chunk-ext (RFC 9112 7.1, 7.1.1)'],
    ['chunk size, leading space', chunks(" 5\r\nhello\r\n0\r\n\r\n"), 400, 400],
    ['chunk size with leading zeros', chunks("0005\r\nhello\r\n0\r\n\r\n"), 200, 200],
    ['chunk size with 20 leading zeros', chunks(('0' x 20) . "5\r\nhello\r\n0\r\n\r\n"), 200, 200],
    ['chunk extension after BWS', chunks("5 ;x=y\r\nhello\r\n0\r\n\r\n"), 200, 200],
    ['extension on the last chunk, and a trailer', chunks("5\r\nhello\r\n0;x=y\r\nX-T: v\r\n\r\n"),
        200, 200],
    ['chunk data longer than its size', chunks("3\r\nhello\r\n0\r\n\r\n"), 400, 400],
    ['chunk size ffffffffffffffff1 (overflow)', chunks("ffffffffffffffff1\r\nhello\r\n0\r\n\r\n"),
        400, 400],
    ['chunk extension with a quoted ";"', chunks("5;a=\"b;c\"\r\nhello\r\n0\r\n\r\n"), 200, 200],
    ['chunk extension with an unterminated quote', chunks("5;a=\"b\r\nhello\r\n0\r\n\r\n"), 400, 200,
        'a quoted-string ends at its DQUOTE and holds no CR or LF (RFC 9110 5.6.4, RFC 9112 7.1.1): '
        . 'a parser that honours the quote reads past this CRLF, so the two disagree on where the '
        . 'chunk data begins (CVE-2026-2332, CVE-2026-33870)'],
    ['chunk extension, a bare ";"', chunks("5;\r\nhello\r\n0\r\n\r\n"), 400, 200,
        'chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ) (RFC 9112 7.1.1): '
        . 'a ";" needs a name'],
    ['chunk extension, "=" and no value', chunks("5;a=\r\nhello\r\n0\r\n\r\n"), 400, 200,
        'chunk-ext-val = token / quoted-string (RFC 9112 7.1.1): neither is empty'],
    ['chunk data ended by a bare LF', chunks("5\r\nhello\n0\r\n\r\n"), 400, 200,
        'chunk = chunk-size [chunk-ext] CRLF chunk-data CRLF (RFC 9112 7.1); a proxy that takes '
        . '"\n0" as data reads a different body'],

    # NUL bytes
    ['NUL in a field value', "GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n", 400, 400],
    ['NUL in the target', "GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n", 400, 400],

    # a fragment, which no request-target holds (RFC 9112 3.2)
    ['a fragment in the target', "GET /a?b#c HTTP/1.1\r\nHost: x\r\n\r\n", 200, 200],

    # versions (RFC 9112 2.3)
    ['HTTP/1.10', "GET / HTTP/1.10\r\nHost: x\r\n\r\n", 400, 200,
        'HTTP-version = HTTP-name "/" DIGIT "." DIGIT (RFC 9112 2.3): "1.10" is no version'],
    ['HTTP/1.2', "GET / HTTP/1.2\r\nHost: x\r\n\r\n", 200, 200],
    ['HTTP/2.0', "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, 505],
    ['HTTP/0.9 in a request line', "GET / HTTP/0.9\r\nHost: x\r\n\r\n", 505, 400,
        'a well-formed version Serow does not serve: 505 (RFC 9110 15.6.6)'],
    ['HTTP/0.9 simple request (no version)', "GET /\r\n\r\n", 400, '0.9',
        'HTTP/0.9 is not HTTP/1.x (RFC 9112 2.3, Appendix C.1); an answer without a status line '
        . 'is a response a proxy cannot frame'],
    ['lower-case http/1.1', "GET / http/1.1\r\nHost: x\r\n\r\n", 400, 400],

    # Host (RFC 9112 3.2)
    ['no Host in HTTP/1.1', "GET / HTTP/1.1\r\n\r\n", 400, 400],
    ['two Host fields', "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, 400],
    ['no Host in HTTP/1.0', "GET / HTTP/1.0\r\n\r\n", 200, 200],
    ['absolute-form target, other Host', "GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n", 200, 200],

    # sizes
    ['a 20 KB field', "GET / HTTP/1.1\r\nHost: x\r\nX: " . ('a' x 20_000) . "\r\n\r\n", 200, 400,
        "within Serow's --max-header-size (default 64 KiB); nginx's large_client_header_buffers "
        . 'is 8 KB per line (a configuration difference, not a framing one)'],
    ['a 70 KB header section',
        "GET / HTTP/1.1\r\nHost: x\r\n" . join('', map { "X-$_: " . ('a' x 7000) . "\r\n" } 1 .. 10) . "\r\n",
        431, 400, 'over --max-header-size: 431 Request Header Fields Too Large (RFC 6585 5)'],
);

sub table { return @TABLE }

# Sent right behind each request: its answer tells whether a server read it
# as a request of its own, and where it thought the one before ended.
use constant SECOND => "GET /second HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

# The checks on what Serow sent back to a request it accepts (a row's bytes,
# then SECOND): status 200, then the pipelined request answered once as
# itself, or the connection closed after the first; no desync either way.
# $closed: whether the connection was seen to close.
sub check_accepted {
    my ($raw, $closed) = @_;
    my @responses = parse_response($raw);
    Test::More::is($responses[0] && $responses[0]{status}, 200, 'status 200') or Test::More::diag($raw);
    my @rest = @responses[1 .. $#responses];
    if (@rest) {
        Test::More::is(scalar @rest, 1, 'the pipelined request is answered once');
        Test::More::like($rest[0]{body}, qr{"path":"/second"}, '  as itself');
    } else {
        Test::More::ok($closed, 'or the connection is closed after the first');
    }
}

# The status of a server's first response, as the table's nginx column
# gives it: '0.9' for a body without a status line, 'none' for nothing.
sub first_status {
    my ($raw) = @_;
    my $first = parse_response($raw);
    return $first ? $first->{status} : $raw =~ /\Aok\n/ ? '0.9' : 'none';
}

1;
