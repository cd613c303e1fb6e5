use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port can_bind);
use IO::Socket::IP ();
use lib 't/lib';
use Serow::Test qw(start_server http_get find_command);

# --listen [::1]:PORT: IPv6, v6-only (the same port stays free on IPv4).

plan skip_all => 'no IPv6 loopback here' unless can_bind('::1');

subtest 'serow --listen [::1]:PORT' => sub {
    my $port = empty_port({ host => '::1' });
    my $server = start_server(listen => 'none', app_file => 't/apps/pid.psgi',
        options => ['--listen', "[::1]:$port", '--workers', 2]);
    ok wait_port({ host => '::1', port => $port, max_wait => 30 }), "it listens on [::1]:$port"
        or return diag $server->log;
    ok $server->wait_for_log(qr/listening on http:\/\/\[::1\]:$port with 2 workers/), 'and says so';
    my $res = http_get({ host => '::1', port => $port }, '/');
    is $res->{status}, 200, 'a request over IPv6 is answered';
    like $res->{body}, qr/ server ::1:$port$/, 'SERVER_NAME is ::1';
    ok !IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port), 'the socket is IPv6 only';
    is $server->stop, 0;
};

subtest 'the same port on IPv4 and IPv6 at once' => sub {
    my $port;
    do { $port = empty_port({ host => '::1' }) } until can_bind('127.0.0.1', $port);
    my $server = start_server(listen => 'none', app_file => 't/apps/pid.psgi',
        options => ['--listen', "[::1]:$port", '--listen', "127.0.0.1:$port", '--workers', 2]);
    ok wait_port({ host => $_, port => $port, max_wait => 30 }), "$_ listens" or return diag $server->log
        for '::1', '127.0.0.1';
    like http_get({ host => '::1', port => $port }, '/')->{body}, qr/ server ::1:$port$/, 'IPv6 is served';
    like http_get({ host => '127.0.0.1', port => $port }, '/')->{body}, qr/ server 127\.0\.0\.1:$port$/,
        'IPv4 is served';
    is $server->stop, 0;
};

subtest 'plackup --listen [::1]:PORT' => sub {
    my $plackup = find_command('plackup') or plan skip_all => 'no plackup (libplack-perl)';
    my $port = empty_port({ host => '::1' });
    my $server = start_server(listen => 'none', command => [$^X, '-Mblib', $plackup,
        '-s', 'Serow', '-E', 'deployment', '--listen', "[::1]:$port", '--workers', 1, 't/apps/pid.psgi']);
    ok wait_port({ host => '::1', port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    is http_get({ host => '::1', port => $port }, '/')->{status}, 200, 'and serves';
    is $server->stop, 0;
};

done_testing;
