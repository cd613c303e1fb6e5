use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use IO::Socket::IP ();
use Net::EmptyPort qw(empty_port);
use Plack::Builder;
use POSIX ();
use Serow::Test qw(need_debian_packages start_server http_get wait_until);

# eg/haproxy/serow.cfg (shown in docs/deployment.md) in front of two Serow
# servers: HAProxy's health checks against Serow's status page bring both
# in, requests go to both, and when one stops the other takes every request
# (one that meets the stopped server is retried on the other: redispatch).
# The test changes only the address, the hosts and the check interval.

need_debian_packages('haproxy');

my @servers = map {
    my $name = $_;
    start_server(app => builder {
        enable 'SerowStatus', allow => ['127.0.0.1'];
        sub { [200, ['Content-Type' => 'text/plain'], ["server $name"]] };
    }, options => ['--workers', 1, '--keepalive-timeout', 30]);
} qw(A B);

my $dir = File::Temp->newdir;
my $port = empty_port();
my $config = do { local $/; open my $fh, '<', 'eg/haproxy/serow.cfg' or die $!; <$fh> };
$config =~ s/^(\s*bind) :80$/$1 127.0.0.1:$port/m or die 'no bind line';
$config =~ s/^\s*server app\d .*\n//mg or die 'no server lines';
$config =~ s/\binter 2s\b/inter 200ms/ or die 'no check interval';
$config .= join '', map { "    server app$_ 127.0.0.1:" . $servers[$_]->port . " check\n" } 0, 1;
open my $fh, '>', "$dir/haproxy.cfg" or die $!;
print {$fh} "global\n    pidfile $dir/haproxy.pid\n\n", $config;
close $fh;

my $check = `haproxy -c -f $dir/haproxy.cfg 2>&1`;
is $?, 0, 'haproxy -c accepts the configuration' or diag $check;

my $pid = fork // die "fork: $!";
if ($pid == 0) {
    POSIX::setpgid(0, 0);
    open(STDOUT, '>', "$dir/haproxy.log");
    open(STDERR, '>&', \*STDOUT);
    # The listen sockets handed to the servers stay open across exec: haproxy
    # holding them would keep a stopped server's port accepting.
    $_->close_listen_socket for @servers;
    delete $ENV{LD_PRELOAD}; # tools/test-sanitized's libasan is for perl
    eval { require Serow; Serow::set_parent_death_signal(POSIX::SIGTERM()) };
    { exec "haproxy", "-db", "-f", "$dir/haproxy.cfg" }
    POSIX::_exit(112);
}
sub haproxy_log { local $/; open my $fh, '<', "$dir/haproxy.log" or return ''; <$fh> }

my $front = { port => $port };
my %seen;
ok wait_until(sub {
    my $res = eval { http_get($front, '/') };
    $seen{ $res->{body} }++ if $res && $res->{status} == 200;
    keys %seen == 2;
}, 60), 'requests through HAProxy reach both servers' or diag explain(\%seen), haproxy_log();
# The health checks read it from HAProxy's address, which the allow list
# lets in; a client's request passed on with X-Forwarded-For does not get it.
is http_get($front, '/server-status')->{status}, 403, "the status page through HAProxy: 403";

is $servers[1]->stop, 0, 'server B stops';
$servers[1]->close_listen_socket; # its port now refuses connections

my ($streak, $failed) = (0, 0);
ok wait_until(sub {
    my $res = eval { http_get($front, '/') };
    $failed++ unless $res && $res->{status} == 200;
    $streak = $res && $res->{status} == 200 && $res->{body} eq 'server A' ? $streak + 1 : 0;
    $streak >= 20;
}, 60), 'then every request goes to server A' or diag haproxy_log();
is $failed, 0, 'no request failed meanwhile: one refused by B was retried on A';
like haproxy_log(), qr/app1 is DOWN/, 'after the health check found B down' or diag haproxy_log();

kill 'TERM', $pid;
waitpid($pid, 0);
is $servers[0]->stop, 0, 'server A stops';
done_testing;
