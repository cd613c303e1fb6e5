use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Plack::Builder;
use Serow::Test qw(need_debian_packages start_server http_get wait_until);
use Serow::Test::HAProxy;

# eg/haproxy/serow.cfg (shown in docs/deployment.md) in front of two Serow
# servers: HAProxy's health checks against Serow's status page bring both
# in, requests go to both, and when one stops the other takes every request
# (one that meets the stopped server is retried on the other: redispatch).
# The test changes only the address, the hosts and the check interval
# (Serow::Test::HAProxy).

need_debian_packages('haproxy');

my @servers = map {
    my $name = $_;
    start_server(app => builder {
        enable 'SerowStatus', allow => ['127.0.0.1'];
        sub { [200, ['Content-Type' => 'text/plain'], ["server $name"]] };
    }, options => ['--workers', 1, '--keepalive-timeout', 30]);
} qw(A B);

my $haproxy = eval { Serow::Test::HAProxy->start(servers => \@servers, check_interval => '200ms') };
ok $haproxy, 'haproxy -c accepts the configuration, and HAProxy starts' or BAIL_OUT($@);
sub haproxy_log { $haproxy->log }

my $front = $haproxy;
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

$haproxy->stop;
is $servers[0]->stop, 0, 'server A stops';
done_testing;
