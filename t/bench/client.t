use strict;
use warnings;
use Test::More;
use IPC::Open2 ();
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until);
use Serow::Test::CProgram ();
use Serow::Test::Prometheus ();

# bench/client, the load generator of bench/run's fairness scenarios and of
# the second measurement of (a): its counts must be the server's, whether it
# writes a request at once (the usual case) or the server has closed the
# connection under it.  Built like the C test programs, with the sanitizers
# when they work here.

my $built = Serow::Test::CProgram::build(name => 'client', sources => ['bench/client.c', 'bench/client_common.c'],
    includes => []);
plan skip_all => 'no working C compiler' unless exists $built->{status};
ok $built->{binary}, 'bench/client.c builds' or diag $built->{output};
my $client = $built->{binary} or done_testing, exit;

# One worker, so that the app's count is every request the server answered.
my $hello = sub {
    my $answered = 0;
    sub {
        my ($env) = @_;
        return [200, ['Content-Type' => 'text/plain'], [$answered]] if $env->{PATH_INFO} eq '/count';
        $answered++;
        [200, ['Content-Type' => 'text/plain', 'Content-Length' => 5], ['Hello']];
    };
};

sub answered_by_server {
    my ($server) = @_;
    my $res = http_get($server, '/count');
    return $res && $res->{status} == 200 ? $res->{body} : undef;
}

sub run_client {
    my $out = Serow::Test::CProgram::run($client, @_);
    is $out->{status}, 0, "client @_[0..2] ran to its end" or diag $out->{output};
    return { map { split ' ', $_, 2 } grep { /\S/ } split /\n/, $out->{output} };
}

subtest 'load: keep-alive, every answer counted once' => sub {
    my $server = start_server(app => $hello->(), options => ['--workers', 1]);
    wait_until(sub { defined answered_by_server($server) }) or BAIL_OUT('server did not start');
    my $r = run_client('load', '--port', $server->port, '--conns', 4, '--duration', 1);
    cmp_ok $r->{requests}, '>', 0, 'requests answered';
    is $r->{$_}, 0, $_ for qw(errors_connect errors_read errors_write errors_timeout
        connections_unserved closed_before_answer);
    # The server may have answered the requests in flight when the client
    # stopped (one per connection at most): never fewer than the client counts.
    my $answered = answered_by_server($server);
    cmp_ok $answered, '>=', $r->{requests}, "the server answered at least the client's count";
    cmp_ok $answered, '<=', $r->{requests} + 4, 'and at most one more per connection';
    $server->stop;
};

subtest 'load: Connection: close, a new connection per request' => sub {
    my $server = start_server(app => $hello->(), options => ['--workers', 1]);
    wait_until(sub { defined answered_by_server($server) }) or BAIL_OUT('server did not start');
    my $r = run_client('load', '--port', $server->port, '--conns', 2, '--duration', 1, '--close');
    cmp_ok $r->{requests}, '>', 0, 'requests answered';
    is $r->{$_}, 0, $_ for qw(errors_connect errors_read errors_write errors_timeout);
    my $answered = answered_by_server($server);
    cmp_ok $answered, '>=', $r->{requests}, "the server answered at least the client's count";
    cmp_ok $answered, '<=', $r->{requests} + 2, 'and at most one more per connection';
    $server->stop;
};

# idle mode: opens the connections, waits for a line, asks on each again.
sub idle_client {
    my ($server, $conns, $before_go) = @_;
    local $ENV{ASAN_OPTIONS} = 'detect_leaks=0:abort_on_error=1';
    my $pid = IPC::Open2::open2(my $from, my $to, $client, 'idle', '--port', $server->port,
        '--conns', $conns, '--timeout', 30);
    my %r;
    while (my $line = <$from>) {
        my ($k, $v) = split ' ', $line;
        $r{$k} = $v;
        last if $k eq 'tried';
    }
    $before_go->() if $before_go;
    print {$to} "go\n";
    close $to;
    while (my $line = <$from>) {
        my ($k, $v) = split ' ', $line;
        $r{$k} = $v;
    }
    waitpid $pid, 0;
    is $?, 0, 'idle client exited cleanly';
    return \%r;
}

subtest 'idle: kept connections answer again' => sub {
    my $server = start_server(app => $hello->(), options => ['--workers', 1]);
    wait_until(sub { defined answered_by_server($server) }) or BAIL_OUT('server did not start');
    my $r = idle_client($server, 20);
    is $r->{opened}, 20, 'all opened';
    is $r->{again_ok}, 20, 'all answered again';
    is $r->{again_closed} + $r->{again_failed}, 0, 'none closed or failed';
    is answered_by_server($server), 40, 'the server answered each twice';
    $server->stop;
};

subtest 'idle: connections the server closed are counted as closed' => sub {
    my $server = start_server(app => $hello->(),
        options => ['--workers', 1, '--keepalive-timeout', 1, '--metrics-path', '/metrics']);
    wait_until(sub { defined answered_by_server($server) }) or BAIL_OUT('server did not start');
    my $r = idle_client($server, 10, sub {
        # the server closes them after its keep-alive timeout
        ok wait_until(sub {
            my $res = http_get($server, '/metrics') or return 0;
            my $m = Serow::Test::Prometheus::parse($res->{body});
            # (the connection asking counts itself)
            Serow::Test::Prometheus::value($m, 'serow_connections_open') <= 1;
        }), 'the server closed the idle connections';
    });
    is $r->{opened}, 10, 'all opened';
    is $r->{closed_while_idle}, 10, 'seen closed before asking again';
    is $r->{again_closed}, 10, 'each counted as closed by the server';
    is $r->{again_ok} + $r->{again_failed}, 0, 'none answered, none failed otherwise';
    $server->stop;
};

done_testing;
