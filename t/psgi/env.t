# The PSGI env: every key the spec asks for, with the right values, over TCP
# and over a UNIX socket.  Every request also goes through
# Plack::Middleware::Lint.
use strict;
use warnings;
use Test::More;
use JSON::PP ();
use Plack::Middleware::Lint;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response parse_response raw_request);

my $json = JSON::PP->new->utf8->canonical->allow_nonref;

# The env as JSON: plain values as they are, references as their type and,
# for psgi.version, the array.
my $app = Plack::Middleware::Lint->wrap(sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/errors') {
        $env->{'psgi.errors'}->print("a line for psgi.errors\n");
    }
    if ($env->{PATH_INFO} eq '/modify') {
        $env->{SCRIPT_NAME} = '/changed';
        $env->{'my.key'} = 1;
    }
    my %out;
    for my $key (keys %$env) {
        my $v = $env->{$key};
        $out{$key} = !ref $v ? $v
            : $key eq 'psgi.version' ? $v
            : ref $v;
    }
    my $input = $env->{'psgi.input'};
    $out{'input read'} = $input->read(my $buffer, 100);
    return [200, ['Content-Type' => 'application/json'], [$json->encode(\%out)]];
});

sub env_of {
    my ($server, $request) = @_;
    my $res = parse_response(raw_request($server, $request));
    return undef unless $res && $res->{status} == 200;
    return $json->decode($res->{body});
}

for my $listen (qw(tcp unix)) {
    my $server = start_server(app => $app, options => ['--workers', 1], listen => $listen);

    subtest "$listen: the keys of a GET" => sub {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /a%20b/c%2Fd?x=%20y&z HTTP/1.1\r\nHost: example.com:8080\r\n"
            . "User-Agent: test\r\nConnection: close\r\n\r\n";
        my $env = $json->decode(read_response($sock)->{body});
        is $env->{REQUEST_METHOD}, 'GET';
        is $env->{SCRIPT_NAME}, '', 'SCRIPT_NAME is empty';
        is $env->{PATH_INFO}, '/a b/c/d', 'PATH_INFO is decoded';
        is $env->{REQUEST_URI}, '/a%20b/c%2Fd?x=%20y&z', 'REQUEST_URI is raw';
        is $env->{QUERY_STRING}, 'x=%20y&z', 'QUERY_STRING is raw';
        is $env->{SERVER_PROTOCOL}, 'HTTP/1.1';
        is $env->{HTTP_HOST}, 'example.com:8080';
        is $env->{HTTP_USER_AGENT}, 'test';
        if ($listen eq 'tcp') {
            is $env->{SERVER_NAME}, '127.0.0.1', 'SERVER_NAME: the address listened on';
            is $env->{SERVER_PORT}, $server->port, 'SERVER_PORT: the port listened on';
            is $env->{REMOTE_ADDR}, '127.0.0.1', 'REMOTE_ADDR';
            is $env->{REMOTE_PORT}, $sock->sockport, 'REMOTE_PORT is the client\'s port';
        } else {
            is $env->{SERVER_NAME}, 'localhost', 'SERVER_NAME on a UNIX socket';
            is $env->{SERVER_PORT}, 0, 'SERVER_PORT on a UNIX socket';
            is $env->{REMOTE_ADDR}, '127.0.0.1', 'REMOTE_ADDR on a UNIX socket (it has none)';
            is $env->{REMOTE_PORT}, 0, 'REMOTE_PORT on a UNIX socket';
        }
        is_deeply $env->{'psgi.version'}, [1, 1], 'psgi.version';
        is $env->{'psgi.url_scheme'}, 'http';
        is $env->{'psgi.input'}, 'GLOB', 'psgi.input is a handle';
        is $env->{'input read'}, 0, 'it reads 0 bytes for a request without a body';
        is $env->{'psgi.errors'}, 'IO::File', 'psgi.errors is a handle';
        ok !$env->{'psgi.multithread'}, 'psgi.multithread is false';
        ok $env->{'psgi.multiprocess'}, 'psgi.multiprocess is true';
        ok !$env->{'psgi.run_once'}, 'psgi.run_once is false';
        ok !$env->{'psgi.nonblocking'}, 'psgi.nonblocking is false';
        ok $env->{'psgi.streaming'}, 'psgi.streaming is true';
        ok $env->{'psgix.input.buffered'}, 'psgix.input.buffered is true';
        is $env->{'psgix.io'}, 'GLOB', 'psgix.io is a handle';
        is $env->{'psgix.informational'}, 'CODE';
        is $env->{'psgix.cleanup.handlers'}, 'ARRAY';
        ok $env->{'psgix.cleanup'}, 'psgix.cleanup is true';
        ok $env->{'psgix.harakiri'}, 'psgix.harakiri is true';
        ok !exists $env->{CONTENT_LENGTH}, 'no CONTENT_LENGTH without a body';
        ok !exists $env->{CONTENT_TYPE}, 'no CONTENT_TYPE without one';
        is_deeply [grep { /^HTTP_CONTENT_/ } keys %$env], [], 'no HTTP_CONTENT_*';
    };

    subtest "$listen: a POST: CONTENT_LENGTH and CONTENT_TYPE, not HTTP_CONTENT_*" => sub {
        my $env = env_of($server, "POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
            . "Content-Length: 5\r\nConnection: close\r\n\r\nhello");
        is $env->{CONTENT_LENGTH}, 5;
        is $env->{CONTENT_TYPE}, 'text/plain';
        is $env->{'input read'}, 5;
        is_deeply [grep { /^HTTP_CONTENT_/ } keys %$env], [], 'no HTTP_CONTENT_*';
    };

    $server->stop;
}

my $server = start_server(app => $app, options => ['--workers', 1]);

subtest 'HTTP/1.0' => sub {
    is env_of($server, "GET / HTTP/1.0\r\n\r\n")->{SERVER_PROTOCOL}, 'HTTP/1.0';
};

subtest 'PATH_INFO: / for the root, "%" without two hex digits left as is' => sub {
    my $env = env_of($server, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    is $env->{PATH_INFO}, '/';
    is $env->{QUERY_STRING}, '', 'QUERY_STRING is there, empty';
    $env = env_of($server, "GET /a%zz/b%4/%41%2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    is $env->{PATH_INFO}, '/a%zz/b%4/A%2';
    $env = env_of($server, "GET /%e2%98%BA?%41 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    is $env->{PATH_INFO}, "/\xe2\x98\xba", 'decoded to bytes';
    is $env->{QUERY_STRING}, '%41', 'the query is not decoded';
};

subtest 'an absolute-form target: REQUEST_URI is its path and query, its host is HTTP_HOST' => sub {
    my $env = env_of($server, "GET http://example.org:81/p%61th?q=1 HTTP/1.1\r\nHost: ignored\r\n"
        . "Connection: close\r\n\r\n");
    is $env->{REQUEST_URI}, '/p%61th?q=1';
    is $env->{PATH_INFO}, '/path';
    is $env->{QUERY_STRING}, 'q=1';
    is $env->{HTTP_HOST}, 'example.org:81';
    $env = env_of($server, "GET http://example.org?q HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n\r\n");
    is $env->{REQUEST_URI}, '/?q';
    is $env->{PATH_INFO}, '/';
};

subtest 'a fragment (no part of a request-target) is left out of the env' => sub {
    for my $case (
        ['/a/b?c=d#e', '/a/b', 'c=d', '/a/b?c=d'],
        ['/a/b#c', '/a/b', '', '/a/b'],
        ['/a/b#c?d=e', '/a/b', '', '/a/b'],
        ['/a%23b?q=%23#f#g', '/a#b', 'q=%23', '/a%23b?q=%23'],
        ['/#', '/', '', '/'],
        ['http://example.org#f?q', '/', '', '/'],
        ['http://example.org/p?q#f', '/p', 'q', '/p?q'],
    ) {
        my ($target, $path, $query, $uri) = @$case;
        my $env = env_of($server, "GET $target HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n\r\n");
        is_deeply [@$env{qw(PATH_INFO QUERY_STRING REQUEST_URI)}], [$path, $query, $uri], $target;
    }
};

subtest 'OPTIONS *: REQUEST_URI is "*", PATH_INFO is empty (it must start with / otherwise)' => sub {
    my $env = env_of($server, "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    is $env->{REQUEST_METHOD}, 'OPTIONS';
    is $env->{REQUEST_URI}, '*';
    is $env->{PATH_INFO}, '';
};

subtest 'HTTP_*: names upper-cased with _ for -, repeated fields joined' => sub {
    my $env = env_of($server, "GET / HTTP/1.1\r\nHost: x\r\nx-lower-case: v\r\n"
        . "X-Multi: a\r\nX-Multi: b\r\nx-multi: c\r\nCookie: a=1\r\nCookie: b=2\r\n"
        . "X-Empty:\r\nConnection: close\r\n\r\n");
    is $env->{HTTP_X_LOWER_CASE}, 'v';
    is $env->{HTTP_X_MULTI}, 'a, b, c', 'joined with ", "';
    is $env->{HTTP_COOKIE}, 'a=1; b=2', 'cookies joined with "; "';
    is $env->{HTTP_X_EMPTY}, '', 'an empty field is there, empty';
    is $env->{HTTP_CONNECTION}, 'close';
};

subtest 'a long header name reaches the app like any other' => sub {
    # Names of 256 bytes and more take another path in the env builder.
    my %names = map { $_ => 'X-' . ('n' x ($_ - 2)) } 256, 257, 1000, 8000;
    my $env = env_of($server, "GET / HTTP/1.1\r\nHost: x\r\n"
        . join('', map { "$names{$_}: v$_\r\n" } sort keys %names)
        . "$names{8000}: again\r\nConnection: close\r\n\r\n");
    for my $length (sort { $a <=> $b } keys %names) {
        my $key = 'HTTP_' . uc($names{$length} =~ tr/-/_/r);
        is $env->{$key}, $length == 8000 ? 'v8000, again' : "v$length", "a name of $length bytes";
    }
};

subtest 'header names with an underscore are dropped on purpose' => sub {
    # X_Forwarded_For would become HTTP_X_FORWARDED_FOR like X-Forwarded-For:
    # a client could pass it off as the one a proxy in front has set.
    my $env = env_of($server, "GET / HTTP/1.1\r\nHost: x\r\nX_Forwarded_For: 6.6.6.6\r\n"
        . "X-Forwarded-For: 10.0.0.1\r\nX_Only_Underscore: 1\r\nConnection: close\r\n\r\n");
    is $env->{HTTP_X_FORWARDED_FOR}, '10.0.0.1', 'the dash form is kept, unmixed';
    ok !exists $env->{HTTP_X_ONLY_UNDERSCORE}, 'the underscore form is gone';
    $env = env_of($server, "GET / HTTP/1.1\r\nHost: x\r\nX_Forwarded_For: 6.6.6.6\r\n"
        . "Connection: close\r\n\r\n");
    ok !exists $env->{HTTP_X_FORWARDED_FOR}, 'even alone';
};

subtest 'each request gets its own env' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /modify HTTP/1.1\r\nHost: x\r\n\r\n";
    read_response($sock);
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    my $env = $json->decode(read_response($sock)->{body});
    is $env->{SCRIPT_NAME}, '', 'a change to the env does not last';
    ok !exists $env->{'my.key'}, 'nor does a key the app added';
};

subtest 'psgi.errors goes to the error log' => sub {
    env_of($server, "GET /errors HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ok $server->wait_for_log(qr/a line for psgi.errors/), 'the line is in the log';
};

is $server->stop, 0, 'the server stops cleanly';
unlike $server->log, qr/\[error\]/, 'Lint found nothing';
done_testing;
