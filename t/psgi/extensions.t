# The psgix.* extensions Serow offers: psgix.io, psgix.informational,
# psgix.harakiri and psgix.cleanup.
use strict;
use warnings;
use Test::More;
use IO::Handle ();
use IO::Select ();
use Socket ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response parse_response raw_request);

# Pipes between the test and the app, made before the server forks.
pipe(my $release_read, my $release_write) or die;
pipe(my $done_read, my $done_write) or die;
$_->autoflush(1) for $release_write, $done_write;

# A line from a pipe, waiting at most 30 s.
sub read_line {
    my ($fh) = @_;
    my $line = '';
    my $sel = IO::Select->new($fh);
    while ($line !~ /\n/) {
        $sel->can_read(30) or return undef;
        sysread($fh, $line, 1, length $line) or return undef;
    }
    return $line;
}

my ($kept_io, $kept_env);
# More than a socket buffer takes at once.
use constant BIG => 4 * 1024 * 1024;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my @type = ('Content-Type' => 'text/plain');
    return [200, [@type], [$$]] if $path eq '/pid';
    return [200, [@type], [join ',', map { "$_=" . ($env->{"psgix.$_"} ? 1 : 0) }
        qw(io informational harakiri cleanup input.buffered)]] if $path eq '/features';

    # psgix.io
    if ($path eq '/own-response') {
        my $io = $env->{'psgix.io'};
        syswrite $io, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nown";
        close $io if $env->{QUERY_STRING} eq 'close';
        die "after answering on the socket\n" if $env->{QUERY_STRING} eq 'die';
        return sub { }; # the responder is never called
    }
    if ($path eq '/hold') {
        $kept_io = $env->{'psgix.io'};
        syswrite $kept_io, "held\n";
        return sub { };
    }
    if ($path eq '/write-held') {
        syswrite $kept_io, "written later\n";
        close $kept_io;
        undef $kept_io;
        return [200, [@type], ['done']];
    }
    if ($path eq '/echo-upgrade') {
        # A blocking handler as written for Starman: plain sysread and print
        # on psgix.io, without blocking(1).
        my $io = $env->{'psgix.io'};
        print $io "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n";
        $io->flush or die "print: $!\n";
        for (;;) {
            my $line = '';
            while ($line !~ /\n\z/) {
                defined(my $n = sysread($io, $line, 1, length $line)) or die "sysread: $!\n";
                return sub { } if $n == 0;
            }
            last if $line eq "bye\n";
            print $io $line eq "big\n" ? 'x' x BIG . "\n" : "echo: $line";
            $io->flush or die "print: $!\n";
        }
        close $io;
        return sub { };
    }
    if ($path eq '/peer') {
        my $io = $env->{'psgix.io'};
        my ($port) = Socket::unpack_sockaddr_in(getpeername($io));
        return [200, [@type], ["$port $env->{REMOTE_PORT}"]];
    }
    if ($path eq '/keep-env') {
        $kept_env = $env;
        return [200, [@type], ['kept']];
    }
    if ($path eq '/old-env-io') {
        return [200, [@type], [defined $kept_env->{'psgix.io'} ? 'defined' : 'undef']];
    }

    # psgix.informational
    if ($path eq '/early-hints') {
        $env->{'psgix.informational'}->(103, ['Link' => '</style.css>; rel=preload']);
        $env->{'psgix.informational'}->(103, ['Link' => '</app.js>; rel=preload']);
        return [200, [@type], ['final']];
    }
    if ($path eq '/bad-informational') {
        my @errors;
        for my $args ([200, []], [101, []], [103, ['Bad Name' => 'x']], [103, ['X' => "a\nb"]]) {
            eval { $env->{'psgix.informational'}->(@$args); 1 } or push @errors, $@ =~ s/ at .*//sr;
        }
        return [200, [@type], [join "\n", @errors]];
    }
    if ($path eq '/late-informational') {
        return sub {
            my $w = $_[0]->([200, [@type]]);
            my $ok = eval { $env->{'psgix.informational'}->(103, []); 1 };
            $w->write($ok ? 'sent' : "refused: $@");
            $w->close;
        };
    }

    # psgix.harakiri
    if ($path eq '/harakiri') {
        $env->{'psgix.harakiri.commit'} = 1;
        return [200, [@type], [$$]];
    }

    # psgix.cleanup
    if ($path eq '/cleanup') {
        push @{ $env->{'psgix.cleanup.handlers'} }, sub {
            my ($e) = @_;
            my $go = read_line($release_read) // "timeout\n";
            syswrite $done_write, "cleanup ran for $e->{PATH_INFO} after $go";
        };
        return [200, [@type], ['response before cleanup']];
    }
    if ($path eq '/cleanup-dies') {
        push @{ $env->{'psgix.cleanup.handlers'} }, sub { die "cleanup broke\n" },
            sub { syswrite $done_write, "second handler ran\n" };
        return [200, [@type], ['ok']];
    }
    return [404, [@type], ['not found']];
};

my $server = start_server(app => $app, options => ['--workers', 1]);

sub get {
    my ($path) = @_;
    return parse_response(raw_request($server, "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
}

is get('/features')->{body}, 'io=1,informational=1,harakiri=1,cleanup=1,input.buffered=1',
    'the extensions are announced';

subtest 'psgix.io: an app that answers on the socket itself gets no byte added' => sub {
    for my $how ('close', 'drop', 'die') {
        my $raw = raw_request($server, "GET /own-response?$how HTTP/1.1\r\nHost: x\r\n\r\n");
        is $raw, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nown",
            "$how: exactly the app's bytes, then the connection closes";
    }
};

subtest 'psgix.io: a handle the app keeps stays open, and the server leaves it alone' => sub {
    my $held = raw_connect($server);
    syswrite $held, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_line($held), "held\n", 'the app wrote on it';
    is get('/write-held')->{body}, 'done', 'the worker serves other connections meanwhile';
    is read_line($held), "written later\n", 'the app wrote on it from a later request';
    my $rest = '';
    1 while IO::Select->new($held)->can_read(30) && sysread($held, $rest, 4096, length $rest);
    is $rest, '', 'the connection ends when the app closes it, with nothing from the server';
};

subtest 'psgix.io is blocking: a handler written for Starman works unchanged' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /echo-upgrade HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n";
    is Serow::Test::read_until_match($sock, qr/\r\n\r\n\z/),
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n",
        'the handler\'s 101, nothing from the server';
    syswrite $sock, "ping\n";
    is Serow::Test::read_until_match($sock, qr/\n\z/), "echo: ping\n",
        'its sysread waited for the client';
    syswrite $sock, "big\n";
    my $big = Serow::Test::read_until_match($sock, qr/\n\z/);
    ok $big eq 'x' x BIG . "\n", 'its print of more than the socket takes at once went out whole'
        or diag length($big) . ' bytes';
    syswrite $sock, "bye\n";
    my ($rest, $closed) = Serow::Test::read_until_close($sock);
    is $rest, '', 'nothing more';
    ok $closed, 'the connection closes when the handler is done';
    unlike $server->log, qr/the app died: (?:sysread|print)/, 'no I/O error in the handler';
    my $sock2 = raw_connect($server);
    for (1 .. 2) {
        syswrite $sock2, "GET /peer HTTP/1.1\r\nHost: x\r\n\r\n";
        like read_response($sock2)->{body}, qr/^\d+ \d+$/,
            'a connection whose app read psgix.io and answered normally is served on';
    }
};

subtest 'psgix.io read, the connection closed: it is the server\'s again, non-blocking' => sub {
    # The app read psgix.io and answered normally with Connection: close,
    # with a request pipelined behind: the server stops sending and discards
    # what the client still sends for a while (lingering), which must never
    # wait on a socket left blocking for the app.  One worker: it serves the
    # next connection only if it did not.
    my $sock = raw_connect($server);
    syswrite $sock, "GET /peer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        . "GET /peer HTTP/1.1\r\nHost: x\r\n\r\n";
    my ($raw, $closed) = Serow::Test::read_until_close($sock);
    like $raw, qr/\r\n\r\n\d+ \d+\z/, 'answered once';
    ok $closed, 'the server ended its side';
    syswrite $sock, "more from the client\n";
    for (1 .. 2) {
        my $res = get('/pid');
        like $res && $res->{body}, qr/^\d+$/, 'the worker serves the next connection';
    }
    close $sock;
};

subtest 'psgix.io is the client\'s socket' => sub {
    my ($io_port, $env_port) = split ' ', get('/peer')->{body};
    is $io_port, $env_port, 'its peer is REMOTE_PORT';
};

subtest 'psgix.io read by an app that answers normally: the connection is kept' => sub {
    my $sock = raw_connect($server);
    for (1 .. 2) {
        syswrite $sock, "GET /peer HTTP/1.1\r\nHost: x\r\n\r\n";
        like read_response($sock)->{body}, qr/^\d+ \d+$/;
    }
};

subtest 'psgix.io of an env kept past its request is undef, not a later socket' => sub {
    is get('/keep-env')->{body}, 'kept';
    is get('/old-env-io')->{body}, 'undef';
};

subtest 'psgix.informational: 103 Early Hints before the response' => sub {
    my $raw = raw_request($server, "GET /early-hints HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    my @responses = parse_response($raw);
    is scalar(@responses), 3, 'two 1xx and the final response';
    is $responses[0]{status}, 103;
    is $responses[0]{reason}, 'Early Hints';
    is $responses[0]{headers}{link}, '</style.css>; rel=preload';
    is $responses[1]{headers}{link}, '</app.js>; rel=preload';
    ok !defined $responses[0]{headers}{connection}, 'no Connection header on a 1xx';
    is $responses[2]{status}, 200;
    is $responses[2]{body}, 'final';
};

subtest 'psgix.informational: nothing for an HTTP/1.0 client' => sub {
    my @responses = parse_response(raw_request($server, "GET /early-hints HTTP/1.0\r\n\r\n"));
    is scalar(@responses), 1;
    is $responses[0]{status}, 200;
};

subtest 'psgix.informational: a bad status or header dies in the app, nothing is sent' => sub {
    my @responses = parse_response(raw_request($server,
        "GET /bad-informational HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    is scalar(@responses), 1, 'only the final response';
    my @errors = split /\n/, $responses[0]{body};
    is scalar(@errors), 4, 'each call died';
    like $errors[0], qr/invalid status/;
    like $errors[2], qr/Bad Name/;
};

subtest 'psgix.informational after the response started dies' => sub {
    like get('/late-informational')->{body}, qr/refused: the response has already started/;
};

subtest 'psgix.cleanup: handlers run after the client has the whole response' => sub {
    for my $connection ('keep-alive', 'close') {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /cleanup HTTP/1.1\r\nHost: x\r\nConnection: $connection\r\n\r\n";
        # The handler is blocked on the release pipe while we read.
        my $res = read_response($sock);
        is $res->{body}, 'response before cleanup', "$connection: the response is complete";
        if ($connection eq 'close') {
            my $eof = IO::Select->new($sock)->can_read(30) && sysread($sock, my $byte, 1) == 0;
            ok $eof, 'close: the connection is closed before the handler ends';
        }
        syswrite $release_write, "release $connection\n";
        is read_line($done_read), "cleanup ran for /cleanup after release $connection\n",
            "$connection: the handler ran, with the env, once released";
    }
};

subtest 'psgix.cleanup: a handler that dies is logged, the next ones run' => sub {
    is get('/cleanup-dies')->{body}, 'ok';
    is read_line($done_read), "second handler ran\n";
    like $server->log, qr/a psgix.cleanup handler died: cleanup broke/;
};

subtest 'psgix.harakiri: the worker leaves after the response, a new one takes over' => sub {
    my $before = get('/pid')->{body};
    my $res = get('/harakiri');
    is $res->{body}, $before, 'the current worker answered';
    my $sock = raw_connect($server);
    syswrite $sock, "GET /harakiri HTTP/1.1\r\nHost: x\r\n\r\n";
    $res = read_response($sock);
    ok !defined $res->{headers}{connection}, 'the connection is kept: the holder takes it over';
    syswrite $sock, "GET /pid HTTP/1.1\r\nHost: x\r\n\r\n";
    my $after = read_response($sock)->{body};
    isnt $after, $res->{body}, 'a new worker answers the next request on it';
    unlike $server->log, qr/\[error\].*exited/, 'a worker that leaves this way is no error';
};

is $server->stop, 0, 'the server stops cleanly';
unlike $server->log, qr/never called the responder/,
    'an app that answered on psgix.io is not taken for one that forgot to respond';
like $server->log, qr/the app died: after answering on the socket/,
    'an app that died after answering on psgix.io is logged all the same';
done_testing;
