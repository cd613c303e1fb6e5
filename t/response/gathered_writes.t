use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use POSIX ();
use Time::HiRes ();
use Serow::Test qw(start_server raw_connect read_response gate);
use Serow::Test::Common qw(READ_TIMEOUT);
use Serow::Test::Trace qw(have_strace worker_pids trace_syscalls mark client_writes);
use Serow::Test::TLS qw(test_pki tls_options tls_connect tls_request);

# A streamed body's writes are gathered while the app goes on writing, and
# what the app leaves gathered when it stops writing (it waits, here on a
# gate the test holds shut) is sent by the worker's flusher thread
# (src/worker/worker_output.c).  Each check below waits for bytes while the
# app is still blocked: held until the app returned, they would never come
# and the check would fail at its timeout.  And each write stays one chunk,
# whole: gathering never cuts a write.

my $gate = gate();
# Sizes around what is held at most (16 KiB), framing included.
my @SIZES = (1, 9, 100, 5000, 12000, 16384, 16385, 20000, 300, 16370, 2);
sub event { my ($i, $n) = @_; return substr(("event $i " . chr(97 + $i % 26)) x $n, 0, $n) }
my @EVENTS = map { event($_, $SIZES[$_]) } 0 .. $#SIZES;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    return [200, ['Content-Type' => 'text/plain'], ['marked']] if $path eq '/mark' && (mark(), 1);
    return sub {
        my $writer = shift->([200, ['Content-Type' => 'text/event-stream']]);
        $writer->write("data: 1\n\n");
        $gate->wait;
        $writer->write("data: 2\n\n");
        $writer->close;
    } if $path eq '/pause';
    return sub {
        my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
        $writer->write($_) for @EVENTS;
        $gate->wait;
        $writer->write('end');
        $writer->close;
    } if $path eq '/burst';
    return sub {
        my $writer = shift->([200, ['Content-Type' => 'text/plain', 'Content-Length' => 6]]);
        $writer->write('abc');
        $gate->wait;
        $writer->write('def');
        $writer->close;
    } if $path eq '/length';
    return sub {
        # The app takes the socket (psgix.io) after a write: the write
        # reaches the client before the app's own bytes.
        my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
        $writer->write('first');
        syswrite $env->{'psgix.io'}, 'raw bytes';
        $writer->close;
    } if $path eq '/then-socket';
    return sub {
        # A fork (the child leaves at once) while a write is held: the
        # parent sends it once, the child never.
        my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
        $writer->write('before');
        my $pid = fork // die "fork: $!";
        POSIX::_exit(0) if $pid == 0;
        waitpid($pid, 0);
        $writer->write('after');
        $writer->close;
    } if $path eq '/fork';
    return sub {
        my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
        $writer->write("line $_ of eight\n") for 1 .. 8;
        $writer->close;
    } if $path eq '/eight';
    return sub {
        my $writer = shift->([200, ['Content-Type' => 'text/plain', 'Content-Length' => 8 * 16]]);
        $writer->write("line $_ of eight\n") for 1 .. 8;
        $writer->close;
    } if $path eq '/eight-length';
    return [404, [], ['not found']];
};

# Reads from $sock into $$buffer until $until (a pattern, or code given the
# buffer) says so, or READ_TIMEOUT passes.
sub read_until {
    my ($sock, $buffer, $until) = @_;
    my $select = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + READ_TIMEOUT;
    while (ref $until eq 'CODE' ? !$until->($$buffer) : $$buffer !~ $until) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !$select->can_read($left);
        sysread($sock, $$buffer, 65536, length $$buffer) or return 0;
    }
    return 1;
}

# The chunks of a chunked body (after the head) as far as they are whole.
sub chunks {
    my ($bytes) = @_;
    my $body = substr($bytes, index($bytes, "\r\n\r\n") + 4);
    my @chunks;
    while ($body =~ s/\A([0-9a-f]+)\r\n//) {
        my $n = hex $1;
        last if $n == 0 || length($body) < $n + 2;
        push @chunks, substr($body, 0, $n, '');
        $body =~ s/\A\r\n// or last;
    }
    return @chunks;
}

sub request {
    my ($server, $path, $extra) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n" . ($extra // '') . "\r\n";
    return $sock;
}

my $server = start_server(app => $app, options => ['--workers', 1]);

{
    my $sock = request($server, '/pause');
    my $buffer = '';
    ok read_until($sock, \$buffer, qr{\r\n\r\n9\r\ndata: 1\n\n\r\n}),
        'an event written before the app blocks reaches the client while it is blocked'
        or diag $buffer;
    $gate->open(1);
    ok read_until($sock, \$buffer, qr{9\r\ndata: 2\n\n\r\n0\r\n\r\n\z}), 'the next one, and the end';
    # the connection serves another request
    syswrite $sock, "GET /eight HTTP/1.1\r\nHost: x\r\n\r\n";
    $buffer = '';
    ok read_until($sock, \$buffer, qr{line 8 of eight\n\r\n0\r\n\r\n\z}), 'then the next request';
}
{
    my $sock = request($server, '/burst');
    my $buffer = '';
    my $total = 0;
    $total += length(sprintf '%x', $_) + $_ + 4 for @SIZES;
    my $all_there = sub { my $head = index($_[0], "\r\n\r\n"); $head >= 0 && length($_[0]) >= $head + 4 + $total };
    ok read_until($sock, \$buffer, $all_there),
        'writes in quick succession, then a block: all of them reach the client' or diag length $buffer;
    is_deeply [chunks($buffer)], \@EVENTS, 'each write is one chunk, whole, in order';
    $gate->open(1);
    ok read_until($sock, \$buffer, qr{3\r\nend\r\n0\r\n\r\n\z}), 'the rest after the block';
}
{
    my $sock = request($server, '/length');
    my $buffer = '';
    ok read_until($sock, \$buffer, qr{\r\n\r\nabc\z}), 'a body with a Content-Length: its first write too';
    $gate->open(1);
    ok read_until($sock, \$buffer, qr{\r\n\r\nabcdef\z}), 'and the rest';
}
{
    my $sock = raw_connect($server);
    syswrite $sock, "GET /pause HTTP/1.0\r\nHost: x\r\n\r\n";
    my $buffer = '';
    ok read_until($sock, \$buffer, qr{\r\n\r\ndata: 1\n\n\z}), 'HTTP/1.0 (no chunks): the same';
    $gate->open(1);
    ok read_until($sock, \$buffer, qr{\r\n\r\ndata: 1\n\ndata: 2\n\n\z}), 'and the rest';
}
{
    my $sock = request($server, '/then-socket', "Connection: close\r\n");
    my $buffer = '';
    ok read_until($sock, \$buffer, qr{raw bytes}), 'a write, then the app writes on psgix.io';
    like $buffer, qr{\r\n\r\n5\r\nfirst\r\nraw bytes}, 'the write first';
}
{
    my $sock = request($server, '/fork');
    my $buffer = '';
    ok read_until($sock, \$buffer, qr{0\r\n\r\n\z}), 'an app that forks while a write is held';
    is_deeply [chunks($buffer)], ['before', 'after'], 'each write sent once, in order';
}

SKIP: {
    skip 'strace is not installed (tools/setup installs it)', 4 unless have_strace();
    my ($worker) = worker_pids($server->pid);
    my $sock = raw_connect($server);
    syswrite $sock, "GET /eight HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock)->{status}, 200, 'warm-up: the worker has the connection';
    my $res;
    my @calls = trace_syscalls($worker, sub {
        syswrite $sock, "GET /eight HTTP/1.1\r\nHost: x\r\n\r\n";
        $res = read_response($sock);
        syswrite $sock, "GET /mark HTTP/1.1\r\nHost: x\r\n\r\n";
        read_response($sock);
    });
    is $res->{body}, join('', map { "line $_ of eight\n" } 1 .. 8), 'eight writes: the body';
    my @out = client_writes(@calls);
    # The app's own thread writes once, at close; the flusher (another
    # thread) may have sent what came before, had the app been slow.
    my @app_thread = grep { !$_->{pid} || $_->{pid} == $worker } @out;
    is scalar(@app_thread), 1, "the app's thread makes one write for eight pieces and the end"
        or diag explain \@out;
    my ($sent, $wire) = (0, $res->{head_length});
    $sent += $_->{result} for @out;
    $wire += length(sprintf '%x', $_) + 4 + $_ for @{ $res->{chunks} };
    is $sent, $wire, "the writes seen sent the whole response ($wire bytes)";
}

is $server->stop, 0, 'the server stops cleanly' or diag $server->log;

# Over TLS the gathered writes are one record: the app's thread seals and
# sends the eight pieces in one call (the TLS transport seals what one
# writev gives it as one record up to 16 KiB), where it made eight.
SKIP: {
    skip 'strace is not installed (tools/setup installs it)', 4 unless have_strace();
    eval { require IO::Socket::SSL; 1 } or skip 'IO::Socket::SSL is not installed', 4;
    my $pki = test_pki();
    my $tls = start_server(app => $app, options => ['--workers', 1, tls_options($pki)]);
    my $sock = tls_connect($tls, $pki) or die "TLS connect: $@";
    is tls_request($sock, '/eight-length')->{status}, 200, 'TLS: warm-up';
    my ($worker) = worker_pids($tls->pid);
    my $res;
    my @calls = trace_syscalls($worker, sub {
        $res = tls_request($sock, '/eight-length');
        tls_request($sock, '/mark');
    });
    is $res->{body}, join('', map { "line $_ of eight\n" } 1 .. 8), 'TLS: eight writes, the body';
    my @app_thread = grep { !$_->{pid} || $_->{pid} == $worker } client_writes(@calls);
    is scalar(@app_thread), 1, "TLS: the app's thread sends once for eight pieces"
        or diag explain \@app_thread;
    is $tls->stop, 0, 'TLS: the server stops cleanly' or diag $tls->log;
}

done_testing;
