use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Serow::Test qw(start_server find_command need_debian_packages http_get);
use Serow::Test::Prometheus ();
use Serow::Test::WebSocket qw(websocket_test_app);

# A second real client beside t/websocket/holder.t's Python: Node's ws
# (t/websocket/ws_client.js) against holder.t's echo app
# (Serow::Test::WebSocket): text, binary, a message in three frames with a
# character split between two, 1 MB, pings both ways, close codes both
# ways, a publish to several subscribers; and what ws can be made to send
# that the server must refuse (RSV1 with no extension, a close code no frame
# may carry, a message over the limit whole or in frames, text that is not
# UTF-8), with the close code ws reports.

need_debian_packages('node-ws');
my $node = find_command('node', '/usr/bin') // find_command('nodejs', '/usr/bin')
    // plan skip_all => 'no node binary';
# Debian's Node modules: a Node not Debian's does not look there by itself
$ENV{NODE_PATH} = join ':', '/usr/share/nodejs', grep { defined && length } $ENV{NODE_PATH};
my $client_script = 't/websocket/ws_client.js';

my $app = websocket_test_app();

my $server = start_server(app => $app, options => ['--workers', 2, '--grip', '--metrics-path', '/metrics']);
$server->wait_until_serving('/');

sub client {
    my ($path, @args) = @_;
    open my $out, '-|', $node, $client_script, $args[0], 'ws://127.0.0.1:' . $server->port . $path,
        @args[1 .. $#args] or die "cannot run $node: $!";
    my $json = do { local $/; <$out> };
    close $out;
    my $seen = eval { JSON::PP::decode_json($json) };
    diag "the client printed: $json" unless $seen && !$seen->{error};
    return $seen // {};
}

my $echo = client('/echo', 'echo');
is $echo->{text}, 'hello', 'a text message echoed';
is $echo->{binary}, '0001ff62696e617279', 'a binary message echoed';
is $echo->{fragmented}, "fragmented \x{e9}t\x{e9}",
    'a message in three frames, a character split between two, echoed as one';
ok $echo->{big}, 'a 1 MB message echoed';
is $echo->{pong}, 'are you there', "the client's ping answered with its payload";
is $echo->{app_ping}, 'from the app', "the app's ping reaches the client";
is $echo->{after_ping}, 'pinged', '... with the message after it';
is $echo->{close_code}, 4000, "the client's close echoed with its code";
is $echo->{close_reason}, 'client done', '... and its reason';

my $closed = client('/echo', 'server_close');
is $closed->{code}, 4001, "the app's close reaches the client with its code";
is $closed->{reason}, 'app done', '... and its reason';

my $room = client('/room', 'subscribers', 10, $server->url . '/publish');
is $room->{publish_status}, 200, 'published';
is $room->{received}, 10, 'a publish reaches each of 10 subscribed ws clients';

# ---- what the server refuses ----------------------------------------------

is client('/echo', 'hostile', 'rsv')->{code}, 1002, 'a frame with RSV1 and no extension: ws sees 1002';
is client('/echo', 'hostile', 'bad_close_code')->{code}, 1002, 'a close frame with 1005 in it: ws sees 1002';
is client('/echo', 'hostile', 'oversize')->{code}, 1009, 'a 2 MiB message: ws sees 1009';
is client('/echo', 'hostile', 'oversize_fragments')->{code}, 1009,
    '1.5 MiB in three frames of 512 KiB: ws sees 1009';
is client('/echo', 'hostile', 'utf8')->{code}, 1007, 'text that is not UTF-8: ws sees 1007';
my $metrics = http_get($server, '/metrics');
is Serow::Test::Prometheus::value(Serow::Test::Prometheus::parse($metrics->{body} // ''),
    'serow_websocket_protocol_errors_total'), 5, '... the five counted';

my $after = client('/echo', 'echo');
is $after->{text}, 'hello', 'the server serves the next client as before';

is $server->stop, 0, 'clean stop';
done_testing;
