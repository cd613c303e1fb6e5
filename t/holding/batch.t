use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect wait_until);
use Serow::Test::Holding qw(server_status read_for held_app publish_to);
use Serow::Test::Trace qw(have_strace trace_syscalls client_writes);

# Publishes that wait together on the holder's hand-back channel are
# delivered as a batch (src/holder/grip_holds.h): one send per subscriber
# for all of them.  The holder is stopped (SIGSTOP) while three publishes
# are made, so that it finds them waiting together when it goes on; strace
# counts its writes to each subscriber: one, not three.  Each subscriber
# still gets every item, once, in order.

plan skip_all => 'needs strace' unless have_strace();

use constant SUBSCRIBERS => 3;

my $server = start_server(app => held_app(), options => ['--workers', 2, '--grip']);
$server->wait_until_serving('/plain');

my @subs;
for (1 .. SUBSCRIBERS) {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    ok read_for($sock, \$buf, qr/:ok\n\n\r\n/), "subscriber $_: its stream began" or diag $buf;
    push @subs, [$sock, \$buf];
}
ok wait_until(sub { (server_status($server)->{grip_held} // 0) == SUBSCRIBERS }), 'all held by the holder';
my $holder = server_status($server)->{holder_pid};
ok $holder, "the holder's pid";

my @calls = trace_syscalls($holder, sub {
    kill 'STOP', $holder;
    # each publish is a request to a worker, which sends it on to the holder
    is publish_to($server, "/publish/$_"), 200, "publish $_ made while the holder is stopped" for 1 .. 3;
    kill 'CONT', $holder;
    for my $n (1 .. SUBSCRIBERS) {
        my ($sock, $buf) = @{ $subs[$n - 1] };
        ok read_for($sock, $buf, qr/data: item 3\n/), "subscriber $n got the three items" or diag $$buf;
    }
}, until_mark => 0);

for my $n (1 .. SUBSCRIBERS) {
    my $buf = ${ $subs[$n - 1][1] };
    is_deeply [ $buf =~ /data: (item \d+)/g ], ['item 1', 'item 2', 'item 3'], "subscriber $n: each once, in order";
}
my %writes;
$writes{ $_->{fd} }++ for client_writes(@calls);
is scalar(keys %writes), SUBSCRIBERS, 'the holder wrote to each subscriber' or diag explain \%writes;
is_deeply [ sort values %writes ], [ (1) x SUBSCRIBERS ], 'one send each for the three publishes'
    or diag explain [ map { "$_->{name}($_->{args}) = $_->{result}" } client_writes(@calls) ];

$server->stop;

# A batch of large items for a client that reads: what it queues is written
# once past 64 KiB, so --hold-max-pending counts only what the client did not
# take.  (Six items of 32 KB, 128K allowed: a batch that wrote nothing before
# its end dropped the reader.)
my $big = start_server(app => held_app(big => 1), options => ['--workers', 2, '--grip', '--hold-max-pending', '128K']);
$big->wait_until_serving('/plain');
my $reader = raw_connect($big);
syswrite $reader, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
my $got = '';
ok read_for($reader, \$got, qr/:ok\n\n\r\n/), 'a reader subscribed' or diag $got;
ok wait_until(sub { (server_status($big)->{grip_held} // 0) == 1 }), 'held';
my $big_holder = server_status($big)->{holder_pid};
kill 'STOP', $big_holder;
is publish_to($big, "/publish/$_"), 200, "large publish $_ made while the holder is stopped" for 1 .. 6;
kill 'CONT', $big_holder;
ok read_for($reader, \$got, qr/id: 6\n/), 'the reader got all six' or diag length $got;
is_deeply [ $got =~ /^id: (\d+)$/mg ], [1 .. 6], 'each once, in order';
is server_status($big)->{grip_drops}, 0, 'and was not dropped';
$big->stop;
done_testing;
