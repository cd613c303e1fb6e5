use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use POSIX ();
use Serow::Test qw(start_server raw_connect read_response wait_until);

# The holder takes idle connections from a worker stuck in a slow request
# only when another worker is free to answer them (on a saturated core the
# "stuck" worker is usually just waiting for its turn, and moving its
# connections would only cost).  Here both workers are stuck, a request
# arrives on an idle connection of the first, and it must be answered by the
# second as soon as that one is done, while the first is still stuck.
# Slow requests block on FIFOs until the test lets them go: no timing.

my $dir = File::Temp->newdir;
for my $name (qw(release_a release_b)) {
    POSIX::mkfifo("$dir/$name", 0600) or die "mkfifo: $!";
}

my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} =~ m{\A/block/(\w+)\z}) {
        my $fifo = "$dir/release_$1";
        open(my $log, '>>', "$dir/entered") or die "open: $!";
        syswrite $log, "$1 $$\n";
        close $log;
        open(my $fh, '<', $fifo) or die "open $fifo: $!";
        my $line = <$fh>;
    }
    return [200, ['Content-Type' => 'text/plain'], [$$]];
};
my $server = start_server(app => $app, options => ['--workers', 2]);

sub ask {
    my ($sock, $path) = @_;
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
}

sub entered {
    open(my $fh, '<', "$dir/entered") or return {};
    return { map { split ' ' } <$fh> };
}

sub release {
    my ($name) = @_;
    open(my $fh, '>', "$dir/release_$name") or die "open: $!";
    print {$fh} "go\n";
    close $fh;
}

sub get {
    my ($sock) = @_;
    ask($sock, '/');
    my $res = read_response($sock) or BAIL_OUT('no response');
    return $res->{body};
}

# A new connection goes to whichever worker is waiting (the kernel tends to
# wake the same one), so each worker is placed by keeping the other busy.
# First worker B gets a connection while A is held in a slow request.
my $first = raw_connect($server);
my $pid_a = get($first);
ask($first, '/block/a');
ok wait_until(sub { entered()->{a} }), 'first worker stuck';
my $stuck_b = raw_connect($server);
my $pid_b = get($stuck_b);
isnt $pid_b, $pid_a, 'a new connection went to the other worker';
release('a');
read_response($first) or BAIL_OUT('no response to the first slow request');
unlink "$dir/entered";

# B stuck first; then two new connections on A (the only free worker), and A
# stuck in one of them: no worker was free when A became busy.  (Where the
# two workers share one CPU, either may have gathered the other's parked
# connection meanwhile (docs/keepalive.md): B is whichever is stuck now.)
ask($stuck_b, '/block/b');
ok wait_until(sub { entered()->{b} }), 'the second worker is stuck';
($pid_a, $pid_b) = (entered()->{b} eq $pid_b ? $pid_a : $pid_b, entered()->{b});
my ($stuck_a, $idle_a) = (raw_connect($server), raw_connect($server));
is get($stuck_a), $pid_a, 'a new connection on the first worker';
is get($idle_a), $pid_a, 'another one';
ask($stuck_a, '/block/a');
ok wait_until(sub { entered()->{a} }), 'now the first worker is stuck too';

ask($idle_a, '/');
release('b');
my $slow_b = read_response($stuck_b);
is $slow_b && $slow_b->{body}, $pid_b, 'the second worker finished its slow request';
my $res = read_response($idle_a, timeout => 30);
ok $res, 'the request on the stuck worker\'s idle connection is answered';
is $res && $res->{body}, $pid_b, '... by the worker that became free, while the first is still stuck';

release('a');
my $slow_a = read_response($stuck_a);
is $slow_a && $slow_a->{status}, 200, 'the first slow request completes once released';

is $server->stop, 0, 'clean stop';
done_testing;
