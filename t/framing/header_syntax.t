# Field and method syntax (RFC 9112 2.2, 3, 5; RFC 9110 5.1, 5.5, 5.6.2):
# whatever a lenient parser would repair (obs-fold, whitespace before the
# colon, control bytes, non-token names or methods) is rejected with 400 and
# a closed connection, since a proxy may have repaired it differently.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

sub get_with { "GET / HTTP/1.1\r\nHost: x\r\n" . join('', map { "$_\r\n" } @_) . "\r\n" }

subtest 'unusual but valid fields are accepted (the control case)' => sub {
    my $res = parse_response(raw_request($server, get_with(
        "X-Token!#\$%&'*+-.^_`|~: v", "X-Empty:", "X-Tab:\tv\tw\t", "X-Obs-Text: caf\xe9",
        'Connection: close')));
    is $res->{status}, 200;
};

rejects($server, get_with('X-Folded: a', ' b'), 400, 'obs-fold with a space');
rejects($server, get_with('X-Folded: a', "\tb"), 400, 'obs-fold with a tab');
rejects($server, "GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400, 'whitespace before the first field');
rejects($server, get_with('X-Space : a'), 400, 'a space before the colon');
rejects($server, get_with("X-Tab\t: a"), 400, 'a tab before the colon');
rejects($server, get_with("Content-Length : 0"), 400, 'a space before the colon of Content-Length');
rejects($server, get_with("X-Nul: a\0b"), 400, 'a NUL in a value');
rejects($server, get_with("X-Cr: a\rb"), 400, 'a bare CR in a value');
rejects($server, get_with("X-Lf: a\nb"), 400, 'a bare LF in a value');
rejects($server, get_with("X-Del: a\x7fb"), 400, 'a DEL in a value');
rejects($server, get_with("X-Ctl: a\x01b"), 400, 'a control byte in a value');
rejects($server, get_with('X(Bad): a'), 400, 'a parenthesis in a name');
rejects($server, get_with('X Bad: a'), 400, 'a space in a name');
rejects($server, get_with('X@Bad: a'), 400, 'an @ in a name');
rejects($server, get_with("X\x80Bad: a"), 400, 'a non-ASCII byte in a name');
rejects($server, get_with(': a'), 400, 'an empty name');
rejects($server, get_with('NoColon'), 400, 'a line without a colon');
rejects($server, "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a parenthesis in the method');
rejects($server, "G\@T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'an @ in the method');
rejects($server, "GE\x80T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a non-ASCII byte in the method');
rejects($server, " GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'whitespace before the method');
rejects($server, "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'two spaces after the method');
rejects($server, "GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a tab after the method');
rejects($server, "GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400, 'a space after the version');
rejects($server, "GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a control byte in the target');
rejects($server, "GET /caf\xe9 HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a non-ASCII byte in the target');
rejects($server, " / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'no method');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
