package Serow::Test::Holding;
use strict;
use warnings;

# For the tests of held connections (t/holding, t/app/live.t): the server's
# numbers from its status page, and reading a held stream as it grows.

use Exporter 'import';
use IO::Select ();
use JSON::PP ();
use Time::HiRes ();
use Serow::Test::Client qw(raw_connect read_response);

our @EXPORT_OK = qw(server_status read_for);

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

1;
