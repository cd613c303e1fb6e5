# Serow::WebSocket::Events, the apps' side of WebSocket-over-HTTP: decoding
# and encoding events, close events, control messages and the answer's
# headers; and held against the server's side (src/http/websocket_events.c,
# through t/websocket/events_codec.c): what one writes, the other reads the
# same.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();
use Serow::Test::Process qw(run_command);
use File::Temp ();
use JSON::PP ();

use Serow::WebSocket::Events qw(decode_websocket_events encode_websocket_events websocket_event
    websocket_close_event websocket_close_code websocket_control_message websocket_response_headers);

my $body = "OPEN\r\nTEXT 5\r\nhello\r\nBINARY 3\r\n\x00\r\n\r\nTEXT 0\r\n\r\n"
    . "PING 2\r\nhi\r\nPONG\r\nKEEP-ALIVE\r\nTEXT A\r\n0123456789\r\nCLOSE 5\r\n\x03\xE8bye\r\nDISCONNECT\r\n";
my @events = decode_websocket_events($body);
is_deeply [map { [$_->{type}, $_->{content}] } @events], [
    ['OPEN', undef], ['TEXT', 'hello'], ['BINARY', "\x00\r\n"], ['TEXT', ''], ['PING', 'hi'],
    ['PONG', undef], ['KEEP-ALIVE', undef], ['TEXT', '0123456789'], ['CLOSE', "\x03\xE8bye"],
    ['DISCONNECT', undef],
], 'decode: every kind of event, contents with CRLF and NUL inside, an upper-case hex length';
(my $lower = $body) =~ s/TEXT A\r\n/TEXT a\r\n/;
is encode_websocket_events(@events), $lower, 'encode: the same body back (lower-case hex)';
is encode_websocket_events(['OPEN'], ['TEXT', 'm:hi'], { type => 'CLOSE' }),
    "OPEN\r\nTEXT 4\r\nm:hi\r\nCLOSE\r\n", 'encode: pairs and hashes';
is_deeply [decode_websocket_events('')], [], 'decode: an empty body has no events';

for my $bad ("text 1\r\nx\r\n", "OPEN\n", "TEXT 2\r\nx\r\n", "TEXT 1\r\nxy\r\n", "TEXT \r\nx\r\n",
             "TEXT 1g\r\nx\r\n", "TEXT 00000000000000001\r\nx\r\n", "OPEN\r\nTEXT") {
    (my $shown = $bad) =~ s/\r/\\r/g;
    $shown =~ s/\n/\\n/g;
    ok !eval { decode_websocket_events($bad); 1 }, "decode: refuses $shown";
    like $@, qr/^websocket events: /, '... saying so';
}

ok !eval { websocket_event('text', 'x'); 1 }, 'an event type in lower case is refused';
ok !eval { websocket_event('TEXT', "\x{263A}"); 1 }, 'content in characters is refused';

my $close = websocket_close_event(1001, "gon\x{e9}");
is $close->{content}, "\x03\xE9gon\xC3\xA9", 'close event: the code in two bytes, the reason in UTF-8';
is_deeply [websocket_close_code($close)], [1001, "gon\x{e9}"], 'close code: read back';
is_deeply [websocket_close_code(websocket_close_event())], [], 'close event without a code';
ok !eval { websocket_close_event(1005); 1 }, 'close event: 1005 is never sent';
ok !eval { websocket_close_event(1000, 'x' x 124); 1 }, 'close event: a reason over 123 bytes';

my $control = websocket_control_message(subscribe => channel => "caf\x{e9}");
like $control, qr/^c:\{/, 'control message: c: and JSON';
is_deeply(JSON::PP->new->utf8->decode(substr $control, 2), { type => 'subscribe', channel => "caf\x{e9}" },
    "... with the type and fields, characters in UTF-8");

is_deeply websocket_response_headers(), ['Content-Type', 'application/websocket-events'],
    'headers: the content type';
is_deeply websocket_response_headers(grip => 1, headers => ['Sec-WebSocket-Protocol', 'chat']),
    ['Content-Type', 'application/websocket-events', 'Sec-WebSocket-Extensions', 'grip',
     'Sec-WebSocket-Protocol', 'chat'], 'headers: grip, then the app\'s';
is websocket_response_headers(grip => 1, message_prefix => 'm:')->[3], 'grip', 'headers: the default prefix is left out';
is websocket_response_headers(grip => 1, message_prefix => '')->[3], 'grip; message-prefix=""',
    'headers: an empty prefix';
is websocket_response_headers(grip => 1, message_prefix => 'a"b')->[3], 'grip; message-prefix="a\"b"',
    'headers: a prefix quoted';

# ---- against the server's side -------------------------------------------------

my $build = Serow::Test::CProgram::build(name => 'events_codec',
    sources => [qw(t/websocket/events_codec.c src/http/websocket_events.c src/http/websocket_frame.c
                   src/http/grip_instruct.c)]);
SKIP: {
    skip 'no C compiler (build-essential)', 1 unless $build->{compiler};
    is $build->{status}, 0, 'the server\'s codec compiled' or diag $build->{output};
    skip 'not compiled', 1 unless $build->{binary};

    my $c = sub {
        my ($mode, $input) = @_;
        my $tmp = File::Temp->new;
        binmode $tmp;
        print $tmp $input;
        close $tmp;
        my $out = run_command('sh', '-c', "exec \"\$0\" \"\$1\" < \"\$2\"", $build->{binary}, $mode, "$tmp");
        is $out->{status}, 0, "events_codec $mode ran" or diag $out->{output};
        return $out->{output};
    };

    my @app = (['OPEN'], ['TEXT', "m:caf\xC3\xA9"], ['BINARY', join('', map { chr } 0 .. 255) x 3],
               ['TEXT', websocket_control_message(subscribe => channel => 'room-1')], ['PING', ''],
               { %{ websocket_close_event(4000, 'done') } });
    my $expected = join '', map {
        my $e = ref $_ eq 'ARRAY' ? { type => $_->[0], content => $_->[1] } : $_;
        "$e->{type} " . (defined $e->{content} ? unpack('H*', $e->{content}) : '-') . "\n"
    } @app;
    is $c->('parse', encode_websocket_events(@app)), $expected, 'what the module encodes, the server reads';

    # (events_codec encode takes no empty content)
    my $lines = join '', map { "$_->[0] " . (defined $_->[1] ? unpack('H*', $_->[1]) : '-') . "\n" }
        (['OPEN'], ['TEXT', 'hello'], ['BINARY', "\x00\xFF"], ['CLOSE', "\x03\xE8bye"], ['DISCONNECT']);
    my $server_body = $c->('encode', $lines);
    is_deeply [map { [$_->{type}, $_->{content}] } decode_websocket_events($server_body)],
        [['OPEN', undef], ['TEXT', 'hello'], ['BINARY', "\x00\xFF"], ['CLOSE', "\x03\xE8bye"], ['DISCONNECT', undef]],
        'what the server encodes, the module reads';

    like $c->('control', substr(websocket_control_message(subscribe => channel => 'news'), 2)), qr/^1 news$/,
        'the server reads the module\'s subscribe';
    like $c->('control', substr(websocket_control_message(unsubscribe => channel => 'news'), 2)), qr/^2 news$/,
        '... and unsubscribe';
    like $c->('control', substr(websocket_control_message('detach'), 2)), qr/^3 $/, '... and detach';

    for my $prefix (undef, '', 'a"b', 'x:') {
        my $value = websocket_response_headers(grip => 1, message_prefix => $prefix)->[3];
        my $want = '1 ' . unpack('H*', $prefix // 'm:');
        is $c->('grip', $value), "$want\n", "the server reads the grip extension [$value]";
    }
}

done_testing;
