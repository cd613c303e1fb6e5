# Persistence (RFC 9112 9.3): HTTP/1.1 keeps the connection by default,
# HTTP/1.0 only when it asks with Connection: keep-alive, and "close" in
# Connection (any case, anywhere in the list) ends it after the response.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close);

my $server = start_server(app => sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/app-close') {
        return [200, ['Connection' => 'close'], ['/app-close']];
    }
    if ($env->{PATH_INFO} eq '/stream') {
        return sub { my $w = $_[0]->([200, []]); $w->write('streamed'); $w->close };
    }
    return [200, [], ["$env->{PATH_INFO}"]];
}, options => ['--workers', 1, '--keepalive-timeout', 30]);

# Sends each request on one connection and reads its response.  Then finds
# out whether the connection is still usable: with $probe (a request) sent
# on it, it is open if the probe is answered; without, it must end at once.
# Returns the responses, whether the server closed the connection and what
# came after the last response.
sub exchange {
    my ($requests, $probe) = @_;
    my $sock = raw_connect($server);
    my ($buf, @responses) = ('');
    for my $req (@$requests) {
        syswrite $sock, $req;
        push @responses, read_response($sock, buffer => \$buf);
    }
    if ($probe) {
        local $SIG{PIPE} = 'IGNORE'; # a closed connection shows as no answer
        syswrite $sock, $probe;
        my $res = read_response($sock, buffer => \$buf);
        return (\@responses, !($res && $res->{body} eq '/probe'), '');
    }
    my ($rest, $closed) = read_until_close($sock, buffer => \$buf);
    return (\@responses, $closed, $rest);
}
my $probe11 = "GET /probe HTTP/1.1\r\nHost: x\r\n\r\n";
my $probe10 = "GET /probe HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";

subtest 'HTTP/1.1 is persistent by default' => sub {
    my ($res, $closed) = exchange([map { "GET /$_ HTTP/1.1\r\nHost: x\r\n\r\n" } 1 .. 3], $probe11);
    is_deeply [map { $_ && $_->{body} } @$res], ['/1', '/2', '/3'], 'three answers on one connection';
    ok !grep({ $_ && exists $_->{headers}{connection} } @$res), 'no Connection header';
    ok !$closed, 'the connection stays open (a further request is answered)';
};

for my $value ('close', 'Close', 'CLOSE', 'keep-alive, close', 'close,foo', 'foo , close') {
    subtest "HTTP/1.1 with Connection: $value is closed after the response" => sub {
        my ($res, $closed, $rest) = exchange(["GET /1 HTTP/1.1\r\nHost: x\r\nConnection: $value\r\n\r\n"]);
        is $res->[0]{body}, '/1';
        is lc $res->[0]{headers}{connection}, 'close', 'the response says Connection: close';
        ok $closed, 'the server closed';
        is $rest, '', 'nothing after the response';
    };
}

subtest 'HTTP/1.1 with Connection: close after kept requests' => sub {
    my ($res, $closed) = exchange(["GET /1 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"]);
    is_deeply [map { $_->{body} } @$res], ['/1', '/2'];
    ok !exists $res->[0]{headers}{connection}, 'the first is kept';
    is lc $res->[1]{headers}{connection}, 'close', 'the second closes';
    ok $closed, 'the server closed';
};

subtest "the app's own Connection: close is honoured" => sub {
    my ($res, $closed) = exchange(["GET /app-close HTTP/1.1\r\nHost: x\r\n\r\n"]);
    is $res->[0]{body}, '/app-close';
    is lc $res->[0]{headers}{connection}, 'close', 'said once';
    ok $closed, 'the server closed';
};

subtest 'HTTP/1.0 is closed by default' => sub {
    my ($res, $closed) = exchange(["GET /1 HTTP/1.0\r\n\r\n"]);
    is $res->[0]{body}, '/1';
    is lc $res->[0]{headers}{connection}, 'close';
    ok $closed, 'the server closed';
};

for my $value ('keep-alive', 'Keep-Alive', 'KEEP-ALIVE', 'foo, keep-alive') {
    subtest "HTTP/1.0 with Connection: $value is kept" => sub {
        my ($res, $closed) = exchange([map { "GET /$_ HTTP/1.0\r\nConnection: $value\r\n\r\n" } 1 .. 2], $probe10);
        is_deeply [map { $_ && $_->{body} } @$res], ['/1', '/2'];
        is lc($res->[$_]{headers}{connection} // ''), 'keep-alive', "response $_ says keep-alive"
            for 0, 1;
        ok !$closed, 'the connection stays open (a further request is answered)';
    };
}

subtest 'HTTP/1.0 asking for keep-alive and close is closed' => sub {
    my ($res, $closed) = exchange(["GET /1 HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"]);
    is lc $res->[0]{headers}{connection}, 'close';
    ok $closed;
};

subtest 'HTTP/1.0 keep-alive with a body of unknown length ends with the connection' => sub {
    # no chunked coding in HTTP/1.0: closing is the only way to end the body
    my ($res, $closed) = exchange(["GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"]);
    is $res->[0]{body}, 'streamed';
    ok !exists $res->[0]{headers}{'transfer-encoding'}, 'not chunked';
    is lc $res->[0]{headers}{connection}, 'close';
    ok $closed;
};

subtest 'HTTP/1.1 with a body of unknown length is chunked and kept' => sub {
    my ($res, $closed) = exchange(["GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", "GET /after HTTP/1.1\r\nHost: x\r\n\r\n"],
        $probe11);
    is $res->[0]{body}, 'streamed';
    is lc $res->[0]{headers}{'transfer-encoding'}, 'chunked';
    is $res->[1]{body}, '/after', 'the connection is reused';
    ok !$closed;
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
