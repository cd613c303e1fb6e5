# Differential check over TLS: the hostile requests of t/differential/nginx.t
# (Serow::Test::HostileRequests), each sent byte for byte inside a TLS
# connection (IO::Socket::SSL: one write, sealed as the client's records)
# to Serow with TLS and to Debian's nginx with ssl on the same test
# certificate; each must answer as it does in plain HTTP (the table's
# statuses, the same checks: a rejection answered once, Connection: close,
# closed, nothing behind it answered; an acceptance without desync).
#
# Then what only TLS has, where the table below says what each server sends
# back (docs/differential.md):
#   - plain HTTP to the TLS port;
#   - a ClientHello cut short, then the client's end of the connection shut;
#   - after a finished handshake, a record the server must refuse: an unknown
#     content type, a wrong version, a length over the protocol's limit, a
#     record whose tag fails (each in TLS 1.3 and TLS 1.2);
#   - a client that finishes its handshake and sends nothing (both servers'
#     request-head timeouts set to 2 s here).
# What a server sends is named as the client sees it: "alert NAME" (a fatal
# alert OpenSSL read and reported), "close_notify", "nothing" (the connection
# closed without a record), or "400" (a plain HTTP answer).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use Socket ();
use Time::HiRes ();
use Serow::Test qw(start_server parse_response echo_app need_debian_packages raw_connect
                   read_until_close SMUGGLED);
use Serow::Test::HostileRequests ();
use Serow::Test::TLS qw(test_pki tls_options tls_connect);

need_debian_packages(qw(nginx openssl libio-socket-ssl-perl libnet-ssleay-perl));
require Serow::Test::Nginx;
require IO::Socket::SSL;

my $pki = test_pki();

# ---- what only TLS has -----------------------------------------------------

# A real ClientHello, from OpenSSL through memory buffers (nothing sent).
sub client_hello {
    my $ctx = Net::SSLeay::CTX_new() or die 'CTX_new';
    my $ssl = Net::SSLeay::new($ctx);
    my ($rbio, $wbio) = map { Net::SSLeay::BIO_new(Net::SSLeay::BIO_s_mem()) } 1, 2;
    Net::SSLeay::set_bio($ssl, $rbio, $wbio);
    Net::SSLeay::set_tlsext_host_name($ssl, 'localhost');
    Net::SSLeay::connect($ssl);
    my $hello = Net::SSLeay::BIO_read($wbio);
    Net::SSLeay::free($ssl);
    Net::SSLeay::CTX_free($ctx);
    return $hello;
}

# What a server sends back on a plain socket, after $bytes and the client's
# end shut: '400' (plain HTTP), 'alert NAME' (a plaintext alert record),
# 'nothing', or the bytes' start in hex.
sub raw_answer {
    my ($server, $bytes) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, $bytes;
    shutdown($sock, Socket::SHUT_WR());
    my $raw = read_until_close($sock);
    return 'nothing' if $raw eq '';
    return $1 if $raw =~ m{\AHTTP/1\.1 (\d+) };
    if ($raw =~ /\A\x15\x03[\x01-\x04]\x00\x02([\x01\x02])(.)/s) {
        return 'alert ' . ord($2) . (ord($1) == 2 ? '' : ' (warning)');
    }
    return 'bytes ' . unpack('H*', substr($raw, 0, 16));
}

# A record written raw on the socket under a finished TLS connection: how
# the server answers it, as OpenSSL reads it.
sub after_handshake {
    my ($server, $version, $record) = @_;
    my $sock = tls_connect($server, $pki, SSL_version => $version) or return "no TLS connection: $@";
    open(my $raw, '>&', $sock->fileno) or die "dup: $!";
    syswrite $raw, $record;
    close $raw;
    my ($buf, $how) = read_all($sock);
    return length $buf ? "data, then $how" : $how;
}

my $hello = client_hello();
my @TLS_CASES = (
    # [name, sub { what a server sends back }, Serow, nginx, why they differ]
    ['plain HTTP to the TLS port', sub { raw_answer($_[0], "GET / HTTP/1.1\r\nHost: x\r\n\r\n") }, '400', '400'],
    ['a ClientHello cut in half, then the client\'s end shut',
        sub { raw_answer($_[0], substr($hello, 0, length($hello) / 2)) }, 'alert 50', 'nothing',
        'GnuTLS answers a handshake message cut short with decode_error (RFC 8446 6.2); OpenSSL '
        . 'closes without a word: both close, and neither answer tells anything of the server'],
    ['a ClientHello\'s record header alone, then the client\'s end shut',
        sub { raw_answer($_[0], substr($hello, 0, 5)) }, 'alert 50', 'nothing', 'as above'],
);
my %DIFFER = (
    'TLS 1.3: a record of version 0x0a0a' => ['alert bad record mac', 'alert protocol version',
        'TLS 1.3 ignores legacy_record_version "for all purposes" (RFC 8446 5.1): the record is '
        . 'opened, and its header, in the additional data, fails the tag; OpenSSL checks the version first'],
    'TLS 1.2: a record of an unknown content type (99)' => ['alert unexpected message', 'alert bad record mac',
        'an unexpected record type MUST get unexpected_message (RFC 5246 6); OpenSSL tries to open it first'],
);
my %SAME = ('a record of an unknown content type (99)' => 'alert unexpected message',
    'a record of version 0x0a0a' => 'alert protocol version',
    'a record longer than the protocol allows (65535 bytes)' => 'alert record overflow',
    'a record whose tag fails' => 'alert bad record mac');
for my $version (['TLS 1.3', 'TLSv1_3'], ['TLS 1.2', 'TLSv1_2']) {
    my ($v, $ssl_version) = @$version;
    for my $case (['a record of an unknown content type (99)', "\x63\x03\x03\x00\x20" . ("\x00" x 32)],
                  ['a record of version 0x0a0a', "\x17\x0a\x0a\x00\x20" . ("\x00" x 32)],
                  ['a record longer than the protocol allows (65535 bytes)', "\x17\x03\x03\xff\xff" . ("\x00" x 65535)],
                  ['a record whose tag fails', "\x17\x03\x03\x00\x20" . ("\x00" x 32)]) {
        my ($what, $record) = @$case;
        my $name = "$v: $what";
        my ($serow_sends, $nginx_sends, $why) = @{ $DIFFER{$name} // [$SAME{$what}, $SAME{$what}] };
        push @TLS_CASES, [$name, sub { after_handshake($_[0], $ssl_version, $record) },
            $serow_sends, $nginx_sends, $why];
    }
}
push @TLS_CASES, ['a finished handshake, then nothing (request-head timeout 2 s)', sub {
    my $sock = tls_connect($_[0], $pki) or return "no TLS connection: $@";
    my ($buf, $how) = read_all($sock, 60);
    return length $buf ? "data, then $how" : $how;
}, 'close_notify', 'close_notify'];

if (grep { $_ eq '--markdown' } @ARGV) {
    print "| sent | Serow sends | nginx sends | why they differ |\n| --- | --- | --- | --- |\n";
    for (@TLS_CASES) {
        my ($name, undef, $s, $n, $why) = @$_;
        print "| $name | $s | $n | ", ($s eq $n ? '' : $why), " |\n";
    }
    exit 0;
}

# ---- the servers ---------------------------------------------------------

my $serow = start_server(app => echo_app(),
    options => ['--workers', 1, '--header-timeout', 2, tls_options($pki)]);
my $nginx = Serow::Test::Nginx::start_nginx(config => sub {
    my ($listen) = @_;
    return "server {\n    listen $listen ssl;\n    ssl_certificate $pki->{cert};\n"
        . "    ssl_certificate_key $pki->{key};\n    client_header_timeout 2s;\n"
        # (TLS 1.3 is in nginx's default from 1.23.4; Debian's 1.22 needs it said)
        . "    ssl_protocols TLSv1.2 TLSv1.3;\n"
        . "    location / { return 200 \"ok\\n\"; }\n}\n";
});
my %servers = (Serow => $serow, nginx => $nginx);

# Everything the server sends on $sock until it closes (or READ_TIMEOUT),
# and how it ended: 'close_notify', 'nothing' (closed without one), 'alert
# NAME' (a fatal alert), 'timeout', or OpenSSL's error.
sub read_all {
    my ($sock, $timeout) = @_;
    my ($buf, $sel) = ('', IO::Select->new($sock));
    my $deadline = Time::HiRes::time + ($timeout // Serow::Test::READ_TIMEOUT);
    while (1) {
        my $left = $deadline - Time::HiRes::time;
        return ($buf, 'timeout') if $left <= 0;
        next unless $sock->pending || $sel->can_read($left);
        my $n = sysread($sock, $buf, 65536, length $buf);
        next if !defined $n && $!{EAGAIN};
        return ($buf, ended($sock)) if !$n;
    }
}

sub ended {
    my ($sock) = @_;
    my @errors;
    while (my $e = Net::SSLeay::ERR_get_error()) { push @errors, Net::SSLeay::ERR_error_string($e) }
    my ($alert) = map { /alert (.+)$/ ? $1 : () } @errors;
    return "alert $alert" if $alert;
    return 'nothing' if grep { /unexpected eof/ } @errors;
    return "@errors" if @errors;
    my $shutdown = Net::SSLeay::get_shutdown($sock->_get_ssl_object);
    return $shutdown & Net::SSLeay::RECEIVED_SHUTDOWN() ? 'close_notify' : 'nothing';
}

sub send_all {
    my ($sock, $bytes) = @_;
    while (length $bytes) {
        my $n = syswrite($sock, $bytes) or return 0;
        substr($bytes, 0, $n, '');
    }
    return 1;
}

# ---- the hostile requests, over TLS ---------------------------------------
for my $row (Serow::Test::HostileRequests::table()) {
    my ($name, $bytes, $serow_status, $nginx_status) = @$row;
    subtest "$name: Serow answers $serow_status over TLS" => sub {
        my $sock = tls_connect($serow, $pki) or return fail "no TLS connection: $@";
        if ($serow_status == 200) {
            send_all($sock, $bytes . Serow::Test::HostileRequests::SECOND);
            my ($raw, $how) = read_all($sock);
            Serow::Test::HostileRequests::check_accepted($raw, $how ne 'timeout');
        } else {
            send_all($sock, $bytes . SMUGGLED);
            my ($raw, $how) = read_all($sock);
            my @responses = parse_response($raw);
            is scalar @responses, 1, 'exactly one response' or diag $raw;
            is $responses[0] && $responses[0]{status}, $serow_status, "status $serow_status";
            is lc(($responses[0] && $responses[0]{headers}{connection}) // ''), 'close', 'Connection: close';
            is $how, 'close_notify', 'closed, after close_notify';
            unlike $raw, qr/smuggled/, 'the bytes after it were not answered';
        }
    };
    my $sock = tls_connect($nginx, $pki) or do { fail "nginx: no TLS connection: $@"; next };
    send_all($sock, $bytes . Serow::Test::HostileRequests::SECOND);
    my ($raw) = read_all($sock);
    is Serow::Test::HostileRequests::first_status($raw), $nginx_status,
        "$name: nginx answers $nginx_status over TLS" or diag $raw;
}

# ---- what only TLS has, compared -------------------------------------------

for my $case (@TLS_CASES) {
    my ($name, $run, $serow_sends, $nginx_sends, $why) = @$case;
    ok defined $why, "$name: the table says why Serow differs" if $serow_sends ne $nginx_sends;
    is $run->($serow), $serow_sends, "$name: Serow sends $serow_sends";
    is $run->($nginx), $nginx_sends, "$name: nginx sends $nginx_sends";
}

is $nginx->stop, 0, 'nginx stops cleanly';
is $serow->stop, 0, 'Serow stops cleanly';
done_testing;
