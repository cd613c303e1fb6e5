use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use JSON::PP ();
use Time::HiRes ();
use Serow::Test qw(need_debian_packages start_server wait_until);
use Serow::Test::Holding qw(held_app);
use Serow::Test::TLS qw(test_pki tls_options tls_connect tls_request);

# Held TLS connections (--grip, docs/holding.md): the worker hands the
# connection and its record state to the holder, which seals what is
# published to it; after a long poll's answer the same session goes on,
# back in a worker.  The client is OpenSSL's: a record sealed from a stale
# state fails its check.

need_debian_packages(qw(openssl libio-socket-ssl-perl libnet-ssleay-perl));

my $pki = test_pki();
my $server = start_server(app => held_app(), options => ['--workers', 2, '--grip', tls_options($pki)]);

# Reads from $sock into $$buf until it matches $re (OpenSSL's pending bytes first).
sub read_for {
    my ($sock, $buf, $re) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + Serow::Test::READ_TIMEOUT;
    while ($$buf !~ $re) {
        my $left = $deadline - Time::HiRes::time;
        last if $left <= 0 || !($sock->pending || $sel->can_read($left));
        my $n = sysread($sock, $$buf, 65536, length $$buf);
        last if defined $n && $n == 0;
        last if !defined $n && !$!{EAGAIN};
    }
    return $$buf =~ $re;
}

sub publish {
    my ($path) = @_;
    my $sock = tls_connect($server, $pki) or return 0;
    my $res = tls_request($sock, $path, headers => { Connection => 'close' });
    return $res ? $res->{status} : 0;
}

# How many connections the holder holds for GRIP (the status page).
sub held {
    my $sock = tls_connect($server, $pki) or return -1;
    my $res = tls_request($sock, '/server-status',
        headers => { Accept => 'application/json', Connection => 'close' });
    return $res ? (JSON::PP::decode_json($res->{body})->{grip_held} // -1) : -1;
}

subtest 'a stream: what is published is sealed by the holder' => sub {
    my $sock = tls_connect($server, $pki) or return fail "no TLS connection: $@";
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n";
    my $buf = '';
    ok read_for($sock, \$buf, qr/:ok\n\n/), 'the stream began' or diag $buf;
    ok wait_until(sub { held() == 1 }), 'held by the holder';
    is publish("/publish/$_"), 200, "publish $_" for 1 .. 3;
    ok read_for($sock, \$buf, qr/data: item 3\n/), 'the three items arrived' or diag $buf;
    is_deeply [ $buf =~ /data: (item \d+)/g ], ['item 1', 'item 2', 'item 3'], 'each once, in order';
};

subtest 'a long poll answered by the holder, then the same session in a worker' => sub {
    my $sock = tls_connect($server, $pki) or return fail "no TLS connection: $@";
    for my $round (1 .. 3) {
        syswrite $sock, "GET /poll HTTP/1.1\r\nHost: localhost\r\n\r\n";
        ok wait_until(sub { held() >= 1 }), "round $round: held";
        is publish("/answer/$round"), 200, 'published';
        my $buf = '';
        ok read_for($sock, \$buf, qr/answer \Q$round\E/), 'the answer arrived, sealed by the holder'
            or diag $buf;
        my $res = tls_request($sock, '/plain');
        is $res && $res->{body}, "ok\n", 'and the session goes on with a worker';
    }
};

is $server->stop, 0, 'clean stop';
done_testing;
