# --max-keepalive-requests N: the Nth response on a connection says
# Connection: close and the server closes; pipelined requests after it are
# not answered.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close parse_response);

use constant N => 3;
my $server = start_server(app => sub { [200, [], [$_[0]{PATH_INFO}]] },
    options => ['--workers', 1, '--max-keepalive-requests', N, '--keepalive-timeout', 30]);

subtest 'one request at a time' => sub {
    my $sock = raw_connect($server);
    my $buf = '';
    for my $i (1 .. N) {
        syswrite $sock, "GET /$i HTTP/1.1\r\nHost: x\r\n\r\n";
        my $res = read_response($sock, buffer => \$buf);
        is $res->{body}, "/$i";
        if ($i < N) {
            ok !exists $res->{headers}{connection}, "response $i keeps the connection";
        } else {
            is lc $res->{headers}{connection}, 'close', "response $i closes it";
        }
    }
    my ($rest, $closed) = read_until_close($sock, buffer => \$buf);
    ok $closed, 'the server closed';
    is $rest, '';
};

subtest 'pipelined: requests after the Nth are not answered' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, join '', map { "GET /$_ HTTP/1.1\r\nHost: x\r\n\r\n" } 1 .. N + 2;
    my ($raw, $closed) = read_until_close($sock);
    my @res = parse_response($raw);
    is_deeply [map { $_->{body} } @res], [map { "/$_" } 1 .. N], 'N answers';
    is lc $res[-1]{headers}{connection}, 'close';
    ok $closed;
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
