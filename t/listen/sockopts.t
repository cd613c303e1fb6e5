use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use File::Temp ();
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use lib 't/lib';
use Serow::Test qw(start_server http_get);

# TCP listen sockets get TCP_NODELAY (which accepted connections inherit)
# and TCP_DEFER_ACCEPT; connections are accepted with accept4(SOCK_CLOEXEC |
# SOCK_NONBLOCK); no listen socket leaks into the app's child processes.
# t/apps/sockets.psgi reports what a worker sees.

use constant TCP_DEFER_ACCEPT => 9;

sub report {
    my ($target) = @_;
    my $res = http_get($target, '/');
    return [split /\n/, ($res && $res->{body}) // ''];
}

subtest 'sockets serow opens itself (--listen)' => sub {
    my $dir = File::Temp->newdir;
    my $port = empty_port();
    my $path = "$dir/s.sock";
    my $server = start_server(listen => 'none', app_file => 't/apps/sockets.psgi',
        options => ['--listen', "127.0.0.1:$port", '--listen', $path, '--workers', 1]);
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;

    my $tcp = report({ port => $port });
    my ($listen) = grep { /^listen \d+ inet / } @$tcp;
    like $listen, qr/ nodelay=1 /, 'TCP_NODELAY on the TCP listen socket';
    like $listen, qr/ defer=[1-9]\d* /, 'TCP_DEFER_ACCEPT on it (the kernel rounds the seconds up)';
    like $listen, qr/ cloexec=1$/, 'close-on-exec';
    my ($conn) = grep { /^conn / } @$tcp;
    like $conn, qr/^conn \d+ tcp nodelay=1 /, 'the accepted connection has TCP_NODELAY';
    like $conn, qr/ cloexec=1 nonblock=1$/, 'and was accepted close-on-exec and non-blocking';

    my $unix = report({ path => $path });
    like +(grep { /^listen \d+ unix / } @$unix)[0], qr/ cloexec=1$/, 'the UNIX listen socket is close-on-exec';
    like +(grep { /^conn / } @$unix)[0], qr/^conn \d+ unix nodelay=0 cloexec=1 nonblock=1$/,
        'a UNIX connection too was accepted close-on-exec and non-blocking';
    is $server->stop, 0;
};

subtest 'sockets handed over (SERVER_STARTER_PORT)' => sub {
    my $server = start_server(app_file => 't/apps/sockets.psgi', options => ['--workers', 1]);
    # A connection takes the listen socket's options when it is made: make
    # it once Serow has set them.
    ok $server->wait_for_log(qr/listening on/), 'it runs' or return diag $server->log;
    my $report = report($server);
    # The test holds the same socket: its options are Serow's.
    my $sock = $server->{socket};
    is unpack('i', getsockopt($sock, IPPROTO_TCP, TCP_NODELAY)), 1, 'TCP_NODELAY set on the handed-over socket';
    cmp_ok unpack('i', getsockopt($sock, IPPROTO_TCP, TCP_DEFER_ACCEPT)), '>', 0, 'TCP_DEFER_ACCEPT set';
    my ($listen) = grep { /^listen / } @$report;
    like $listen, qr/ cloexec=1$/, "close-on-exec in the worker: the app's child processes do not get it";
    like +(grep { /^conn / } @$report)[0], qr/ tcp nodelay=1 cloexec=1 nonblock=1$/, 'connections as above';
    is $server->stop, 0;
};

done_testing;
