use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages start_server wait_until http_get);
use Serow::Test::HAProxy;
use Serow::Test::Holding qw(held_app check_stream check_long_poll);

# Held requests behind HAProxy with eg/haproxy/serow.cfg as it is (docs/holding.md,
# "Behind nginx or HAProxy"): a stream's head, first body and every publish
# are passed on at once, a client that leaves is let go by Serow once
# something is written to it, and long polls are answered one after the
# other on one client connection.

need_debian_packages('haproxy');

my $server = start_server(app => held_app(), options => ['--workers', 2, '--grip']);
$server->wait_until_serving('/plain');
my $haproxy = Serow::Test::HAProxy->start(servers => [$server], check_interval => '200ms');
ok wait_until(sub { my $res = eval { http_get($haproxy, '/plain') }; $res && $res->{status} == 200 }, 60),
    'HAProxy passes requests on once its health check brought Serow in' or diag $haproxy->log;

# HAProxy notices that a client left only when a write to it fails (a
# publish, or the stream's Grip-Keep-Alive data), not at once as nginx does.
subtest 'a stream' => sub { check_stream($server, $haproxy, '/events', written => 1) };
subtest 'long polls' => sub { check_long_poll($server, $haproxy, '/poll') };

$haproxy->stop; # (TERM: HAProxy is ended by the signal)
is $server->stop, 0, 'serow stops cleanly';
done_testing;
