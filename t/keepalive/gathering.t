use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response wait_until);

# Workers that outnumber their CPUs take turns on them, and a connection
# whose worker waits for its turn waits with it.  So the worker holding the
# most connections takes the parked connections of the others, one gatherer
# per CPU (docs/keepalive.md, "Gathering").  Here: four keep-alive
# connections placed on four workers that share one CPU, then requests on
# them one at a time until a single worker answers all four.  With as many
# CPUs as workers, connections stay where they are.

my $root = Serow::Test::root();
system('taskset', '-c', '0', 'true') == 0 or plan skip_all => 'taskset cannot pin here';

sub start_pinned {
    my ($cpus, $workers) = @_;
    my $gate = Serow::Test::gate();
    my $server = start_server(
        command => ['taskset', '-c', $cpus, $^X, "-I$root/blib/lib", "-I$root/blib/arch",
                    "-I$root/t/lib", "$root/script/serow", '--workers', $workers,
                    '--metrics-path', '/metrics', "$root/t/apps/gated.psgi"],
        env => { SEROW_TEST_GATE => $gate->fd });
    return ($server, $gate);
}

sub get {
    my ($sock, $path) = @_;
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    my $res = read_response($sock) or BAIL_OUT("no answer to GET $path");
    return $res;
}

sub pid_of { $_[0]{body} =~ /(\d+)/ ? $1 : '' }

# One connection per worker: a new connection goes to a worker that is free,
# so each is placed while the workers before it are held in /slow.  Returns
# the connections and the pid of the worker that answered on each.
sub place_connections {
    my ($server, $gate, $n) = @_;
    my @socks;
    for my $i (1 .. $n) {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
        my @in = $server->wait_for_log_all(qr/slow request in worker (\d+)/, $i, undef, 0);
        @in == $i or BAIL_OUT("slow request $i did not start");
        push @socks, $sock;
    }
    $gate->open($n);
    my @pids = map { pid_of(read_response($_) || BAIL_OUT('no answer to /slow')) } @socks;
    return (\@socks, \@pids);
}

sub metric {
    my ($sock, $name) = @_;
    my $text = get($sock, '/metrics')->{body};
    return $text =~ /^\Q$name\E (\S+)$/m ? $1 : undef;
}

subtest 'four workers on one CPU: the connections gather in one' => sub {
    my ($server, $gate) = start_pinned('0', 4);
    my ($socks, $pids) = place_connections($server, $gate, 4);
    my @socks = @$socks;
    my %placed = map { $_ => 1 } @$pids;
    is scalar(keys %placed), 4, 'the four connections are on four workers';

    my %last;
    ok wait_until(sub {
        %last = ();
        $last{ pid_of(get($_, '/')) }++ for @socks;
        return keys(%last) == 1;
    }, 60), 'one worker answers on all four connections';
    cmp_ok metric($socks[0], 'serow_connections_gathered_total'), '>=', 3,
        'at least three connections were gathered';
    is $server->stop, 0, 'clean stop';
};

subtest 'two workers on two CPUs: each keeps its connections' => sub {
    my ($server, $gate) = start_pinned('0,1', 2);
    my ($socks, $placed) = place_connections($server, $gate, 2);
    my @socks = @$socks;
    my @pids = @$placed;
    isnt $pids[0], $pids[1], 'the two connections are on two workers';
    # Gathering looks every millisecond; this is hundreds of them.
    my $moved = 0;
    for (1 .. 200) {
        for my $i (0, 1) {
            $moved++ if pid_of(get($socks[$i], '/')) ne $pids[$i];
        }
    }
    is $moved, 0, 'every request answered by the worker that has its connection';
    is metric($socks[0], 'serow_connections_gathered_total'), 0, 'nothing gathered';
    is $server->stop, 0, 'clean stop';
};

done_testing;
