use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use IO::Select ();
use IPC::Open2 ();
use JSON::PP ();
use Time::HiRes ();
use Serow::Test qw(start_server wait_until find_command need_debian_packages);
use Serow::Test::Prometheus ();
use Serow::Test::TLS qw(test_pki tls_options tls_connect tls_request);
use Serow::Test::WebSocket qw(websocket_test_app);

# WebSocket over TLS in the connection holder (docs/websocket.md): a wss://
# upgrade is handed to the holder with the connection's record state, as a
# ws:// one is, and the holder opens and seals its records.  Python's
# websockets (t/websocket/ws_client.py) against an echo app, as in
# holder.t; records laid out by the test (t/websocket/tls_records.py) for
# what the transport keeps where epoll cannot see it; KeyUpdate from
# openssl s_client; HUP and stop with wss connections held; psgix.io over
# TLS for --websocket-psgix-io's paths.

need_debian_packages(qw(openssl));
my $python = (grep { defined && system("$_ -c 'import websockets' 2>/dev/null") == 0 }
    '/usr/bin/python3', find_command('python3'))[0];
unless ($python) {
    need_debian_packages('python3-websockets');
    $python = '/usr/bin/python3';
}

my $pki = test_pki();
my $record_dir = File::Temp->newdir;
my $gate_dir = File::Temp->newdir;

# Serow::Test::WebSocket's echo app (holder.t's and node_ws.t's), and the
# app's own psgix.io WebSocket under /raw/.
my $echo = websocket_test_app(disconnected => "$record_dir/disconnected");
my $app = sub {
    my ($env) = @_;
    return psgix_io_echo($env) if $env->{PATH_INFO} =~ m{\A/raw/};
    return $echo->($env);
};

# --websocket-psgix-io's paths: the app's own WebSocket on psgix.io
# (Serow::TLSSocket): the 101, then each text frame echoed until a close.
sub psgix_io_echo {
    my ($env) = @_;
    require Digest::SHA;
    my $io = $env->{'psgix.io'} or die "no psgix.io\n";
    my $accept = Digest::SHA::sha1_base64($env->{HTTP_SEC_WEBSOCKET_KEY}
        . '258EAFA5-E914-47DA-95CA-C5AB0DC85B11') . '=';
    syswrite $io, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        . "Connection: Upgrade\r\nSec-WebSocket-Accept: $accept\r\n\r\n";
    my $buf = '';
    my $sel = IO::Select->new($io);
    while (1) {
        while (my ($op, $payload) = take_frame(\$buf)) {
            syswrite $io, chr(0x80 | $op) . chr(length $payload) . $payload; # (short ones only)
            last if $op == 8; # (the close answered: the end)
        }
        last unless $io->pending || $sel->can_read(60);
        my $n = sysread($io, $buf, 65536, length $buf);
        last unless $n;
    }
    close $io;
    return sub { };
}

# A client's frame from the front of $$buf (masked): (opcode, payload), or ().
sub take_frame {
    my ($buf) = @_;
    return () if length $$buf < 6;
    my ($b0, $b1) = unpack 'CC', $$buf;
    my $len = $b1 & 0x7f;
    return () if $len > 125 || length $$buf < 6 + $len;
    my $key = substr($$buf, 2, 4);
    my $payload = substr($$buf, 6, $len) ^ substr($key x ($len / 4 + 1), 0, $len);
    substr($$buf, 0, 6 + $len, '');
    return ($b0 & 0x0f, $payload);
}

sub url { my ($server, $path) = @_; 'wss://127.0.0.1:' . $server->port . $path }

sub client {
    my ($server, @args) = @_;
    my $path = $args[0] eq 'subscribers' ? '/room' : $args[0] eq 'once' ? '/raw/ws' : '/chat';
    open my $out, '-|', $python, 't/websocket/ws_client.py', '--ca', $pki->{ca}, $args[0],
        url($server, $path), @args[1 .. $#args] or die "cannot run $python: $!";
    my $json = do { local $/; <$out> };
    close $out;
    my $seen = eval { JSON::PP::decode_json($json) };
    diag "the client printed: $json" unless $seen;
    return $seen // {};
}

sub records_client {
    my ($server, @args) = @_;
    open my $out, '-|', $python, 't/websocket/tls_records.py', $args[0], $server->port, $pki->{ca},
        @args[1 .. $#args] or die "cannot run $python: $!";
    my $json = do { local $/; <$out> };
    close $out;
    my $seen = eval { JSON::PP::decode_json($json) };
    diag "the client printed: $json" unless $seen;
    return $seen // {};
}

sub metric {
    my ($server, $name) = @_;
    my $sock = tls_connect($server, $pki) or return undef;
    my $res = tls_request($sock, '/metrics', headers => { Connection => 'close' });
    return undef unless $res && $res->{status} == 200;
    return Serow::Test::Prometheus::value(Serow::Test::Prometheus::parse($res->{body}), $name);
}

my $server = start_server(app => $app, options => ['--workers', 2, '--grip', '--metrics-path', '/metrics',
    '--websocket-psgix-io', '/raw/', tls_options($pki)]);

my $echo = client($server, 'echo');
is $echo->{text}, 'hello', 'wss: a text message echoed';
is $echo->{binary}, '0001ff62696e617279', 'a binary message echoed';
is $echo->{fragmented}, "fragmented \x{e9}t\x{e9}", 'a message in three frames echoed as one';
ok $echo->{big}, 'a 100 KiB message echoed (records of 16 KiB both ways)';
ok $echo->{pong}, 'a ping answered';
is $echo->{close_code}, 4000, "the client's close echoed with its code";

my $burst = client($server, 'burst', 300);
is $burst->{count}, 300, '300 messages of 1 KiB sent at once: all echoed';
ok $burst->{in_order}, '... in order';

my $closed = client($server, 'server_close');
is $closed->{code}, 4001, "the app's close reaches the client with its code";
is $closed->{reason}, 'app done', '... and its reason';

my $two = client($server, 'two', "$gate_dir/two");
my ($pid_a) = ($two->{a} // '') =~ /\Apid (\d+)\z/;
my ($pid_b) = ($two->{b} // '') =~ /\Apid (\d+)\z/;
ok $pid_a && $pid_b, 'two wss clients answered';
isnt $pid_a, $pid_b, 'a message is served by the free worker while the other is busy with a message';

my $room = client($server, 'subscribers', 50, 'https://127.0.0.1:' . $server->port . '/publish');
is $room->{received}, 50, "50 wss clients subscribed by the app's control message: one publish reaches each";

my $gone = client($server, 'gone');
is $gone->{echo}, 'before going', 'a wss client echoed, then gone without a close';
ok wait_until(sub { -e "$record_dir/disconnected" }), '... the app hears DISCONNECT';
ok wait_until(sub { (metric($server, 'serow_websocket_connections') // -1) == 0 }),
    'no WebSocket left in the holder (serow_websocket_connections 0)';

my $once = client($server, 'once');
is $once->{echo}, 'once', "--websocket-psgix-io: the app's own psgix.io WebSocket over TLS echoes";
is $once->{close_code}, 1000, '... and closes';

# The handshake's refusals, as on plain connections
{
    my $sock = tls_connect($server, $pki) or die "no TLS connection: $@";
    my $res = tls_request($sock, '/chat', headers => { Upgrade => 'websocket', Connection => 'Upgrade',
        'Sec-WebSocket-Key' => 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version' => 8 });
    is $res && $res->{status}, 426, 'wss: 426 to another version';
}

# ---- what the transport keeps -------------------------------------------

is records_client($server, 'upgrade_record')->{status}, 'HTTP/1.1 400 Bad Request',
    'a frame in the upgrade request\'s record: 400, as bytes after the head are on a plain connection';
is records_client($server, 'record_begun')->{status}, 'HTTP/1.1 400 Bad Request',
    'the upgrade request\'s record, and a record begun after it: 400 (the worker would not hand over the record begun)';
for my $version ('1.3', '1.2') {
    my $kept = records_client($server, 'kept_plain', "$gate_dir/kept-$version", $version);
    ok $kept->{waited} && $kept->{big}, "TLS $version: a held message, then one of 70000 bytes echoed";
    is $kept->{texts}, 66, '... then 66 messages, the last one\'s end plaintext the transport kept past its '
        . 'read\'s room (epoll does not see it)' or diag explain $kept;
    ok $kept->{in_order}, '... in order';
}

my $slow = records_client($server, 'slow_reader');
ok $slow->{big}, "900000 bytes echoed to a client that does not read meanwhile: the holder's sealed "
    . 'writes cut short and refused, the records whole and in order';
is $slow->{after}, 'after', '... and the next message after them';

my $closes = records_client($server, 'closes');
is_deeply $closes->{client_close}, [4000, 'bye', 'close_notify'],
    "the client's close echoed, then the holder's close_notify";
is_deeply $closes->{app_close}, [4002, 'app done', 'close_notify'],
    "the app's close left unanswered: the holder's timer ends the connection, with close_notify";

# ---- many on one worker ----------------------------------------------------

my $one = start_server(app => $app, options => ['--workers', 1, '--grip', tls_options($pki)]);
my $many = client($one, 'many', 50);
is $many->{echoed}, 50, 'one worker: 50 wss clients at once all get their echoes';

# ---- KeyUpdate ---------------------------------------------------------------

subtest 'KeyUpdate from the client while held (openssl s_client)' => sub {
    # s_client's "K" updates its keys and asks for the server's, "k" does
    # not ask (t/tls/keyupdate.t); its input is the WebSocket's bytes (a
    # frame begins with no command letter)
    my ($to, $from);
    my $pid = do {
        delete local $ENV{LD_PRELOAD}; # (not Serow's code)
        IPC::Open2::open2($from, $to, 'sh', '-c', 'exec "$@" 2>&1', 'sh', 'openssl', 's_client',
            '-connect', '127.0.0.1:' . $server->port, '-servername', 'localhost', '-CAfile', $pki->{ca},
            '-verify_return_error', '-tls1_3', '-msg');
    };
    $to->autoflush(1);
    my $output = '';
    my $select = IO::Select->new($from);
    my $read_until = sub {
        my ($re, $start) = @_;
        my $deadline = Time::HiRes::time + Serow::Test::READ_TIMEOUT;
        while (1) {
            pos($output) = $start;
            return ($-[0], $1) if $output =~ /$re/g;
            my $left = $deadline - Time::HiRes::time;
            return () if $left <= 0 || !$select->can_read($left);
            sysread($from, $output, 65536, length $output) or return ();
        }
    };
    print {$to} "GET /chat HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        . "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    ok defined(($read_until->(qr{HTTP/1\.1 101 Switching Protocols}, 0))[0]), 'the 101' or return diag $output;
    my $key = "\x01\x02\x03\x04";
    for my $round (1 .. 4) {
        my $letter = $round % 2 ? 'K' : 'k';
        my $start = length $output;
        print {$to} "$letter\n";
        ok defined(($read_until->(qr/KEYUPDATE\n/, $start))[0]), "round $round: s_client's KeyUpdate ($letter)"
            or return diag substr($output, -2000);
        my $after = length $output;
        my $text = "round $round";
        print {$to} chr(0x81) . chr(0x80 | length $text) . $key . ($text ^ substr($key x 3, 0, length $text));
        my ($at) = $read_until->(qr/\x81\Q${\ chr(length $text)}$text\E/, $after);
        ok defined $at, '... a message after it echoed, sealed and opened with the new keys'
            or return diag substr($output, -2000);
        my @theirs = substr($output, $after, $at - $after)
            =~ /^<<< TLS 1\.3, Handshake \[length 0005\], KeyUpdate\n\s+18 00 00 01 0(\d)/mg;
        is "@theirs", $letter eq 'K' ? '0' : '', $letter eq 'K'
            ? "... after the holder's own KeyUpdate, as asked" : '... and the holder did not update its keys';
    }
    close $to;
    waitpid($pid, 0);
    unlike $output, qr/error|fatal/i, 's_client saw no error and no fatal alert';
};

# ---- HUP and stop with wss connections held --------------------------------

subtest 'HUP, then the stop, with wss connections held' => sub {
    my ($to, $from);
    my $pid = IPC::Open2::open2($from, $to, $python, 't/websocket/ws_client.py', '--ca', $pki->{ca},
        'held', url($server, '/chat'), 5);
    $to->autoflush(1);
    my $select = IO::Select->new($from);
    my $line = sub {
        return undef unless $select->can_read(Serow::Test::READ_TIMEOUT);
        my $got = <$from>;
        return eval { JSON::PP::decode_json($got // '') };
    };
    my $before = $line->() or return fail 'five wss clients open';
    my %old = map { /(\d+)/ ? ($1 => 1) : () } @{ $before->{pids} };
    is scalar(@{ $before->{pids} }), 5, 'five wss clients answered';
    my $mark = $server->log_mark;
    $server->signal('HUP');
    is scalar($server->wait_for_log_all(qr/worker \d+ exited with status 0/, 2, undef, $mark)), 2,
        'HUP: the old workers leave';
    print {$to} "pid\n";
    my $after = $line->() // {};
    my @new = grep { /(\d+)/ && !$old{$1} } @{ $after->{pids} || [] };
    is scalar(@new), 5, 'the five held wss connections answered by the new workers';
    $server->signal('TERM');
    print {$to} "closed\n";
    my $end = $line->() // {};
    is_deeply $end->{closed}, [([1001, 'server stopping']) x 5], 'the stop: each closed with 1001';
    print {$to} "end\n";
    close $to;
    waitpid($pid, 0);
    is $server->wait_exit, 0, 'clean stop';
};

is $one->stop, 0, 'clean stop';
done_testing;
