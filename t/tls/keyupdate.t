use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use IPC::Open2 ();
use Time::HiRes ();
use Serow::Test qw(need_debian_packages start_server);
use Serow::Test::TLS qw(test_pki tls_options);

# KeyUpdate (TLS 1.3, RFC 8446 4.6.3) from real clients, on a connection
# that moves between processes: with --max-requests 1 each request is
# answered by a new worker, so between two requests the connection (and its
# record state) goes to the holder and on to another worker.
#
# openssl s_client's interactive commands: "k" updates the client's keys,
# "K" also asks the server to update its own.  The server's KeyUpdate (with
# update_not_requested) must come before its next response, sealed with the
# old key, and the response after it with the new one: s_client (OpenSSL,
# strict) reads it, and -msg shows each handshake message it received.
# gnutls-cli --rehandshake, in TLS 1.3, sends a KeyUpdate that asks for the
# server's right after the handshake.

need_debian_packages(qw(openssl gnutls-bin));

my $pki = test_pki();
my $app = sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/plain'], ["$env->{PATH_INFO} $$\n"]];
};
my $server = start_server(app => $app,
    options => ['--workers', 2, '--max-requests', 1, '--keepalive-timeout', 300, tls_options($pki)]);
my $port = $server->port;

# A command with its standard error on its standard output (one pipe to read).
my @with_stderr = ('sh', '-c', 'exec "$@" 2>&1', 'sh');

# s_client, its input a pipe the test writes to (-crlf: each line ends in
# CRLF), its output and error read together (each record it receives is
# shown by -msg, then its plaintext).  Not -quiet: that would turn the
# command letters off.
my ($to, $from); # (open2 makes both)
my $s_client = do {
    delete local $ENV{LD_PRELOAD}; # (not Serow's code)
    IPC::Open2::open2($from, $to, @with_stderr, 'openssl', 's_client', '-connect', "127.0.0.1:$port",
        '-servername', 'localhost', '-CAfile', $pki->{ca}, '-verify_return_error', '-tls1_3',
        '-crlf', '-msg');
};
$to->autoflush(1);
my $output = '';
my $select = IO::Select->new($from);

# Reads s_client's output until what came after offset $start matches $re:
# the match's offset and its first group, or () when it did not come in time.
sub read_until {
    my ($re, $start) = @_;
    my $deadline = Time::HiRes::time + Serow::Test::READ_TIMEOUT;
    while (1) {
        pos($output) = $start;
        return ($-[0], $1) if $output =~ /$re/g;
        my $left = $deadline - Time::HiRes::time;
        return () if $left <= 0 || !$select->can_read($left);
        sysread($from, $output, 65536, length $output) or return ();
    }
}

# A request on the connection: the answering worker's pid, and where its
# response begins in the output.
sub ask {
    my ($path) = @_;
    my $start = length $output;
    print {$to} "GET $path HTTP/1.1\nHost: localhost\n\n";
    my ($at, $pid) = read_until(qr{^\Q$path\E (\d+)$}m, $start) or return ();
    return ($pid, $at);
}

my ($first_pid) = ask('/first');
ok $first_pid, 'a first request on the TLS 1.3 connection' or diag $output;
my %pids = ($first_pid => 1);
my ($moves, $server_updates) = (0, 0);
for my $round (1 .. 8) {
    my $letter = $round % 2 ? 'K' : 'k';
    my $start = length $output;
    print {$to} "$letter\n";
    # (s_client reads a line that begins with a command letter as the
    # command alone: the next request must wait until it was taken)
    my ($taken) = read_until(qr/^KEYUPDATE$/m, $start);
    ok defined $taken, "round $round: s_client sent its KeyUpdate ($letter)"
        or diag(substr($output, -2000)), last;
    # the client's KeyUpdate itself: update_requested (1) for K, not (0) for k
    my ($at, $ours) = read_until(qr/^>>> TLS 1\.3, Handshake \[length 0005\], KeyUpdate\n\s+18 00 00 01 0(\d)/m,
        $start);
    is $ours, $letter eq 'K' ? 1 : 0, '... asking for the server\'s own: ' . ($letter eq 'K' ? 'yes' : 'no');
    my $after_key_update = length $output;
    my ($pid, $response_at) = ask("/round$round");
    ok $pid, '... and the next request is answered, read with the new keys' or last;
    $moves++ unless $pids{$pid}++;
    my $between = substr($output, $after_key_update, $response_at - $after_key_update);
    my @theirs = $between =~ /^<<< TLS 1\.3, Handshake \[length 0005\], KeyUpdate\n\s+18 00 00 01 0(\d)/mg;
    if ($letter eq 'K') {
        is "@theirs", '0', '... after the server\'s KeyUpdate (update_not_requested), sealed before it';
        $server_updates++ if "@theirs" eq '0';
    } else {
        is "@theirs", '', '... and the server did not update its own keys';
    }
}
is $moves, 8, 'each request answered by another worker: the connection moved between every two';
is $server_updates, 4, 'the server updated its keys each time it was asked';
my ($pid) = ask('/last');
ok $pid, 'a last request after all the updates';
close $to;
waitpid($s_client, 0);
unlike $output, qr/error|fatal/i, 's_client saw no error and no fatal alert' or diag $output;

subtest 'gnutls-cli --rehandshake: a KeyUpdate that asks for the server\'s, right after the handshake' => sub {
    my ($in, $out);
    my $pid = do {
        delete local $ENV{LD_PRELOAD};
        IPC::Open2::open2($out, $in, @with_stderr, 'gnutls-cli', '--x509cafile', $pki->{ca}, '--rehandshake',
            '--priority', 'NORMAL:-VERS-ALL:+VERS-TLS1.3', '-d', 4, '-p', $port, 'localhost');
    };
    print {$in} "GET /gnutls HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    close $in;
    my $got = do { local $/; <$out> };
    waitpid($pid, 0);
    like $got, qr/sending key update \(1\)/, 'gnutls-cli sent a KeyUpdate with update_requested';
    like $got, qr/received TLS 1\.3 key update \(0\)/, 'the server answered with its own';
    like $got, qr{^/gnutls \d+$}m, 'and the request after it was answered';
};

is $server->stop, 0, 'clean stop';
done_testing;
