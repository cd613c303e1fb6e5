use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use POSIX ();
use Serow::Test qw(need_debian_packages start_server wait_until);
use Serow::Test::TLS qw(test_pki tls_options run_client);

# Session tickets: a client resumes its TLS session on any worker, since
# every worker seals and opens tickets with keys derived from one master key
# that the master made before it forked them.  The clients are openssl
# s_client, which says "Reused" for a session resumed: a session is made on
# one connection (-sess_out) and resumed on new ones (-sess_in), in TLS 1.3
# and 1.2.  The worker that made it is kept busy in a slow request (which
# waits on a FIFO until the test lets it go: nothing depends on timing), so
# the resuming connections are served by the other worker.  A resumed
# connection is then kept alive and moved between the workers, its record
# state exported after a resumed handshake as after a full one; and it
# still resumes after HUP, which keeps the key.  GnuTLS's own client
# (gnutls-cli --resume) resumes as well.  With --ssl-session-tickets
# off nothing resumes.

need_debian_packages('openssl');

my $dir = File::Temp->newdir;
my $fifo = "$dir/release";
POSIX::mkfifo($fifo, 0600) or die "mkfifo: $!";
my $inside = "$dir/inside"; # holds the pid of the worker in the slow request

my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/block') {
        open(my $mark, '>', "$inside.new") or die $!;
        print $mark $$;
        close $mark;
        rename "$inside.new", $inside or die $!;
        open(my $fh, '<', $fifo) or die "open $fifo: $!";
        my $line = <$fh>;
        unlink $inside;
    }
    return [200, ['Content-Type' => 'text/plain'], ["pid=$$ path=$env->{PATH_INFO}\n"]];
};

my $pki = test_pki();
my $n = 0;

# openssl s_client kept open: requests written to its input one at a time,
# its output (the session's report, then the answers) in a file.
sub s_client {
    my ($server, @args) = @_;
    my $out = "$dir/s_client." . ++$n;
    pipe(my $read, my $write) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        close $write;
        POSIX::dup2(fileno($read), 0) or POSIX::_exit(110);
        open(STDOUT, '>', $out) or POSIX::_exit(111);
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(111);
        delete $ENV{LD_PRELOAD}; # (not Serow's code: see Serow::Test::TLS, run_client)
        { exec 'openssl', 's_client', '-connect', '127.0.0.1:' . $server->port, '-servername', 'localhost',
              '-CAfile', $pki->{ca}, '-verify_return_error', @args }
        POSIX::_exit(112);
    }
    close $read;
    $write->autoflush(1);
    return { pid => $pid, in => $write, out => $out, asked => 0 };
}

sub output { my ($c) = @_; open(my $fh, '<', $c->{out}) or return ''; local $/; return scalar <$fh> }

# Writes a GET of $path; unless $no_wait, waits for its answer: the pid of
# the worker that answered (undef if none came).
sub ask {
    my ($c, $path, $no_wait) = @_;
    print { $c->{in} } "GET $path HTTP/1.1\r\nHost: localhost\r\n\r\n";
    my $nth = ++$c->{asked};
    return if $no_wait;
    return answer($c, $nth);
}

sub answer {
    my ($c, $nth) = @_;
    my @pids;
    wait_until(sub { @pids = output($c) =~ /^pid=(\d+) path=/mg; @pids >= $nth });
    return $pids[$nth - 1];
}

sub finish {
    my ($c) = @_;
    close $c->{in};
    waitpid($c->{pid}, 0); # (s_client leaves at the end of its input)
}

sub resumed { output($_[0]) =~ /^Reused, TLSv1\.[23]/m }

sub release {
    open(my $release, '>', $fifo) or die "open $fifo: $!";
    print $release "go\n";
    close $release;
    wait_until(sub { !-e $inside });
}

sub blocked_pid {
    wait_until(sub { -s $inside }) or return 0;
    open(my $fh, '<', $inside) or return 0;
    return scalar <$fh>;
}

my $server = start_server(app => $app, options => ['--workers', 2, '--keepalive-timeout', 300, tls_options($pki)]);

for my $version ('-tls1_3', '-tls1_2') {
    subtest "$version: a session made on one worker resumes on the other" => sub {
        my $session = "$dir/session$version.pem";
        # The first handshake, by worker P1, whose connection stays there.
        my $first = s_client($server, $version, '-sess_out', $session);
        my $p1 = ask($first, '/first');
        ok $p1, "the first connection is answered (worker $p1)";
        like output($first), qr/^New, TLSv1\.[23]/m, '... after a full handshake';
        ok -s $session, '... and s_client kept its session (with the ticket)';
        # P1 busy: the connection kept there asks for the slow request.
        ask($first, '/block', 1);
        is blocked_pid(), $p1, 'the worker that made the session is kept busy';
        # Two new connections resume the session: only the other worker
        # is free to take them.
        my @resumed = map { s_client($server, $version, '-sess_in', $session) } 1 .. 2;
        my @pids = map { ask($_, '/resumed') } @resumed;
        ok resumed($_), 'a new connection resumes the session ("Reused")' for @resumed;
        ok $pids[0] && $pids[0] != $p1 && $pids[1] == $pids[0],
            "... on the other worker ($pids[0], not $p1)";
        release();
        is answer($first, 2), $p1, 'the slow request ends';

        # A resumed connection moves: the other one parked beside it keeps
        # worker P2 busy, so the holder takes it and P1 answers it, on the
        # same records (s_client checks every one).
        my ($moving, $blocker) = @resumed;
        ask($blocker, '/block', 1);
        is blocked_pid(), $pids[0], 'the worker the resumed connections are in is kept busy';
        my @moved = map { ask($moving, "/moved$_") } 1 .. 3;
        is_deeply \@moved, [($p1) x 3], 'the resumed connection is taken to the first worker and answered there, kept alive';
        release();
        is answer($blocker, 2), $pids[0], 'the slow request ends';
        my @after = map { ask($moving, "/after$_") } 1 .. 3;
        is scalar(grep { $_ } @after), 3, 'and the resumed connection goes on answering';
        unlike output($moving), qr/error|alert/i, 'no record was refused on either side';
        finish($_) for $first, @resumed;
    };
}

subtest "GnuTLS's own client resumes too (gnutls-cli --resume)" => sub {
    need_debian_packages('gnutls-bin');
    for my $version ('TLS1.3', 'TLS1.2') {
        my (undef, $text) = run_client('gnutls-cli', '--resume', '--x509cafile', $pki->{ca}, '--priority',
            "NORMAL:-VERS-ALL:+VERS-$version", '-p', $server->port, '127.0.0.1');
        like $text, qr/This is a resumed session/, "$version: the second connection resumed the first's session"
            or diag $text;
    }
};

subtest 'HUP keeps the ticket key: a session made before resumes on the new workers' => sub {
    my $session = "$dir/session-hup.pem";
    my $before = s_client($server, '-sess_out', $session);
    my $old = ask($before, '/before');
    finish($before);
    ok -s $session, 'a session made before HUP';
    my %old = map { $_ => 1 } $server->worker_pids;
    $server->signal('HUP');
    ok $server->wait_for_log(qr/received SIGHUP/), 'HUP received';
    # Once the old workers have gone, a new connection reaches a new one.
    ok wait_until(sub { !grep { $old{$_} } $server->worker_pids }), 'the old workers have left';
    my $after = s_client($server, '-sess_in', $session);
    my $new = ask($after, '/after-hup');
    finish($after);
    ok $new && !$old{$new}, "answered by a new worker ($new)";
    ok resumed($after), 'which resumed the session made before HUP';
};

is $server->stop, 0, 'clean stop';

subtest '--ssl-session-tickets off: nothing resumes' => sub {
    my $off = start_server(app => $app,
        options => ['--workers', 2, tls_options($pki), '--ssl-session-tickets', 'off']);
    for my $version ('-tls1_3', '-tls1_2') {
        my $session = "$dir/session-off$version.pem";
        my $first = s_client($off, $version, '-sess_out', $session);
        ok ask($first, '/first'), "$version: answered";
        finish($first);
        unlike output($first), qr/TLS session ticket:/, '... and no ticket was sent';
        # (With no ticket, TLS 1.3 leaves s_client no session to keep.)
        next unless -s $session;
        my $again = s_client($off, $version, '-sess_in', $session);
        ok ask($again, '/again'), "$version: a new connection with the session is answered";
        finish($again);
        ok !resumed($again), '... after a full handshake';
    }
    is $off->stop, 0, 'clean stop';
};

done_testing;
