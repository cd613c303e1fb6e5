use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Handle ();
use Socket qw(AF_INET IPPROTO_TCP SOCK_STREAM SOL_SOCKET SO_RCVBUF TCP_MAXSEG inet_aton
              pack_sockaddr_in);
use Serow::Test qw(need_debian_packages start_server);
use Serow::Test::Process qw(run_command);
use Serow::Test::TLS qw(test_pki tls_request);

# A handshake whose flight the socket does not take at once: the server's
# certificate chain (about 100 KB here: GnuTLS refuses to send one of a few
# megabytes) is more than the server's socket and the client's hold, so
# the worker must wait for the socket to drain and go on writing; the
# client sends nothing until it has the whole flight.  The client makes the
# buffers small before it connects: its receive buffer (SO_RCVBUF), and the
# server's send buffer through the segment size it announces (TCP_MAXSEG:
# the kernel sizes a new connection's send buffer from it; on loopback's
# 64 KiB segments it would take megabytes at once).  A worker that waited for
# input instead would stall until --header-timeout (60 s here), past the
# client's deadline (30 s): the test fails then, and never asserts on time.

need_debian_packages(qw(openssl libio-socket-ssl-perl libnet-ssleay-perl));
require IO::Socket::SSL;

use constant INTERMEDIATES => 4;    # CAs between the test CA and the server's certificate
use constant COMMENT => 24_000;       # bytes of each one's comment
use constant SSL_CTRL_SET_MAX_CERT_LIST => 51; # (OpenSSL's; Net::SSLeay has no wrapper)

# A chain that links (GnuTLS drops the certificates of a chain that do not,
# and keeps at most 16): the test CA, INTERMEDIATES CAs each signed by the
# one before and bloated by a comment, then the server's certificate for
# its key, signed by the last.
my $pki = test_pki();
my $dir = $pki->{dir};
sub openssl {
    my $run = run_command('openssl', @_);
    $run->{status} == 0 or die "openssl @_[0, 1]: $run->{output}";
}
sub write_file {
    my ($path, $text) = @_;
    open(my $fh, '>', $path) or die "$path: $!";
    print {$fh} $text;
    close $fh or die "$path: $!";
}
sub read_file { my ($path) = @_; open(my $fh, '<', $path) or die "$path: $!"; local $/; return <$fh> }
write_file("$dir/ca.ext", "basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign,cRLSign\n"
    . 'nsComment=' . ('x' x COMMENT) . "\n");
write_file("$dir/leaf.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
my ($issuer, $issuer_key) = ($pki->{ca}, "$dir/ca.key");
my @intermediates;
for my $i (1 .. INTERMEDIATES) {
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
        '-keyout', "$dir/int$i.key", '-out', "$dir/int$i.csr", '-subj', "/CN=intermediate $i");
    openssl('x509', '-req', '-in', "$dir/int$i.csr", '-CA', $issuer, '-CAkey', $issuer_key,
        '-CAcreateserial', '-out', "$dir/int$i.pem", '-days', 2, '-extfile', "$dir/ca.ext");
    unshift @intermediates, "$dir/int$i.pem";
    ($issuer, $issuer_key) = ("$dir/int$i.pem", "$dir/int$i.key");
}
openssl('req', '-new', '-key', $pki->{key}, '-out', "$dir/leaf.csr", '-subj', '/CN=localhost');
openssl('x509', '-req', '-in', "$dir/leaf.csr", '-CA', $issuer, '-CAkey', $issuer_key,
    '-CAcreateserial', '-out', "$dir/leaf.pem", '-days', 2, '-extfile', "$dir/leaf.ext");
my $chain = "$dir/chain.pem";
write_file($chain, join '', map { read_file($_) } "$dir/leaf.pem", @intermediates);
cmp_ok -s $chain, '>', 100_000, 'a chain of more than 100 KB';

my $app = sub { return [200, ['Content-Type' => 'text/plain'], ['through']] };
my $server = start_server(app => $app, options => ['--workers', 1, '--header-timeout', 60,
    '--enable-ssl', '--ssl-cert', $chain, '--ssl-key', $pki->{key}]);

# TLS 1.2 first: its client sends nothing between its hello and the
# server's last message.  (OpenSSL's TLS 1.3 client sends a
# ChangeCipherSpec as soon as the server's hello comes, which gives the
# worker input to wake on; the server still must not spin on it.)
for my $version ('TLSv1_2', 'TLSv1_3') {
    socket(my $sock, AF_INET, SOCK_STREAM, 0) or die "socket: $!";
    setsockopt($sock, SOL_SOCKET, SO_RCVBUF, 1024) or die "SO_RCVBUF: $!";
    setsockopt($sock, IPPROTO_TCP, TCP_MAXSEG, 536) or die "TCP_MAXSEG: $!";
    connect($sock, pack_sockaddr_in($server->port, inet_aton('127.0.0.1'))) or die "connect: $!";
    my $tls = IO::Socket::SSL->start_SSL($sock, SSL_ca_file => $pki->{ca}, SSL_version => $version,
        SSL_verify_mode => IO::Socket::SSL::SSL_VERIFY_PEER(), SSL_verifycn_name => 'localhost',
        SSL_verifycn_scheme => 'http', Timeout => Serow::Test::READ_TIMEOUT,
        SSL_create_ctx_callback => sub {
            my ($ctx) = @_;
            Net::SSLeay::CTX_ctrl($ctx, SSL_CTRL_SET_MAX_CERT_LIST, 16 << 20, 0);
        });
    ok $tls, "$version: the handshake finished before the client's deadline, well before --header-timeout"
        or diag $IO::Socket::SSL::SSL_ERROR;
  SKIP: {
        skip 'no handshake', 1 unless $tls;
        my $res = tls_request($tls, '/', headers => { Connection => 'close' });
        is $res && $res->{body}, 'through', "$version: a request answered over it";
    }
}

done_testing;
