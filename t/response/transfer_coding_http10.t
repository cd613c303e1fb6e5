# RFC 9112 6.1: a server MUST NOT send Transfer-Encoding in a response to an
# HTTP/1.0 request.  chunked alone is the server's to remove (the body is
# decoded and ended by the close: t/response/app_chunked.t); any other coding
# the app applied (gzip, "gzip, chunked") cannot be removed, and the body
# without the header would reach the client still coded, with nothing saying
# so: the response is refused (500, the reason logged).  HTTP/1.1 clients
# get the app's codings as they are; a streamed body of unknown length goes to
# HTTP/1.0 without Transfer-Encoding, ended by the close.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response);

my %coding = (gzip_chunked => 'gzip, chunked', gzip => 'gzip', chunked => 'chunked',
              spaced => ' chunked ');
my %body = (gzip_chunked => "5\r\nHELLO\r\n0\r\n\r\n", gzip => 'HELLO',
            chunked => "5\r\nhello\r\n0\r\n\r\n", spaced => "5\r\nhello\r\n0\r\n\r\n");

my $app = sub {
    my ($env) = @_;
    my ($how, $kind) = $env->{PATH_INFO} =~ m{\A/(\w+)/(\w+)\z} or return [404, [], []];
    if ($kind eq 'stream') {
        return sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $w->write($_) for qw(ab cd);
            $w->close;
        };
    }
    my @head = ('Transfer-Encoding' => $coding{$kind});
    return [200, \@head, [$body{$kind}]] if $how eq 'array';
    return sub {
        my $w = $_[0]->([200, \@head]);
        $w->write($body{$kind});
        $w->close;
    };
};

my $server = start_server(app => $app, options => ['--workers', 1]);

for my $how (qw(array writer)) {
    for my $kind (qw(gzip_chunked gzip)) {
        subtest "$how, Transfer-Encoding: $coding{$kind}, HTTP/1.0: refused" => sub {
            my $closed;
            my $res = parse_response(raw_request($server, "GET /$how/$kind HTTP/1.0\r\n\r\n",
                eof => \$closed));
            is $res->{status}, 500, 'status 500';
            ok !exists $res->{headers}{'transfer-encoding'}, 'no Transfer-Encoding';
            unlike $res->{body}, qr/HELLO/, 'none of the coded body';
            ok $closed, 'the connection is closed';
            ok $server->wait_for_log(qr{GET /$how/$kind: .*Transfer-Encoding.*\Q$coding{$kind}\E.*HTTP/1\.0}),
                'the reason is logged';
        };
        subtest "$how, Transfer-Encoding: $coding{$kind}, HTTP/1.1: sent as the app gave it" => sub {
            my $raw = raw_request($server, "GET /$how/$kind HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
            my $res = parse_response($raw);
            is $res->{status}, 200, 'status 200';
            is $res->{headers}{'transfer-encoding'}, $coding{$kind}, 'the app\'s Transfer-Encoding';
            like $raw, qr/\r\n\r\n\Q$body{$kind}\E\z/, 'the body as the app coded it';
        };
    }
    for my $kind (qw(chunked spaced)) {
        subtest "$how, Transfer-Encoding: '$coding{$kind}', HTTP/1.0: decoded, ended by the close" => sub {
            my $closed;
            my $raw = raw_request($server, "GET /$how/$kind HTTP/1.0\r\n\r\n", eof => \$closed);
            my $res = parse_response($raw);
            is $res->{status}, 200, 'status 200';
            ok !exists $res->{headers}{'transfer-encoding'}, 'no Transfer-Encoding';
            like $raw, qr/\r\n\r\nhello\z/, 'the body decoded';
            ok $closed, 'the connection is closed';
        };
    }
}

subtest 'HEAD, Transfer-Encoding: gzip, HTTP/1.0: refused as a GET is' => sub {
    my $res = parse_response(raw_request($server, "HEAD /array/gzip HTTP/1.0\r\n\r\n"));
    is $res->{status}, 500, 'status 500';
    ok !exists $res->{headers}{'transfer-encoding'}, 'no Transfer-Encoding';
};

subtest 'a streamed body of unknown length to HTTP/1.0: no Transfer-Encoding, ended by the close' => sub {
    my $closed;
    my $raw = raw_request($server, "GET /writer/stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        eof => \$closed);
    my $res = parse_response($raw);
    is $res->{status}, 200, 'status 200';
    ok !exists $res->{headers}{'transfer-encoding'}, 'no Transfer-Encoding';
    ok !exists $res->{headers}{'content-length'}, 'no Content-Length';
    like $raw, qr/\r\n\r\nabcd\z/, 'the body as written, not chunked';
    ok $closed, 'the connection is closed';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
