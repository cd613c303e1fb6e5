use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get gate gated_app hammer child_pids);

# HUP replaces the workers gracefully: new workers start first, the old ones
# finish their requests and leave, and no request fails meanwhile.

my $gate = gate();
my $app = gated_app($gate);

sub started_workers {
    my ($server, $n, $mark) = @_;
    return $server->wait_for_log_all(qr/worker (\d+) started/, $n, undef, $mark);
}

subtest 'HUP: new workers, the request in flight finishes, no request fails' => sub {
    my $server = start_server(app => $app, options => ['--workers', 2]);
    my @old = started_workers($server, 2);
    is scalar(@old), 2, 'two workers' or return diag $server->log;

    my $slow = raw_connect($server);
    syswrite $slow, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    my ($busy) = ($server->wait_for_log(qr/slow request in worker \d+/) // '') =~ /(\d+)/;
    ok $busy, "a slow request is in flight in worker $busy" or return diag $server->log;

    my $hammer = hammer($server, clients => 2, expect => qr/^pid \d+$/);
    ok $hammer->wait_running, 'clients are sending requests';
    # What the master, the old and the new workers log from here comes in no
    # fixed order: each line is waited for from this mark.
    my $mark = $server->log_mark;
    $server->signal('HUP');
    ok $server->wait_for_log(qr/received SIGHUP: replacing workers gracefully/, undef, $mark),
        'the master restarts its workers';
    my @new = started_workers($server, 2, $mark);
    is scalar(@new), 2, 'two new workers started';
    ok !grep({ my $n = $_; grep { $_ == $n } @old } @new), 'with new pids';
    my ($idle) = grep { $_ != $busy } @old;
    ok $server->wait_for_log(qr/worker $idle exited with status 0/, undef, $mark), 'the idle old worker has left';
    $gate->open;
    my $res = read_response($slow);
    is $res && $res->{status}, 200, 'the slow request completes with 200';
    is $res && $res->{body}, "slow request done by $busy", 'answered by the old worker';
    # (Its TERM waited for the request in the app to be answered.)
    ok $server->wait_for_log(qr/worker $busy stopping/, undef, $mark), 'the busy old worker stops accepting';
    ok $server->wait_for_log(qr/worker $busy exited with status 0/, undef, $mark), 'which then leaves';
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } @new], 'only the new workers are left';

    my $result = $hammer->stop;
    cmp_ok $result->{ok}, '>', 0, "requests during the restart: $result->{ok} answered";
    is $result->{failed}, 0, 'none failed' or diag explain $result->{errors};
    my ($pid) = http_get($server, '/')->{body} =~ /^pid (\d+)/;
    ok +(grep { $_ == $pid } @new), 'a new worker answers now';
    is $server->stop, 0;
    unlike $server->log, qr/\[error\]/, 'nothing went wrong on the way';
};

subtest 'several HUPs in a row under load: no request fails' => sub {
    my $server = start_server(app => $app, options => ['--workers', 3]);
    my @workers = started_workers($server, 3);
    my $hammer = hammer($server, clients => 3, expect => qr/^pid \d+$/);
    ok $hammer->wait_running, 'clients are sending requests';
    for my $round (1 .. 4) {
        my $mark = $server->log_mark;
        $server->signal('HUP');
        ok $server->wait_for_log(qr/received SIGHUP/, undef, $mark), "HUP $round received";
        my @new = started_workers($server, 3, $mark);
        is scalar(@new), 3, "HUP $round: three new workers";
        my $old = join '|', @workers;
        my @left = $server->wait_for_log_all(qr/worker ($old) exited with status 0/, 3, undef, $mark);
        is_deeply [sort @left], [sort @workers], "HUP $round: the old workers left";
        @workers = @new;
    }
    my $result = $hammer->stop;
    cmp_ok $result->{ok}, '>', 0, "$result->{ok} requests answered";
    is $result->{failed}, 0, 'none failed' or diag explain $result->{errors};
    is $server->stop, 0;
    unlike $server->log, qr/\[error\]/, 'nothing went wrong on the way';
};

subtest 'HUP replaces workers on kept-alive connections too' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1]);
    my ($old) = started_workers($server, 1);
    my $sock = raw_connect($server);
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock)->{body}, "pid $old", 'a kept-alive connection to the old worker';
    my $mark = $server->log_mark;
    $server->signal('HUP');
    my ($new) = started_workers($server, 1, $mark);
    ok $server->wait_for_log(qr/worker $old exited with status 0/, undef, $mark),
        'the old worker closes its idle connection and leaves';
    ok !read_response($sock), 'the idle connection is closed';
    is http_get($server, '/')->{body}, "pid $new", 'a new connection meets the new worker';
    is $server->stop, 0;
};

done_testing;
