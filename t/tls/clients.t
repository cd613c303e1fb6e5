use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Digest::MD5 qw(md5_hex);
use File::Temp ();
use JSON::PP ();
use POSIX ();
use IO::Select ();
use Serow::Test qw(need_debian_packages start_server raw_connect read_until_close);
use Serow::Test::TLS qw(test_pki tls_options tls_connect tls_request run_with_input);

# Real clients over TLS: curl (several URLs on one connection, a 2.7 MB
# upload with Expect: 100-continue, a chunked one, a file body sent through
# the transport's sendfile, a streamed body), openssl s_client with each
# cipher in TLS 1.3 and 1.2 (and close_notify at the end), LWP over
# IO::Socket::SSL; the env (https, HTTPS=on, psgix.io); plain HTTP to
# the TLS port (nginx's 400); a client that never finishes its handshake.

need_debian_packages(qw(openssl curl libio-socket-ssl-perl libnet-ssleay-perl libwww-perl
                        liblwp-protocol-https-perl));

my $dir = File::Temp->newdir;
my $big = join '', map { sprintf "%08d\n", $_ } 1 .. 300_000; # 2.7 MB
{ open my $fh, '>', "$dir/big" or die $!; print {$fh} $big; close $fh }

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/file') {
        open(my $fh, '<', "$dir/big") or die $!;
        return [200, ['Content-Type' => 'text/plain', 'Content-Length' => -s $fh], $fh];
    }
    if ($path eq '/stream') {
        return sub {
            my $writer = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $writer->write(sprintf "%08d\n", $_) for 1 .. 20_000;
            $writer->close;
        };
    }
    my $body = '';
    while ($env->{'psgi.input'}->read(my $part, 65536)) { $body .= $part }
    return [200, ['Content-Type' => 'application/json'], [JSON::PP->new->canonical->encode({
        path => $path, port => $env->{REMOTE_PORT}, scheme => $env->{'psgi.url_scheme'},
        https => $env->{HTTPS}, io => exists $env->{'psgix.io'} ? 1 : 0, length => length $body,
        md5 => md5_hex($body), pid => $$,
    })]];
};

my $pki = test_pki();
my $server = start_server(app => $app,
    # (Tickets off: s_client prints a TLS 1.3 ticket that arrives after the
    # handshake in the middle of the answer it is printing.  Resumption is
    # t/tls/resumption.t's.)
    options => ['--workers', 2, '--header-timeout', 2, '--ssl-session-tickets', 'off', tls_options($pki)]);
my $url = 'https://localhost:' . $server->port;

sub curl {
    return run_with_input(undef, 'curl', '-sS', '-v', '--max-time', Serow::Test::READ_TIMEOUT,
        '--cacert', $pki->{ca}, '--resolve', 'localhost:' . $server->port . ':127.0.0.1', @_);
}
# (The app's JSON objects only: s_client also prints the session tickets it
# gets, whose bytes may show a brace.)
sub answers { my ($out) = @_; return map { JSON::PP::decode_json($_) } $out =~ /(\{"[^}]*"path":[^}]*\})/g }

subtest 'curl: several URLs on one connection, and the env' => sub {
    my ($out, $err, $status) = curl("$url/one", "$url/two", "$url/three");
    is $status, 0, 'curl succeeds' or diag $err;
    like $err, qr/ALPN: server accepted http\/1\.1/, 'ALPN: http/1.1';
    like $err, qr/SSL certificate verify ok/, 'the certificate verified against the test CA';
    my @seen = answers($out);
    is_deeply [map { $_->{path} } @seen], [qw(/one /two /three)], 'three answers';
    is scalar(() = $err =~ /Re-using existing connection/g), 2, 'on one connection';
    is_deeply [map { "$_->{scheme} $_->{https} $_->{io}" } @seen], [('https on 1') x 3],
        'psgi.url_scheme https, HTTPS on, psgix.io (t/tls/psgix_io.t)';
};

for my $version ('--tlsv1.3', '--tls-max') {
    my @version = $version eq '--tls-max' ? ('--tlsv1.2', '--tls-max', '1.2') : ('--tlsv1.3');
    my $name = $version eq '--tls-max' ? 'TLS 1.2' : 'TLS 1.3';
    subtest "curl, $name: bodies both ways" => sub {
        my ($out, $err, $status) = curl(@version, '--data-binary', "\@$dir/big", "$url/upload");
        is $status, 0, 'curl succeeds' or diag $err;
        like $err, qr/SSL connection using TLSv\Q${\ substr($name, 4)}\E/, "in $name";
        like $err, qr{^< HTTP/1\.1 100 Continue}mi, 'a 100 Continue, sealed, before the body';
        my ($seen) = answers($out);
        is $seen->{md5}, md5_hex($big), 'a 2.7 MB upload arrives byte for byte';
        ($out, $err, $status) = curl(@version, '-H', 'Transfer-Encoding: chunked',
            '--data-binary', "\@$dir/big", "$url/chunked");
        ($seen) = answers($out);
        is $seen->{md5}, md5_hex($big), 'and a chunked one';
        ($out, $err, $status) = curl(@version, "$url/file");
        is $status, 0, 'curl succeeds' or diag $err;
        is md5_hex($out), md5_hex($big), 'a file body (the transport\'s sendfile) arrives whole';
        ($out, $err, $status) = curl(@version, "$url/stream");
        is $out, join('', map { sprintf "%08d\n", $_ } 1 .. 20_000), 'a streamed body too';
    };
}

subtest 'openssl s_client, each cipher in TLS 1.3 and 1.2, close_notify at the end' => sub {
    my $request = "GET /s_client HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    for my $case (
        ['-tls1_3', '-ciphersuites', 'TLS_AES_128_GCM_SHA256'],
        ['-tls1_3', '-ciphersuites', 'TLS_AES_256_GCM_SHA384'],
        ['-tls1_3', '-ciphersuites', 'TLS_CHACHA20_POLY1305_SHA256'],
        ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-GCM-SHA256'],
        ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES256-GCM-SHA384'],
        ['-tls1_2', '-cipher', 'ECDHE-ECDSA-CHACHA20-POLY1305'],
    ) {
        my ($out, $err, $status) = run_with_input($request, 'openssl', 's_client', '-connect',
            '127.0.0.1:' . $server->port, '-servername', 'localhost', '-CAfile', $pki->{ca},
            '-verify_return_error', '-ign_eof', @$case);
        is $status, 0, "@$case: s_client succeeds" or diag $err;
        my ($seen) = answers($out);
        is $seen && $seen->{path}, '/s_client', '... answered';
        like $out, qr/Cipher is \Q$case->[-1]\E|Cipher\s*: \Q$case->[-1]\E/, "... with $case->[-1]";
        unlike "$out$err", qr/unexpected eof/i, '... and ended by close_notify, not a cut';
    }
};

subtest 'LWP over IO::Socket::SSL, kept alive' => sub {
    require LWP::UserAgent;
    my $ua = LWP::UserAgent->new(keep_alive => 1, timeout => Serow::Test::READ_TIMEOUT,
        ssl_opts => { SSL_ca_file => $pki->{ca}, verify_hostname => 1 });
    my %ports;
    for my $i (1 .. 20) {
        my $res = $ua->post("$url/lwp/$i", Content => "x" x ($i * 1000));
        ok $res->is_success, "request $i" or diag $res->status_line;
        my ($seen) = answers($res->content);
        is $seen->{length}, $i * 1000, '... its body arrived';
        $ports{ $seen->{port} } = 1;
    }
    is scalar(keys %ports), 1, 'all on one connection';
};

# A relay between a client and the server that passes what the client
# sends in pieces of 1 to 7 bytes, each its own segment (TCP_NODELAY): the
# server sees its handshake and its records arrive in parts.  Returns the
# relay's port; the relay serves one connection, then exits.
sub slow_relay {
    require IO::Socket::IP;
    require Socket;
    my $listen = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 1,
        ReuseAddr => 1) or die "relay: $@";
    my $pid = fork // die "fork: $!";
    if ($pid) { my $port = $listen->sockport; close $listen; return ($port, $pid) }
    my $client = $listen->accept or POSIX::_exit(1);
    my $server_sock = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $server->port)
        or POSIX::_exit(2);
    setsockopt($server_sock, Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1);
    my $sel = IO::Select->new($client, $server_sock);
    my $n = 0;
    while (my @ready = $sel->can_read(Serow::Test::READ_TIMEOUT)) {
        for my $from (@ready) {
            my $got = sysread($from, my $buf, 65536) or POSIX::_exit(0);
            if ($from == $server_sock) { syswrite($client, $buf); next }
            while (length $buf) {
                my $piece = substr($buf, 0, 1 + $n++ % 7, '');
                syswrite($server_sock, $piece) or POSIX::_exit(3);
            }
        }
    }
    POSIX::_exit(0);
}

subtest 'a client whose handshake and records arrive a few bytes at a time' => sub {
    my ($port, $relay) = slow_relay();
    my $via = bless { port => $port }, 'Serow::Test::Server';
    my $sock = tls_connect($via, $pki) or return fail "no TLS connection: $@";
    for my $i (1 .. 5) {
        my $body = 'p' x (1000 * $i * $i);
        my $res = tls_request($sock, "/pieces/$i", method => 'POST', body => $body);
        my ($seen) = $res ? answers($res->{body}) : ();
        is $seen && $seen->{md5}, md5_hex($body), "request $i: its body of " . length($body) . ' bytes';
    }
    close $sock;
    waitpid($relay, 0);
};

subtest "the server's own error pages, sealed" => sub {
    my $sock = tls_connect($server, $pki) or return fail "no TLS connection: $@";
    syswrite $sock, "GET / HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n";
    my $res = Serow::Test::TLS::tls_read_response($sock);
    is $res && $res->{status}, 400, 'a malformed head: 400';
    $sock = tls_connect($server, $pki) or return fail "no TLS connection: $@";
    my $head = "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " . ('x' x 70_000) . "\r\n\r\n";
    while (length $head) { # (a record at a time)
        my $n = syswrite($sock, $head) or last;
        substr($head, 0, $n, '');
    }
    $res = Serow::Test::TLS::tls_read_response($sock);
    is $res && $res->{status}, 431, 'a head over --max-header-size: 431';
};

subtest 'plain HTTP to the TLS port: 400, as nginx answers' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    my $answer = read_until_close($sock);
    like $answer, qr{\AHTTP/1\.1 400 Bad Request\r\n}, 'answered 400 Bad Request';
    like $answer, qr{The plain HTTP request was sent to HTTPS port}, 'saying why';
    my ($length) = $answer =~ /Content-Length: (\d+)/;
    is $length, length($answer) - index($answer, "\r\n\r\n") - 4, 'with its body\'s length';
};

subtest 'a handshake that does not end is closed after --header-timeout' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "\x16\x03\x01\x00\x05"; # a record header, and no more
    my $answer = read_until_close($sock, timeout => 30);
    is $answer, '', 'closed, with nothing sent';
    my $tls = tls_connect($server, $pki) or diag $@;
    my $res = $tls && tls_request($tls, '/after');
    is $res && $res->{status}, 200, 'and the server goes on';
};

subtest 'plackup -s Serow --enable-ssl --ssl-cert --ssl-key' => sub {
    my $plackup = Serow::Test::find_command('plackup') or return plan skip_all => 'no plackup';
    require Net::EmptyPort;
    my $port = Net::EmptyPort::empty_port();
    my $served = start_server(listen => 'none', command => [$^X, '-Mblib', $plackup, '-s', 'Serow',
        '--listen', "127.0.0.1:$port", '--enable-ssl', '--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key},
        't/apps/pid.psgi']);
    ok $served->wait_for_log(qr{Serow: Accepting connections at https://127\.0\.0\.1:$port/}),
        "plackup's server_ready line says https" or return diag $served->log;
    my $sock = tls_connect(bless({ port => $port }, 'Serow::Test::Server'), $pki) or return fail "TLS: $@";
    my $res = tls_request($sock, '/');
    is $res && $res->{status}, 200, 'and it serves TLS';
    is $served->stop, 0, 'TERM stops it cleanly';
};

is $server->stop, 0, 'clean stop';
done_testing;
