use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response wait_until);

# A worker computing a long request (running, not sleeping) loses its parked
# connections to a free worker: a request on one of them is answered by the
# other worker while the first still computes.  (A worker that only waits
# for a CPU keeps them: moving them would buy nothing; see
# docs/keepalive.md.)  The long request spins until the test opens a gate.

# Placing connections on chosen workers needs them to stay put: on one CPU,
# workers gather each other's parked connections (t/keepalive/gathering.t).
sub usable_cpus {
    open(my $fh, '<', '/proc/self/status') or return 0;
    my ($list) = map { /^Cpus_allowed_list:\s*(\S+)/ ? $1 : () } <$fh>;
    return 0 unless defined $list;
    my $n = 0;
    for (split /,/, $list) { my ($a, $b) = split /-/; $n += defined $b ? $b - $a + 1 : 1 }
    return $n;
}
plan skip_all => 'needs two CPUs (on one, workers gather connections)' if usable_cpus() < 2;

my $gate = Serow::Test::gate();
my $hold = Serow::Test::gate();
my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/spin') {
        print STDERR "spin request in worker $$\n";
        my $bits = '';
        vec($bits, $gate->fd, 1) = 1;
        until (select(my $ready = $bits, undef, undef, 0)) {
            my $x = 0;
            $x += $_ for 1 .. 10_000;
        }
        $gate->wait;
    } elsif ($env->{PATH_INFO} eq '/hold') {
        print STDERR "held request in worker $$\n";
        $hold->wait;
    }
    return [200, ['Content-Type' => 'text/plain'], [$$]];
};
my $server = start_server(app => $app, options => ['--workers', 2]);

sub ask { syswrite $_[0], "GET $_[1] HTTP/1.1\r\nHost: x\r\n\r\n" }

sub get {
    my ($sock, $path) = @_;
    ask($sock, $path // '/');
    my $res = read_response($sock) or BAIL_OUT('no response');
    return $res->{body};
}

# Two connections on worker X: the second is made while the other worker is
# held in a request (a new connection goes to a free worker).
my $first = raw_connect($server);
my $pid_x = get($first);
ask($first, '/hold');
my ($held) = $server->wait_for_log_all(qr/held request in worker (\d+)/, 1);
is $held, $pid_x, 'worker X held';
my $other = raw_connect($server);
my $pid_y = get($other);
isnt $pid_y, $pid_x, 'a connection on worker Y';
$hold->open(1);
read_response($first) or BAIL_OUT('no answer to /hold');

ask($other, '/hold');
($held) = $server->wait_for_log_all(qr/held request in worker (\d+)/, 1);
is $held, $pid_y, 'worker Y held';
my $parked = raw_connect($server);
is get($parked), $pid_x, 'a second connection on worker X';
$hold->open(1);
read_response($other) or BAIL_OUT('no answer to /hold');

# X computes; Y is free; a request comes on X's parked connection.
ask($first, '/spin');
my ($spinning) = $server->wait_for_log_all(qr/spin request in worker (\d+)/, 1);
is $spinning, $pid_x, 'worker X computes';
ask($parked, '/');
my $res = read_response($parked, timeout => 60);
is $res && $res->{body}, $pid_y, 'the request on its parked connection is answered by worker Y';

$gate->open(1);
my $spun = read_response($first);
is $spun && $spun->{body}, $pid_x, 'the long request ends when the gate opens';
is $server->stop, 0, 'clean stop';
done_testing;
