# Server-sent events held by Serow's connection holder, with no worker each.
# From the top of the source tree, once built (tools/setup):
#
#   perl -Mblib script/serow --grip --workers 2 eg/live/live.psgi
#
# (or `serow --grip --workers 2 eg/live/live.psgi` once installed), then
# open http://localhost:5000/ in a few browser tabs and send a message from
# one: every tab shows it.  Or from the shell:
#
#   curl -N localhost:5000/events                    # a subscriber
#   curl -d 'text=hello' localhost:5000/say          # a publish
#
# t/app/live_browser.t checks this page in headless Chromium, t/app/live.t
# with plain sockets; docs/holding.md shows it behind nginx or HAProxy.
#
# GET /events answers with GRIP headers (as behind Pushpin): Grip-Hold: stream
# makes the worker write the head and the first body, hand the connection to
# the holder and go on to the next request.  POST /say publishes one event
# from Perl with Serow::Holding::publish: the holder writes it to every
# subscriber of the channel, and keeps the last 16 for a client that
# reconnects with Last-Event-ID (EventSource does that by itself).
# docs/holding.md has the whole story.
use strict;
use warnings;
use Plack::Request;
use Serow::Holding;

my $next_id = time * 1000; # ids that grow across restarts of the app
my $page = do { local $/; <DATA> };

sub event {
    my ($id, $text) = @_;
    $text =~ s/[\r\n]+/ /g; # one data line
    return "id: $id\ndata: $text\n\n";
}

sub {
    my ($env) = @_;
    my $req = Plack::Request->new($env);
    my $path = $req->path_info;
    if ($path eq '/events') {
        my $last = $req->header('Last-Event-ID');
        my $channel = 'chat';
        $channel .= "; prev-id=$last" if defined $last && $last =~ /^[0-9-]+$/;
        return [200, [
            'Content-Type'    => 'text/event-stream',
            'Cache-Control'   => 'no-cache',
            # Behind nginx: each event passed on as it comes, whatever its
            # proxy_buffering (docs/holding.md, "Behind nginx or HAProxy").
            'X-Accel-Buffering' => 'no',
            'Grip-Hold'       => 'stream',
            'Grip-Channel'    => $channel,
            'Grip-Keep-Alive' => ':\n\n; format=cstring; timeout=20',
        ], [":connected\n\n"]];
    }
    if ($path eq '/say' && $req->method eq 'POST') {
        my $text = $req->body_parameters->get('text') // '';
        return [400, ['Content-Type' => 'text/plain'], ["no text\n"]] unless length $text;
        my $id = ++$next_id . "-$$"; # unique across workers
        Serow::Holding::publish({ channel => 'chat', id => $id,
            http_stream => { content => event($id, $text) } });
        return [200, ['Content-Type' => 'text/plain'], ["published $id\n"]];
    }
    return [200, ['Content-Type' => 'text/html; charset=utf-8'], [$page]];
};

__DATA__
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Serow live</title></head>
<body>
<h1>Serow live</h1>
<form id="say"><input name="text" autocomplete="off" autofocus> <button>Send</button></form>
<ul id="log"></ul>
<script>
var log = document.getElementById('log');
var events = new EventSource('/events');
events.onmessage = function (e) {
  var li = document.createElement('li');
  li.textContent = e.data;
  log.appendChild(li);
};
document.getElementById('say').onsubmit = function (e) {
  e.preventDefault();
  var input = this.elements.text;
  fetch('/say', {method: 'POST', body: new URLSearchParams({text: input.value})});
  input.value = '';
};
</script>
</body></html>
