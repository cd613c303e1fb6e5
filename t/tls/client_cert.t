use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use JSON::PP ();
use POSIX ();
use Serow::Test qw(need_debian_packages run_serow start_server wait_until);
use Serow::Test::Process qw(run_command);
use Serow::Test::TLS qw(test_pki test_cert client_cert revoked tls_options tls_connect tls_request run_with_input);

# Client certificates (mutual TLS, --ssl-verify-client): the handshake
# refuses what the mode refuses, and the env has what mod_ssl and nginx
# give (SSL_CLIENT_VERIFY, the subject and issuer in RFC 4514's form, the
# serial, the dates...), on every request of a kept connection, whichever
# worker answers it: the connections are made to move, as in moving.t (a
# worker kept busy by a slow request, whose parked connections the holder
# takes and another worker answers), and across HUP.  Clients: curl,
# openssl s_client and OpenSSL through IO::Socket::SSL.

need_debian_packages(qw(openssl curl libio-socket-ssl-perl libnet-ssleay-perl));

my $dir = File::Temp->newdir;
my $fifo = "$dir/release";
POSIX::mkfifo($fifo, 0600) or die "mkfifo: $!";
my $inside = "$dir/inside"; # made while the slow request runs

my $json = JSON::PP->new->canonical; # (bytes in, bytes out: no ->utf8)
my $app = sub {
    my ($env) = @_;
    kill 'KILL', $$ if $env->{PATH_INFO} eq '/die'; # (its worker, with its connections)
    if ($env->{PATH_INFO} eq '/block') {
        open(my $mark, '>', $inside) or die $!;
        close $mark;
        open(my $fh, '<', $fifo) or die "open $fifo: $!";
        my $line = <$fh>;
        unlink $inside;
    }
    my %seen = (pid => $$, map { $_ => $env->{$_} } grep { /^SSL_|^HTTPS\z/ } keys %$env);
    return [200, ['Content-Type' => 'application/json'], [$json->encode(\%seen)]];
};

my $pki = test_pki();
# A subject with what RFC 4514 escapes (a comma, a plus, quotes, <>;\),
# UTF-8; and one as plain as can be.
my $alice = client_cert($pki, 'alice', serial => '0A1B2C3D4E',
    subject => '/C=FR/O=Acme, Inc./OU=R\+D/CN=Zoë "Q" <x>;y/emailAddress=alice@example.com');
my $bob = client_cert($pki, 'bob', serial => '02');
my $mallory = client_cert($pki, 'mallory', other_ca => 1, serial => '03');

# What openssl says of a certificate, in the form the env should have.
sub expected {
    my ($c) = @_;
    my $o = run_command('openssl', 'x509', '-in', $c->{cert}, '-noout', '-serial', '-startdate',
        '-enddate', '-fingerprint', '-sha1', '-subject', '-issuer', '-nameopt', 'RFC2253,-esc_msb');
    $o->{status} == 0 or die $o->{output};
    my %x = $o->{output} =~ /^(\w[\w ]*?)\s*=\s*(.*)$/mg;
    (my $fingerprint = lc $x{'sha1 Fingerprint'}) =~ tr/://d;
    open(my $fh, '<', $c->{cert}) or die $!;
    my $pem = do { local $/; <$fh> };
    return { SSL_CLIENT_S_DN => $x{subject}, SSL_CLIENT_I_DN => $x{issuer},
             SSL_CLIENT_M_SERIAL => $x{serial}, SSL_CLIENT_V_START => $x{notBefore},
             SSL_CLIENT_V_END => $x{notAfter}, SSL_CLIENT_FINGERPRINT => $fingerprint,
             SSL_CLIENT_M_VERSION => 3, SSL_CLIENT_CERT => $pem };
}
my %expect = (alice => expected($alice), bob => expected($bob), mallory => expected($mallory));

# Written out, so that the test says what the form is, not only that it
# matches openssl's.
is $expect{alice}{SSL_CLIENT_S_DN},
    'emailAddress=alice@example.com,CN=Zoë \"Q\" \<x\>\;y,OU=R\+D,O=Acme\, Inc.,C=FR',
    "(openssl's RFC 2253 form of the subject, for reference)";
is $expect{alice}{SSL_CLIENT_M_SERIAL}, '0A1B2C3D4E', '(the serial, for reference)';

# curl with the client certificate $c (none: undef): (the env, or undef; curl's stderr).
sub curl_env {
    my ($server, $c) = @_;
    my ($out, $err, $status) = run_with_input('', 'curl', '-sS', '--max-time',
        Serow::Test::READ_TIMEOUT, '--cacert', $pki->{ca},
        '--resolve', 'localhost:' . $server->port . ':127.0.0.1',
        ($c ? ('--cert', $c->{cert}, '--key', $c->{key}) : ()),
        'https://localhost:' . $server->port . '/env');
    return ($status == 0 && $out =~ /^\{/ ? $json->decode($out) : undef, $err);
}

# The env as a kept connection sees it: undef when it got no answer.
sub ask {
    my ($sock, $path) = @_;
    my $res = tls_request($sock, $path // '/env');
    return $res && $res->{status} == 200 ? $json->decode($res->{body}) : undef;
}

sub connect_as {
    my ($server, $c) = @_;
    return tls_connect($server, $pki, $c ? (SSL_cert_file => $c->{cert}, SSL_key_file => $c->{key}) : ());
}

# Whether $env is what a client with $name's certificate should see.
sub env_is {
    my ($env, $name, $what) = @_;
    my $want = { %{ $expect{$name} }, SSL_CLIENT_VERIFY => 'SUCCESS' };
    $want->{SSL_CLIENT_VERIFY} = 'FAILED:unable to get local issuer certificate' if $name eq 'mallory';
    my @wrong = grep { ($env->{$_} // '<none>') ne $want->{$_} } sort keys %$want;
    ok !@wrong, "$what: the env has $name\'s certificate"
        or diag join "\n", map { "$_: '" . ($env->{$_} // '<none>') . "', want '$want->{$_}'" } @wrong;
    return !@wrong;
}

sub start {
    my ($mode, @more) = @_;
    return start_server(app => $app, options => ['--workers', 2, '--keepalive-timeout', 300,
        tls_options($pki), '--ssl-verify-client', $mode, @more]);
}

subtest 'refused at start' => sub {
    my @tls = (tls_options($pki), '--listen', '127.0.0.1:0'); # (never bound: refused before)
    my $garbage = "$dir/garbage.pem";
    open(my $fh, '>', $garbage) or die; print $fh "not PEM\n"; close $fh;
    for my $case (
        [['--ssl-verify-client', 'on'], qr/--ssl-verify-client: on needs --ssl-client-ca/],
        [['--ssl-verify-client', 'optional'], qr/--ssl-verify-client: optional needs --ssl-client-ca/],
        [['--ssl-verify-client', 'sometimes'], qr/--ssl-verify-client: 'sometimes' is not one of off, on, optional, optional_no_ca/],
        [['--ssl-client-ca', $pki->{ca}], qr/--ssl-client-ca: needs --ssl-verify-client/],
        [['--ssl-verify-client', 'on', '--ssl-client-ca', "$dir/missing.pem"],
         qr/--ssl-client-ca: cannot read \S+missing\.pem: No such file/],
        [['--ssl-verify-client', 'on', '--ssl-client-ca', $garbage],
         qr/--ssl-client-ca: \S+garbage\.pem holds no PEM certificate/],
    ) {
        my ($argv, $message) = @$case;
        my ($status, $text) = run_serow(@tls, @$argv, 'eg/hello.psgi');
        is $status, 2, "@$argv: serow exits with status 2";
        like $text, $message, '... saying why';
    }
    my ($status, $text) = run_serow('--listen', '127.0.0.1:0', '--ssl-verify-client', 'optional_no_ca', 'eg/hello.psgi');
    like $text, qr/--ssl-verify-client: no address serves TLS/, 'without TLS: refused';
    ($status, $text) = run_serow('--listen', '127.0.0.1:0', '--ssl-client-ca', $pki->{ca}, 'eg/hello.psgi');
    like $text, qr/--ssl-client-ca: no address serves TLS/, '... and the CA too';
};

subtest 'on: only a valid certificate has a handshake' => sub {
    my $server = start('on', '--ssl-client-ca', $pki->{ca});
    my ($env, $err) = curl_env($server);
    ok !$env, 'curl without a certificate: no handshake' or diag explain $env;
    ($env, $err) = curl_env($server, $mallory);
    ok !$env, 'curl with a certificate of another CA: no handshake' or diag explain $env;
    ($env, $err) = curl_env($server, $alice);
    ok $env, 'curl with a certificate of the CA: answered' or diag $err;
    env_is($env, 'alice', 'curl');
    like $env->{SSL_CLIENT_V_REMAIN} // '', qr/^[12]\z/, 'SSL_CLIENT_V_REMAIN: the days left';
    is $env->{HTTPS}, 'on', 'HTTPS is on';
    like $env->{SSL_PROTOCOL} // '', qr/^TLSv1\.3\z/, 'SSL_PROTOCOL';
    like $env->{SSL_CIPHER} // '', qr/^TLS_(AES_128_GCM_SHA256|AES_256_GCM_SHA384|CHACHA20_POLY1305_SHA256)\z/,
        'SSL_CIPHER, by OpenSSL\'s name';

    my ($out, $s_err, $status) = run_with_input(
        "GET /env HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        'openssl', 's_client', '-connect', '127.0.0.1:' . $server->port, '-servername', 'localhost',
        '-CAfile', $pki->{ca}, '-cert', $bob->{cert}, '-key', $bob->{key}, '-tls1_2',
        '-cipher', 'ECDHE-ECDSA-AES256-GCM-SHA384', '-quiet', '-ign_eof');
    my ($body) = $out =~ /(\{.*\})/s;
    ok $body, 'openssl s_client -cert, TLS 1.2: answered' or diag $s_err;
    $env = $body ? $json->decode($body) : {};
    env_is($env, 'bob', 's_client');
    is $env->{SSL_PROTOCOL}, 'TLSv1.2', 'SSL_PROTOCOL TLSv1.2';
    is $env->{SSL_CIPHER}, 'ECDHE-ECDSA-AES256-GCM-SHA384', 'SSL_CIPHER of TLS 1.2, with the key exchange';
    ($out, $s_err, $status) = run_with_input(
        "GET /env HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        'openssl', 's_client', '-connect', '127.0.0.1:' . $server->port, '-servername', 'localhost',
        '-CAfile', $pki->{ca}, '-quiet', '-ign_eof');
    unlike $out, qr/SSL_CLIENT/, 'openssl s_client without a certificate: no answer';

    # Kept connections, made to move from worker to worker.
    my %conns = map { $_ => connect_as($server, $_ eq 'bob' ? $bob : $alice) } qw(alice alice2 bob);
    ok !grep({ !$_ } values %conns), 'three kept connections with certificates' or diag $@;
    moves($server, \%conns);
    is $server->stop, 0, 'clean stop';
};

# Rounds in which a connection that shares its worker with another asks
# for a slow request: its worker is busy, the holder takes the other one
# and the other worker answers it.  The env is checked on every answer,
# then across HUP (the old workers hand their idle connections to the
# holder in a message, and new workers answer them).
sub moves {
    my ($server, $conns) = @_;
    my (%last, %moved, $wrong);
    my $check = sub {
        my ($name, $what) = @_;
        my $env = ask($conns->{$name});
        (my $cert = $name) =~ s/\d+\z//;
        if (!$env || !env_is($env, $cert, "$what, $name")) {
            $wrong++;
            return;
        }
        $moved{$name}++ if defined $last{$name} && $last{$name} != $env->{pid};
        $last{$name} = $env->{pid};
    };
    $check->($_, 'first') for sort keys %$conns;
    for my $round (1 .. 8) {
        last if $wrong;
        # (two of three connections share a worker: the one of them that
        # moved more blocks it, and the other moves)
        my @names = sort { ($moved{$b} // 0) <=> ($moved{$a} // 0) || $a cmp $b } keys %$conns;
        my ($blocker) = grep { my $n = $_; grep { $_ ne $n && $last{$_} == $last{$n} } @names } @names;
        $blocker //= $names[0];
        syswrite $conns->{$blocker}, "GET /block HTTP/1.1\r\nHost: localhost\r\n\r\n";
        wait_until(sub { -e $inside }) or BAIL_OUT('the slow request never started');
        $check->($_, "round $round") for grep { $_ ne $blocker } @names;
        open(my $release, '>', $fifo) or die "open $fifo: $!";
        print $release "go\n";
        close $release;
        my $res = Serow::Test::TLS::tls_read_response($conns->{$blocker});
        ok $res && $res->{status} == 200, "round $round: the slow request ends" or last;
        $last{$blocker} = $json->decode($res->{body})->{pid};
        wait_until(sub { !-e $inside });
    }
    ok !$wrong, 'every answer on the kept connections had its certificate';
    diag 'moves: ' . join(', ', map { "$_: " . ($moved{$_} // 0) } sort keys %$conns);
    cmp_ok scalar(grep { $moved{$_} } keys %$conns), '>=', 2,
        'connections moved to the other worker, by the holder, and their env went with them';

    my %old = map { $_ => 1 } values %last;
    $server->signal('HUP');
    ok $server->wait_for_log(qr/received SIGHUP/), 'HUP received';
    my $round = 0;
    my $all_new = wait_until(sub {
        $round++;
        $check->($_, "after HUP $round") for sort keys %$conns;
        return $wrong || !grep { $old{ $last{$_} } } keys %$conns;
    });
    ok $all_new && !$wrong, 'after HUP, new workers answer the kept connections, with their certificates';
}

subtest 'optional: none, or a valid one' => sub {
    my $server = start('optional', '--ssl-client-ca', $pki->{ca});
    my ($env, $err) = curl_env($server);
    ok $env, 'curl without a certificate: answered' or diag $err;
    is $env->{SSL_CLIENT_VERIFY}, 'NONE', 'SSL_CLIENT_VERIFY NONE';
    ok !grep({ /^SSL_CLIENT_(?!VERIFY)/ } keys %$env), 'and no other SSL_CLIENT_*';
    ($env, $err) = curl_env($server, $alice);
    env_is($env // {}, 'alice', 'curl with a certificate of the CA');
    ($env, $err) = curl_env($server, $mallory);
    ok !$env, 'curl with a certificate of another CA: no handshake';
    is $server->stop, 0, 'clean stop';
};

subtest 'optional_no_ca: any certificate, its check said to the app' => sub {
    my $server = start('optional_no_ca', '--ssl-client-ca', $pki->{ca});
    my ($env, $err) = curl_env($server, $mallory);
    ok $env, 'curl with a certificate of another CA: answered' or diag $err;
    env_is($env // {}, 'mallory', 'curl with an unknown CA');
    ($env) = curl_env($server, $alice);
    env_is($env // {}, 'alice', 'curl with a certificate of the CA');
    ($env) = curl_env($server);
    is $env && $env->{SSL_CLIENT_VERIFY}, 'NONE', 'without: NONE';
    # (kept, and moved: a FAILED one moves as a SUCCESS one does)
    my %conns = map { $_ => connect_as($server, $_ =~ /mallory/ ? $mallory : $alice) } qw(alice mallory mallory2);
    ok !grep({ !$_ } values %conns), 'three kept connections' or diag $@;
    moves($server, \%conns);
    is $server->stop, 0, 'clean stop';
};

subtest '--ssl-crl: a revoked certificate fails its check' => sub {
    my $crl = revoked($pki, $bob);
    my ($status, $text) = run_serow(tls_options($pki), '--listen', '127.0.0.1:0', '--ssl-verify-client', 'optional_no_ca',
        '--ssl-crl', $crl, 'eg/hello.psgi');
    like $text, qr/--ssl-crl: needs --ssl-client-ca/, 'without --ssl-client-ca: refused';
    ($status, $text) = run_serow(tls_options($pki), '--listen', '127.0.0.1:0', '--ssl-verify-client', 'optional_no_ca',
        '--ssl-client-ca', "$pki->{dir}/other-ca.pem", '--ssl-crl', $crl, 'eg/hello.psgi');
    like $text, qr/--ssl-crl: \S+crl\.pem holds no PEM CRL, or one that no CA of --ssl-client-ca signed/,
        "a CRL of another CA: refused";

    my $server = start('on', '--ssl-client-ca', $pki->{ca}, '--ssl-crl', $crl);
    my ($env) = curl_env($server, $bob);
    ok !$env, 'on: a revoked certificate has no handshake';
    ($env) = curl_env($server, $alice);
    env_is($env // {}, 'alice', 'on: one the CRL does not list');
    is $server->stop, 0, 'clean stop';
    $server = start('optional_no_ca', '--ssl-client-ca', $pki->{ca}, '--ssl-crl', $crl);
    ($env) = curl_env($server, $bob);
    is $env && $env->{SSL_CLIENT_VERIFY}, 'FAILED:certificate revoked', 'optional_no_ca: FAILED:certificate revoked';
    is $server->stop, 0, 'clean stop';
};

subtest 'a full table is swept of the records of connections gone without a word' => sub {
    # Three records: three kept connections fill the table, and a fourth
    # handshake with a certificate is refused.  Then each of the three asks
    # for the death of its worker (SIGKILL: the connection ends with it, and
    # nothing lets its record go), and the next handshakes find the table
    # full of records whose sockets are gone: swept, they make room.
    local $ENV{SEROW_TEST_TLS_PEER_RECORDS} = 3;
    my $server = start('on', '--ssl-client-ca', $pki->{ca});
    my @kept = map { connect_as($server, $bob) } 1 .. 3;
    is scalar(grep { my $env = ask($_); $env && $env->{SSL_CLIENT_VERIFY} eq 'SUCCESS' } grep { $_ } @kept), 3,
        'three kept connections with a certificate';
    my ($env) = curl_env($server, $alice);
    ok !$env, 'a fourth: no handshake, the table is full';
    ok $server->wait_for_log(qr/no room in the table of client certificates/), '... and the log says why';
    for my $sock (@kept) {
        ok !ask($sock, '/die'), 'a connection ends with its worker, killed';
    }
    for my $i (1 .. 4) {
        ($env) = curl_env($server, $alice);
        env_is($env // {}, 'alice', "handshake $i after");
    }
    ok $server->wait_for_log(qr/3 record\(s\) of client certificates .* swept/), 'the sweep made room';
    is $server->stop, 0, 'clean stop';
};

# openssl s_client with $c's certificate, one request with Connection: close;
# @more: -sess_out FILE, -sess_in FILE.  (the env, whether it resumed).
sub s_client_env {
    my ($server, $c, @more) = @_;
    my ($out) = run_with_input("GET /env HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        'openssl', 's_client', '-connect', '127.0.0.1:' . $server->port, '-servername', 'localhost',
        '-CAfile', $pki->{ca}, '-cert', $c->{cert}, '-key', $c->{key}, '-ign_eof', @more);
    # (the body has no newline: s_client's own lines may follow it)
    my ($body) = $out =~ /^(\{.*?"pid":\d+\})/m;
    return ($body ? $json->decode($body) : undef, $out =~ /^Reused, TLSv1\.[23]/m ? 1 : 0);
}

subtest 'a resumed session: the same certificate in the env' => sub {
    for my $version ('-tls1_3', '-tls1_2') {
        my $server = start('on', '--ssl-client-ca', $pki->{ca});
        my ($env, $reused) = s_client_env($server, $alice, $version, '-sess_out', "$dir/session");
        env_is($env // {}, 'alice', "$version: a full handshake");
        ok !$reused, '  (not resumed)';
        ($env, $reused) = s_client_env($server, $alice, $version, '-sess_in', "$dir/session");
        ok $reused, "$version: the session resumed";
        env_is($env // {}, 'alice', "$version: resumed");
        is $server->stop, 0, 'clean stop';
    }
};

subtest 'several certificates (SNI): a client certificate checked under each name' => sub {
    my $other = test_cert($pki, 'other', 'other.example', ['other.example']);
    my $server = start('on', '--ssl-client-ca', $pki->{ca}, '--ssl-cert', $other->{cert}, '--ssl-key', $other->{key});
    for my $name ('localhost', 'other.example') {
        my ($out, $err, $status) = run_with_input('', 'curl', '-sS', '--max-time', Serow::Test::READ_TIMEOUT,
            '--cacert', $pki->{ca}, '--resolve', "$name:" . $server->port . ':127.0.0.1',
            '--cert', $alice->{cert}, '--key', $alice->{key}, "https://$name:" . $server->port . '/env');
        env_is($status == 0 && $out =~ /^\{/ ? $json->decode($out) : {}, 'alice', "curl to $name") or diag $err;
        ($out, $err, $status) = run_with_input('', 'curl', '-sS', '--max-time', Serow::Test::READ_TIMEOUT,
            '--cacert', $pki->{ca}, '--resolve', "$name:" . $server->port . ':127.0.0.1',
            "https://$name:" . $server->port . '/env');
        isnt $status, 0, "curl to $name without a certificate: no handshake";
    }
    is $server->stop, 0, 'clean stop';
};

sub copy_file {
    my ($from, $to) = @_;
    open(my $in, '<', $from) or die "$from: $!";
    open(my $out, '>', $to) or die "$to: $!";
    print $out do { local $/; <$in> };
    close $out or die "$to: $!";
}

subtest 'HUP reads the CA and the CRL again' => sub {
    my $crl = "$dir/hup-crl.pem";
    copy_file(revoked($pki), $crl);
    my $server = start('optional_no_ca', '--ssl-client-ca', $pki->{ca}, '--ssl-crl', $crl);
    my ($env) = curl_env($server, $bob);
    is $env && $env->{SSL_CLIENT_VERIFY}, 'SUCCESS', 'bob, before: SUCCESS';
    copy_file(revoked($pki, $bob), "$crl.new");
    rename "$crl.new", $crl or die "rename: $!";
    my %old = map { $_ => 1 } $server->worker_pids;
    my $mark = $server->log_mark;
    $server->signal('HUP');
    ok $server->wait_for_log(qr/TLS: read \S+ again/, undef, $mark), 'the files read again';
    ok wait_until(sub { my @now = $server->worker_pids; @now && !grep { $old{$_} } @now }), 'the new workers';
    ($env) = curl_env($server, $bob);
    is $env && $env->{SSL_CLIENT_VERIFY}, 'FAILED:certificate revoked', 'bob, after HUP with the new CRL: revoked';
    is $server->stop, 0, 'clean stop';
};

done_testing;
