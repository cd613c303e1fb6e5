# A worker reuses the env hash of the previous request when the app kept no
# reference to it (src/psgi/psgi_env.c): the app must not be able to tell.  Every
# request after one that added keys, changed values, deleted keys or sent
# other headers gets the env a fresh worker's first request gets; an env the
# app kept (a global, a closure, a delayed or streaming response, a reference
# to one of its values, a psgix.cleanup handler) is left as it was.
use strict;
use warnings;
use Test::More;
use JSON::PP ();
use Scalar::Util ();
use Socket ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response);

my $json = JSON::PP->new->utf8->canonical;

# The env as the app sees it: plain values with a mark when they are
# characters (UTF-8 flag), references as their type.  REMOTE_PORT differs
# from connection to connection; psgix.io is not read (that makes a handle).
sub describe {
    my ($env) = @_;
    my %out;
    for my $key (keys %$env) {
        next if $key eq 'psgix.io';
        my $v = $env->{$key};
        $out{$key} = ref $v ? ref $v
            : !defined $v ? '(undef)'
            : utf8::is_utf8($v) ? "$v (characters)"
            : $v;
    }
    $out{'psgix.io'} = exists $env->{'psgix.io'} ? 'there' : 'missing';
    $out{REMOTE_PORT} = 'a port' if ($out{REMOTE_PORT} // '') =~ /\A[1-9][0-9]*\z/;
    $out{'psgi.version'} = join '.', @{ $env->{'psgi.version'} } if ref $env->{'psgi.version'};
    if (ref $env->{'psgix.cleanup.handlers'} eq 'ARRAY') {
        $out{'psgix.cleanup.handlers'} = 'handlers: ' . @{ $env->{'psgix.cleanup.handlers'} };
    }
    if (ref(my $input = $env->{'psgi.input'})) {
        my $n = $input->read(my $buffer, 1 << 20);
        $out{'psgi.input'} = ref($input) . " with '" . ($buffer // '') . "'";
    }
    return \%out;
}

# What the app kept between requests (in the worker).
my ($kept_env, $kept_closure, $weak_env, $kept_value_ref, $cleanup_saw, $kept_writer, $copy);

my %routes = (
    '/show' => sub { return },
    # Adds keys, changes values of every kind, reads psgix.io.
    '/change' => sub {
        my ($env) = @_;
        $env->{'psgix.session'} = { user => 'joe' };
        $env->{REMOTE_USER} = 'joe';
        $env->{'my.key'} = 'mine';
        $env->{PATH_INFO} = "/\x{263a}";                 # characters
        $env->{SCRIPT_NAME} = '/mounted';
        $env->{QUERY_STRING} = [1];                       # a reference
        $env->{SERVER_PORT} = 'eighty';
        $env->{HTTP_ACCEPT} = 'changed';
        $env->{HTTP_X_CUSTOM} .= ' and more';
        $env->{'psgi.url_scheme'} = 'https';
        $env->{'psgi.version'} = [2, 0];
        $env->{'psgi.errors'} = \*STDOUT;
        $env->{'psgi.multiprocess'} = "$env->{'psgi.multiprocess'}"; # now a string too
        $env->{'psgi.run_once'} = 1;
        $env->{'psgix.input.buffered'} = undef;
        $env->{'psgi.input'} = 'not a handle';
        my $io = $env->{'psgix.io'};
        push @{ $env->{'psgix.cleanup.handlers'} }, sub { $_[0]{'late.key'} = 1 };
        return;
    },
    # Deletes keys, leaves an iteration half done.
    '/delete' => sub {
        my ($env) = @_;
        my ($first) = each %$env;
        delete @$env{qw(PATH_INFO psgix.cleanup.handlers psgi.version psgix.io psgi.input)};
        delete $env->{$first};
        return;
    },
    '/empty' => sub { %{ $_[0] } = (); return },
    '/close-input' => sub { close $_[0]{'psgi.input'}; return },
    '/bless' => sub { bless $_[0], 'Some::Class'; return },
    '/keep' => sub { $kept_env = $_[0]; return },
    '/kept' => sub {
        my ($env) = @_;
        return { kept => describe($kept_env), same => $kept_env == $env ? 1 : 0 };
    },
    '/release' => sub { undef $kept_env; return },
    '/closure' => sub { my ($env) = @_; $kept_closure = sub { $env }; return },
    '/closure-kept' => sub {
        my ($env) = @_;
        my $kept = $kept_closure->();
        return { kept => describe($kept), same => $kept == $env ? 1 : 0 };
    },
    '/weak' => sub { Scalar::Util::weaken($weak_env = $_[0]); return },
    '/weak-kept' => sub { return { defined => defined $weak_env ? 1 : 0 } },
    '/value-ref' => sub { $kept_value_ref = \$_[0]{PATH_INFO}; return },
    '/value-ref-kept' => sub { return { value => $$kept_value_ref } },
    # A copy of a value (perl shares the buffer of a string this long with
    # the env's value until one of them changes).
    '/%41/a-path-long-enough-to-be-copied-on-write' => sub { $copy = $_[0]{PATH_INFO}; return },
    '/A/a-path-long-enough-to-be-copied-on-write' => sub { return },
    '/copy' => sub { return { copy => $copy } },
    '/cleanup' => sub {
        my ($env) = @_;
        # A handler that closes over the env (a reference cycle while it waits).
        push @{ $env->{'psgix.cleanup.handlers'} }, sub { $cleanup_saw = $env->{PATH_INFO} };
        Scalar::Util::weaken($weak_env = $env);
        return;
    },
    '/cleanup-saw' => sub { return { saw => $cleanup_saw, env_gone => defined $weak_env ? 0 : 1 } },
    '/io' => sub {
        my ($env) = @_;
        my ($port) = Socket::unpack_sockaddr_in(getpeername($env->{'psgix.io'}));
        return { peer_port => $port };
    },
);

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/stream') {
        # A streaming response; the app keeps its writer (and so the env).
        return sub {
            my ($responder) = @_;
            my $writer = $responder->([200, ['Content-Type' => 'application/json']]);
            $kept_writer = [$writer, $env];
            $writer->write($json->encode({ streamed => 1 }));
            $writer->close;
        };
    }
    if ($path eq '/stream-kept') {
        my $kept = $kept_writer->[1];
        undef $kept_writer;
        return [200, [], [$json->encode({ kept => describe($kept), same => $kept == $env ? 1 : 0 })]];
    }
    my $route = $routes{$path} or return [404, [], ['no such route']];
    my $answer = $route->($env);
    my $body = $json->encode($answer // describe($env));
    if ($env->{QUERY_STRING} eq 'delayed') {
        # A delayed response: the closure holds the env while it runs.
        return sub { $_[0]->([200, ['Content-Type' => 'application/json'], [$body]]) };
    }
    return [200, ['Content-Type' => 'application/json'], [$body]];
};

my $server = start_server(app => $app, options => ['--workers', 1]);

# One request on the connection $sock (a new one when undef); the decoded answer.
sub ask {
    my ($sock, $request) = @_;
    $sock //= raw_connect($server);
    syswrite $sock, $request;
    my $res = read_response($sock);
    return undef unless $res && $res->{status} == 200;
    return $json->decode($res->{body});
}

my $show = "GET /show?a=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: test\r\n\r\n";

# The first request of this worker: an env built from nothing.
my $fresh = ask(undef, $show);
is $fresh->{PATH_INFO}, '/show', 'the first request';
is $fresh->{'psgi.input'}, "GLOB with ''", 'it has the empty input';

my $sock = raw_connect($server);
is_deeply ask($sock, $show), $fresh, 'the next request, on a kept-alive connection, gets the same env';

subtest 'keys the app added go, values it changed are the next request\'s' => sub {
    my $changed = ask($sock, "POST /change?x=1 HTTP/1.1\r\nHost: other.example\r\nUser-Agent: test\r\n"
        . "Accept: text/html\r\nX-Custom: one\r\nCookie: a=1\r\nCookie: " . ('b' x 5000) . "\r\n"
        . "Content-Type: text/plain\r\nContent-Length: 4\r\n\r\nbody");
    is $changed->{'my.key'}, 'mine', 'the app added keys';
    is $changed->{HTTP_X_CUSTOM}, 'one and more', 'and changed values';
    ok $changed->{HTTP_COOKIE} eq 'a=1; ' . ('b' x 5000), 'with a long cookie';
    is_deeply ask($sock, $show), $fresh, 'the next request gets the env of a first request';
    is ask($sock, "GET /show HTTP/1.1\r\nHost: x\r\nCookie: c=3\r\n\r\n")->{HTTP_COOKIE}, 'c=3',
        'a short cookie after the long one';
    is_deeply ask(undef, $show), $fresh, 'and on another connection';
};

subtest 'keys the app deleted come back' => sub {
    ask($sock, "GET /delete HTTP/1.1\r\nHost: x\r\n\r\n");
    is_deeply ask($sock, $show), $fresh, 'after deleting keys in an unfinished each';
    ask($sock, "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n");
    is_deeply ask($sock, $show), $fresh, 'after emptying the env';
};

subtest 'an empty input the app closed is replaced' => sub {
    ask($sock, "GET /close-input HTTP/1.1\r\nHost: x\r\n\r\n");
    is_deeply ask($sock, $show), $fresh, 'the next request has an open empty input';
    is_deeply ask($sock, $show), $fresh, 'and the one after it';
};

subtest 'headers of the previous request are gone' => sub {
    ask($sock, "GET /show HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nX-Rare: 1\r\nTE: trailers\r\n"
        . "Accept: text/html\r\n\r\n");
    is_deeply ask($sock, $show), $fresh, 'common and rare ones';
    my $absolute = ask($sock, "GET http://abs.example/show HTTP/1.1\r\nHost: abs.example\r\n\r\n");
    is $absolute->{HTTP_HOST}, 'abs.example', 'an absolute-form target\'s host';
    is_deeply ask($sock, $show), $fresh, 'then Host again';
};

subtest 'a blessed env is not reused' => sub {
    ask($sock, "GET /bless HTTP/1.1\r\nHost: x\r\n\r\n");
    is_deeply ask($sock, $show), $fresh, 'the next request gets a plain env';
};

subtest 'an env the app keeps is left alone' => sub {
    ask($sock, "GET /keep HTTP/1.1\r\nHost: x\r\nX-Kept: yes\r\n\r\n");
    my $after = ask($sock, "GET /kept HTTP/1.1\r\nHost: y\r\n\r\n");
    is $after->{same}, 0, 'the next request has another env';
    is $after->{kept}{PATH_INFO}, '/keep', 'the kept one has its own request\'s values';
    is $after->{kept}{HTTP_X_KEPT}, 'yes', 'and headers';
    is $after->{kept}{HTTP_HOST}, 'x', 'and Host';
    ask($sock, "GET /release HTTP/1.1\r\nHost: x\r\n\r\n");
    is_deeply ask($sock, $show), $fresh, 'once released, the envs are as fresh';
};

subtest 'an env a closure of the app holds is left alone' => sub {
    ask($sock, "GET /closure HTTP/1.1\r\nHost: x\r\n\r\n");
    my $after = ask($sock, "GET /closure-kept HTTP/1.1\r\nHost: y\r\n\r\n");
    is $after->{same}, 0, 'the next request has another env';
    is $after->{kept}{PATH_INFO}, '/closure', 'the closure\'s env is its request\'s';
    is_deeply ask($sock, $show), $fresh, 'the next request';
};

subtest 'delayed and streaming responses' => sub {
    is ask($sock, "GET /show?delayed HTTP/1.1\r\nHost: x\r\n\r\n")->{QUERY_STRING}, 'delayed',
        'a delayed response';
    is_deeply ask($sock, $show), $fresh, 'the request after it';
    is ask($sock, "GET /stream?s HTTP/1.1\r\nHost: x\r\n\r\n")->{streamed}, 1, 'a streaming response';
    my $after = ask($sock, "GET /stream-kept HTTP/1.1\r\nHost: y\r\n\r\n");
    is $after->{same}, 0, 'its env, kept with the writer, is not the next one';
    is $after->{kept}{QUERY_STRING}, 's', 'and has its own values';
    is_deeply ask($sock, $show), $fresh, 'the request after';
};

subtest 'a weak reference to the env' => sub {
    ask($sock, "GET /weak HTTP/1.1\r\nHost: x\r\n\r\n");
    is ask($sock, "GET /weak-kept HTTP/1.1\r\nHost: x\r\n\r\n")->{defined}, 0,
        'is gone once its request is over, as the env is';
    is_deeply ask($sock, $show), $fresh, 'the request after';
};

subtest 'a reference to a value of the env' => sub {
    ask($sock, "GET /value-ref HTTP/1.1\r\nHost: x\r\n\r\n");
    is ask($sock, "GET /value-ref-kept HTTP/1.1\r\nHost: x\r\n\r\n")->{value}, '/value-ref',
        'keeps its value: the next request did not overwrite it';
    is_deeply ask($sock, $show), $fresh, 'the request after';
};

subtest 'a copy of a value the app keeps' => sub {
    my $path = '/a-path-long-enough-to-be-copied-on-write';
    is ask($sock, "GET /%2541$path HTTP/1.1\r\nHost: x\r\n\r\n")->{PATH_INFO}, "/%41$path",
        'PATH_INFO decoded once';
    # The next PATH_INFO starts as the same bytes as the copy, then is decoded.
    is ask($sock, "GET /%41$path HTTP/1.1\r\nHost: x\r\n\r\n")->{PATH_INFO}, "/A$path",
        'the next one';
    is ask($sock, "GET /copy HTTP/1.1\r\nHost: x\r\n\r\n")->{copy}, "/%41$path",
        'the copy kept its value';
};

subtest 'a psgix.cleanup handler that holds the env' => sub {
    ask($sock, "GET /cleanup HTTP/1.1\r\nHost: x\r\n\r\n");
    my $after = ask($sock, "GET /cleanup-saw HTTP/1.1\r\nHost: x\r\n\r\n");
    is $after->{saw}, '/cleanup', 'ran after its request, and saw that request\'s env';
    is $after->{env_gone}, 1, 'that env was freed: the handler, run, no longer holds it';
    is_deeply ask($sock, $show), $fresh, 'the next requests have no handler';
};

subtest 'psgix.io after a request that read it' => sub {
    my $io_sock = raw_connect($server);
    is ask($io_sock, "GET /io HTTP/1.1\r\nHost: x\r\n\r\n")->{peer_port}, $io_sock->sockport,
        'psgix.io is this connection\'s';
    my $other = raw_connect($server);
    is ask($other, "GET /io HTTP/1.1\r\nHost: x\r\n\r\n")->{peer_port}, $other->sockport,
        'and on another connection, that one\'s';
    is ask($io_sock, "GET /io HTTP/1.1\r\nHost: x\r\n\r\n")->{peer_port}, $io_sock->sockport,
        'and back on the first';
    is_deeply ask($sock, $show), $fresh, 'the request after';
};

$server->stop;
done_testing;
