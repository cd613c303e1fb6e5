use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use Serow::Test qw(start_server raw_connect get_on read_response wait_until);

my $app = sub { [200, ['Content-Type' => 'text/plain'], ["ok"]] };

# True once the server has closed the connection (EOF), within 30 s.
sub closed_by_server {
    my ($sock) = @_;
    return 0 unless IO::Select->new($sock)->can_read(30);
    my $n = sysread($sock, my $buf, 1);
    return defined $n && $n == 0;
}

subtest '--keepalive-timeout closes idle connections, in a worker or in the holder' => sub {
    my $server = start_server(app => $app, options => ['--workers', 2, '--keepalive-timeout', 1]);
    my $short = raw_connect($server);   # idle less than the holder's hand-off time
    my $long = raw_connect($server);
    is get_on($short, '/')->{status}, 200;
    is get_on($long, '/')->{status}, 200;
    ok closed_by_server($short), 'an idle connection is closed after the timeout';
    ok closed_by_server($long), 'so is the other one';
    my $fresh = raw_connect($server);
    is get_on($fresh, '/')->{status}, 200, 'the server goes on serving';
    is $server->stop, 0;
};

subtest '--max-keepalive-requests closes after that many requests' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--max-keepalive-requests', 3]);
    my $sock = raw_connect($server);
    for my $i (1 .. 2) {
        my $res = get_on($sock, "/$i");
        ok !defined $res->{headers}{connection}, "request $i keeps the connection";
    }
    my $last = get_on($sock, '/3');
    is $last->{headers}{connection}, 'close', 'the third says Connection: close';
    ok closed_by_server($sock), 'and the connection is closed';
    is $server->stop, 0;
};

subtest '--max-keepalive-connections: new connections answered and closed, oldest idle closed' => sub {
    my $server = start_server(app => $app,
        options => ['--workers', 2, '--max-keepalive-connections', 4, '--keepalive-timeout', 300]);
    my @kept;
    for my $i (1 .. 4) {
        my $sock = raw_connect($server);
        my $res = get_on($sock, "/$i");
        ok !defined $res->{headers}{connection}, "connection $i is kept";
        push @kept, $sock;
    }
    # A connection that has sent part of a request is open and cannot be
    # closed: the cap is exceeded until the oldest idle one goes.
    my $pending = raw_connect($server);
    syswrite $pending, "GET /pending HTTP/1.1\r\n";
    # The oldest by the holder's millisecond clock: the four were parked
    # within a millisecond or two, so any of them may count as the oldest.
    my @ready = IO::Select->new(@kept)->can_read(30);
    is scalar(@ready), 1, 'over the cap, one idle connection is closed';
    ok @ready && closed_by_server($ready[0]), '... by the server';
    syswrite $pending, "Host: x\r\n\r\n";
    is read_response($pending)->{status}, 200, 'the pending request is answered';

    # Four connections in the middle of their requests: open, not idle, so
    # nothing can make room for a fifth.
    my @busy = map { my $s = raw_connect($server); syswrite $s, "GET /partial HTTP/1.1\r\n"; $s } 1 .. 4;
    my $extra = raw_connect($server);
    my $res = get_on($extra, '/extra');
    is $res->{status}, 200, 'a connection over the cap is still answered';
    is $res->{headers}{connection}, 'close', '... and closed';
    ok closed_by_server($extra), 'it is closed';
    for my $s (@busy) {
        syswrite $s, "Host: x\r\n\r\n";
        is read_response($s)->{status}, 200, 'the requests under way are answered';
    }
    is $server->stop, 0;
};

subtest '--max-keepalive-connections default: the open-file limit less a reserve' => sub {
    # Each under its own open-file limit (a shell lowers it for one perl).
    my %want = (20000 => 18000, 1024 => 922, 300 => 236, 100 => 50);
    for my $limit (sort { $a <=> $b } keys %want) {
        my $got = `ulimit -n $limit && $^X -Mblib -MSerow::Server -e 'print Serow::Server::default_max_keepalive_connections()'`;
        is $got, $want{$limit}, "open-file limit $limit: at most $want{$limit} connections";
    }
};

done_testing;
