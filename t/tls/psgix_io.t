use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Digest::SHA ();
use IO::Select ();
use MIME::Base64 ();
use Time::HiRes ();
use Serow::Test qw(need_debian_packages start_server);
use Serow::Test::TLS qw(test_pki tls_options tls_connect tls_request);

# psgix.io on TLS connections (src/psgi/psgi_tls_socket.c,
# lib/Serow/TLSSocket.pm): the app reads the plaintext the client sent and
# writes plaintext that is sealed into records.  A WebSocket echo written by
# hand as psgix.io apps write it (the upgrade read from the env, the 101
# written, then frames both ways with IO::Select, small sysreads and
# pending), a line echo after an Upgrade with readline and print, the
# client's close_notify seen as the end by the app, the app's close giving
# the client close_notify, and a handle the app keeps after its request.
# The client is OpenSSL's (IO::Socket::SSL): a record sealed from a wrong
# state fails its check.

need_debian_packages(qw(openssl libio-socket-ssl-perl libnet-ssleay-perl));

use constant BIG => 100_000; # more than six records

my ($kept_io, $kept_fd);

# One WebSocket frame from the front of $$buf: (opcode, payload), or ()
# when it is not all there.  Masked or not.
sub take_frame {
    my ($buf) = @_;
    return () if length $$buf < 2;
    my ($b0, $b1) = unpack 'CC', $$buf;
    my ($len, $at) = ($b1 & 0x7f, 2);
    if ($len == 126) { return () if length $$buf < 4; $len = unpack 'x2n', $$buf; $at = 4 }
    elsif ($len == 127) { return () if length $$buf < 10; $len = unpack 'x2Q>', $$buf; $at = 10 }
    my $mask = $b1 & 0x80 ? 4 : 0;
    return () if length $$buf < $at + $mask + $len;
    my $key = substr($$buf, $at, $mask);
    my $payload = substr($$buf, $at + $mask, $len);
    $payload ^= substr($key x (int($len / 4) + 1), 0, $len) if $mask;
    substr($$buf, 0, $at + $mask + $len, '');
    return ($b0 & 0x0f, $payload);
}

# A final frame of $opcode; masked (as a client's must be) when $masked.
sub frame {
    my ($opcode, $payload, $masked) = @_;
    my $len = length $payload;
    my $m = $masked ? 0x80 : 0;
    my $head = pack('C', 0x80 | $opcode)
        . ($len < 126 ? pack('C', $m | $len) : $len < 65536 ? pack('Cn', $m | 126, $len)
                                                            : pack('CQ>', $m | 127, $len));
    return $head . $payload unless $masked;
    my $key = pack 'N', int rand 2**32;
    return $head . $key . ($payload ^ substr($key x (int($len / 4) + 1), 0, $len));
}

sub write_all {
    my ($io, $data) = @_;
    while (length $data) {
        my $n = syswrite($io, $data);
        die "syswrite: $!\n" unless $n;
        substr($data, 0, $n, '');
    }
}

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/ws') {
        my $io = $env->{'psgix.io'} or die "no psgix.io\n";
        my $accept = Digest::SHA::sha1_base64($env->{HTTP_SEC_WEBSOCKET_KEY}
            . '258EAFA5-E914-47DA-95CA-C5AB0DC85B11') . '=';
        write_all($io, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            . "Connection: Upgrade\r\nSec-WebSocket-Accept: $accept\r\n\r\n");
        my $sel = IO::Select->new($io);
        my $buf = '';
        for (;;) {
            while (my ($op, $payload) = take_frame(\$buf)) {
                if ($op == 8) { # close: answered, and the connection closed
                    write_all($io, frame(8, $payload));
                    close $io or die "close: $!\n";
                    return sub { };
                }
                write_all($io, frame($op, $payload));
            }
            # What the process opened already comes first: select sees the socket only.
            $io->pending or $sel->can_read or die "select: $!\n";
            my $n = sysread($io, $buf, 4096, length $buf); # (less than a record)
            die "sysread: $!\n" unless defined $n;
            return sub { } if $n == 0;
        }
    }
    if ($path eq '/lines') {
        my $io = $env->{'psgix.io'};
        print $io "HTTP/1.1 101 Switching Protocols\r\nUpgrade: lines\r\nConnection: Upgrade\r\n\r\n"
            or die "print: $!\n";
        while (defined(my $line = <$io>)) {
            last if $line eq "bye\n";
            print $io "echo: $line" or die "print: $!\n";
        }
        # The end (the client's close_notify) or bye: said, then closed.
        print $io "the end\n" or die "print: $!\n";
        close $io;
        return sub { };
    }
    if ($path eq '/nonblocking') {
        # Made non-blocking: a read with nothing there fails with EAGAIN.
        my $io = $env->{'psgix.io'};
        $io->blocking(0);
        my $n = sysread($io, my $got, 100);
        my $said = defined $n ? "read $n" : $!{EAGAIN} ? 'EAGAIN' : "error $!";
        write_all($io, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n$said\n");
        my $line = '';
        my $sel = IO::Select->new($io);
        while ($line !~ /\n/) {
            $io->pending or $sel->can_read or die "select: $!\n";
            my $n = sysread($io, $line, 100, length $line);
            next if !defined $n && $!{EAGAIN}; # (a record's rest on its way)
            die "sysread: $!\n" unless $n;
        }
        write_all($io, "got $line");
        close $io;
        return sub { };
    }
    if ($path eq '/keep') {
        $kept_io = $env->{'psgix.io'};
        $kept_fd = fileno $kept_io;
        print $kept_io "HTTP/1.1 101 Switching Protocols\r\nUpgrade: kept\r\nConnection: Upgrade\r\n\r\n";
        return sub { }; # the app keeps the connection past its request
    }
    if ($path eq '/write-kept') {
        return [200, ['Content-Type' => 'text/plain'], ['not this worker']] unless $kept_io;
        my $line = <$kept_io>;
        my $ok = defined $line && print $kept_io "later: $line";
        close $kept_io if $env->{QUERY_STRING} eq 'close';
        undef $kept_io if $env->{QUERY_STRING} eq 'drop';
        # What the handle's descriptor is now: closed with the handle, or
        # (closed, the handle kept) no longer the socket.
        my $now = readlink("/proc/self/fd/$kept_fd") // 'closed';
        $now = 'a socket' if $now =~ /\Asocket:/;
        return [200, ['Content-Type' => 'text/plain'], [$ok ? "written; its descriptor: $now" : "not written: $!"]];
    }
    if ($path eq '/look') {
        # Reading psgix.io (a middleware dumping the env) and answering as usual.
        my $io = $env->{'psgix.io'};
        return [200, ['Content-Type' => 'text/plain'], [ref($io) . ' ' . (defined fileno($io) ? 'fileno' : 'none')]];
    }
    return [404, ['Content-Type' => 'text/plain'], ['no']];
};

my $pki = test_pki();
my $server = start_server(app => $app, options => ['--workers', 2, tls_options($pki)]);

# Reads from $sock into $$buf until $done->() says so, the end, or the
# deadline (OpenSSL's pending bytes first).  True when done.
sub read_until {
    my ($sock, $buf, $done) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + Serow::Test::READ_TIMEOUT;
    until ($done->()) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !($sock->pending || $sel->can_read($left));
        my $n = sysread($sock, $$buf, 65536, length $$buf);
        return 0 if defined $n && $n == 0;
        return 0 if !defined $n && !$!{EAGAIN};
    }
    return 1;
}

# Reads up to the end of the connection; (what came, whether it ended with close_notify).
sub read_to_end {
    my ($sock) = @_;
    my $buf = '';
    my $ended = 0;
    read_until($sock, \$buf, sub { 0 });
    my $shutdown = Net::SSLeay::get_shutdown($sock->_get_ssl_object);
    return ($buf, $shutdown & Net::SSLeay::RECEIVED_SHUTDOWN() ? 1 : 0);
}

# Whether the TCP connection under $sock ends (its FIN read) within the
# read timeout, after TLS said its last.
sub tcp_ended {
    my ($sock) = @_;
    open(my $raw, '<&', fileno $sock) or die "dup: $!";
    my $sel = IO::Select->new($raw);
    my $deadline = Time::HiRes::time + Serow::Test::READ_TIMEOUT;
    for (;;) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !$sel->can_read($left);
        my $n = sysread($raw, my $junk, 4096);
        return 1 if defined $n && $n == 0;
        return 0 unless defined $n;
    }
}

sub upgrade {
    my ($path, %headers) = @_;
    my $sock = tls_connect($server, $pki) or return (undef, "no TLS connection: $@");
    my $head = "GET $path HTTP/1.1\r\nHost: localhost\r\n"
        . join('', map { "$_: $headers{$_}\r\n" } sort keys %headers) . "\r\n";
    write_all($sock, $head);
    my $buf = '';
    read_until($sock, \$buf, sub { $buf =~ /\r\n\r\n/ }) or return (undef, "no 101: $buf");
    my ($response) = $buf =~ /\A(.*?\r\n\r\n)/s;
    substr($buf, 0, length $response, '');
    return ($sock, $response, $buf);
}

subtest 'a WebSocket echo over TLS, by hand' => sub {
    my $key = MIME::Base64::encode_base64(join('', map { chr rand 256 } 1 .. 16), '');
    my ($sock, $response, $buf) = upgrade('/ws', Upgrade => 'websocket', Connection => 'Upgrade',
        'Sec-WebSocket-Key' => $key, 'Sec-WebSocket-Version' => 13);
    ok $sock, 'the 101 came' or return diag $response;
    my $accept = Digest::SHA::sha1_base64($key . '258EAFA5-E914-47DA-95CA-C5AB0DC85B11') . '=';
    like $response, qr/\AHTTP\/1\.1 101 .*\r\nSec-WebSocket-Accept: \Q$accept\E\r\n/s,
        'the app\'s 101, with its accept key, and nothing from the server';
    my $echo = sub {
        my ($message, $how) = @_;
        my $frame = frame(1, $message, 1);
        if (($how // '') eq 'bytes') {
            write_all($sock, $_) for split //, $frame; # one record for each byte
        } else {
            write_all($sock, $frame);
        }
        my @got;
        read_until($sock, \$buf, sub { @got = take_frame(\$buf) }) or return undef;
        return $got[0] == 1 ? $got[1] : undef;
    };
    is $echo->("message $_"), "message $_", "message $_ echoed" for 1 .. 5;
    my $big = join '', map { sprintf "%07d\n", $_ } 1 .. BIG / 8;
    ok $echo->($big) eq $big, 'a message of 100 KB (several records both ways) echoed';
    is $echo->('in one-byte records', 'bytes'), 'in one-byte records',
        'a message that came in one-byte records echoed';
    # Two messages in one write: the second is opened with the first, and
    # waits in the process (pending), not in the socket.
    write_all($sock, frame(1, 'first', 1) . frame(1, 'x' x 20_000, 1) . frame(1, 'third', 1));
    my @got;
    for (1 .. 3) {
        my @f;
        read_until($sock, \$buf, sub { @f = take_frame(\$buf) }) or last;
        push @got, $f[1];
    }
    is_deeply \@got, ['first', 'x' x 20_000, 'third'], 'three messages in one write: each echoed';
    is $echo->("after $_"), "after $_", "and more after them ($_)" for 1 .. 3;
    write_all($sock, frame(8, pack('n', 1000), 1));
    my @close;
    ok read_until($sock, \$buf, sub { @close = take_frame(\$buf) }), 'the close frame answered';
    is $close[0], 8, 'with a close frame';
    my ($rest, $notify) = read_to_end($sock);
    is $rest, '', 'nothing after it';
    ok $notify, 'the app\'s close sent close_notify';
    unlike $server->log, qr/died|error/i, 'no error in the log';
};

subtest 'a first message sent with the upgrade request is read first' => sub {
    my $sock = tls_connect($server, $pki) or return fail "no TLS connection: $@";
    my $key = MIME::Base64::encode_base64('0123456789abcdef', '');
    write_all($sock, "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
        . "Connection: Upgrade\r\nSec-WebSocket-Key: $key\r\nSec-WebSocket-Version: 13\r\n\r\n"
        . frame(1, 'early', 1));
    my $buf = '';
    my @got;
    my $head;
    read_until($sock, \$buf, sub {
        $head //= $buf =~ s/\A(.*?\r\n\r\n)//s ? $1 : undef;
        return defined $head && (@got = take_frame(\$buf));
    });
    like $head, qr/\AHTTP\/1\.1 101 /, 'the 101';
    is $got[1], 'early', 'echoed: the worker\'s read-ahead went to the handle';
    write_all($sock, frame(8, '', 1));
    my ($rest, $notify) = read_to_end($sock);
    ok $notify, 'closed with close_notify';
};

subtest 'a line echo after an Upgrade: readline and print; bye, and the client\'s close_notify' => sub {
    my ($sock, $response, $buf) = upgrade('/lines', Upgrade => 'lines', Connection => 'Upgrade');
    ok $sock, 'the 101 came' or return diag $response;
    for my $line ('one', 'two', 'x' x 40_000) {
        write_all($sock, "$line\n");
        read_until($sock, \$buf, sub { $buf =~ /\n/ });
        ok $buf eq "echo: $line\n", 'a line echoed: ' . substr($line, 0, 10) or diag substr($buf, 0, 80);
        $buf = '';
    }
    write_all($sock, "bye\n");
    my ($rest, $notify) = read_to_end($sock);
    is $buf . $rest, "the end\n", 'bye: the app ended';
    ok $notify, 'with close_notify';

    # The client's close_notify, sent with the connection still open for
    # reading: the app's readline sees the end, and answers before it closes.
    ($sock, $response, $buf) = upgrade('/lines', Upgrade => 'lines', Connection => 'Upgrade');
    ok $sock, 'another 101' or return diag $response;
    write_all($sock, "three\n");
    read_until($sock, \$buf, sub { $buf =~ /\n/ });
    is $buf, "echo: three\n", 'a line echoed';
    my $ssl = $sock->_get_ssl_object;
    Net::SSLeay::shutdown($ssl); # close_notify, one way (the socket stays open)
    ($rest, $notify) = read_to_end($sock);
    is $rest, "the end\n", 'the app saw the client\'s close_notify as the end, and wrote after it';
    ok $notify, 'then closed with its own close_notify';
};

subtest 'non-blocking: EAGAIN with nothing there, select to wait' => sub {
    my ($sock, $response, $buf) = upgrade('/nonblocking', Upgrade => 'x', Connection => 'Upgrade');
    ok $sock, 'the 101 came' or return diag $response;
    read_until($sock, \$buf, sub { $buf =~ /\n/ });
    is $buf, "EAGAIN\n", 'the app\'s read with nothing there failed with EAGAIN';
    $buf = '';
    write_all($sock, "hello\n");
    my ($rest, $notify) = read_to_end($sock);
    is $rest, "got hello\n", 'its read after select got the line';
    ok $notify, 'then close_notify';
};

subtest 'a handle the app keeps after its request: the connection is the app\'s' => sub {
    for my $how ('close', 'drop') {
        my ($sock, $response, $buf) = upgrade('/keep', Upgrade => 'kept', Connection => 'Upgrade');
        ok $sock, "$how: the 101 came" or return diag $response;
        write_all($sock, "hello $how\n");
        # Another connection's request: the kept handle reads the line and
        # writes on the kept connection (each worker: one of them keeps it).
        my $written = 0;
        for (1 .. 20) {
            my $other = tls_connect($server, $pki) or last;
            my $res = tls_request($other, "/write-kept?$how", headers => { Connection => 'close' });
            $written = $res->{body}, last if $res && $res->{body} =~ /\Awritten/;
        }
        ok $written, "$how: the kept handle read and wrote from a later request";
        # A handle closed and kept lets go of the socket at once.
        is $written, "written; its descriptor: " . ($how eq 'close' ? '/dev/null' : 'closed'),
            "$how: the app's descriptor no longer holds the socket";
        read_until($sock, \$buf, sub { $buf =~ /\n/ });
        is $buf, "later: hello $how\n", "$how: the kept connection got it";
        my ($rest, $notify) = read_to_end($sock);
        is $rest, '', "$how: then the end";
        ok $notify, "$how: with close_notify";
        ok tcp_ended($sock), "$how: and the socket's end (FIN)";
    }
};

subtest 'psgix.io read by an app that answers as usual: the connection goes on' => sub {
    my $sock = tls_connect($server, $pki) or return fail "no TLS connection: $@";
    for (1 .. 3) {
        my $res = tls_request($sock, '/look');
        is $res && $res->{body}, 'Serow::TLSSocket fileno', "request $_ answered on the same session";
    }
};

done_testing;
