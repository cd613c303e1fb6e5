use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use IO::Socket::IP ();
use lib 't/lib';
use Serow::Test qw(start_server http_get);

# serow --listen HOST:PORT opens its TCP sockets itself; --listen repeats.

sub serow {
    my (@options) = @_;
    return start_server(listen => 'none', app_file => 't/apps/pid.psgi', options => \@options);
}

subtest 'serow --listen 127.0.0.1:PORT --workers 4 APP' => sub {
    my $port = empty_port();
    my $server = serow('--listen', "127.0.0.1:$port", '--workers', 4);
    ok wait_port({ host => '127.0.0.1', port => $port, max_wait => 30 }), "it listens on $port"
        or return diag $server->log;
    ok $server->wait_for_log(qr/listening on http:\/\/127\.0\.0\.1:$port with 4 workers/), 'and says so';
    $server->wait_for_log(qr/worker \d+ started/) for 1 .. 4;
    is scalar($server->worker_pids), 4, 'four workers';
    for (1 .. 4) {
        my $res = http_get({ port => $port }, '/');
        is $res->{status}, 200, "request $_ answered";
        like $res->{body}, qr/ server 127\.0\.0\.1:$port$/, 'SERVER_NAME and SERVER_PORT are the listen address';
    }
    is $server->stop, 0, 'it stops cleanly';
    ok !IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $port), 'and its port is closed';
};

subtest '--listen twice: both ports are served' => sub {
    my ($a, $b) = (empty_port(), empty_port());
    $b = empty_port() while $b == $a;
    my $server = serow("--listen", "127.0.0.1:$a", "--listen", "127.0.0.1:$b", "--workers", 2);
    ok wait_port({ port => $_, max_wait => 30 }), "port $_ is open" or return diag $server->log for $a, $b;
    ok $server->wait_for_log(qr/listening on http:\/\/127\.0\.0\.1:$a, http:\/\/127\.0\.0\.1:$b with 2 workers/);
    like http_get({ port => $a }, '/')->{body}, qr/ server 127\.0\.0\.1:$a$/, "port $a is served";
    like http_get({ port => $b }, '/')->{body}, qr/ server 127\.0\.0\.1:$b$/, "port $b is served";
    is $server->stop, 0;
};

subtest '--listen a,b: a comma-separated list works too' => sub {
    my ($a, $b) = (empty_port(), empty_port());
    $b = empty_port() while $b == $a;
    my $server = serow('--listen', "127.0.0.1:$a,127.0.0.1:$b", '--workers', 1);
    ok wait_port({ port => $_, max_wait => 30 }), "port $_ is open" or return diag $server->log for $a, $b;
    is http_get({ port => $_ }, '/')->{status}, 200, "port $_ is served" for $a, $b;
    is $server->stop, 0;
};

subtest '--listen :PORT and --listen PORT listen on every address' => sub {
    for my $form (':%d', '%d') {
        my $port = empty_port();
        my $server = serow('--listen', sprintf($form, $port), '--workers', 1);
        ok wait_port({ port => $port, max_wait => 30 }), "'$form' listens" or return diag $server->log;
        ok $server->wait_for_log(qr/listening on http:\/\/0\.0\.0\.0:$port /), 'on 0.0.0.0';
        is http_get({ port => $port }, '/')->{status}, 200, 'and serves 127.0.0.1';
        is $server->stop, 0;
    }
};

subtest 'a port in use is an error' => sub {
    my $taken = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 5) or die $@;
    my $port = $taken->sockport;
    my $server = serow('--listen', "127.0.0.1:$port");
    my $status = $server->wait_exit;
    is $status >> 8, 2, 'serow exits with status 2';
    like $server->log, qr/\[error\] \[pid \d+\] --listen: cannot listen on 127\.0\.0\.1:$port: .*in use/i, 'and says why';
};

done_testing;
