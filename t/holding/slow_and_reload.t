use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select;
use IO::Socket::IP;
use JSON::PP ();
use Socket qw(SOL_SOCKET SO_RCVBUF);
use Time::HiRes ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect wait_until http_get);
use Serow::Test::Holding qw(server_status);

# --grip: a subscriber that never reads is dropped past --hold-max-pending and
# counted, while the others get every item; a HUP deploy keeps the held
# connections (they are in the holder), which go on getting items.

use constant { READERS => 5, ITEMS => 150, ITEM_BYTES => 32000 };

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/events') {
        return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
            'Grip-Channel' => 'big'], [":ok\n\n"]];
    }
    if ($path =~ m{^/publish/(\d+)$}) {
        Serow::Holding::publish({ channel => 'big',
            http_stream => { content => "id: $1\ndata: " . ('x' x ITEM_BYTES) . "\n\n" } });
        return [200, [], ["$$"]];
    }
    return [200, ['Content-Type' => 'text/plain'], ["plain $$"]];
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 2, '--grip', '--hold-max-pending', '256K']);
sub status { server_status($server) }
$server->wait_until_serving('/plain');


sub subscribe {
    my ($sock) = @_;
    $sock //= raw_connect($server);
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
    return $sock;
}

# What each reader has read so far, drained without waiting.
my (@readers, %got);
sub drain {
    for my $r (@readers) {
        while (IO::Select->new($r)->can_read(0)) {
            my $n = sysread($r, $got{$r}, 1 << 20, length($got{$r} // ''));
            last unless $n;
        }
    }
}
sub ids_of { my ($r) = @_; return [ ($got{$r} // '') =~ /^id: (\d+)$/mg ] }

push @readers, subscribe() for 1 .. READERS;
# the slow one: a small receive window, and it never reads
my $slow = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $server->port, Blocking => 1)
    or die "connect: $@";
setsockopt($slow, SOL_SOCKET, SO_RCVBUF, 4096);
subscribe($slow);
ok wait_until(sub { (status()->{grip_held} // 0) == READERS + 1 }), 'every subscriber held';

for my $i (1 .. ITEMS) {
    my $res = http_get($server, "/publish/$i");
    die "publish $i failed" unless $res && $res->{status} == 200;
    drain();
}
my $all = sub { !grep { @{ ids_of($_) } < ITEMS } @readers };
wait_until(sub { drain(); $all->() });
is scalar(grep { join(',', @{ ids_of($_) }) eq join(',', 1 .. ITEMS) } @readers), READERS,
    'every reader got every item, in order, once';
my $s = wait_until(sub { my $s = status(); ($s->{grip_drops} // 0) >= 1 && $s });
is $s && $s->{grip_drops}, 1, 'the subscriber that never read is dropped, and counted';
is $s && $s->{grip_held}, READERS, 'the readers are still held';
ok $server->wait_for_log(qr/past --hold-max-pending/), 'the drop is logged';
my $big = wait_until(sub { my ($c) = grep { $_->{channel} eq 'big' } @{ status()->{channels} || [] };
    $c && $c->{drops} == 1 && $c });
ok $big, 'and counted for its channel';
is $big && $big->{subscribers}, READERS, 'whose subscribers are the readers';

# HUP: a new generation of workers; the held connections stay
my $old = http_get($server, '/publish/0');
my $mark = $server->log_mark;
$server->signal('HUP');
is scalar($server->wait_for_log_all(qr/worker \d+ exited with status 0/, 2, undef, $mark)), 2,
    'HUP: the old workers leave';
is status()->{grip_held}, READERS, 'the held connections are still held';
%got = ();
my $res = http_get($server, '/publish/' . (ITEMS + 1));
isnt $res && $res->{body}, $old && $old->{body}, 'a new worker publishes';
wait_until(sub { drain(); !grep { !@{ ids_of($_) } || ids_of($_)->[-1] != ITEMS + 1 } @readers });
is scalar(grep { @{ ids_of($_) } && ids_of($_)->[-1] == ITEMS + 1 } @readers), READERS,
    'the held connections get what the new workers publish';

is $server->stop, 0, 'clean stop';
done_testing;
