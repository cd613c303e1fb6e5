use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server http_get child_pids wait_until);

# TTIN adds a worker, TTOU removes one (never the last).

my $app = sub { [200, ['Content-Type' => 'text/plain'], ["pid $$"]] };

sub started_worker {
    my ($server) = @_;
    my $line = $server->wait_for_log(qr/worker (\d+) started/) or return;
    return ($line =~ /(\d+)/)[0];
}

subtest 'TTIN adds a worker, TTOU removes the newest' => sub {
    my $server = start_server(app => $app, options => ['--workers', 2]);
    my @workers = grep { defined } map { started_worker($server) } 1 .. 2;
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } @workers], 'two workers';

    $server->signal('TTIN');
    ok $server->wait_for_log(qr/received SIGTTIN: 3 workers/), 'TTIN: the master now wants three';
    my $third = started_worker($server);
    ok $third, "a third worker started ($third)";
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } @workers, $third], 'three workers';

    $server->signal('TTIN');
    ok $server->wait_for_log(qr/received SIGTTIN: 4 workers/);
    my $fourth = started_worker($server);
    is scalar(child_pids($server->pid)), 4, 'four workers';

    $server->signal('TTOU');
    ok $server->wait_for_log(qr/received SIGTTOU: 3 workers/), 'TTOU: the master now wants three';
    ok $server->wait_for_log(qr/worker $fourth stopping \(asked by the master\)/), 'the newest worker stops';
    ok $server->wait_for_log(qr/worker $fourth exited with status 0/), 'and leaves';
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } @workers, $third], 'three workers again';

    $server->signal('TTOU');
    ok $server->wait_for_log(qr/worker $third exited with status 0/), 'a second TTOU removes another';
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } @workers], 'two workers';
    is http_get($server, '/')->{status}, 200, 'they serve';
    is $server->stop, 0;
    unlike $server->log, qr/\[error\]/, 'nothing went wrong on the way';
};

subtest 'TTOU never removes the last worker' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1]);
    my $only = started_worker($server);
    $server->signal('TTOU');
    ok $server->wait_for_log(qr/received SIGTTOU: 1 workers/), 'still one worker wanted';
    # A TTIN after it is handled after it: once it is, the TTOU has been too.
    $server->signal('TTIN');
    ok $server->wait_for_log(qr/received SIGTTIN: 2 workers/);
    ok started_worker($server), 'the TTIN adds one';
    unlike $server->log, qr/worker $only (?:stopping|exited)/, 'the only worker was never stopped';
    is $server->stop, 0;
};

subtest 'TTIN and TTOU sent to the whole process group do not stop the workers' => sub {
    # The default action of TTIN and TTOU is to stop (freeze) a process.
    my $server = start_server(app => $app, options => ['--workers', 2]);
    my @workers = grep { defined } map { started_worker($server) } 1 .. 2;
    kill 'TTIN', -$server->pid; # the master leads its process group
    ok $server->wait_for_log(qr/received SIGTTIN: 3 workers/), 'the master adds a worker';
    ok started_worker($server);
    kill 'TTOU', -$server->pid;
    ok $server->wait_for_log(qr/received SIGTTOU: 2 workers/), 'and removes one';
    my @stopped = grep { _state($_) eq 'T' } Serow::Test::all_child_pids($server->pid);
    is_deeply \@stopped, [], 'no worker is stopped';
    my $answered = 0;
    for (1 .. 6) {
        my $res = http_get($server, '/');
        last unless $res && $res->{status} == 200;
        $answered++;
    }
    is $answered, 6, 'and requests are answered';
    is $server->stop, 0;
};

sub _state { (Serow::Test::proc_stat_fields($_[0]))[0] // '' }

done_testing;
