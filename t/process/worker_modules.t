use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Net::EmptyPort ();
use Serow::Test qw(start_server http_get);

# What the master loads before it forks is in every worker's memory (RSS),
# shared or not: Serow's own modules load none of the big ones they can do
# without.  (A module the app loads is the app's choice.)
my @NOT_LOADED = ('POSIX.pm', 'Getopt/Long.pm', 'IO/Socket.pm', 'IO/Socket/IP.pm', 'B.pm');

sub loaded_in_worker {
    my ($server) = @_;
    my $res = http_get($server, '/');
    is $res->{status}, 200, 'the app answers' or diag $server->log;
    return { map { $_ => 1 } split /\n/, $res->{body} // '' };
}

subtest 'a listen socket handed over (Server::Starter)' => sub {
    my $server = start_server(app_file => 't/apps/loaded_modules.psgi', options => ['--workers', 1]);
    my $loaded = loaded_in_worker($server);
    ok $loaded->{'Serow/Worker.pm'}, 'the list is that of a worker';
    ok !$loaded->{$_}, "no $_" for @NOT_LOADED;
    is $server->stop, 0;
};

subtest 'a TCP socket Serow opens itself (--listen), options given as --name=value' => sub {
    my $port = Net::EmptyPort::empty_port();
    my $server = start_server(app_file => 't/apps/loaded_modules.psgi', listen => 'none',
        options => ["--listen=127.0.0.1:$port", '--workers=1']);
    $server->{port} = $port;
    ok $server->wait_for_log(qr/worker \d+ started/), 'a worker started' or return diag $server->log;
    my $loaded = loaded_in_worker($server);
    ok !$loaded->{$_}, "no $_" for @NOT_LOADED;
    is $server->stop, 0;
};

done_testing;
