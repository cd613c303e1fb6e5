use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until child_pids process_alive generation_pids);

# The app is loaded once, by the generation process (not the master),
# before it forks the workers; --workers N forks N workers, which are the
# master's children, and a worker that dies is replaced.

sub started_workers {
    my ($server, $n) = @_;
    my @pids;
    for (1 .. $n) {
        my $line = $server->wait_for_log(qr/worker (\d+) started/) or last;
        push @pids, $line =~ /(\d+)/;
    }
    return @pids;
}

subtest 'the app is loaded by the generation process, once; --workers 4 forks four workers' => sub {
    my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--workers', 4]);
    my @workers = started_workers($server, 4);
    is scalar(@workers), 4, 'four workers started' or return diag $server->log;
    my @loads = $server->log =~ /test app loaded in pid (\d+)/g;
    my @generations = generation_pids($server->pid);
    is scalar(@generations), 1, 'the master has one generation process';
    is_deeply \@loads, \@generations, 'the app was loaded once, by the generation process';
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } @workers], 'the master has exactly these four children';
    for (1 .. 8) {
        my $res = http_get($server, '/');
        my ($pid, $loaded_in) = ($res->{body} // '') =~ /^pid (\d+) loaded-in (\d+)/
            or fail "request $_: $res->{status} $res->{body}";
        ok +(grep { $_ == $pid } @workers), "request $_ is answered by a worker ($pid)";
        is $loaded_in, $generations[0], '  with the app the generation loaded';
    }
    is $server->stop, 0;
    ok !grep({ process_alive($_) } @workers), 'no worker is left after the stop';
};

subtest 'a worker killed with SIGKILL is replaced' => sub {
    my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--workers', 2]);
    my @workers = started_workers($server, 2);
    is scalar(@workers), 2 or return diag $server->log;
    kill 'KILL', $workers[0];
    ok $server->wait_for_log(qr/\[error\] .*worker $workers[0] was killed by signal 9; starting a new one/),
        'the master notices, as an error';
    my ($new) = started_workers($server, 1);
    ok $new, "a new worker $new started" or return diag $server->log;
    ok !grep({ $_ == $new } @workers), 'with a new pid';
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } $workers[1], $new], 'two workers again';
    like http_get($server, '/')->{body}, qr/^pid (?:$workers[1]|$new) /, 'and they serve';
    is $server->stop, 0;
};

subtest 'a worker that leaves on its own (psgix.harakiri) is replaced' => sub {
    my $server = start_server(app => sub {
        my ($env) = @_;
        $env->{'psgix.harakiri.commit'} = 1 if $env->{PATH_INFO} eq '/harakiri';
        return [200, [], ["pid $$"]];
    }, options => ['--workers', 1]);
    my ($first) = started_workers($server, 1);
    my $res = http_get($server, '/harakiri');
    is $res->{body}, "pid $first", 'answered by the first worker';
    ok $server->wait_for_log(qr/\[info\] .*worker $first exited with status 0; starting a new one/),
        'which then exits 0 (not an error)';
    my ($second) = started_workers($server, 1);
    ok $second && $second != $first, 'a new worker takes its place';
    is http_get($server, '/')->{body}, "pid $second", 'and serves';
    is $server->stop, 0;
};

subtest 'a worker that dies on every request keeps being replaced' => sub {
    # Replacements of workers that die young are throttled, not given up on.
    my $server = start_server(app => sub { POSIX::_exit(3) }, options => ['--workers', 1]);
    my ($first) = started_workers($server, 1);
    for (1 .. 3) {
        ok !http_get($server, '/'), "request $_ gets no answer";
        ok $server->wait_for_log(qr/worker \d+ exited with status 3; starting a new one/), "death $_ is logged";
        ok started_workers($server, 1), 'and a new worker starts';
    }
    is $server->stop, 0, 'the master itself stays up and stops cleanly';
};

subtest 'each worker has its own rand() sequence, even when the master used rand()' => sub {
    # The app draws a number when it is loaded, in the master, and each
    # worker leaves after one request (psgix.harakiri); a worker that did not
    # reseed would repeat the same numbers as every sibling.
    my $server = start_server(app_file => 't/apps/rand.psgi', options => ['--workers', 1]);
    my (%pids, %draws);
    for (1 .. 5) {
        my $res = http_get($server, '/');
        my ($pid, $draw) = ($res->{body} // '') =~ /^pid (\d+) rand (\S+)/ or fail "no answer";
        $pids{$pid}++;
        $draws{$draw}++;
    }
    is scalar(keys %pids), 5, 'five requests, five workers';
    is scalar(keys %draws), 5, 'five different first draws';
    is $server->stop, 0;
};

done_testing;
