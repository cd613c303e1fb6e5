package Serow::Test::Holding;
use strict;
use warnings;

# For the tests of held connections (t/holding, t/app/live.t, and behind
# proxies, t/nginx/holding.t and t/haproxy/holding.t): the server's numbers
# from its status page, reading a held stream as it grows, and an app with a
# stream, a long poll and their publishes, checked through a proxy.

use Exporter 'import';
use IO::Select ();
use JSON::PP ();
use Plack::Middleware::SerowStatus ();
use Test::More ();
use Time::HiRes ();
use Serow::Test::Client qw(raw_connect read_response);
use Serow::Test::Process qw(wait_until);

our @EXPORT_OK = qw(server_status read_for held_app check_stream check_long_poll publish_to);

# The status page's JSON (Plack::Middleware::SerowStatus at /server-status),
# as a hash; {} when it did not answer.
sub server_status {
    my ($server) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /server-status HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
        . "Connection: close\r\n\r\n";
    my $res = read_response($sock);
    return $res ? JSON::PP::decode_json($res->{body}) : {};
}

# Reads from $sock onto $$buf until $$buf matches $re, the connection ends or
# $timeout seconds (10) pass.  Whether it matched.
sub read_for {
    my ($sock, $buf, $re, $timeout) = @_;
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + ($timeout // 10);
    while ($$buf !~ $re) {
        my $left = $deadline - Time::HiRes::time;
        last if $left <= 0 || !$sel->can_read($left);
        sysread($sock, $$buf, 65536, length $$buf) or last;
    }
    return $$buf =~ $re;
}

# An app for held requests behind a proxy, with its status page (for the
# test and a balancer's health checks, from this machine):
#   .../events          a stream on channel "news" (server-sent events);
#                       ?accel: with X-Accel-Buffering: no
#   .../poll            a long poll on channel "inbox" (Grip-Timeout 30)
#   /publish/ID         an event with that id to "news" (held_app(big => 1): 32 KB)
#   /close              a close to "news"
#   /answer/ID          an http-response to "inbox", its body "answer ID"
sub held_app {
    my (%o) = @_; # big => 1: each published event 32 KB of data
    my $app = sub {
        my ($env) = @_;
        my ($path, $query) = ($env->{PATH_INFO}, $env->{QUERY_STRING} // '');
        if ($path =~ m{/events\z}) {
            return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
                'Grip-Channel' => 'news', ($query eq 'accel' ? ('X-Accel-Buffering' => 'no') : ())],
                [":ok\n\n"]];
        }
        if ($path =~ m{/poll\z}) {
            return [200, ['Content-Type' => 'application/json', 'Grip-Hold' => 'response',
                'Grip-Channel' => 'inbox', 'Grip-Timeout' => 30], ['{"messages":[]}']];
        }
        if ($path =~ m{\A/publish/(\w+)\z}) {
            Serow::Holding::publish({ channel => 'news', id => $1,
                http_stream => { content => "id: $1\ndata: " . ($o{big} ? 'x' x 32000 : "item $1") . "\n\n" } });
        } elsif ($path eq '/close') {
            Serow::Holding::publish({ channel => 'news', http_stream => { close => 1 } });
        } elsif ($path =~ m{\A/answer/(\w+)\z}) {
            Serow::Holding::publish({ channel => 'inbox', http_response => { code => 200,
                headers => [['Content-Type', 'text/plain']], body => "answer $1" } });
        }
        return [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
    };
    return Plack::Middleware::SerowStatus->wrap($app, allow => ['127.0.0.1']);
}

# A GET to the app on $server, straight (not through the proxy); its status.
sub publish_to {
    my ($server, $path) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    my $res = read_response($sock);
    return $res ? $res->{status} : 0;
}

sub held { server_status($_[0])->{grip_held} // -1 }

my $next_id = 0;

# A stream through $front (a proxy in front of $server, which runs held_app)
# at $path: its head and first body come at once, two publishes each while
# it stays open, and when the client leaves the proxy closes its connection
# to Serow, which holds it no longer.  Options: written => 1, the proxy
# notices that the client left only when a write to it fails (HAProxy):
# publishes until it does.
sub check_stream {
    my ($server, $front, $path, %o) = @_;
    my $sock = raw_connect($front);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    Test::More::ok(read_for($sock, \$buf, qr/\r\n\r\n.*:ok\n\n/s), 'the head and the first body come at once')
        or Test::More::diag($buf);
    my ($head) = $buf =~ /\A(.*?\r\n\r\n)/s;
    Test::More::like($head // '', qr{\AHTTP/1\.1 200 .*^Content-Type: text/event-stream\r$}msi, '200, text/event-stream');
    Test::More::unlike($head // '', qr/^(?:Grip-|X-Accel-)/mi, 'no Grip-* header, no X-Accel-*');
    Test::More::ok(wait_until(sub { held($server) == 1 }), 'held by the holder');
    for (1, 2) {
        my $id = ++$next_id;
        publish_to($server, "/publish/$id");
        Test::More::ok(read_for($sock, \$buf, qr/id: $id\ndata: item $id\n/), "publish $_ passed on while the stream stays open")
            or Test::More::diag($buf);
    }
    close $sock;
    Test::More::ok(wait_until(sub {
        publish_to($server, '/publish/' . ++$next_id) if $o{written};
        held($server) == 0;
    }), 'the client leaves: Serow holds it no longer' . ($o{written} ? ' (once written to)' : ''));
}

# Two long polls through $front at $path, one after the other on one client
# connection: each held, then answered by a published http-response.
sub check_long_poll {
    my ($server, $front, $path) = @_;
    my $sock = raw_connect($front);
    my $buf = '';
    for my $n (1, 2) {
        syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
        Test::More::ok(wait_until(sub { held($server) == 1 }), "long poll $n held by the holder");
        my $id = ++$next_id;
        publish_to($server, "/answer/$id");
        my $res = read_response($sock, buffer => \$buf);
        Test::More::is($res && $res->{status}, 200, "long poll $n answered by a publish");
        Test::More::is($res && $res->{body}, "answer $id", '... with its body');
        Test::More::ok(wait_until(sub { held($server) == 0 }), '... and no longer held');
    }
}

1;
