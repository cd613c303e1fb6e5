package Serow::Test::StatusPage;
use strict;
use warnings;

# For the tests of the status page (t/status): a server with
# Plack::Middleware::SerowStatus at /status and one request held in flight.

use Exporter 'import';
use JSON::PP ();
use Plack::Middleware::SerowStatus ();
use Serow::Test::Client qw(raw_connect read_response);
use Serow::Test::Gate qw(gate);
use Serow::Test::Process qw(wait_until);
use Serow::Test::Server qw(start_server);

our @EXPORT_OK = qw(server_with_held_request status_json);

# server_with_held_request($target): starts the server with two workers (one
# held by a gate, one for everything else, so that each request is counted
# before the next is answered), sends "GET $target" (a target under /slow/
# waits at the gate) and waits until the status page shows it in flight.
# Returns the server, the held request's socket, the gate and the snapshot
# that showed it (undef if it never came).
sub server_with_held_request {
    my ($target) = @_;
    my $gate = gate();
    my $app = sub {
        my ($env) = @_;
        $gate->wait if $env->{PATH_INFO} =~ m{\A/slow/};
        return [200, ['Content-Type' => 'text/plain'], ['ok']];
    };
    my $server = start_server(
        app => Plack::Middleware::SerowStatus->wrap($app, path => '/status'),
        options => ['--workers', 2]);
    my $held = raw_connect($server);
    syswrite $held, "GET $target HTTP/1.1\r\nHost: x\r\n\r\n";
    # Processing 2: the held request and the status request itself.  A
    # worker is busy from the first byte of a request; its request line is
    # shown once it has been read: wait for that too.
    my $status = wait_until(sub {
        my $s = status_json($server);
        return $s && $s->{processing} == 2 && @{ $s->{workers} } == 2
            && (grep { $_->{busy} && $_->{request} eq "GET $target" } @{ $s->{workers} }) && $s;
    });
    return ($server, $held, $gate, $status);
}

# The JSON view, decoded (undef when no response came).
sub status_json {
    my ($server) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /status?json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    my $res = read_response($sock) or return undef;
    return JSON::PP::decode_json($res->{body});
}

1;
