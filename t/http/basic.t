use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request raw_connect read_response parse_response);

my $server = start_server(app => sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/plain'], ["$env->{REQUEST_METHOD} $env->{PATH_INFO}"]];
}, options => ['--workers', 2]);

subtest 'a GET is answered with a computed Content-Length and a Date' => sub {
    my $res = parse_response(raw_request($server, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    is $res->{status}, 200;
    is $res->{body}, 'GET /hello';
    is $res->{headers}{'content-length'}, 10;
    like $res->{headers}{date}, qr/^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/;
    is $res->{headers}{connection}, 'close';
};

subtest 'HTTP/1.1 keeps the connection open for the next request' => sub {
    my $sock = raw_connect($server);
    for my $i (1 .. 3) {
        syswrite $sock, "GET /$i HTTP/1.1\r\nHost: x\r\n\r\n";
        my $res = read_response($sock);
        is $res->{status}, 200, "request $i";
        is $res->{body}, "GET /$i";
        ok !defined $res->{headers}{connection}, 'no Connection header on a kept HTTP/1.1 connection';
    }
};

subtest 'HTTP/1.0 with keep-alive is kept too, and says so' => sub {
    my $sock = raw_connect($server);
    for my $i (1 .. 2) {
        syswrite $sock, "GET /$i HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
        my $res = read_response($sock);
        is $res->{body}, "GET /$i";
        is lc $res->{headers}{connection}, 'keep-alive';
    }
};

subtest 'HTTP/1.0 without keep-alive is closed' => sub {
    my $raw = raw_request($server, "GET / HTTP/1.0\r\n\r\n");
    like $raw, qr{\AHTTP/1.1 200 OK\r\n};
    like $raw, qr{\r\nConnection: close\r\n}i;
};

is $server->stop, 0, 'the server stops cleanly on TERM';
done_testing;
