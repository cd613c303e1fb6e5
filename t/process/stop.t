use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use File::Temp ();
use Socket qw(AF_INET AF_UNIX SOCK_STREAM inet_aton pack_sockaddr_in pack_sockaddr_un);
use Time::HiRes ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get gate gated_app wait_until process_alive);

# TERM, INT and QUIT stop the server gracefully: no more accepting (the
# sockets Serow opened refuse new connections at once), the requests in
# flight are finished (a stop signal does not cut short what the app is
# doing), then the master exits 0.

my $gate = gate();
my $gated = gated_app($gate);
# /sleep: sleeps SLEEP_SECONDS and says how long it slept (a monotonic clock).
use constant SLEEP_SECONDS => 2;
my $app = sub {
    my ($env) = @_;
    return $gated->($env) unless $env->{PATH_INFO} eq '/sleep';
    my $start = Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC());
    print STDERR "sleeping in worker $$\n";
    Time::HiRes::sleep(SLEEP_SECONDS);
    my $slept = Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) - $start;
    return [200, ['Content-Type' => 'text/plain'], ["slept $slept"]];
};

# Whether a connect to $target ({ port } or { path }) is refused now.
sub connect_refused {
    my ($target) = @_;
    my ($family, $address) = $target->{path} ? (AF_UNIX, pack_sockaddr_un($target->{path}))
        : (AF_INET, pack_sockaddr_in($target->{port}, inet_aton('127.0.0.1')));
    socket(my $sock, $family, SOCK_STREAM, 0) or die "socket: $!";
    return connect($sock, $address) ? 0 : $!{ECONNREFUSED} ? 1 : 0;
}

# Starts a request that stays in the app until the gate opens; returns the
# socket and the pid of the worker holding it.
sub start_slow_request {
    my ($server, $target) = @_;
    my $sock = raw_connect($target // $server);
    syswrite $sock, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    my $line = $server->wait_for_log(qr/slow request in worker (\d+)\n/) or return;
    my ($pid) = $line =~ /(\d+)/;
    return ($sock, $pid);
}

for my $sig (qw(TERM INT QUIT)) {
    subtest "SIG$sig: the request in flight completes, then the server exits 0" => sub {
        my $server = start_server(app => $app, options => ['--workers', 2]);
        my ($sock, $worker) = start_slow_request($server);
        ok $worker, 'a slow request is in the app' or return diag $server->log;
        $server->signal($sig);
        ok $server->wait_for_log(qr/received SIG$sig: finishing in-flight requests/), 'the master says it stops';
        # This socket is the test's, handed over as Server::Starter does: it
        # outlives the server, and stays open.
        ok !connect_refused($server), 'a socket Serow was handed is not closed';
        $gate->open;
        my $res = read_response($sock);
        is $res && $res->{status}, 200, 'the slow request is answered with 200';
        is $res && $res->{body}, "slow request done by $worker", 'in full';
        is $res && $res->{headers}{connection}, 'close', 'and the connection is closed after it';
        # The master asks its workers to stop (shared memory, no signal),
        # whichever signal it got; the worker takes the request once its
        # request is answered.
        ok $server->wait_for_log(qr/worker $worker stopping \(asked by the master\)/),
            'the worker was asked to stop';
        is $server->wait_exit, 0, 'the master exits 0';
        like $server->log, qr/\] stopped\n/, 'after saying so';
        unlike $server->log, qr/did not finish/, 'no worker had to be killed';
    };
}

for my $kind (qw(tcp unix)) {
    subtest "after the signal, a socket Serow opened ($kind) refuses new connections at once" => sub {
        my $dir = File::Temp->newdir;
        my $target = $kind eq 'tcp' ? { port => empty_port() } : { path => "$dir/serow.sock" };
        my $server = start_server(app => $app, listen => 'none',
            options => ['--listen', $target->{path} // "127.0.0.1:$target->{port}", '--workers', 2]);
        ok $server->wait_for_log(qr/listening on/), 'the server listens' or return diag $server->log;
        is http_get($target, '/')->{status}, 200, 'it serves';
        my ($sock, $worker) = start_slow_request($server, $target);
        ok $worker, 'a slow request is in the app' or return diag $server->log;
        $server->signal('TERM');
        # (A poll: the master takes the signal when it next runs.)
        ok wait_until(sub { connect_refused($target) }), 'a new connection is refused'
            or diag $server->log;
        ok process_alive($server->pid), 'while the master still runs';
        $gate->open;
        my $res = read_response($sock);
        is $res && $res->{status}, 200, 'the request in flight is answered';
        is $server->wait_exit, 0, 'the master exits 0';
        unlike $server->log, qr/did not finish/, 'no worker had to be killed';
    };
}

for my $to ('the master', 'the whole process group') {
    subtest "TERM to $to does not cut short the app's sleep" => sub {
        my $server = start_server(app => $app, options => ['--workers', 2]);
        my $sock = raw_connect($server);
        syswrite $sock, "GET /sleep HTTP/1.1\r\nHost: x\r\n\r\n";
        ok $server->wait_for_log(qr/sleeping in worker \d+/), 'the app sleeps' or return diag $server->log;
        kill 'TERM', $to eq 'the master' ? $server->pid : -$server->pid;
        my $res = read_response($sock);
        is $res && $res->{status}, 200, 'answered with 200';
        my ($slept) = ($res && $res->{body} // '') =~ /slept ([\d.]+)/;
        cmp_ok $slept // 0, '>=', SLEEP_SECONDS, 'after sleeping for as long as it asked';
        is $server->wait_exit, 0, 'the master exits 0';
    };
}

subtest "the master's signals sent to a worker itself are ignored" => sub {
    # The master tells its workers through the shared memory; a worker
    # ignores these, so that one sent to the whole process group does not cut
    # short what the app is doing.
    my $server = start_server(app => $app, options => ['--workers', 1]);
    my ($worker) = ((http_get($server, '/') // {})->{body} // '') =~ /pid (\d+)/;
    ok $worker, 'a worker answers' or return diag $server->log;
    # (An ignored signal is dropped when it is sent: nothing to wait for.)
    kill $_, $worker for qw(TERM INT QUIT HUP USR1);
    ok process_alive($worker), 'it lives on';
    is http_get($server, '/')->{body}, "pid $worker", 'and answers the next request';
    unlike $server->log, qr/worker $worker stopping/, 'without stopping';
    is $server->stop, 0, 'the server stops';
};

subtest 'a signal right after start is not lost by a worker still starting' => sub {
    # A TERM that reached a worker just before it went to sleep in epoll used
    # to wait for --graceful-timeout; each round here would then take 20s
    # and log a kill.
    for my $round (1 .. 10) {
        my $server = start_server(app => $app, options => ['--workers', 2, '--graceful-timeout', 20]);
        $server->wait_for_log(qr/listening on/);
        $server->signal('TERM');
        my $status = $server->wait_exit;
        unless (is $status, 0, "round $round: exit 0" and unlike $server->log, qr/did not finish/, "round $round: no worker killed") {
            diag $server->log;
            last;
        }
    }
};

subtest 'HUP and TTIN during the shutdown start no new workers' => sub {
    my $server = start_server(app => $app, options => ['--workers', 2]);
    my ($sock, $worker) = start_slow_request($server);
    ok $worker or return diag $server->log;
    $server->signal('TERM');
    ok $server->wait_for_log(qr/received SIGTERM/);
    $server->signal('HUP');
    $server->signal('TTIN');
    # The master handles signals in order; a QUIT after these shows they were seen.
    $server->signal('QUIT');
    $gate->open;
    is read_response($sock)->{status}, 200, 'the request in flight is answered';
    is $server->wait_exit, 0, 'the master exits 0 (a worker started by the HUP would keep it running)';
    my @started = $server->log =~ /worker (\d+) started/g;
    is scalar(@started), 2, 'no worker was started but the first two';
};

subtest 'workers leave when their master is killed' => sub {
    my $server = start_server(app => $app, options => ['--workers', 3]);
    $server->wait_for_log(qr/worker \d+ started/) for 1 .. 3;
    my @workers = $server->log =~ /worker (\d+) started/g;
    is scalar(@workers), 3, 'three workers';
    is http_get($server, '/')->{status}, 200;
    kill 'KILL', $server->pid;
    ok defined $server->wait_exit, 'the master is gone';
    ok wait_until(sub { !grep { process_alive($_) } @workers }, 30), 'so are its workers'
        or diag "still running: @{[ grep { process_alive($_) } @workers ]}";
    # The kernel's parent-death signal (USR2: a worker ignores TERM).
    is scalar(() = $server->log =~ /worker \d+ stopping \(its master is gone\)/g), 3,
        'each stopped on its own, as its master was gone';
};

subtest 'a USR2 (the workers\' parent-death signal) does not kill the master' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1]);
    ok $server->wait_for_log(qr/worker \d+ started/), 'the server has started';
    $server->signal('USR2');
    # A TTIN after it: once its worker started, the master has handled both.
    $server->signal('TTIN');
    ok $server->wait_for_log(qr/received SIGTTIN/), 'the master handles the next signal';
    ok process_alive($server->pid), 'the master lives';
    is http_get($server, '/')->{status}, 200, 'and serves';
    is $server->stop, 0, 'and stops cleanly';
};

done_testing;
