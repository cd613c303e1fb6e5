use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use JSON::PP ();
use POSIX ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(need_debian_packages start_server wait_until);
use Serow::Test::TLS qw(test_pki tls_options tls_connect tls_request);

# TLS connections move as plain ones do: kept alive over many requests,
# each connection parked in a worker, taken by the holder while that
# worker is busy in a slow request, and answered by another worker, again
# and again, on the same TLS session.  The client is OpenSSL's (through
# IO::Socket::SSL): a record sealed with a wrong sequence number, nonce or
# key fails its check and ends the connection, so one mistake in the state
# that moves is a request with no answer here.  The slow request waits on
# a FIFO until the test lets it go: nothing depends on timing.

need_debian_packages(qw(openssl libio-socket-ssl-perl libnet-ssleay-perl));

# SEROW_TEST_TLS_ROUNDS: more rounds for a long run (docs/tls.md: 500 rounds
# are some 15,000 requests and, over the six connections, some 2,000 moves).
use constant { CONNECTIONS => 6, ROUNDS => $ENV{SEROW_TEST_TLS_ROUNDS} || 30, REQUESTS => 6 };

my $dir = File::Temp->newdir;
my $fifo = "$dir/release";
POSIX::mkfifo($fifo, 0600) or die "mkfifo: $!";
my $inside = "$dir/inside"; # made while the slow request runs

my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/block') {
        open(my $mark, '>', $inside) or die $!;
        close $mark;
        open(my $fh, '<', $fifo) or die "open $fifo: $!";
        my $line = <$fh>;
        unlink $inside;
        return [200, ['Content-Type' => 'text/plain'], ["released $$"]];
    }
    my $body = '';
    while ($env->{'psgi.input'}->read(my $part, 65536)) { $body .= $part }
    # what was asked, who answered, and the body back: a mix-up shows
    return [200, ['Content-Type' => 'text/plain'], ["$env->{PATH_INFO} $$ " . length($body) . " $body"]];
};

my $pki = test_pki();
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 2, '--keepalive-timeout', 300, tls_options($pki)]);

my @conns = map { tls_connect($server, $pki) or BAIL_OUT("no TLS connection: $@") } 1 .. CONNECTIONS;
my (%pids_of, %last_pid, %moves, $answered, $wrong);
my $ask = sub {
    my ($c, $round, $i) = @_;
    # bodies of several records now and then: the rest of a record the
    # worker's read had no room for waits in the transport
    my $body = $i % 3 == 2 ? ('b' x (20_000 + $i)) : '';
    my $path = "/c$c/r$round/i$i";
    my $res = tls_request($conns[$c], $path, $body ne '' ? (method => 'POST', body => $body) : ());
    my ($seen_path, $pid, $length, $echo) = split / /, ($res && $res->{body}) // '', 4;
    if (!$res || $res->{status} != 200 || ($seen_path // '') ne $path || $length != length $body
        || ($echo // '') ne $body) {
        $wrong++;
        diag "connection $c, round $round, request $i: " . ($res ? "$res->{status} " . substr($res->{body}, 0, 80)
                                                             : "no answer ($!)");
        return;
    }
    $answered++;
    $pids_of{$c}{$pid}++;
    $moves{$c}++ if defined $last_pid{$c} && $last_pid{$c} != $pid;
    $last_pid{$c} = $pid;
};

sub status {
    my $sock = tls_connect($server, $pki) or return {};
    my $res = tls_request($sock, '/server-status', headers => { Accept => 'application/json' });
    return $res ? JSON::PP::decode_json($res->{body}) : {};
}

$ask->($_, 0, 0) for 0 .. $#conns;
my $stolen_before = status()->{connections_stolen} // 0;
for my $round (1 .. ROUNDS) {
    # One kept connection asks for a slow request: its worker is busy, the
    # holder takes the connections parked in it, the other worker answers
    # them.  A different one each round, so that they move back and forth.
    my $b = $round % CONNECTIONS;
    syswrite $conns[$b], "GET /block HTTP/1.1\r\nHost: localhost\r\n\r\n";
    wait_until(sub { -e $inside }) or BAIL_OUT('the slow request never started');
    for my $i (1 .. REQUESTS) {
        $ask->($_, $round, $i) for grep { $_ != $b } 0 .. $#conns;
    }
    open(my $release, '>', $fifo) or die "open $fifo: $!";
    print $release "go\n";
    close $release;
    my $res = Serow::Test::TLS::tls_read_response($conns[$b]);
    ok $res && $res->{body} =~ /^released/, "round $round: the slow request ends" or last;
    wait_until(sub { !-e $inside });
    last if $wrong;
}
is $wrong // 0, 0, 'every request on the kept TLS connections was answered, on the same sessions';
is $answered, CONNECTIONS + ROUNDS * REQUESTS * (CONNECTIONS - 1), "all of them ($answered)";
diag 'moves between workers: ' . join(', ', map { "connection $_: " . ($moves{$_} // 0) } sort keys %pids_of);
# (A connection moves each round its worker is the busy one: about two
# rounds in three here.)
my @moved = grep { ($moves{$_} // 0) >= 5 } keys %pids_of;
is scalar(@moved), CONNECTIONS, 'each connection went from worker to worker, by the holder, many times';
cmp_ok((status()->{connections_stolen} // 0) - $stolen_before, '>=', ROUNDS,
    'the holder took connections from the busy worker, in every round');
# And once the workers are free again, the sessions go on.
$ask->($_, 'after', 0) for 0 .. $#conns;
is $wrong // 0, 0, 'and they answer again after';

# HUP: the old workers hand their idle connections to the holder in a
# message (the state beside each descriptor), and new workers answer them.
my %old = map { %{ $pids_of{$_} } } keys %pids_of;
$server->signal('HUP');
ok $server->wait_for_log(qr/received SIGHUP/), 'HUP received';
# Until the old workers have left (they answer what comes meanwhile), then
# only new ones answer.
my $round = 0;
my $all_new = wait_until(sub {
    %pids_of = ();
    $round++;
    $ask->($_, "hup$round", 0) for 0 .. $#conns;
    return $wrong || !grep { $old{$_} } map { keys %{ $pids_of{$_} } } keys %pids_of;
});
is $wrong // 0, 0, 'after HUP every kept TLS connection answers, each time';
ok $all_new && !$wrong, 'and then only the new workers answer them';

is $server->stop, 0, 'clean stop';
done_testing;
