use strict;
use warnings;
use Test::More;
use POSIX ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect raw_request read_response parse_response wait_until);

# A connection the app keeps through psgix.io (a WebSocket, say) is the
# app's: the worker lets go of its own descriptor.  The socket lives on in the
# app's copy, and epoll drops a descriptor only with a socket's last copy, so
# the worker must take it out of epoll itself.  Otherwise, once the client
# sends something the app has not read yet, epoll reports it for ever under
# the worker's old number: the worker spins, and the connection that got that
# number next is woken for nothing, claimed back from being parked, and never
# handed to the holder.

my ($kept, $kept_number);

# The other descriptor of this process on the socket of $fh: the worker's.
sub worker_number_of {
    my ($fh) = @_;
    my $inode = (stat $fh)[1];
    opendir(my $dh, '/proc/self/fd') or die "/proc/self/fd: $!";
    for my $n (sort { $a <=> $b } grep { /\A\d+\z/ } readdir $dh) {
        next if $n == fileno $fh;
        my $other = (stat "/proc/self/fd/$n")[1];
        return $n if defined $other && $other == $inode;
    }
    return undef;
}

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my @type = ('Content-Type' => 'text/plain');
    if ($path eq '/keep') {
        $kept = $env->{'psgix.io'};
        $kept_number = worker_number_of($kept);
        return [200, [@type], [defined $kept_number ? 'kept' : 'kept, but the worker had no descriptor of its own']];
    }
    if ($path eq '/number') {
        # whether the number the worker had for the kept connection is now
        # another socket's (this one's): the case that matters here
        my $now = (stat "/proc/self/fd/$kept_number")[1];
        return [200, [@type], [defined $now && $now != (stat $kept)[1] ? 'reused' : 'not reused']];
    }
    if ($path eq '/held') {
        my $status = $env->{'serow.status'}->();
        return [200, [@type], [$status->{held_by_holder}]];
    }
    return [200, [@type], ['hello']];
};

my $server = start_server(app => $app, options => ['--workers', 1]);
my ($worker) = $server->wait_for_log_all(qr/worker (\d+) started/, 1);
ok $worker, 'one worker' or BAIL_OUT('the worker did not start: ' . $server->log);

my $keeper = raw_connect($server);
syswrite $keeper, "GET /keep HTTP/1.1\r\nHost: x\r\n\r\n";
is((read_response($keeper) || {})->{body}, 'kept', 'the app kept the connection, the worker had a descriptor of its own');

my $next = raw_connect($server);
syswrite $next, "GET /number HTTP/1.1\r\nHost: x\r\n\r\n";
is((read_response($next) || {})->{body}, 'reused',
    'the next connection got the number the worker had for the kept one');

# Unread input on the kept socket: level-triggered epoll would report it on
# every wait for as long as the app does not read it.
syswrite $keeper, "ping\n";
my $cpu_before = cpu_ticks($worker);

# The next connection is parked; idle for longer than the hand-off time
# (500 ms), the holder takes it.  Asked on connections of their own, closed.
sub held {
    my ($res) = parse_response(raw_request($server, "GET /held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    return $res ? $res->{body} : -1;
}
ok wait_until(sub { held() == 1 }, 30), 'the parked connection was handed to the holder';

# A spinning worker uses a CPU for as long as that took (half a second and
# more); a waiting one, the few status requests.
my $ticks = cpu_ticks($worker) - $cpu_before;
my $hz = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
cmp_ok $ticks, '<', $hz / 4, "the worker waited instead of spinning ($ticks ticks of CPU)";

syswrite $next, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
is((read_response($next) || {})->{body}, 'hello', 'the handed-over connection is answered');

close $keeper;
close $next;
done_testing;

# user + system CPU time of a process, in clock ticks
sub cpu_ticks {
    my @f = Serow::Test::proc_stat_fields($_[0]);
    return @f ? $f[11] + $f[12] : 0;
}
