# 101 Switching Protocols (RFC 9110 15.2.2, 7.8): a server switches only to a
# protocol the client offered in its request's Upgrade field (an HTTP/1.1
# request: a server ignores Upgrade in HTTP/1.0), and names it in the 101's
# own Upgrade header.  An app that answers 101 otherwise would leave its
# client reading bytes of a protocol it never asked for: that response is
# broken, answered 500 and logged, as any other the server cannot send.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response);

my $app = sub {
    my ($env) = @_;
    my $headers = $env->{HTTP_X_NO_UPGRADE_HEADER} ? [] : ['Upgrade' => 'echo', 'Connection' => 'Upgrade'];
    if ($env->{HTTP_X_STREAMING}) {
        return sub { my $w = $_[0]->([101, $headers]); $w->close if $w };
    }
    return [101, $headers, []];
};
my $server = start_server(app => $app, options => ['--workers', 1]);

sub answer {
    my ($request) = @_;
    my $raw = raw_request($server, $request);
    return (Serow::Test::parse_response_head($raw), $raw);
}

for my $streaming (0, 1) {
    my $how = $streaming ? ' (streaming responder)' : '';
    my $x = $streaming ? "X-Streaming: 1\r\n" : '';

    my ($res) = answer("GET / HTTP/1.1\r\nHost: x\r\n${x}Upgrade: echo\r\nConnection: Upgrade\r\n\r\n");
    is $res && $res->{status}, 101, "an upgrade offered and named: 101 goes out$how";
    is $res && $res->{headers}{upgrade}, 'echo', "  with the app's Upgrade$how";

    ($res, my $raw) = answer("GET / HTTP/1.1\r\nHost: x\r\n${x}\r\n");
    is $res && $res->{status}, 500, "a 101 to a request that offered no upgrade: 500$how";
    is lc($res && $res->{headers}{connection} // ''), 'close', "  and the connection closed$how";
    unlike $raw, qr/101|Upgrade: echo/i, "  nothing of the app's 101 went out$how";

    ($res) = answer("GET / HTTP/1.1\r\nHost: x\r\n${x}X-No-Upgrade-Header: 1\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n");
    is $res && $res->{status}, 500, "a 101 without an Upgrade header: 500$how";

    ($res) = answer("GET / HTTP/1.0\r\n${x}Upgrade: echo\r\nConnection: Upgrade\r\n\r\n");
    is $res && $res->{status}, 500, "a 101 to HTTP/1.0, whose Upgrade a server ignores: 500$how";
}

like $server->log, qr/101 Switching Protocols to a request that offered no upgrade/,
    'the broken 101 is logged, saying why';

is $server->stop, 0, 'the server stops cleanly';
done_testing;
