use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get gate process_alive);

# --graceful-timeout: a worker that has not finished that long after it was
# asked to stop is killed, on a stop as on a HUP.

my $gate = gate();
my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/stuck') {
        print STDERR "stuck request in worker $$\n";
        $gate->wait; # opened only once the test is over
        return [200, [], ['too late']];
    }
    return [200, ['Content-Type' => 'text/plain'], ["pid $$"]];
};

sub stuck_request {
    my ($server) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n";
    my $line = $server->wait_for_log(qr/stuck request in worker \d+/) or return;
    return ($sock, ($line =~ /(\d+)/)[0]);
}

subtest 'on TERM, a worker that does not finish is killed, then the master exits 0' => sub {
    my $server = start_server(app => $app, options => ['--workers', 2, '--graceful-timeout', 1]);
    my ($sock, $stuck) = stuck_request($server);
    ok $stuck, "a request is stuck in worker $stuck" or return diag $server->log;
    $server->signal('TERM');
    ok $server->wait_for_log(qr/\[error\] .*worker $stuck did not finish within --graceful-timeout 1s: killed/),
        'the master kills the stuck worker, saying so';
    ok $server->wait_for_log(qr/worker $stuck was killed by signal 9/);
    is $server->wait_exit, 0, 'then exits 0';
    ok !process_alive($stuck), 'the stuck worker is gone';
    ok !read_response($sock), 'its client gets no response, the connection closes';
};

subtest 'on HUP, an old worker that does not finish is killed; the new ones serve' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--graceful-timeout', 1]);
    my ($sock, $stuck) = stuck_request($server);
    ok $stuck or return diag $server->log;
    my $mark = $server->log_mark;
    $server->signal('HUP');
    my ($new) = $server->wait_for_log_all(qr/worker (\d+) started/, 1, undef, $mark);
    ok $new, "a new worker started ($new)";
    is http_get($server, '/')->{body}, "pid $new", 'and serves while the old one is stuck' or diag $server->log;
    ok $server->wait_for_log(qr/worker $stuck did not finish within --graceful-timeout 1s: killed/),
        'the stuck old worker is killed';
    ok $server->wait_for_log(qr/worker $stuck was killed by signal 9/);
    is http_get($server, '/')->{body}, "pid $new", 'the new worker still serves';
    is $server->stop, 0;
};

subtest 'workers that finish in time are not killed' => sub {
    my $server = start_server(app => $app, options => ['--workers', 2, '--graceful-timeout', 60]);
    my ($sock, $worker) = stuck_request($server);
    $server->signal('TERM');
    ok $server->wait_for_log(qr/received SIGTERM/);
    $gate->open;
    is read_response($sock)->{status}, 200, 'the request in flight is answered';
    is $server->wait_exit, 0;
    unlike $server->log, qr/did not finish/, 'nobody was killed';
};

done_testing;
