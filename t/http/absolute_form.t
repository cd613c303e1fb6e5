# Absolute-form request targets (RFC 9112 3.2.2): the app sees the path and
# query of the target, and its authority as the host, in place of the Host
# field.  A target whose authority is no valid host gets 400.
use strict;
use warnings;
use Test::More;
use JSON::PP ();
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app rejects);

my $server = start_server(app => echo_app(), options => ['--workers', 1]);

sub seen {
    my ($target, $host) = @_;
    my $res = parse_response(raw_request($server,
        "GET $target HTTP/1.1\r\nHost: " . ($host // 'from-the-host-field') . "\r\nConnection: close\r\n\r\n"));
    return $res && $res->{status} == 200 ? JSON::PP::decode_json($res->{body}) : {};
}

my @cases = (
    # target                                 PATH_INFO    QUERY_STRING  HTTP_HOST           REQUEST_URI
    ['http://example.com/path?q=1&r=2',     '/path',     'q=1&r=2',    'example.com',      '/path?q=1&r=2'],
    ['http://example.com:8080/a/b',         '/a/b',      '',           'example.com:8080', '/a/b'],
    ['https://example.com/s',               '/s',        '',           'example.com',      '/s'],
    ['HTTP://Example.COM/Case',             '/Case',     '',           'Example.COM',      '/Case'],
    ['http://example.com',                  '/',         '',           'example.com',      '/'],
    ['http://example.com?only=query',       '/',         'only=query', 'example.com',      '/?only=query'],
    ['http://example.com/a%20b?c%20d',      '/a b',      'c%20d',      'example.com',      '/a%20b?c%20d'],
    ['http://[::1]:8000/v6',                '/v6',       '',           '[::1]:8000',       '/v6'],
    ['http://127.0.0.1/ip',                 '/ip',       '',           '127.0.0.1',        '/ip'],
);

for my $case (@cases) {
    my ($target, $path, $query, $host, $uri) = @$case;
    subtest $target => sub {
        my $seen = seen($target);
        is $seen->{path}, $path, 'PATH_INFO';
        is $seen->{query}, $query, 'QUERY_STRING';
        is $seen->{host}, $host, 'HTTP_HOST is the authority, not the Host field';
        is $seen->{uri}, $uri, 'REQUEST_URI is in origin form';
    };
}

rejects($server, "GET http://example.com/ HTTP/1.1\r\n\r\n", 400,
    'HTTP/1.1 still needs a Host field (RFC 9112 3.2)');
rejects($server, "GET http:///path HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'an empty authority');
rejects($server, "GET http://user:pw\@example.com/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'userinfo');
rejects($server, "GET http://exa\"mple.com/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a quote in the authority');
rejects($server, "GET http://exa<mple>.com/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'angle brackets in the authority');
rejects($server, "GET http://exa{mple}.com/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'braces in the authority');
rejects($server, "GET ftp://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'a scheme other than http(s)');
rejects($server, "GET example.com/path HTTP/1.1\r\nHost: x\r\n\r\n", 400, 'no scheme and no leading slash');

is $server->stop, 0, 'the server stops cleanly';
done_testing;
