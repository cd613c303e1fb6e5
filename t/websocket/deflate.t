use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Serow::Test qw(start_server raw_connect read_until_match find_command need_debian_packages);
use Serow::WebSocket::Events qw(decode_websocket_events encode_websocket_events
    websocket_response_headers websocket_control_message);

# permessage-deflate (RFC 7692) on the WebSockets the connection holder
# serves (docs/websocket.md): Python's websockets, which offers it by
# default, against an echo app: compressed messages both ways (the server's
# seen with RSV1), the limit on what a message inflates to (1009), text not
# UTF-8 once inflated (1007), a client without the extension, the offers
# declined, --websocket-deflate off, and one publish to a mix of clients.

my $python = (grep { defined && system("$_ -c 'import websockets' 2>/dev/null") == 0 }
    '/usr/bin/python3', find_command('python3'))[0];
unless ($python) {
    need_debian_packages('python3-websockets');
    $python = '/usr/bin/python3';
}
my $client_script = 't/websocket/deflate_client.py';
my $published = 'to all: ' . 'the same words again and again ' x 8;

my $app = sub {
    my ($env) = @_;
    if (($env->{CONTENT_TYPE} // '') ne 'application/websocket-events') {
        Serow::Holding::publish({ channel => 'room', ws_message => { content => $published } })
            if $env->{PATH_INFO} eq '/publish';
        return [200, ['Content-Type' => 'text/plain'], ["plain\n"]];
    }
    if ($env->{PATH_INFO} eq '/room') {
        return [200, websocket_response_headers(grip => 1),
            [encode_websocket_events(['OPEN'], ['TEXT', websocket_control_message('subscribe', channel => 'room')])]];
    }
    my $body = '';
    while ($env->{'psgi.input'}->read(my $chunk, 65536)) { $body .= $chunk }
    my @out = map { $_->{type} eq 'OPEN' ? ['OPEN']
                  : $_->{type} =~ /\A(?:TEXT|BINARY|CLOSE)\z/ ? [$_->{type}, $_->{content}]
                  : () } decode_websocket_events($body);
    return [200, websocket_response_headers(), [encode_websocket_events(@out)]];
};

sub client {
    my ($server, $command, @args) = @_;
    my $url = 'ws://127.0.0.1:' . $server->port . ($command eq 'subscribers' ? '/room' : '/chat');
    open my $out, '-|', $python, $client_script, $command, $url, @args
        or die "cannot run $python: $!";
    my $json = do { local $/; <$out> };
    close $out;
    my $seen = eval { JSON::PP::decode_json($json) };
    diag "the client printed: $json" unless $seen;
    return $seen // {};
}

my $server = start_server(app => $app, options => ['--workers', 2, '--grip']);
$server->wait_until_serving('/');

my $echo = client($server, 'echo');
is $echo->{extensions}, 'permessage-deflate; server_no_context_takeover; client_no_context_takeover',
    'permessage-deflate negotiated, neither side keeping a context';
ok $echo->{$_}, "compressed both ways: the $_ message echoed" for qw(chat small doc binary large fragmented);
is $echo->{close_code}, 4000, '... and the close';
is_deeply $echo->{rsv1}, [JSON::PP::true, JSON::PP::false, (JSON::PP::true) x 4],
    "the server's messages compressed, but for the one under 64 bytes";

my $plain = client($server, 'echo_plain');
is $plain->{extensions}, undef, 'a client that offers no extension gets none';
ok $plain->{$_}, "... and its $_ message echoed" for qw(chat small doc binary large fragmented);

is client($server, 'over_limit')->{code}, 1009,
    'a compressed message that inflates past the 1 MiB limit: 1009';
is client($server, 'bad_utf8')->{code}, 1007, 'compressed text that is not UTF-8 once inflated: 1007';

my $room = client($server, 'subscribers', 5, $server->url . '/publish');
is $room->{negotiated}, 5, 'five subscribers with permessage-deflate';
is $room->{declined}, 5, '... five without';
is $room->{received}, 10, 'one publish reaches all ten';
is_deeply $room->{rsv1}, [(JSON::PP::true) x 5], '... compressed for those that negotiated it';

# ---- offers -----------------------------------------------------------------

sub extensions_answered {
    my ($on, @offers) = @_;
    my $sock = raw_connect($on);
    syswrite $sock, "GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        . "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        . join('', map { "Sec-WebSocket-Extensions: $_\r\n" } @offers) . "\r\n";
    my $head = read_until_match($sock, qr/\r\n\r\n/);
    return 'no 101' unless $head =~ /\AHTTP\/1\.1 101 /;
    return $head =~ /^Sec-WebSocket-Extensions: ([^\r]*)\r$/m ? $1 : '';
}

like extensions_answered($server, 'permessage-deflate; server_max_window_bits=10'),
    qr/\Apermessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10\z/,
    'a smaller window asked for: used, and named';
is extensions_answered($server, 'permessage-deflate; server_max_window_bits=8'), '',
    'a window of 8 bits (which zlib cannot keep to): declined, still a 101';
is extensions_answered($server, 'permessage-deflate; x-unknown', 'permessage-deflate; client_max_window_bits'),
    'permessage-deflate; server_no_context_takeover; client_no_context_takeover',
    'an offer with an unknown parameter declined, the next accepted';
is extensions_answered($server, 'permessage-deflate; server_no_context_takeover; server_no_context_takeover'), '',
    'a parameter given twice: declined';
is extensions_answered($server, 'permessage-deflate;;'), '', 'a field off the grammar: no extension, still a 101';

# ---- --websocket-deflate off --------------------------------------------------

my $off = start_server(app => $app, options => ['--workers', 1, '--grip', '--websocket-deflate', 'off']);
$off->wait_until_serving('/');
my $declined = client($off, 'echo');
is $declined->{extensions}, undef, '--websocket-deflate off: the offer declined';
ok $declined->{chat} && $declined->{large}, '... and messages echoed';
is_deeply $declined->{rsv1}, [], '... none compressed';

done_testing;
