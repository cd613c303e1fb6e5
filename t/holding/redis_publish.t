use strict;
use warnings;
use Test::More;
use lib 't/lib';
use HTTP::Tiny ();
use IO::Select ();
use JSON::PP ();
use Net::EmptyPort ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect read_response wait_until http_get);
use Serow::Test::Holding qw(server_status read_for);
use Serow::Test::Prometheus ();
use Serow::Test::Redis ();

# --publish-redis: two Serows sharing one real redis-server each deliver
# every publish to their own subscribers, exactly once, whichever host it was
# published on (from Perl or over HTTP); every host's store keeps the same
# items, so a subscriber that reconnects to the other host with
# Last-Event-ID gets what it missed there; a long poll is answered across
# hosts; a publish in flight when Redis dies is delivered on its host once; a
# Redis that comes back is reconnected to (waited for on the metrics), the
# gap counted, and what was published meanwhile reached the publishing
# host's own subscribers, counted as lost.

my $redis = Serow::Test::Redis->start;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/events') {
        my $last = $env->{HTTP_LAST_EVENT_ID};
        return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
            'Grip-Channel' => 'news' . (defined $last ? "; prev-id=$last" : '')], [":ok\n\n"]];
    }
    if ($path eq '/poll') {
        return [200, ['Content-Type' => 'text/plain', 'Grip-Hold' => 'response',
            'Grip-Channel' => 'inbox', 'Grip-Timeout' => 120], ['nothing']];
    }
    if ($path =~ m{^/publish/(\d+)$}) {
        my $id = $1;
        Serow::Holding::publish({ channel => 'news', id => $id,
            http_stream => { content => "id: $id\ndata: item $id\n\n" } });
        return [200, ['Content-Type' => 'text/plain'], ["published $id"]];
    }
    return [200, ['Content-Type' => 'text/plain'], ["plain $$"]];
};

my $publish_port = Net::EmptyPort::empty_port();
my @common = ('--workers', 2, '--metrics-path', '/metrics', '--publish-redis', $redis->url('t'));
my $A = start_server(app => Plack::Middleware::SerowStatus->wrap($app), options => [@common]);
my $B = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => [@common, '--publish-listen', "127.0.0.1:$publish_port"]);
$_->wait_until_serving('/plain') for $A, $B;

sub metric {
    my ($server, $name) = @_;
    my $res = http_get($server, '/metrics');
    return undef unless $res && $res->{status} == 200;
    return Serow::Test::Prometheus::value(Serow::Test::Prometheus::parse($res->{body}), $name);
}
sub wait_metric {
    my ($server, $name, $want) = @_;
    return wait_until(sub { (metric($server, $name) // -1) == $want }, 60);
}

ok wait_metric($A, 'serow_redis_up', 1), 'A: the link to Redis is up (serow_redis_up)';
ok wait_metric($B, 'serow_redis_up', 1), 'B: the link to Redis is up';
like $A->log, qr/publishing through redis:\/\/127\.0\.0\.1:\d+\/t \(--publish-redis\)/,
    'the start-up line names it';
like server_status($A)->{redis_up} // '', qr/\A1\z/, 'the status page says it is up';

# An SSE subscriber, held once the holder has it (its count of held
# connections grew).
sub subscribe {
    my ($server, %headers) = @_;
    my $held = server_status($server)->{grip_held} // 0;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: x\r\n"
        . join('', map { "$_: $headers{$_}\r\n" } sort keys %headers) . "\r\n";
    my $buf = '';
    read_for($sock, \$buf, qr/:ok\n\n\r\n/);
    wait_until(sub { (server_status($server)->{grip_held} // 0) > $held });
    return { sock => $sock, buf => \$buf };
}
sub got { my ($sub, $n) = @_; return read_for($sub->{sock}, $sub->{buf}, qr/data: item $n\n/, 30) }
sub times_got { my ($sub, $n) = @_; my @m = ${ $sub->{buf} } =~ /data: item $n\n/g; scalar @m }

my $http = HTTP::Tiny->new(timeout => 30);
sub publish_http {
    my (@items) = @_;
    return $http->request('POST', "http://127.0.0.1:$publish_port/publish/",
        { content => JSON::PP->new->encode({ items => \@items }), headers => { 'Content-Type' => 'application/json' } });
}
sub publish_perl {
    my ($server, $id) = @_;
    my $res = http_get($server, "/publish/$id");
    return $res && $res->{status} == 200;
}

my $on_a = subscribe($A);
my $on_b = subscribe($B);

ok publish_perl($A, 1), 'published from Perl on A';
ok got($on_a, 1), 'A\'s subscriber gets it (back through Redis)';
ok got($on_b, 1), 'B\'s subscriber gets it';

my $res = publish_http({ channel => 'news', id => '2',
    formats => { 'http-stream' => { content => "id: 2\ndata: item 2\n\n" } } });
is $res->{status}, 200, 'published over HTTP on B';
ok got($on_a, 2), 'A\'s subscriber gets it';
ok got($on_b, 2), 'B\'s subscriber gets it';
is times_got($on_a, 1) + times_got($on_a, 2), 2, 'A\'s subscriber got each once';
is times_got($on_b, 1) + times_got($on_b, 2), 2, 'B\'s subscriber got each once';

# B's subscriber leaves; two items are published on B while it is away; it
# comes back through the balancer to A, with the id of the last it had.
close $on_b->{sock};
ok publish_perl($B, 3), 'item 3 published from Perl on B';
is publish_http({ channel => 'news', id => '4', 'http-stream' => { content => "id: 4\ndata: item 4\n\n" } })->{status},
    200, 'item 4 over HTTP on B';
ok got($on_a, 4), 'both reached A';
my $back = subscribe($A, 'Last-Event-ID' => 2);
ok got($back, 4), 'the subscriber back on A with Last-Event-ID 2 gets what it missed';
like ${ $back->{buf} }, qr/data: item 3\n.*data: item 4\n/s, 'items 3 and 4, in order';
is times_got($back, 2), 0, 'and not the one it had';
my $on_b2 = subscribe($B);

# A long poll on A, answered by a publish on B.
my $held = server_status($A)->{grip_held};
my $poll = raw_connect($A);
syswrite $poll, "GET /poll HTTP/1.1\r\nHost: x\r\n\r\n";
ok wait_until(sub { server_status($A)->{grip_held} > $held }), 'a long poll held on A';
is publish_http({ channel => 'inbox', formats => { 'http-response' => { code => 200, body => 'from B' } } })->{status},
    200, 'an http-response published on B';
my $answer = IO::Select->new($poll)->can_read(30) && read_response($poll);
is $answer && $answer->{body}, 'from B', 'answers the long poll on A';

is metric($A, 'serow_redis_lost_total'), 0, 'nothing lost on A so far';
is metric($A, 'serow_redis_gaps_total'), 0, 'no gap';
ok metric($B, 'serow_redis_published_total') >= 3, 'B counts what it published';
ok metric($A, 'serow_redis_received_total') >= 5, 'A counts what it received';

# Redis freezes with a publish of A's in flight, then dies: the item, which
# will never come back, is delivered on A then, once.  A publish while it is
# gone reaches the publishing host's own subscribers only, counted as lost.
# Redis starts again: each link reconnects, the gap counted, and publishes go
# through it again.
$redis->pause;
my $published = metric($A, 'serow_redis_published_total');
ok publish_perl($A, 5), 'item 5 published on A while Redis is frozen';
ok wait_metric($A, 'serow_redis_published_total', $published + 1), 'sent to Redis';
$redis->kill_now;
ok wait_metric($A, 'serow_redis_up', 0), 'Redis killed: A\'s link is down';
ok wait_metric($B, 'serow_redis_up', 0), 'and B\'s';
ok got($on_a, 5), 'the item in flight is delivered to A\'s own subscriber';
ok $A->wait_for_log(qr/redis 127\.0\.0\.1:\d+: the link is lost: 1 publish\(es\) sent and not back delivered on this host/),
    'A says so';
ok publish_perl($A, 6), 'item 6 published on A while Redis is down';
ok got($on_a, 6), 'A\'s own subscriber gets it at once';
ok wait_metric($A, 'serow_redis_lost_total', 1), 'counted as lost (not shared)';
ok $redis->start_again, 'Redis started again on its port';
ok wait_metric($A, 'serow_redis_up', 1), 'A\'s link is up again';
ok wait_metric($B, 'serow_redis_up', 1), 'and B\'s';
is metric($A, 'serow_redis_reconnects_total'), 1, 'A counts a reconnect';
is metric($B, 'serow_redis_gaps_total'), 1, 'B counts the gap';
ok publish_perl($B, 7), 'item 7 published on B after the restart';
ok got($on_a, 7), 'reaches A';
ok got($on_b2, 7), 'and B';
is times_got($on_a, 5) + times_got($on_a, 6), 2, 'A\'s subscriber got items 5 and 6 once each';
is times_got($on_b2, 5) + times_got($on_b2, 6), 0, 'B never had them (the gap)';
is times_got($on_a, 7) + times_got($on_b2, 7), 2, 'item 7 once each';

my $text = http_get($A, '/server-status')->{body};
like $text, qr/^Redis \(--publish-redis\): up; received \d+, rejected 0, published \d+, lost 1, gaps 1, reconnects 1$/m,
    'the status page shows the link and its counters';

close $_->{sock} for $on_a, $back, $on_b2;
is $A->stop, 0, 'A stops cleanly';
is $B->stop, 0, 'B stops cleanly';
done_testing;
