use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use IO::Select;
use JSON::PP ();
use Net::EmptyPort ();
use Serow::Test qw(start_server raw_connect read_until_close read_until_match wait_until
    find_command need_debian_packages http_get);
use Serow::Test::Prometheus ();
use Serow::Test::WebSocket qw(websocket_test_app);

# With holding on, a WebSocket lives in the connection holder and each of its
# messages goes to whichever worker is free, as a WebSocket-over-HTTP POST
# (docs/websocket.md): a real client (Python's websockets) against an echo
# app written with Serow::WebSocket::Events; the handshake's refusals; hostile
# frames closed with the code RFC 6455 gives them.

my $python = (grep { defined && system("$_ -c 'import websockets' 2>/dev/null") == 0 }
    '/usr/bin/python3', find_command('python3'))[0];
unless ($python) {
    need_debian_packages('python3-websockets');
    $python = '/usr/bin/python3';
}
my $client_script = 't/websocket/ws_client.py';

my $record_dir = File::Temp->newdir;

my $app = websocket_test_app(disconnected => "$record_dir/disconnected");

sub client {
    my ($server, @args) = @_;
    my $url = 'ws://127.0.0.1:' . $server->port . ($args[0] eq 'subscribers' ? '/room' : '/chat');
    open my $out, '-|', $python, $client_script, $args[0], $url, @args[1 .. $#args]
        or die "cannot run $python: $!";
    my $json = do { local $/; <$out> };
    close $out;
    my $seen = eval { JSON::PP::decode_json($json) };
    diag "the client printed: $json" unless $seen;
    return $seen // {};
}

my $server = start_server(app => $app, options => ['--workers', 2, '--grip', '--metrics-path', '/metrics']);
$server->wait_until_serving('/');

my $echo = client($server, 'echo');
is $echo->{text}, 'hello', 'a text message echoed';
is $echo->{binary}, '0001ff62696e617279', 'a binary message echoed';
is $echo->{fragmented}, "fragmented \x{e9}t\x{e9}", 'a message in three frames echoed as one';
ok $echo->{big}, 'a 100 KiB message echoed';
ok $echo->{pong}, 'a ping answered';
is $echo->{close_code}, 4000, "the client's close echoed with its code";

my $burst = client($server, 'burst', 300);
is $burst->{count}, 300, '300 messages of 1 KiB sent at once: all echoed';
ok $burst->{in_order}, '... in order';

my $closed = client($server, 'server_close');
is $closed->{code}, 4001, "the app's close reaches the client with its code";
is $closed->{reason}, 'app done', '... and its reason';

my $gate_dir = File::Temp->newdir;
my $gate = "$gate_dir/gate";
my $two = client($server, 'two', $gate);
my ($pid_a) = ($two->{a} // '') =~ /\Apid (\d+)\z/;
my ($pid_b) = ($two->{b} // '') =~ /\Apid (\d+)\z/;
ok $pid_a && $pid_b, 'both clients answered';
isnt $pid_a, $pid_b, 'a message is served by the free worker while the other is busy with a message';

# ---- the handshake --------------------------------------------------------

sub upgrade {
    my ($path, %headers) = @_;
    my $on = delete $headers{server} // $server;
    my %h = ('Upgrade' => 'websocket', 'Connection' => 'Upgrade',
        'Sec-WebSocket-Key' => 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version' => 13, %headers);
    my $sock = raw_connect($on);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n"
        . join('', map { defined $h{$_} ? "$_: $h{$_}\r\n" : '' } sort keys %h) . "\r\n";
    my $head = read_until_match($sock, qr/\r\n\r\n/);
    return ($sock, $head);
}

my (undef, $head) = upgrade('/chat');
like $head, qr{\AHTTP/1\.1 101 }, '101 to a good handshake';
like $head, qr{^Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=\r$}m, "the RFC's example accept value";
(undef, $head) = upgrade('/chat', 'Sec-WebSocket-Version' => 8);
like $head, qr{\AHTTP/1\.1 426 }, '426 to another version';
like $head, qr{^Sec-WebSocket-Version: 13\r$}m, '... naming 13';
(undef, $head) = upgrade('/chat', 'Sec-WebSocket-Key' => 'short');
like $head, qr{\AHTTP/1\.1 400 }, '400 to a bad key';
(undef, $head) = upgrade('/chat', 'Connection' => undef);
like $head, qr{\AHTTP/1\.1 400 }, '400 without Connection: upgrade';
my ($sock, $deny) = upgrade('/deny');
like $deny, qr{\AHTTP/1\.1 403 }, "the app's refusal of OPEN reaches the client";
like scalar(read_until_close($sock, buffer => \$deny)), qr/not here/, '... with its body';

my ($gone) = upgrade('/chat');
close $gone;
ok wait_until(sub { -e "$record_dir/disconnected" }), 'a client that goes without a close: the app hears DISCONNECT';

# ---- hostile frames -------------------------------------------------------

# A client's frame: masked (unless told), FIN set.
sub frame {
    my ($opcode, $payload, %o) = @_;
    my $len = length $payload;
    my $first = chr(($o{fin} // 1 ? 0x80 : 0) | $opcode);
    my $mask_bit = $o{unmasked} ? 0 : 0x80;
    my $head = $len < 126 ? chr($mask_bit | $len)
        : $len < 65536 ? chr($mask_bit | 126) . pack('n', $len) : chr($mask_bit | 127) . pack('Q>', $len);
    return $first . $head . $payload if $o{unmasked};
    my $key = "\x01\x02\x03\x04";
    return $first . $head . $key . ($payload ^ substr($key x (1 + $len / 4), 0, $len));
}

# What a server's close frame says, from the bytes after the 101.
sub close_code_of {
    my ($bytes) = @_;
    return undef unless $bytes =~ /\x88([\x02-\x7d])(..)/s;
    return unpack 'n', $2;
}

sub hostile {
    my ($bytes) = @_;
    my ($sock, $head) = upgrade('/chat');
    return undef unless $head =~ /\AHTTP\/1\.1 101 /;
    (my $after = $head) =~ s/\A.*?\r\n\r\n//s;
    syswrite $sock, $bytes;
    return close_code_of(scalar read_until_close($sock, buffer => \$after));
}

is hostile(frame(1, 'unmasked', unmasked => 1)), 1002, 'an unmasked frame: 1002';
is hostile(chr(0x83) . chr(0x80) . "\0\0\0\0"), 1002, 'a reserved opcode: 1002';
is hostile(frame(1, "\xc0\xaf")), 1007, 'text that is not UTF-8: 1007';
is hostile(chr(0x82) . chr(0xff) . pack('Q>', 2 << 20) . "\0\0\0\0"), 1009,
    'a message over the limit: 1009, before its payload';
is hostile(frame(0, 'continuation')), 1002, 'a continuation with no message: 1002';

# A client refused while it goes on sending (a message over the limit, sent
# whole): what it sends after the close frame is taken and thrown away until
# it closes, so that its writes do not fail on a reset before it has read
# the close frame (Node's ws saw 1006 for 1009 so).
{
    local $SIG{PIPE} = 'IGNORE';
    my ($sock, $head) = upgrade('/chat');
    (my $after = $head) =~ s/\A.*?\r\n\r\n//s;
    syswrite $sock, chr(0x82) . chr(0xff) . pack('Q>', 2 << 20) . "\0\0\0\0";
    is close_code_of(scalar read_until_close($sock, buffer => \$after)), 1009,
        'a message over the limit, its payload still coming: 1009';
    my $taken = 0;
    for (1 .. 16) {
        my $n = syswrite $sock, "\0" x 65536;
        last unless $n;
        $taken += $n;
    }
    is $taken, 16 * 65536, '... and the rest of it, 1 MiB after the close frame, is taken, not reset';
    close $sock;
}

# The app closes, the client never answers: closed all the same.
{
    my ($sock, $head) = upgrade('/chat');
    (my $after = $head) =~ s/\A.*?\r\n\r\n//s;
    syswrite $sock, frame(1, 'close 4002');
    my ($bytes, $ended) = read_until_close($sock, buffer => \$after);
    is close_code_of($bytes), 4002, "the app's close frame";
    ok $ended, 'a client that does not answer it is closed after a while';
}

sub metric {
    my ($name) = @_;
    my $res = http_get($server, '/metrics');
    return undef unless $res && $res->{status} == 200;
    return Serow::Test::Prometheus::value(Serow::Test::Prometheus::parse($res->{body}), $name);
}
is metric('serow_websocket_protocol_errors_total'), 6, 'the six counted (serow_websocket_protocol_errors_total)';
my ($open_sock) = upgrade('/chat');
ok wait_until(sub { (metric('serow_websocket_connections') // -1) == 1 }),
    'a WebSocket open: serow_websocket_connections 1';
close $open_sock;
ok wait_until(sub { (metric('serow_websocket_connections') // -1) == 0 }), '... 0 once it went';

# ---- no worker pinned -----------------------------------------------------

my $one = start_server(app => $app, options => ['--workers', 1, '--grip']);
$one->wait_until_serving('/');
my $many = client($one, 'many', 20);
is $many->{echoed}, 20, 'one worker: 20 WebSocket clients at once all get their echoes';

# ---- publishes ------------------------------------------------------------

my $room = client($server, 'subscribers', 50, $server->url . '/publish');
is $room->{received}, 50, "50 WebSockets subscribed by the app's control message: one publish reaches each";

my $publish_port = Net::EmptyPort::empty_port();
my $endpoint = start_server(app => $app,
    options => ['--workers', 1, '--grip', '--publish-listen', "127.0.0.1:$publish_port",
        '--websocket-psgix-io', '/raw/', '--websocket-psgix-io', '/other']);
$endpoint->wait_until_serving('/');
$room = client($endpoint, 'subscribers', 5, "http://127.0.0.1:$publish_port/publish/");
is $room->{received}, 5, 'a ws-message from the publish endpoint reaches each subscriber';

# --websocket-psgix-io: those paths' upgrades are the app's
my ($raw_sock, $raw) = upgrade('/raw/chat', server => $endpoint);
like $raw, qr{\AHTTP/1\.1 200 }, '--websocket-psgix-io /raw/: an upgrade to /raw/chat goes to the app';
$raw .= read_until_match($raw_sock, qr/plain \d+/) unless $raw =~ /plain \d+/;
like $raw, qr/plain \d+/, '... which answers it';
(undef, $raw) = upgrade('/other', server => $endpoint);
like $raw, qr{\AHTTP/1\.1 200 }, '... and one to the second prefix given';
(undef, $raw) = upgrade('/chat', server => $endpoint);
like $raw, qr{\AHTTP/1\.1 101 }, '... others to the holder';

done_testing;
