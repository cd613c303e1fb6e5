use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select;
use JSON::PP ();
use Time::HiRes ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect wait_until http_get);
use Serow::Test::Holding qw(server_status read_for);

# --grip: server-sent-event streams held by the connection holder with every
# worker free; publishes from Perl reach every subscriber once each, in order;
# Grip-* headers never reach the client; prev-id replay; a quiet stream gets
# its keep-alive data.

use constant SUBSCRIBERS => 20;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/events') {
        my $last = $env->{HTTP_LAST_EVENT_ID};
        my $ka = ($env->{QUERY_STRING} // '') eq 'ka' ? [ 'Grip-Keep-Alive' => ':ka\n\n; format=cstring; timeout=1' ] : [];
        return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
            'Grip-Channel' => 'news' . (defined $last ? "; prev-id=$last" : ''), @$ka],
            [":ok\n\n"]];
    }
    if ($path =~ m{^/publish/(\d+)$}) {
        my $id = $1;
        Serow::Holding::publish({ channel => 'news', id => $id,
            http_stream => { content => "id: $id\ndata: item $id\n\n" } });
        return [200, ['Content-Type' => 'text/plain'], ["published $id"]];
    }
    return [200, ['Content-Type' => 'text/plain'], ["plain $$"]];
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 2, '--grip', '--metrics-path', '/metrics']);
sub status { server_status($server) }
$server->wait_until_serving('/plain');



sub subscribe {
    my (%headers) = @_;
    my $extra = join '', map { "$_: $headers{$_}\r\n" } sort keys %headers;
    my $path = delete $headers{path} // '/events';
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n$extra\r\n";
    my $buf = '';
    read_for($sock, \$buf, qr/:ok\n\n\r\n/);
    return ($sock, \$buf);
}

# The event data lines of a chunked body read so far.
sub events_in { my ($buf) = @_; return [ $$buf =~ /data: (item \d+)/g ] }

my @subs;
for (1 .. SUBSCRIBERS) {
    my ($sock, $buf) = subscribe();
    push @subs, [$sock, $buf];
}
my ($head) = ${ $subs[0][1] } =~ /\A(.*?\r\n\r\n)/s;
like $head, qr{\AHTTP/1\.1 200 }, 'a subscriber gets its head';
like $head, qr{Transfer-Encoding: chunked}i, 'framed open-ended: chunked';
unlike $head, qr{^Grip-}mi, 'no Grip-* header reaches the client';
is scalar(grep { ${ $_->[1] } =~ /:ok\n\n/ } @subs), SUBSCRIBERS, 'every subscriber got the first body';

my $held = wait_until(sub { my $s = status(); ($s->{grip_held} // 0) >= SUBSCRIBERS && $s });
ok $held, SUBSCRIBERS . ' connections held by the holder';
is $held && $held->{processing}, 1, 'no worker is busy but with the status request';
my $plain = http_get($server, '/plain');
is $plain && $plain->{status}, 200, 'a plain request is answered while they are held (2 workers)';

for my $id (1 .. 3) {
    my $res = http_get($server, "/publish/$id");
    is $res && $res->{status}, 200, "publish $id from Perl";
}
my $all = 0;
for my $s (@subs) {
    read_for($s->[0], $s->[1], qr/data: item 3\n/);
    $all++ if join(',', @{ events_in($s->[1]) }) eq 'item 1,item 2,item 3';
}
is $all, SUBSCRIBERS, 'every subscriber got the three items, in order, once each';
unlike join('', map { ${ $_->[1] } } @subs), qr/^Grip-/mi, 'no Grip-* header anywhere';

# prev-id: a subscriber that saw item 1 gets 2 and 3 first
my ($late, $late_buf) = subscribe('Last-Event-ID' => 1);
read_for($late, $late_buf, qr/data: item 3\n/);
is join(',', @{ events_in($late_buf) }), 'item 2,item 3', 'prev-id replays the items after it';

# keep-alive data on a quiet stream (Grip-Keep-Alive timeout=1: time passes on purpose)
my ($quiet, $quiet_buf) = subscribe(path => '/events?ka');
ok read_for($quiet, $quiet_buf, qr/:ka\n\n/), 'a quiet stream gets its keep-alive data';

my $m = wait_until(sub { my $s = status(); ($s->{grip_publishes} // 0) >= 3 && $s });
is $m->{grip_publishes}, 3, 'publishes counted';
cmp_ok $m->{grip_deliveries}, '>=', 3 * SUBSCRIBERS + 2, 'deliveries counted';
cmp_ok $m->{grip_subscriptions}, '>=', SUBSCRIBERS, 'subscriptions counted';

my $metrics = http_get($server, '/metrics');
my %metric = ($metrics->{body} // '') =~ /^(serow_\w+) (\S+)$/mg;
is $metric{serow_publishes_total}, 3, '/metrics: serow_publishes_total';
cmp_ok $metric{serow_deliveries_total} // 0, '>=', 3 * SUBSCRIBERS + 2, '/metrics: serow_deliveries_total';
is $metric{serow_held_connections}, SUBSCRIBERS + 2, '/metrics: serow_held_connections';
cmp_ok $metric{serow_held_subscriptions} // 0, '>=', SUBSCRIBERS + 2, '/metrics: serow_held_subscriptions';
is $metric{serow_held_drops_total}, 0, '/metrics: serow_held_drops_total';
is $metric{serow_replay_gaps_total}, 0, '/metrics: serow_replay_gaps_total';

# a client that leaves is unsubscribed
close $_->[0] for @subs;
ok wait_until(sub { (status()->{grip_held} // 99) == 2 }), 'clients that leave are no longer held';

is $server->stop, 0, 'clean stop';
done_testing;
