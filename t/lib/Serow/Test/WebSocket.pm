package Serow::Test::WebSocket;
use strict;
use warnings;

# The app the WebSocket tests' real clients talk to (t/websocket/holder.t
# and tls.t with Python's websockets, t/websocket/node_ws.t with Node's ws),
# written with Serow::WebSocket::Events as an app would be.

use Exporter 'import';
use Time::HiRes ();
use Serow::WebSocket::Events qw(decode_websocket_events encode_websocket_events
    websocket_response_headers websocket_control_message);

our @EXPORT_OK = qw(websocket_test_app);

# websocket_test_app(disconnected => FILE): an echo app in WebSocket-over-HTTP.
#   a request that is no WebSocket's  "plain PID"; at /publish it first
#                       publishes "to all" to the channel "room"
#   /deny               refuses the OPEN (403, "not here")
#   /room               GRIP on: subscribed to "room" at the OPEN
#   any other path, its TEXT messages:
#     pid               answered "pid PID"
#     wait FILE         answered "pid PID" once FILE exists: held in the app
#                       until the test makes it, so another worker must serve
#                       what comes meanwhile
#     close CODE        the app's close with CODE and "app done"
#     ping me           the app's ping ("from the app"), then "pinged"
#     anything else     echoed, as BINARY and CLOSE are
#   and a DISCONNECT creates the file disconnected names.
sub websocket_test_app {
    my (%o) = @_;
    return sub {
        my ($env) = @_;
        if (($env->{CONTENT_TYPE} // '') ne 'application/websocket-events') {
            Serow::Holding::publish({ channel => 'room', ws_message => { content => 'to all' } })
                if $env->{PATH_INFO} eq '/publish';
            return [200, ['Content-Type' => 'text/plain'], ["plain $$"]];
        }
        return [403, ['Content-Type' => 'text/plain'], ["not here\n"]] if $env->{PATH_INFO} eq '/deny';
        if ($env->{PATH_INFO} eq '/room') {
            return [200, websocket_response_headers(grip => 1),
                [encode_websocket_events(['OPEN'], ['TEXT', websocket_control_message('subscribe', channel => 'room')])]];
        }
        my $body = '';
        while ($env->{'psgi.input'}->read(my $chunk, 65536)) { $body .= $chunk }
        my @out;
        for my $e (decode_websocket_events($body)) {
            my ($t, $c) = @$e{qw(type content)};
            if ($t eq 'OPEN') {
                push @out, ['OPEN'];
            } elsif ($t eq 'TEXT' && $c eq 'pid') {
                push @out, ['TEXT', "pid $$"];
            } elsif ($t eq 'TEXT' && $c =~ /\Await (.+)\z/) {
                my ($gate, $deadline) = ($1, time + 60);
                Time::HiRes::sleep(0.01) until -e $gate || time > $deadline;
                push @out, ['TEXT', "pid $$"];
            } elsif ($t eq 'TEXT' && $c =~ /\Aclose (\d+)\z/) {
                push @out, ['CLOSE', pack('n', $1) . 'app done'];
            } elsif ($t eq 'TEXT' && $c eq 'ping me') {
                push @out, ['PING', 'from the app'], ['TEXT', 'pinged'];
            } elsif ($t eq 'TEXT' || $t eq 'BINARY' || $t eq 'CLOSE') {
                push @out, [$t, $c];
            } elsif ($t eq 'DISCONNECT' && defined $o{disconnected}) {
                open my $fh, '>', $o{disconnected} or die "$o{disconnected}: $!";
            }
        }
        return [200, websocket_response_headers(), [encode_websocket_events(@out)]];
    };
}

1;
