# Faults: a worker killed in the middle of a request, an
# app that dies, calls exit or crashes, and a killed connection holder.
# Each costs at most the process it hit: the master replaces it, requests in
# flight on other workers finish, and a client whose request was lost sees
# its connection closed (or a 500), never a hang.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close answered_and_closed
                   http_get gate gated_app wait_until process_alive is_connection_holder);

my $CLOSE = "Connection: close\r\n";

# gated_app (its /slow requests wait at the gate) with three ways to fail:
# /die, /exit and /segv.
sub fault_app {
    my ($gate) = @_;
    my $gated = gated_app($gate);
    return sub {
        my ($env) = @_;
        my $path = $env->{PATH_INFO};
        die "on purpose\n" if $path eq '/die';
        exit 7 if $path eq '/exit';
        if ($path eq '/segv') {
            $SIG{SEGV} = 'DEFAULT';
            kill SEGV => $$;
        }
        return $gated->($env);
    };
}

# Sends a /slow request on a new connection and waits until a worker holds
# it; returns the socket and that worker's pid.
sub hold {
    my ($server) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /slow HTTP/1.1\r\nHost: x\r\n$CLOSE\r\n";
    my $line = $server->wait_for_log(qr/slow request in worker \d+/) or return;
    return ($sock, $line =~ /(\d+)/);
}

sub started_worker {
    my ($server) = @_;
    my $line = $server->wait_for_log(qr/worker (\d+) started/) or return;
    return ($line =~ /(\d+)/)[0];
}

subtest 'SIGKILL of a worker in the middle of a request' => sub {
    my $gate = gate();
    my $server = start_server(app => fault_app($gate), options => ['--workers', 3]);
    started_worker($server) for 1 .. 3;
    my %held;
    for my $name (qw(a b c)) {
        @{ $held{$name} }{qw(sock pid)} = hold($server);
        ok $held{$name}{pid}, "request $name is held by worker $held{$name}{pid}"
            or return diag $server->log;
    }
    is scalar(keys %{{ map { $_->{pid} => 1 } values %held }}), 3, 'on three workers';

    kill 'KILL', $held{b}{pid};
    my ($raw, $closed) = read_until_close($held{b}{sock});
    ok $closed, "the killed request's client sees its connection closed";
    is $raw, '', '  without a byte of response';
    ok $server->wait_for_log(qr/worker $held{b}{pid} was killed by signal 9; starting a new one/),
        'the master notices';
    ok my $new = started_worker($server), 'and starts a new worker';

    $gate->open(2);
    for my $name (qw(a c)) {
        my $res = read_response($held{$name}{sock});
        is $res && $res->{status}, 200, "request $name, in flight on another worker, is answered";
        is $res && $res->{body}, "slow request done by $held{$name}{pid}", '  by the worker that held it';
    }
    is http_get($server, '/')->{status}, 200, 'new requests are served';
    is $server->stop, 0;
};

subtest 'an app that dies: 500, and the same worker serves the next request' => sub {
    my $server = start_server(app => fault_app(gate()), options => ['--workers', 1]);
    my $before = http_get($server, '/')->{body};
    my $res = http_get($server, '/die');
    is $res && $res->{status}, 500, 'a 500';
    like $server->wait_for_log(qr/\[error\].*GET \/die: the app died: on purpose/), qr/on purpose/,
        'the error is logged';
    is http_get($server, '/')->{body}, $before, 'the same worker (same pid) serves the next request';
    unlike $server->log, qr/worker \d+ (?:exited|was killed)/, 'no worker exited';
    is $server->stop, 0;
};

# Two workers, one holding a request at the gate; a request for $path
# fails on the other.  $client->($sock) checks what its client got;
# the worker must be gone as $how says (and replaced), and the held request
# answered by the worker that held it.
sub fault_beside_held_request {
    my ($path, $how, $client) = @_;
    my $gate = gate();
    my $server = start_server(app => fault_app($gate), options => ['--workers', 2]);
    started_worker($server) for 1 .. 2;
    my ($held, $held_pid) = hold($server);
    ok $held_pid, "a request is held by worker $held_pid" or return diag $server->log;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    $client->($sock);
    my $gone = $server->wait_for_log(qr/worker (\d+) $how; starting a new one/);
    ok $gone, "the worker $how; the master replaces it";
    my ($gone_pid) = ($gone // '') =~ /worker (\d+)/;
    isnt $gone_pid, $held_pid, 'it was the other worker';
    ok started_worker($server), 'a new worker started';
    $gate->open(1);
    my $res = read_response($held);
    is $res && $res->{body}, "slow request done by $held_pid", 'the request held on the other worker is answered';
    ok process_alive($held_pid), 'and that worker lives on';
    is $server->stop, 0;
}

# Serow answers 500 from an END block of the worker (lib/Serow/Worker.pm);
# exit itself is not overridden: the worker leaves, as the app asked.
subtest 'an app that calls exit: a 500, and only its worker is replaced' => sub {
    fault_beside_held_request('/exit', 'exited with status 7',
        sub { answered_and_closed($_[0], 500) });
};

subtest 'an app that crashes (SIGSEGV): its client sees a close, its worker is replaced' => sub {
    fault_beside_held_request('/segv', 'was killed by signal 11', sub {
        my ($raw, $closed) = read_until_close($_[0]);
        ok $closed, 'the client sees its connection closed';
        is $raw, '', '  without a response (a signal leaves no chance to send one)';
    });
};

# The holder keeps idle keep-alive connections (docs/keepalive.md).  Killed,
# the connections it held are closed with it: their clients see EOF, as for a
# keep-alive timeout, and reconnect (RFC 9112 9.3.1: a client must be ready
# for a kept-alive connection to close).  The master starts a new holder,
# which the workers hand their idle connections to from then on.
subtest 'SIGKILL of the connection holder' => sub {
    my $server = start_server(app => fault_app(gate()), options => ['--workers', 1]);
    started_worker($server);
    my $holder = sub {
        (grep { is_connection_holder($_) } Serow::Test::all_child_pids($server->pid))[0];
    };
    my $held_fds = sub {
        my ($pid) = @_;
        opendir(my $dh, "/proc/$pid/fd") or return 0;
        return scalar grep { readlink("/proc/$pid/fd/$_") // '' } grep { /^\d+$/ } readdir $dh;
    };
    # An idle kept-alive connection moves to the holder after IDLE_HANDOFF_MS.
    my $idle_with_holder = sub {
        my ($pid) = @_;
        my $before = $held_fds->($pid);
        my $sock = raw_connect($server);
        syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        my $res = read_response($sock);
        return undef unless $res && $res->{status} == 200;
        return wait_until(sub { $held_fds->($pid) > $before }) ? $sock : undef;
    };
    my $old = wait_until($holder) or return fail 'no connection holder';
    my $idle = $idle_with_holder->($old);
    ok $idle, "an idle keep-alive connection is with the holder ($old)" or return diag $server->log;

    kill 'KILL', $old;
    ok $server->wait_for_log(qr/the connection holder $old exited with status 9; starting a new one/),
        'the master notices';
    my ($raw, $closed) = read_until_close($idle);
    ok $closed, 'the idle connection it held is closed';
    is $raw, '', '  without a byte';
    my $new = wait_until(sub { my $p = $holder->(); $p && $p != $old ? $p : 0 });
    ok $new, "a new holder runs ($new)";
    is http_get($server, '/')->{status}, 200, 'new connections are served';
    my $idle2 = $idle_with_holder->($new);
    ok $idle2, 'an idle connection moves to the new holder';
    syswrite $idle2, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n" if $idle2;
    my $res = $idle2 && read_response($idle2);
    is $res && $res->{body}, "pid " . (Serow::Test::child_pids($server->pid))[0],
        'and its next request is passed on to the worker and answered';
    is $server->stop, 0;
};

done_testing;
