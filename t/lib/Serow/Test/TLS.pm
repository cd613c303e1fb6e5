package Serow::Test::TLS;
use strict;
use warnings;

# TLS for the tests (t/tls/): a test CA and a server certificate made by
# openssl in a temp dir, and a strict client over IO::Socket::SSL (OpenSSL:
# a record with a wrong sequence number or tag ends its connection with
# an error, which the tests see as no answer).  IO::Socket::SSL is loaded
# only by the functions that use it, so that loading this module costs a
# test that skips nothing.

use Exporter 'import';
use File::Temp ();
use POSIX ();
use IO::Select ();
use Time::HiRes ();
use Serow::Test::Common qw(READ_TIMEOUT);
use Serow::Test::Client qw(parse_response_head);
use Serow::Test::Process qw(run_command);

our @EXPORT_OK = qw(test_pki test_cert tls_connect tls_request tls_read_response tls_options run_client run_with_input client_cert revoked);

# A CA and a certificate for localhost and 127.0.0.1 signed by it, with
# ECDSA P-256 keys: { dir, ca, cert, key, other_key } (other_key: a key of
# no certificate).  Dies when openssl fails.
sub test_pki {
    my $dir = File::Temp->newdir;
    my @ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes');
    _openssl('req', '-x509', @ec, '-keyout', "$dir/ca.key", '-out', "$dir/ca.pem", '-days', 2,
        '-subj', '/CN=Serow test CA');
    _openssl('req', @ec, '-keyout', "$dir/server.key", '-out', "$dir/server.csr",
        '-subj', '/CN=localhost');
    open(my $ext, '>', "$dir/ext") or die "$dir/ext: $!";
    print $ext "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
    close $ext;
    _openssl('x509', '-req', '-in', "$dir/server.csr", '-CA', "$dir/ca.pem", '-CAkey', "$dir/ca.key",
        '-CAcreateserial', '-out', "$dir/server.pem", '-days', 2, '-extfile', "$dir/ext");
    _openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256',
        '-out', "$dir/other.key");
    return { dir => $dir, ca => "$dir/ca.pem", cert => "$dir/server.pem", key => "$dir/server.key",
             other_key => "$dir/other.key" };
}

# Another certificate signed by $pki's CA, for the DNS names in @$names,
# with the common name $cn and a new key ('ec': P-256, or 'rsa': 2048
# bits): { cert, key }, files in $pki's dir named after $base.
sub test_cert {
    my ($pki, $base, $cn, $names, $type) = @_;
    my $dir = $pki->{dir};
    my @key = ($type // 'ec') eq 'rsa' ? ('-newkey', 'rsa:2048')
                                       : ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256');
    _openssl('req', @key, '-nodes', '-keyout', "$dir/$base.key", '-out', "$dir/$base.csr", '-subj', "/CN=$cn");
    open(my $ext, '>', "$dir/$base.ext") or die "$dir/$base.ext: $!";
    print $ext 'subjectAltName=' . join(',', map { "DNS:$_" } @$names) . "\n";
    close $ext;
    _openssl('x509', '-req', '-in', "$dir/$base.csr", '-CA', $pki->{ca}, '-CAkey', "$dir/ca.key",
        '-CAcreateserial', '-out', "$dir/$base.pem", '-days', 2, '-extfile', "$dir/$base.ext");
    return { cert => "$dir/$base.pem", key => "$dir/$base.key" };
}

# Runs a TLS client (openssl s_client, gnutls-cli, curl) to its end, with
# nothing on its input; returns its exit status (as $?) and its standard
# output and error together.
sub run_client {
    my (@command) = @_;
    my $out = File::Temp->new;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open(STDIN, '<', '/dev/null') or POSIX::_exit(110);
        open(STDOUT, '>', $out->filename) or POSIX::_exit(111);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(111);
        # Not Serow's code: under tools/test-sanitized the preloaded libasan
        # is for perl (see t/http/curl.t).
        delete $ENV{LD_PRELOAD};
        { exec { $command[0] } @command }
        POSIX::_exit(112);
    }
    waitpid($pid, 0);
    my $status = $?;
    open(my $fh, '<', $out->filename) or die "$out: $!";
    local $/;
    return ($status, scalar <$fh> // '');
}

# A client certificate (mutual TLS) with an ECDSA P-256 key, signed by
# $pki's CA, or with other_ca => 1 by a second CA of the same name the
# server does not know: { cert, key, subject }.  %opts: subject (openssl's
# -subj form, UTF-8; '+' joins the members of one RDN, '\+' is a plus in a
# value), serial (hex).  The files are $name.pem and $name.key in $pki's dir.
sub client_cert {
    my ($pki, $name, %opts) = @_;
    my $dir = $pki->{dir};
    my @ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes');
    my $ca = $opts{other_ca} ? 'other-ca' : 'ca';
    _openssl('req', '-x509', @ec, '-keyout', "$dir/$ca.key", '-out', "$dir/$ca.pem", '-days', 2,
        '-subj', '/CN=Serow test CA') unless -e "$dir/$ca.pem";
    my $subject = $opts{subject} // "/CN=$name";
    _openssl('req', @ec, '-utf8', '-multivalue-rdn', '-keyout', "$dir/$name.key",
        '-out', "$dir/$name.csr", '-subj', $subject);
    open(my $ext, '>', "$dir/client-ext") or die "$dir/client-ext: $!";
    print $ext "extendedKeyUsage=clientAuth\n";
    close $ext;
    _openssl('x509', '-req', '-in', "$dir/$name.csr", '-CA', "$dir/$ca.pem", '-CAkey', "$dir/$ca.key",
        '-set_serial', '0x' . ($opts{serial} // '01'), '-out', "$dir/$name.pem", '-days', 2,
        '-extfile', "$dir/client-ext");
    return { cert => "$dir/$name.pem", key => "$dir/$name.key", subject => $subject };
}

# A CRL (PEM) of $pki's CA that revokes the certificates @certs (client_cert's):
# its file.
sub revoked {
    my ($pki, @certs) = @_;
    my $dir = $pki->{dir};
    open(my $index, '>', "$dir/index.txt") or die "$dir/index.txt: $!";
    close $index;
    open(my $conf, '>', "$dir/ca.conf") or die "$dir/ca.conf: $!";
    print $conf "[ca]\ndefault_ca = test\n[test]\ndatabase = $dir/index.txt\n"
        . "default_md = sha256\ndefault_crl_days = 2\n";
    close $conf;
    my @ca = ('-config', "$dir/ca.conf", '-keyfile', "$dir/ca.key", '-cert', $pki->{ca});
    _openssl('ca', @ca, '-revoke', $_->{cert}) for @certs;
    _openssl('ca', @ca, '-gencrl', '-out', "$dir/crl.pem");
    return "$dir/crl.pem";
}

# Runs a TLS client (curl, openssl s_client) to its end with $input on its
# standard input (undef: none): ($stdout, $stderr, $status as $?).
sub run_with_input {
    my ($input, @command) = @_;
    my $dir = File::Temp->newdir;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open(my $in, '>', "$dir/in") or POSIX::_exit(110);
        print $in $input // '';
        close $in;
        open(STDIN, '<', "$dir/in") or POSIX::_exit(110);
        open(STDOUT, '>', "$dir/out") or POSIX::_exit(111);
        open(STDERR, '>', "$dir/err") or POSIX::_exit(111);
        delete $ENV{LD_PRELOAD}; # (not Serow's code: see run_client)
        { exec @command }
        POSIX::_exit(112);
    }
    waitpid($pid, 0);
    my $status = $?;
    my ($out, $err) = map { local $/; open my $fh, '<', "$dir/$_" or die $!; scalar <$fh> } qw(out err);
    return ($out, $err, $status);
}

sub _openssl {
    my $run = run_command('openssl', @_);
    $run->{status} == 0 or die "openssl @_[0, 1]: $run->{output}";
}

# The server's options for TLS on every address, with $pki's files.
sub tls_options {
    my ($pki) = @_;
    return ('--enable-ssl', '--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key});
}

# A TLS connection to $server checked against $pki's CA, or undef with the
# error in $@.  %ssl: more IO::Socket::SSL options (SSL_version...).
sub tls_connect {
    my ($server, $pki, %ssl) = @_;
    require IO::Socket::SSL;
    my $sock = IO::Socket::SSL->new(PeerHost => '127.0.0.1', PeerPort => $server->port,
        SSL_ca_file => $pki->{ca}, SSL_verify_mode => IO::Socket::SSL::SSL_VERIFY_PEER(),
        SSL_verifycn_name => 'localhost', SSL_verifycn_scheme => 'http',
        SSL_alpn_protocols => ['http/1.1'], Timeout => READ_TIMEOUT, %ssl);
    $@ = $IO::Socket::SSL::SSL_ERROR || $@ unless $sock;
    return $sock;
}

# Sends a GET of $path (or what %opts says) and reads its response.
sub tls_request {
    my ($sock, $path, %opts) = @_;
    my $method = $opts{method} // 'GET';
    my $body = $opts{body} // '';
    my $head = "$method $path HTTP/1.1\r\nHost: localhost\r\n"
        . (length $body || $method eq 'POST' ? 'Content-Length: ' . length($body) . "\r\n" : '')
        . join('', map { "$_: $opts{headers}{$_}\r\n" } sort keys %{ $opts{headers} || {} }) . "\r\n";
    my $out = $head . $body;
    while (length $out) {
        my $n = syswrite($sock, $out);
        return undef unless $n;
        substr($out, 0, $n, '');
    }
    return tls_read_response($sock);
}

# One response with a Content-Length (or up to the end); undef when the
# connection ended first, failed (a record OpenSSL refused), or said
# nothing for READ_TIMEOUT.  What OpenSSL has opened and not handed out
# yet (pending) is read before select is asked.
sub tls_read_response {
    my ($sock) = @_;
    my $buf = '';
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + READ_TIMEOUT;
    my $fill = sub {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0;
        return 0 unless $sock->pending || $sel->can_read($left);
        my $n = sysread($sock, $buf, 65536, length $buf);
        return $n // ($!{EAGAIN} ? -1 : 0); # (-1: a record's rest is on its way)
    };
    while ($buf !~ /\r\n\r\n/) { $fill->() or return undef }
    my $res = parse_response_head($buf) or return undef;
    substr($buf, 0, $res->{head_length}, '');
    if (defined(my $len = $res->{headers}{'content-length'})) {
        while (length $buf < $len) { $fill->() or return undef }
        $res->{body} = substr($buf, 0, $len, '');
    } else {
        1 while $fill->() > 0;
        $res->{body} = $buf;
    }
    return $res;
}

1;
