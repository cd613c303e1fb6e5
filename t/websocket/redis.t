use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Serow::Test qw(start_server find_command need_debian_packages wait_until http_get);
use Serow::Test::Prometheus ();
use Serow::Test::Redis ();
use Serow::WebSocket::Events qw(encode_websocket_events websocket_response_headers
    websocket_control_message);

# --publish-redis: a ws-message published on one Serow reaches the WebSockets
# its app subscribed on another, through Redis (docs/websocket.md).

my $python = (grep { defined && system("$_ -c 'import websockets' 2>/dev/null") == 0 }
    '/usr/bin/python3', find_command('python3'))[0];
unless ($python) {
    need_debian_packages('python3-websockets');
    $python = '/usr/bin/python3';
}

my $redis = Serow::Test::Redis->start;

my $app = sub {
    my ($env) = @_;
    if (($env->{CONTENT_TYPE} // '') eq 'application/websocket-events') {
        return [200, websocket_response_headers(grip => 1),
            [encode_websocket_events(['OPEN'], ['TEXT', websocket_control_message('subscribe', channel => 'room')])]];
    }
    Serow::Holding::publish({ channel => 'room', ws_message => { content => 'to all' } })
        if $env->{PATH_INFO} eq '/publish';
    return [200, ['Content-Type' => 'text/plain'], ["plain $$"]];
};
my @common = ('--workers', 1, '--metrics-path', '/metrics', '--publish-redis', $redis->url('ws'));
my $A = start_server(app => $app, options => [@common]);
my $B = start_server(app => $app, options => [@common]);
$_->wait_until_serving('/') for $A, $B;
for my $server ($A, $B) {
    ok wait_until(sub {
        my $res = http_get($server, '/metrics');
        $res && $res->{status} == 200
            && (Serow::Test::Prometheus::value(Serow::Test::Prometheus::parse($res->{body}), 'serow_redis_up') // 0) == 1;
    }, 60), 'the link to Redis is up';
}

my $url = 'ws://127.0.0.1:' . $A->port . '/room';
open my $out, '-|', $python, 't/websocket/ws_client.py', 'subscribers', $url, 10, $B->url . '/publish'
    or die "cannot run $python: $!";
my $json = do { local $/; <$out> };
close $out;
my $seen = eval { JSON::PP::decode_json($json) } // {};
is $seen->{received}, 10, 'published on B, through Redis: each of the 10 WebSockets subscribed on A gets it';

done_testing;
