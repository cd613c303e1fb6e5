use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get gate gated_app wait_until process_alive);

# TERM, INT and QUIT stop the server gracefully: no more accepting, the
# requests in flight are finished, then the master exits 0.

my $gate = gate();
my $app = gated_app($gate);

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
        # The master passes TERM on to its workers whichever signal it got.
        ok $server->wait_for_log(qr/worker $worker stopping \(SIGTERM\)/),
            'the worker holding the request got the signal';
        $gate->open;
        my $res = read_response($sock);
        is $res && $res->{status}, 200, 'the slow request is answered with 200';
        is $res && $res->{body}, "slow request done by $worker", 'in full';
        is $res && $res->{headers}{connection}, 'close', 'and the connection is closed after it';
        is $server->wait_exit, 0, 'the master exits 0';
        like $server->log, qr/\] stopped\n/, 'after saying so';
        unlike $server->log, qr/did not finish/, 'no worker had to be killed';
    };
}

subtest 'after the signal, new connections are no longer served' => sub {
    my $port = empty_port();
    my $server = start_server(app => $app, listen => 'none',
        options => ['--listen', "127.0.0.1:$port", '--workers', 2]);
    ok wait_port({ port => $port, max_wait => 30 }), 'the server listens' or return diag $server->log;
    is http_get({ port => $port }, '/')->{status}, 200, 'it serves';
    my ($sock, $worker) = start_slow_request($server, { port => $port });
    ok $worker, 'a slow request is in the app' or return diag $server->log;
    $server->signal('TERM');
    # Each worker says when it stops accepting.
    ok $server->wait_for_log(qr/worker \d+ stopping/), "worker $_ of 2 stopped accepting" for 1 .. 2;
    my $late = raw_connect({ port => $port });
    syswrite $late, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n";
    $gate->open;
    is read_response($sock)->{status}, 200, 'the request in flight is answered';
    is $server->wait_exit, 0, 'the master exits 0';
    my $res = read_response($late);
    ok !$res, 'the connection made after the signal got no response';
    ok !IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port), 'and the port is closed';
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
    ok $server->wait_for_log(qr/worker $worker stopping/);
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
};

done_testing;
