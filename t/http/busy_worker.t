# A worker busy with one request must not hold that against the clients it
# was not reading meanwhile: a head that arrived complete within
# --header-timeout is answered, not given 408, even when the worker only gets
# to it after the timeout.
#
# The app blocks on /block until the test writes to a pipe; the test lets the
# timeout pass on purpose (the one sleep here), then releases it.  TIMEOUT is
# larger than the worker needs between reading the start of the waiting head
# and starting /block, even on a slow machine.
use strict;
use warnings;
use Test::More;
use IO::Handle;
use IO::Select;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response);

use constant TIMEOUT => 2;
pipe(my $release_read, my $release_write) or die "pipe: $!";
$release_write->autoflush(1);

my $server = start_server(app => sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/block') {
        print STDERR "blocking\n";
        IO::Select->new($release_read)->can_read(Serow::Test::READ_TIMEOUT);
        sysread $release_read, my $byte, 1;
    }
    return [200, [], ["done $env->{PATH_INFO}"]];
}, options => ['--workers', 1, '--header-timeout', TIMEOUT]);

# Occupies the worker with /block on a connection of its own; returns it.
sub block_worker {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/blocking\n/), 'the worker is busy';
    return $sock;
}

sub release_worker {
    my ($sock) = @_;
    syswrite $release_write, 'x';
    my $res = read_response($sock);
    is $res && $res->{body}, "done /block", "the blocking request is answered" or diag $server->log;
}

subtest 'a head completed while the worker was busy' => sub {
    # The start of the head is read first (it is on its way before /block
    # connects), so its header timer runs while the worker is busy.
    my $waiting = raw_connect($server);
    syswrite $waiting, "GET /waiting HTTP/1.1\r\nHost: x\r\n";
    my $blocker = block_worker();
    syswrite $waiting, "\r\n";
    select undef, undef, undef, TIMEOUT * 2.5; # let the header timeout pass
    release_worker($blocker);
    my $res = read_response($waiting);
    is $res && $res->{status}, 200, 'answered';
    is $res && $res->{body}, 'done /waiting';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
