# --keepalive-timeout: an idle kept-alive connection is closed (quietly: no
# response is owed) once the timeout passes.  It expires here on purpose.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close);

my $server = start_server(app => sub { [200, [], ['ok']] },
    options => ['--workers', 1, '--keepalive-timeout', 1, '--header-timeout', 2]);

subtest 'an idle connection is closed after the timeout' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    my $res = read_response($sock);
    is $res->{status}, 200;
    ok !exists $res->{headers}{connection}, 'kept alive';
    my ($rest, $closed) = read_until_close($sock);
    ok $closed, 'then closed';
    is $rest, '', 'without a response';
};

# RFC 9112 2.2: a stray empty line after a request (some clients end a POST
# body with one) is ignored: the connection is still idle, and closes as
# quietly, rather than waiting for a head and answering 408.
subtest 'a stray CRLF after a request leaves the connection idle' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab\r\n";
    is read_response($sock)->{status}, 200, 'answered';
    my ($rest, $closed) = read_until_close($sock);
    ok $closed, 'then closed';
    is $rest, '', 'without a 408';
};

subtest 'a request after a stray CRLF is served' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n\r\n";
    is read_response($sock)->{status}, 200, 'first';
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock)->{status}, 200, 'second, on the same connection';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
