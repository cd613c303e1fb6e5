use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use IO::Select ();
use IO::Socket::IP ();
use JSON::PP ();
use Time::HiRes ();
use Serow::Test qw(start_server raw_connect read_until_match read_until_close wait_until);
use Serow::Options ();
use Serow::WebSocket::Events qw(decode_websocket_events encode_websocket_events
    websocket_response_headers websocket_control_message);

# The parts of a held WebSocket's life past its messages (docs/websocket.md):
# the limits as options, the holder's pings of a quiet client and the close
# of one that does not answer, the client's address on the requests to the
# app, and GRIP's set-meta, keep-alive and detach.  A raw client, so that
# what it answers (or does not) is the test's to say.

my $ROOT = Serow::Test::root();
my $record_dir = File::Temp->newdir;

# An app with GRIP on: what a message asks for, it does.
my $app = sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/plain'], ['plain']]
        if ($env->{CONTENT_TYPE} // '') ne 'application/websocket-events';
    my $body = '';
    while ($env->{'psgi.input'}->read(my $chunk, 65536)) { $body .= $chunk }
    my $id = $env->{HTTP_CONNECTION_ID};
    my (@out, @headers);
    for my $e (decode_websocket_events($body)) {
        my ($t, $c) = @$e{qw(type content)};
        if (open my $log, '>>', "$record_dir/$id") { print $log "$t " . ($c // '') . "\n" }
        if ($t eq 'OPEN') {
            push @out, ['OPEN'];
        } elsif ($t eq 'TEXT' && $c eq 'who') {
            push @out, ['TEXT', 'm:' . join ' ', map { "$_=" . ($env->{$_} // '') }
                qw(REMOTE_ADDR HTTP_X_FORWARDED_FOR HTTP_META_USER HTTP_META_ROLE)];
        } elsif ($t eq 'TEXT' && $c =~ /\Aset (\S+) ?(.*)\z/) {
            push @out, ['TEXT', websocket_control_message('set-meta', name => $1, value => $2)],
                ['TEXT', 'm:set'];
        } elsif ($t eq 'TEXT' && $c =~ /\Aunset (\S+)\z/) {
            push @out, ['TEXT', websocket_control_message('set-meta', name => $1)], ['TEXT', 'm:unset'];
        } elsif ($t eq 'TEXT' && $c =~ /\Aheader (\S+) ?(.*)\z/) {
            # Pushpin's other way: a Set-Meta-NAME field on the answer
            push @headers, "Set-Meta-$1" => $2;
            push @out, ['TEXT', 'm:header'];
        } elsif ($t eq 'TEXT' && $c =~ /\Akeep-alive (\w+) (\w+)\z/) {
            push @out, ['TEXT', websocket_control_message('keep-alive', content => 'still here',
                timeout => 1, mode => $1, 'message-type' => $2)], ['TEXT', 'm:kept'];
        } elsif ($t eq 'TEXT' && $c eq 'detach') {
            push @out, ['TEXT', websocket_control_message('detach')], ['TEXT', 'm:detached'];
        } elsif ($t eq 'TEXT' || $t eq 'BINARY') {
            push @out, [$t, "m:$c"];
        } elsif ($t eq 'CLOSE') {
            push @out, ['CLOSE', $c];
        }
    }
    return [200, websocket_response_headers(grip => 1, headers => \@headers), [encode_websocket_events(@out)]];
};

# ---- a raw client -----------------------------------------------------------

# A client's frame: masked, FIN set.
sub frame {
    my ($opcode, $payload) = @_;
    my $len = length $payload;
    my $head = $len < 126 ? chr(0x80 | $len)
        : $len < 65536 ? chr(0x80 | 126) . pack('n', $len) : chr(0x80 | 127) . pack('Q>', $len);
    my $key = "\x0a\x0b\x0c\x0d";
    return chr(0x80 | $opcode) . $head . $key . ($payload ^ substr($key x (1 + $len / 4), 0, $len));
}

sub ws_open {
    my ($server, %headers) = @_;
    # from another loopback address than the server's, so that the
    # client's address is not the one a socket pair would give (127.0.0.1)
    my $from = delete $headers{from};
    my $sock = $from ? IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $server->port,
        LocalHost => $from) || die "connect from $from: $@" : raw_connect($server);
    syswrite $sock, "GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        . "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        . join('', map { "$_: $headers{$_}\r\n" } sort keys %headers) . "\r\n";
    my $head = read_until_match($sock, qr/\r\n\r\n/);
    (my $rest = $head) =~ s/\A.*?\r\n\r\n//s;
    return { sock => $sock, head => $head, buffer => $rest };
}

# The next frame from the server: [opcode, payload]; undef at the end of
# the connection (or after a minute without one).
sub next_frame {
    my ($ws) = @_;
    my $sel = IO::Select->new($ws->{sock});
    my $deadline = Time::HiRes::time + 60;
    for (;;) {
        my $b = $ws->{buffer};
        if (length $b >= 2) {
            my ($first, $len) = unpack 'CC', $b;
            my $at = 2;
            ($len, $at) = (unpack('n', substr $b, 2, 2), 4) if $len == 126 && length $b >= 4;
            ($len, $at) = (unpack('Q>', substr $b, 2, 8), 10) if $len == 127 && length $b >= 10;
            if ($len < 126 || $at > 2) {
                if (length $b >= $at + $len) {
                    $ws->{buffer} = substr $b, $at + $len;
                    return [$first & 0x0f, substr $b, $at, $len];
                }
            }
        }
        my $left = $deadline - Time::HiRes::time;
        return undef if $left <= 0 || !$sel->can_read($left);
        sysread($ws->{sock}, $ws->{buffer}, 65536, length $ws->{buffer}) or return undef;
    }
}

# The next data message, pings answered on the way (unless told not to),
# counted in $ws->{pings}.
sub next_message {
    my ($ws, %o) = @_;
    while (my $f = next_frame($ws)) {
        if ($f->[0] == 9) {
            $ws->{pings}++;
            syswrite $ws->{sock}, frame(10, $f->[1]) unless $o{no_pongs};
            return 'PING' if $o{until_ping};
            next;
        }
        return $f->[0] == 8 ? ['CLOSE', unpack('n', $f->[1])] : $f->[1];
    }
    return undef;
}

sub say_to {
    my ($ws, $text) = @_;
    syswrite $ws->{sock}, frame(1, $text);
    return next_message($ws);
}

# ---- the options --------------------------------------------------------------

my $defaults = Serow::Options->defaults;
is $defaults->{websocket_max_message}, 1024 * 1024, '--websocket-max-message: 1M by default';
is $defaults->{websocket_max_gathered}, 64 * 1024, '--websocket-max-gathered: 64K by default';
is $defaults->{websocket_ping_interval}, 30, '--websocket-ping-interval: 30 s by default';
is $defaults->{websocket_ping_timeout}, 30, '--websocket-ping-timeout: 30 s by default';
for ([websocket_max_message => 0, qr/--websocket-max-message: 0 is not between 1 and 1G/],
     [websocket_max_message => '2G', qr/--websocket-max-message: \d+ is not between 1 and 1G/],
     [websocket_max_gathered => 'lots', qr/--websocket-max-gathered: 'lots' is not a size/],
     [websocket_ping_interval => 0, qr/--websocket-ping-interval: '0' is not a positive number of seconds/],
     [websocket_ping_timeout => -1, qr/--websocket-ping-timeout: '-1' is not a positive number of seconds/],
     [websocket_max_message => '1M', max_body_size => '512K', grip => 1,
        qr/--websocket-max-message: with --websocket-max-gathered, .* over --max-body-size/]) {
    my ($re, %given) = (pop @$_, @$_);
    ok !eval { Serow::Options->from_hash(%given); 1 }, join(' ', %given) . ': refused';
    like $@, $re, '... saying why';
}
my ($status, $text) = Serow::Test::run_serow('--websocket-max-message', 0, "$ROOT/eg/hello.psgi");
is $status, 2, 'on the command line too: exit status 2';
like $text, qr/--websocket-max-message: 0 is not between 1 and 1G/, '... and the message';

my $access_log = "$record_dir/access.log"; # (no Connection-Id: never an app's record)
my $server = start_server(app => $app, options => ['--workers', 1, '--grip', '--access-log', $access_log,
    '--websocket-max-message', 1000, '--websocket-max-gathered', 100]);
$server->wait_until_serving('/');

my $ws = ws_open($server);
like $ws->{head}, qr{\AHTTP/1\.1 101 }, 'open';
is say_to($ws, 'x' x 1000), 'x' x 1000, '--websocket-max-message 1000: a message of 1000 bytes passes';
syswrite $ws->{sock}, frame(1, "burst $_ " . 'y' x 50) for 1 .. 30;
my @got = map { next_message($ws) } 1 .. 30;
is_deeply \@got, [map { "burst $_ " . 'y' x 50 } 1 .. 30],
    '--websocket-max-gathered 100: 30 messages sent at once all reach the app, in order';
is_deeply say_to($ws, 'x' x 1001), ['CLOSE', 1009], '... one of 1001 bytes is closed with 1009';

# ---- the client's address and set-meta -------------------------------------

$ws = ws_open($server, from => '127.0.0.2', 'Meta-User' => 'mallory', 'X-Forwarded-For' => '192.0.2.7');
is say_to($ws, 'who'),
    'REMOTE_ADDR=127.0.0.2 HTTP_X_FORWARDED_FOR=192.0.2.7, 127.0.0.2 HTTP_META_USER= HTTP_META_ROLE=',
    "the event requests: the client's REMOTE_ADDR, its address appended to X-Forwarded-For, "
    . "no Meta-* of the client's";
ok wait_until(sub { -e $access_log && `cat $access_log` =~ m{^127\.0\.0\.2 .*"POST /chat }m }),
    "the access log's line of an event request has the client's address";
is say_to($ws, 'set User alice'), 'set', 'set-meta';
is say_to($ws, 'set Role admin'), 'set', 'set-meta again';
is say_to($ws, 'set user bob'), 'set', 'set-meta of the first name, in another case';
is say_to($ws, 'who'),
    'REMOTE_ADDR=127.0.0.2 HTTP_X_FORWARDED_FOR=192.0.2.7, 127.0.0.2 HTTP_META_USER=bob HTTP_META_ROLE=admin',
    'the next requests carry the Meta-* fields set (the last value of each)';
is say_to($ws, 'unset Role'), 'unset', 'set-meta with no value';
like say_to($ws, 'who'), qr/HTTP_META_USER=bob HTTP_META_ROLE=\z/, '... takes the field away';
is say_to($ws, 'header Role guest'), 'header', 'Set-Meta-Role on an answer';
like say_to($ws, 'who'), qr/HTTP_META_USER=bob HTTP_META_ROLE=guest\z/, '... sets the field too';
is say_to($ws, 'header User'), 'header', 'Set-Meta-User empty';
like say_to($ws, 'who'), qr/HTTP_META_USER= HTTP_META_ROLE=guest\z/, '... takes it away';

# ---- keep-alive -----------------------------------------------------------------

for my $mode (qw(idle interval)) {
    $ws = ws_open($server);
    is say_to($ws, "keep-alive $mode text"), 'kept', "keep-alive, mode $mode";
    is next_message($ws), 'still here', '... its content reaches the idle client';
    is next_message($ws), 'still here', '... again';
    is say_to($ws, 'hello'), 'hello', '... and the connection serves messages as before';
}
$ws = ws_open($server);
is say_to($ws, 'keep-alive idle ping'), 'kept', 'keep-alive as a ping';
my $frame;
do { $frame = next_frame($ws) } until !$frame || $frame->[0] != 10;
is_deeply $frame, [9, 'still here'], '... a ping frame with its content';

# ---- detach ---------------------------------------------------------------------

$ws = ws_open($server);
is say_to($ws, 'detach'), 'detached', 'detach';
syswrite $ws->{sock}, frame(1, 'after detach');
syswrite $ws->{sock}, frame(8, pack('n', 1000));
is_deeply next_message($ws), ['CLOSE', 1000], "the client's close is answered by the holder";
# one worker: a request of the detached connection's would have been served
# before this one's
my $other = ws_open($server);
is say_to($other, 'ping?'), 'ping?', 'another connection served';
my ($detached) = grep { !-z $_ && `cat $_` =~ /detach/ } glob "$record_dir/*";
my $seen = $detached ? do { local (@ARGV, $/) = $detached; <> } : '';
is $seen, "OPEN \nTEXT detach\n", 'the app heard nothing of the detached connection after detach';

# ---- idle pings -----------------------------------------------------------------

my $pinging = start_server(app => $app, options => ['--workers', 1, '--grip',
    '--websocket-ping-interval', 0.3, '--websocket-ping-timeout', 2]);
$pinging->wait_until_serving('/');

$ws = ws_open($pinging);
is next_message($ws, until_ping => 1), 'PING', 'a quiet client is pinged';
next_message($ws, until_ping => 1) for 1 .. 4;
is $ws->{pings}, 5, '... again and again while it answers';
is say_to($ws, 'still open'), 'still open', '... and its connection stays open';

# Python's websockets answers pings as a browser does, unseen by its user
my $python = (grep { defined && system("$_ -c 'import websockets' 2>/dev/null") == 0 }
    '/usr/bin/python3', Serow::Test::find_command('python3'))[0];
SKIP: {
    skip 'no python3-websockets', 3 unless $python;
    open my $out, '-|', $python, 't/websocket/ws_client.py', 'idle', 'ws://127.0.0.1:' . $pinging->port . '/chat'
        or die "cannot run $python: $!";
    my $json = do { local $/; <$out> };
    close $out;
    my $seen = eval { JSON::PP::decode_json($json) } // {};
    is $seen->{kept}, 'kept', "Python's websockets, its own pings off: keep-alive set";
    is $seen->{keep_alives}, 3, '... three keep-alives of a second each arrive (past the ping timeout), the holder\'s pings answered';
    is $seen->{echo}, 'hello', '... and the connection is still open' or diag "the client printed: $json";
}

my $silent = ws_open($pinging);
is say_to($silent, 'silent one'), 'silent one', 'a client that says one thing';
is next_message($silent, until_ping => 1, no_pongs => 1), 'PING', 'a client that does not answer is pinged';
my $after = next_frame($silent);
is $after, undef, '... then closed, with no close frame (the client sees 1006)';
my ($silent_log) = grep { `cat $_` =~ /silent one/ } glob "$record_dir/*";
ok wait_until(sub { `cat $silent_log` =~ /^DISCONNECT/m }), '... and the app hears DISCONNECT';

done_testing;
