# bench/websocket's app, in Pushpin's WebSocket-over-HTTP (docs/websocket.md):
# each connection is subscribed to the channel "bench" at its OPEN (GRIP's
# control message), and each message is echoed.  Serow with --grip serves it
# from its connection holder; Pushpin in front of a Serow without --grip
# sends it the same events.  The same app for both, so what differs is the
# server.
use strict;
use warnings;
use Serow::WebSocket::Events qw(decode_websocket_events encode_websocket_events
    websocket_response_headers websocket_control_message);

my $SUBSCRIBE = websocket_control_message('subscribe', channel => 'bench');

sub {
    my ($env) = @_;
    my $body = '';
    while ($env->{'psgi.input'}->read(my $chunk, 65536)) { $body .= $chunk }
    my @out;
    for my $e (decode_websocket_events($body)) {
        my ($type, $content) = @$e{qw(type content)};
        if ($type eq 'OPEN') {
            push @out, ['OPEN'], ['TEXT', $SUBSCRIBE];
        } elsif ($type eq 'TEXT' || $type eq 'BINARY') {
            # GRIP is on: an app's message starts with the prefix "m:"
            push @out, [$type, "m:$content"];
        } elsif ($type eq 'CLOSE') {
            push @out, ['CLOSE', $content];
        }
    }
    return [200, websocket_response_headers(grip => 1), [encode_websocket_events(@out)]];
};
