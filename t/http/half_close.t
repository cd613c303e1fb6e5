# A client may shut down its sending side once its request is out (RFC 9112
# 9.6: a half-close is no reason to drop the response): it still gets every
# response it asked for, then the server closes.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response echo_app);
use JSON::PP ();

my $server = start_server(app => sub {
    my ($env) = @_;
    return sub { my $w = $_[0]->([200, []]); $w->write($_) for 'str', 'eamed'; $w->close }
        if $env->{PATH_INFO} eq '/stream';
    return echo_app()->($env);
}, options => ['--workers', 1, '--keepalive-timeout', 30]);

my %requests = (
    'a GET' => ["GET /get HTTP/1.1\r\nHost: x\r\n\r\n", ['/get']],
    'an HTTP/1.0 GET' => ["GET /old HTTP/1.0\r\n\r\n", ['/old']],
    'a POST with Content-Length' => ["POST /post HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody", ['/post']],
    'a chunked POST' => ["POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n", ['/chunked']],
    'three pipelined requests' => [join('', map { "GET /$_ HTTP/1.1\r\nHost: x\r\n\r\n" } 1 .. 3), ['/1', '/2', '/3']],
    'a streamed response' => ["GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", ['streamed']],
);

for my $name (sort keys %requests) {
    my ($bytes, $expected) = @{ $requests{$name} };
    subtest $name => sub {
        my $raw = raw_request($server, $bytes, half_close => 1, eof => \my $closed);
        my @res = parse_response($raw);
        is_deeply [map { $_->{body} =~ /^\{/ ? JSON::PP::decode_json($_->{body})->{path} : $_->{body} } @res],
            $expected, 'every response';
        ok $closed, 'then the server closed';
    };
}

is $server->stop, 0, 'the server stops cleanly';
done_testing;
