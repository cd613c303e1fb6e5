# slowhttptest (Debian) in slowloris (-H) and slow-body (-B) modes against
# four workers while normal clients run: every normal request is answered, the
# server's timeouts close every slow connection (slowhttptest ends early with
# "No open connections left"; it would hold them for --length seconds), and
# the server's open sockets come back down afterwards.  The short form of
# bench/slow-clients (1,000 connections, wrk's latency).
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server hammer wait_until need_debian_packages);

need_debian_packages('slowhttptest');

my $CONNECTIONS = 250;
my $TEST_LENGTH = 120; # slowhttptest's own bound; the timeouts end it long before

my $server = start_server(app => sub { [200, ['Content-Type' => 'text/plain'], ['ok']] },
    options => ['--workers', 4, '--header-timeout', 2, '--read-timeout', 2]);

# Sockets the master and its children (workers, connection holder) have
# open: client connections, and the server's own listen socket and channels.
# Sockets only: the holder opens a pidfd for a worker when it first takes
# connections from it, and keeps it.
sub open_sockets {
    my $n = 0;
    for my $pid ($server->pid, Serow::Test::all_child_pids($server->pid)) {
        opendir(my $dh, "/proc/$pid/fd") or next;
        $n += grep { (readlink("/proc/$pid/fd/$_") // '') =~ /^socket:/ } grep { /^\d+$/ } readdir $dh;
    }
    return $n;
}

# What each process has open, for a failure's diagnostics.
sub fd_list {
    my $out = '';
    for my $pid ($server->pid, Serow::Test::all_child_pids($server->pid)) {
        opendir(my $dh, "/proc/$pid/fd") or next;
        $out .= "$pid: " . join(' ', map { readlink("/proc/$pid/fd/$_") // '?' } grep { /^\d+$/ } readdir $dh) . "\n";
    }
    return $out;
}

# The baseline: every worker started (each opens its epoll and eventfd), no
# client connected.
is scalar($server->wait_for_log_all(qr/worker \d+ started/, 4)), 4, 'four workers started'
    or diag $server->log;
is Serow::Test::http_get($server, '/')->{status}, 200, 'the server answers';
my $sockets_before = wait_until(sub { my $n = open_sockets(); $n == open_sockets() ? $n : 0 });

my $normal = hammer($server, clients => 2, expect => qr/\Aok\z/);
ok $normal->wait_running, 'normal clients are served' or diag $server->log;

for my $mode (['-H', 'slowloris'], ['-B', 'slow body']) {
    my ($flag, $name) = @$mode;
    subtest "$name, $CONNECTIONS connections" => sub {
        my $dir = File::Temp->newdir;
        my $out = `slowhttptest $flag -c $CONNECTIONS -r $CONNECTIONS -i 5 -l $TEST_LENGTH -p 10 -g -o $dir/stats -u @{[ $server->url ]}/ 2>&1`;
        $out =~ s/\e\[[0-9;]*m//g;
        like $out, qr/Exit status: No open connections left/,
            'the server closed every slow connection before slowhttptest gave up'
            or diag $out;
        open my $csv, '<', "$dir/stats.csv" or return fail "no statistics: $!";
        # Seconds,Closed,Pending,Connected,...: connected, or closed after connecting
        my $max_reached = 0;
        while (<$csv>) {
            my (undef, $closed, undef, $connected) = split /,/;
            next unless "$closed$connected" =~ /^\d+$/;
            $max_reached = $closed + $connected if $closed + $connected > $max_reached;
        }
        is $max_reached, $CONNECTIONS, 'all of them had connected (none failed to)';
    };
}

my $result = $normal->stop;
is $result->{failed}, 0, "every normal request was answered ($result->{ok} of them)"
    or diag explain $result->{errors};
ok $result->{ok} > 0, 'there were some';
ok wait_until(sub { open_sockets() <= $sockets_before }),
    "the server's open sockets came back down (to $sockets_before)"
    or diag 'now ' . open_sockets() . "\n" . fd_list();
is $server->stop, 0, 'the server stops cleanly';
done_testing;
