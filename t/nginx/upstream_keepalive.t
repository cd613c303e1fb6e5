use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Plack::Builder;
use Serow::Test qw(need_debian_packages start_server raw_request parse_response http_get wait_until);
use Serow::Test::Nginx;

# nginx keeps its connections to Serow open and sends request after request
# on them (keepalive N): many requests, each on a new client connection to
# nginx, reach Serow on one or two connections.  Seen from Serow's side: the
# client ports the app sees (TCP) and the connections Serow has open
# (the status page, read directly, not through nginx).  The control is the
# same nginx without "keepalive": a connection per request.

need_debian_packages('nginx');

use constant REQUESTS => 40;

my $app = builder {
    enable 'SerowStatus', allow => ['127.0.0.1'];
    sub { [200, ['Content-Type' => 'text/plain'], [$_[0]{REMOTE_PORT} // '']] };
};

sub status {
    my ($serow) = @_;
    my ($res) = parse_response(raw_request($serow, "GET /server-status HTTP/1.1\r\nHost: x\r\n"
        . "Accept: application/json\r\nConnection: close\r\n\r\n"));
    return $res && eval { JSON::PP::decode_json($res->{body}) } || {};
}

# Serow's open connections other than the status request's own.
sub upstream_connections { status($_[0])->{open_connections} - 1 }

for my $listen (qw(tcp unix)) {
    my $serow = start_server(app => $app, listen => $listen, options => ['--workers', 2]);
    for my $keepalive (8, 0) {
        my $nginx = Serow::Test::Nginx->start(upstream => $serow, keepalive => $keepalive);
        subtest "over $listen, " . ($keepalive ? "keepalive $keepalive" : 'no keepalive (the control)') => sub {
            my %ports;
            my $ok = 0;
            for (1 .. REQUESTS) {
                my $res = http_get($nginx, '/');
                next unless $res && $res->{status} == 200;
                $ok++;
                $ports{ $res->{body} }++;
            }
            is $ok, REQUESTS, REQUESTS . ' requests through nginx answered' or diag $nginx->error_log;
            if ($keepalive) {
                my $open = upstream_connections($serow);
                ok $open >= 1 && $open <= 2, "Serow has $open connection(s) from nginx open, kept alive";
                cmp_ok scalar(keys %ports), '<=', 2, 'the app saw at most 2 client ports'
                    if $listen eq 'tcp';
            } else {
                ok wait_until(sub { upstream_connections($serow) == 0 }),
                    'without keepalive nginx leaves no connection open';
                is scalar(keys %ports), REQUESTS, 'and the app saw a port per request' if $listen eq 'tcp';
            }
        };
        is $nginx->stop, 0, 'nginx stops cleanly';
    }
    is $serow->stop, 0, "serow over $listen stops cleanly";
}

done_testing;
