use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use Time::HiRes ();
use Serow::Test qw(need_debian_packages start_server);
use Serow::Test::TLS qw(test_pki tls_options tls_connect);

# The master's 503 on a TLS connection (src/shared/connection_transfer.c):
# the app is stuck past --request-timeout where the die does not reach it,
# the master kills the worker and seals the 503 from the state the worker
# left in its slot, which it copied after each record it sealed while the
# app ran (src/worker/request_timeout.c).  The client is OpenSSL's: a 503
# sealed from a state behind the worker's (a nonce used again) fails its
# record check, and the client gets no 503.  After a plain request, after a
# 100 Continue and a body the app read (records the worker opened after the
# app began, which the master must not try to open with its copy), after a
# 103 Early Hints (sealed after the app began: without the copies after each
# seal, this 503 fails the client's check), in TLS 1.3 and 1.2.

need_debian_packages(qw(openssl libio-socket-ssl-perl libnet-ssleay-perl));

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/stuck-after-body') {
        $env->{'psgi.input'}->read(my $body, 100_000) for 1 .. 3;
    } elsif ($path eq '/stuck-after-103') {
        $env->{'psgix.informational'}->(103, [Link => '</style.css>; rel=preload']);
    } elsif ($path ne '/stuck') {
        return [200, ['Content-Type' => 'text/plain'], ['fine']];
    }
    # What the die cannot end: SIGALRM ignored (as a blocking C call would
    # defer it forever).
    local $SIG{ALRM} = 'IGNORE';
    sleep 1 while 1;
};

my $pki = test_pki();
my $server = start_server(app => $app, options => ['--workers', 1, '--request-timeout', 1,
    '--request-timeout-grace', 1, tls_options($pki)]);

# The status of the next response head on $sock (what follows it stays in
# $$buf), or 0 when none came: the connection ended, failed (a record
# OpenSSL refused), or said nothing for READ_TIMEOUT.
sub next_status {
    my ($sock, $buf) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + Serow::Test::READ_TIMEOUT;
    while ($$buf !~ /\r\n\r\n/) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !($sock->pending || $sel->can_read($left));
        my $n = sysread($sock, $$buf, 65536, length $$buf);
        return 0 if defined $n && $n == 0;
        return 0 if !defined $n && !$!{EAGAIN};
    }
    $$buf =~ s/\AHTTP\/1\.1 (\d{3})[^\r]*\r\n(?:[^\r]+\r\n)*\r\n// or return 0;
    return $1;
}

sub send_all {
    my ($sock, $data) = @_;
    while (length $data) {
        my $n = syswrite($sock, $data);
        return 0 unless $n;
        substr($data, 0, $n, '');
    }
    return 1;
}

for my $version ('TLSv1_3', 'TLSv1_2') {
    subtest "$version: a stuck request's client gets the master's 503, sealed in sequence" => sub {
        my $sock = tls_connect($server, $pki, SSL_version => $version)
            or return fail "no TLS connection: $@";
        my $buf = '';
        send_all($sock, "GET /stuck HTTP/1.1\r\nHost: localhost\r\n\r\n");
        is next_status($sock, \$buf), 503, 'a plain GET: 503' or diag $server->log;

        $sock = tls_connect($server, $pki, SSL_version => $version)
            or return fail "no TLS connection: $@";
        my $body = 'b' x 200_000; # (more than the worker reads before the app)
        send_all($sock, "POST /stuck-after-body HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
            . length($body) . "\r\nExpect: 100-continue\r\n\r\n");
        $buf = '';
        is next_status($sock, \$buf), 100, 'the app reads its body: 100 Continue';
        send_all($sock, $body);
        send_all($sock, 'more bytes the app will not read');
        is next_status($sock, \$buf), 503, 'after the 100 Continue and the body: 503'
            or diag $server->log;

        $sock = tls_connect($server, $pki, SSL_version => $version)
            or return fail "no TLS connection: $@";
        send_all($sock, "GET /stuck-after-103 HTTP/1.1\r\nHost: localhost\r\n\r\n");
        $buf = '';
        is next_status($sock, \$buf), 103, 'the app sends 103 Early Hints';
        is next_status($sock, \$buf), 503, 'after it: 503' or diag $server->log;

        $sock = tls_connect($server, $pki, SSL_version => $version)
            or return fail "no TLS connection: $@";
        send_all($sock, "GET /fine HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        $buf = '';
        is next_status($sock, \$buf), 200, 'the new worker answers';
    };
}

done_testing;
