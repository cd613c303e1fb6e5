use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get);

# --max-requests N: a worker is replaced after it has served its own limit,
# drawn between 75% and 100% of N so that workers do not restart together.
# Requests on a kept-alive connection count one by one.

my $app = sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/plain'], ["pid $$ rand " . rand()]];
};

# Worker pid => its limit, from the master's 'worker PID started (max requests L)' lines.
sub worker_limits {
    my ($server, $n) = @_;
    my %limits;
    for (1 .. $n) {
        my $line = $server->wait_for_log(qr/worker \d+ started \(max requests \d+\)/) or last;
        my ($pid, $limit) = $line =~ /worker (\d+) started \(max requests (\d+)\)/;
        $limits{$pid} = $limit;
    }
    return %limits;
}

subtest 'requests on one kept-alive connection count; the connection outlives the worker' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--max-requests', 8]);
    my %limits = worker_limits($server, 1);
    my ($first, $limit) = %limits;
    ok $limit >= 6 && $limit <= 8, "the worker's limit, $limit, is within 75%..100% of 8";
    my $sock = raw_connect($server);
    my (@pids, @closing);
    for my $i (1 .. 20) {
        syswrite $sock, "GET /$i HTTP/1.1\r\nHost: x\r\n\r\n" or last;
        my $res = read_response($sock) or last;
        push @pids, $res->{body} =~ /^pid (\d+)/;
        push @closing, $i if ($res->{headers}{connection} // '') eq 'close';
    }
    is scalar(@pids), 20, 'all 20 requests answered on the one connection';
    is_deeply [@pids[0 .. $limit - 1]], [($first) x $limit], "the first $limit by the first worker";
    ok !grep({ $_ == $first } @pids[$limit .. $#pids]), 'the rest by others: the worker left after its limit';
    is_deeply \@closing, [], 'the worker handed the connection over instead of closing it';
    ok $server->wait_for_log(qr/worker $first stopping \(served its $limit requests \(--max-requests\)\)/),
        'the worker says why it stops';
    ok $server->wait_for_log(qr/worker $first exited with status 0; starting a new one/), 'and exits';
    is $server->stop, 0;
};

subtest 'workers keep being recycled, each after its own limit' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--max-requests', 4]);
    my %served;
    my %limits = worker_limits($server, 1);
    for (1 .. 30) {
        my $res = http_get($server, '/');
        my ($pid) = ($res->{body} // '') =~ /^pid (\d+)/ or fail "request $_: no answer";
        $served{$pid}++;
    }
    %limits = (%limits, worker_limits($server, scalar(keys %served) - 1));
    cmp_ok scalar(keys %served), '>=', 30 / 4, 'at least 30/4 workers served the 30 requests';
    for my $pid (sort keys %served) {
        ok $limits{$pid}, "worker $pid was logged with its limit" or next;
        cmp_ok $served{$pid}, '<=', $limits{$pid}, "worker $pid served no more than its limit";
    }
    is $server->stop, 0;
};

subtest 'limits differ from worker to worker, so restarts are spread' => sub {
    my $server = start_server(app => $app, options => ['--workers', 6, '--max-requests', 1000]);
    my %limits = worker_limits($server, 6);
    is scalar(keys %limits), 6, 'six workers with a limit each';
    my @limits = sort { $a <=> $b } values %limits;
    ok !grep({ $_ < 750 || $_ > 1000 } @limits), "all within 750..1000: @limits";
    # Six draws out of 250 values: all equal only once in 250**5.
    cmp_ok scalar(keys %{{ map { $_ => 1 } @limits }}), '>', 1, 'not all the same';
    is $server->stop, 0;
};

done_testing;
