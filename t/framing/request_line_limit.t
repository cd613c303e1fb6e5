# --max-request-line: a longer request line gets 414 (RFC 9110 15.5.15) and a
# closed connection, whether or not its end has arrived: the server must not
# wait for (or buffer) more than the limit allows.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request raw_connect read_response read_until_close parse_response echo_app rejects
    answer_to_unfinished_head);

use constant LIMIT => 1024;
my $server = start_server(app => echo_app(),
    options => ['--workers', 1, '--max-request-line', LIMIT, '--header-timeout', 30]);

# "GET " . path . " HTTP/1.1" is LIMIT bytes exactly when path is LIMIT - 13.
my $fits = '/' . ('a' x (LIMIT - 14));
subtest 'a request line of exactly the limit is accepted' => sub {
    my $res = parse_response(raw_request($server,
        "GET $fits HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    is $res->{status}, 200;
};

rejects($server, "GET ${fits}b HTTP/1.1\r\nHost: x\r\n\r\n", 414, 'one byte over the limit');
rejects($server, "GET /" . ('a' x 100_000) . " HTTP/1.1\r\nHost: x\r\n\r\n", 414,
    'far over the limit');

subtest 'a request line over the limit is answered before it ends' => sub {
    # The client is still sending (no CRLF yet) and the header timeout is
    # far away: only the limit can answer it.
    my $res = answer_to_unfinished_head($server, 'GET /', 'a' x (2 * LIMIT));
    is $res && $res->{status}, 414;
    is lc(($res && $res->{headers}{connection}) // ''), 'close';
};

subtest 'the same when the long line is the first thing on a connection' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /" . ('a' x (2 * LIMIT));
    my $res = read_response($sock);
    my (undef, $closed) = read_until_close($sock);
    ok $closed, 'the server closed the connection';
    is $res && $res->{status}, 414;
};

subtest 'leading empty lines count against the limit' => sub {
    my $raw = raw_request($server, ("\r\n" x LIMIT) . "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        eof => \my $closed);
    like $raw, qr{\AHTTP/1.1 4\d\d }, 'rejected';
    ok $closed, 'and closed';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
