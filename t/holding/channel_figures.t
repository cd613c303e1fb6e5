use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Plack::Middleware::SerowStatus ();
use Serow::Metrics ();
use Serow::Test qw(start_server raw_connect wait_until http_get);
use Serow::Test::Holding qw(server_status read_for);
use Serow::Test::Prometheus ();

# --grip: the busiest channels (the most subscribers) with each one's
# subscribers, publishes, deliveries and drops, in /metrics (labelled with
# the channel) and the status page, as the holder writes them (when they
# change, at most once a second: each check waits for its figures).

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path =~ m{^/events/([\w,-]+)$}) {
        return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
            'Grip-Channel' => $1], [":ok\n\n"]];
    }
    if ($path =~ m{^/publish/([\w-]+)$}) {
        Serow::Holding::publish({ channel => $1, http_stream => { content => "data: to $1\n\n" } });
        return [200, ['Content-Type' => 'text/plain'], ['published']];
    }
    return [200, ['Content-Type' => 'text/plain'], ['plain']];
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 1, '--grip', '--metrics-path', '/metrics']);
$server->wait_until_serving('/plain');

sub subscribe {
    my ($channels) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /events/$channels HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    read_for($sock, \$buf, qr/:ok\n\n\r\n/) or die "no stream on $channels";
    return [$sock, \$buf];
}

sub metrics {
    my $res = http_get($server, '/metrics');
    return Serow::Test::Prometheus::parse($res->{body});
}
sub channel_value { my ($m, $name, $channel) = @_; Serow::Test::Prometheus::value($m, $name, channel => $channel) }
sub channels { [ map { $_->{channel} } @{ server_status($server)->{channels} || [] } ] }

my @subs = ((map { subscribe('news') } 1 .. 3), subscribe('news,sport'), subscribe('sport'), subscribe('tiny'));
http_get($server, "/publish/$_") for qw(news news sport);
for my $want ([0 .. 3, 'to news'], [3, 4, 'to sport']) {
    my $last = pop @$want;
    my $count = $last eq 'to news' ? 2 : 1;
    for my $s (@subs[@$want]) {
        read_for($s->[0], $s->[1], qr/(?:data: \Q$last\E\n\n.*){$count}/s) or fail "a subscriber missed $last";
    }
}

my $m = wait_until(sub { my $m = metrics(); channel_value($m, 'serow_channel_deliveries_total', 'sport') == 2 && $m });
ok $m, 'the figures reach /metrics';
is channel_value($m, 'serow_channel_subscribers', 'news'), 4, 'news: 4 subscribers';
is channel_value($m, 'serow_channel_publishes_total', 'news'), 2, '2 publishes';
is channel_value($m, 'serow_channel_deliveries_total', 'news'), 8, '8 deliveries';
is channel_value($m, 'serow_channel_drops_total', 'news'), 0, 'no drop';
is channel_value($m, 'serow_channel_subscribers', 'sport'), 2, 'sport: 2 subscribers';
is channel_value($m, 'serow_channel_subscribers', 'tiny'), 1, 'tiny: 1';
is $m->{families}{serow_channel_subscribers}{type}, 'gauge', 'subscribers: a gauge';
is $m->{families}{$_}{type}, 'counter', "$_: a counter"
    for qw(serow_channel_publishes_total serow_channel_deliveries_total serow_channel_drops_total);

is_deeply channels(), [qw(news sport tiny)], 'the status page lists them, the most subscribers first';
my $status = server_status($server);
is_deeply $status->{channels}[0], { channel => 'news', subscribers => 4, publishes => 2, deliveries => 8, drops => 0 },
    'with their figures';
my $text = http_get($server, '/server-status')->{body};
like $text, qr/^Busiest channels .*\n^news +4 +2 +8 +0$/m, 'in the text view too';

# Only the busiest: SHARED_GRIP_CHANNELS (10) of them.
push @subs, subscribe("many-$_") for 1 .. 12;
ok wait_until(sub { my $c = channels(); @$c == 10 && $c }), 'at most 10 channels shown';
is_deeply [ @{ channels() }[0 .. 1] ], [qw(news sport)], 'the busiest stay';

# Ending holds updates the figures.
close $_->[0] for @subs[0 .. 2];
ok wait_until(sub { my $m = metrics(); channel_value($m, 'serow_channel_subscribers', 'news') == 1 }),
    'subscribers leaving: the gauge follows';

is $server->stop, 0, 'clean stop';

# A label value is escaped as the text format says (a channel's name cannot
# carry these, but no value may break the format).
my $rendered = Serow::Metrics::_channel_metrics(
    [{ channel => qq{a"b\\c\nd}, subscribers => 1, publishes => 2, deliveries => 3, drops => 0 }]);
like $rendered, qr/^serow_channel_subscribers\{channel="a\\"b\\\\c\\nd"\} 1$/m, 'label values escaped';
my $parsed = Serow::Test::Prometheus::parse($rendered);
is Serow::Test::Prometheus::value($parsed, 'serow_channel_publishes_total', channel => qq{a"b\\c\nd}), 2,
    'and read back by a strict parser';

done_testing;
