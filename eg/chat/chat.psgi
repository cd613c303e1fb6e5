# A chat over WebSockets whose messages any worker answers: no worker is kept
# by a client.  From the top of the source tree, once built (tools/setup):
#
#   perl -Mblib script/serow --grip --workers 2 eg/chat/chat.psgi
#
# (or `serow --grip --workers 2 eg/chat/chat.psgi` once installed), then open
# http://localhost:5000/ in a few browser tabs and send a message from one:
# every tab shows it.
#
# The WebSocket itself lives in Serow's connection holder; the app speaks
# Pushpin's WebSocket-over-HTTP (docs/websocket.md): each of a connection's
# events reaches /ws as a POST that whichever worker is free answers.  At
# OPEN the app subscribes the connection to the room (a GRIP control
# message); a TEXT is published to the room with Serow::Holding::publish,
# and the holder writes it to every connection subscribed, the sender's
# included.
#
# The same app runs behind Pushpin (routes: `* localhost:5000,over_http`),
# served by any PSGI server, with Pushpin's publish endpoint named:
#
#   CHAT_PUBLISH_URL=http://localhost:5561/publish/ plackup -p 5000 eg/chat/chat.psgi
#
# t/websocket/chat_browser.t checks this page in headless Chromium.
use strict;
use warnings;
use Encode ();
use HTTP::Tiny ();
use JSON::PP ();
use Plack::Builder;
use Plack::Request;
use Serow::WebSocket::Events qw(decode_websocket_events encode_websocket_events
    websocket_control_message websocket_response_headers);

my $ROOM = 'room';
my $MAX_MESSAGE = 4096; # bytes: a chat line, not a file
my $page = do { local $/; <DATA> };

# To every connection in the room: through Pushpin's publish endpoint when
# one is named, else handed to Serow's holder from Perl.
my $publish_url = $ENV{CHAT_PUBLISH_URL};
sub publish {
    my ($text) = @_;
    if ($publish_url) {
        # JSON strings are characters: the text is UTF-8 (the WebSocket's rule for TEXT)
        my $items = { items => [{ channel => $ROOM,
            formats => { 'ws-message' => { content => Encode::decode('UTF-8', $text) } } }] };
        my $res = HTTP::Tiny->new(timeout => 10)->post($publish_url, {
            headers => { 'Content-Type' => 'application/json' },
            content => JSON::PP->new->utf8->encode($items) });
        warn "chat: publishing to $publish_url: $res->{status} $res->{reason}\n" unless $res->{success};
        return;
    }
    require Serow::Holding;
    Serow::Holding::publish({ channel => $ROOM, ws_message => { content => $text } });
}

# One request: the events of one connection since its last request, answered
# with the events to send it.  Messages of the app's own start with "m:"
# (GRIP's message prefix), control messages with "c:".
my $events = sub {
    my ($env) = @_;
    my $req = Plack::Request->new($env);
    return [400, ['Content-Type' => 'text/plain'], ["a WebSocket endpoint\n"]]
        unless $req->method eq 'POST' && ($req->content_type // '') eq 'application/websocket-events';
    my @out;
    for my $e (decode_websocket_events($req->content)) {
        my ($type, $content) = @$e{qw(type content)};
        if ($type eq 'OPEN') {
            push @out, ['OPEN'], ['TEXT', websocket_control_message(subscribe => channel => $ROOM)];
        } elsif ($type eq 'TEXT' && length $content > $MAX_MESSAGE) {
            push @out, ['TEXT', "m:(not sent: over $MAX_MESSAGE bytes)"];
        } elsif ($type eq 'TEXT' && length $content) {
            publish($content);
        } elsif ($type eq 'CLOSE') {
            push @out, ['CLOSE', $content]; # the close handshake: its code back
        }
        # BINARY is not chat; DISCONNECT needs nothing: the holder forgets
        # the subscription with the connection.
    }
    return [200, websocket_response_headers(grip => 1), [encode_websocket_events(@out)]];
};

builder {
    mount '/ws' => $events;
    mount '/' => sub { [200, ['Content-Type' => 'text/html; charset=utf-8'], [$page]] };
};

__DATA__
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Serow chat</title></head>
<body>
<h1>Serow chat</h1>
<p id="state">connecting</p>
<form id="say"><input name="text" autocomplete="off" maxlength="1000" autofocus> <button>Send</button></form>
<ul id="log"></ul>
<script>
var log = document.getElementById('log');
var state = document.getElementById('state');
var socket;
function connect() {
  socket = new WebSocket(location.origin.replace(/^http/, 'ws') + '/ws');
  socket.onopen = function () { state.textContent = 'connected'; };
  socket.onmessage = function (e) {
    var li = document.createElement('li');
    li.textContent = e.data;
    log.appendChild(li);
  };
  socket.onclose = function () {
    state.textContent = 'disconnected, reconnecting';
    setTimeout(connect, 2000);
  };
}
connect();
document.getElementById('say').onsubmit = function (e) {
  e.preventDefault();
  var input = this.elements.text;
  if (input.value && socket.readyState === WebSocket.OPEN) {
    socket.send(input.value);
    input.value = '';
  }
};
</script>
</body></html>
