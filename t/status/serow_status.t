use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect read_response wait_until);

# The numbers on the status page match what the test did.

my $app = sub { [200, ['Content-Type' => 'text/plain'], ["ok"]] };
my $server = start_server(
    app => Plack::Middleware::SerowStatus->wrap($app, path => '/status', allow => ['127.0.0.0/8']),
    options => ['--workers', 3, '--keepalive-timeout', 300]);

sub get {
    my ($sock, $path, @headers) = @_;
    syswrite $sock, join "\r\n", "GET $path HTTP/1.1", 'Host: x', @headers, '', '';
    return read_response($sock);
}

sub status_json {
    my $sock = raw_connect($server);
    my $res = get($sock, '/status', 'Accept: application/json', 'Connection: close');
    return JSON::PP::decode_json($res->{body});
}

my @idle = map { raw_connect($server) } 1 .. 7;
get($_, '/') for @idle;
my $busy = raw_connect($server);
get($busy, '/') for 1 .. 13;

# Workers appear once they have started; on a slow machine the third may
# start after the first have answered everything.
my $s = wait_until(sub { my $s = status_json(); $s->{waiting} == 8 && @{ $s->{workers} } == 3 && $s });
ok $s, 'Waiting: the 8 idle keep-alive connections';
is $s->{processing}, 1, 'Processing: the status request itself';
is $s->{queued}, 0, 'Queued: none';
cmp_ok $s->{requests_total}, '>=', 20, 'at least the 20 requests the test made';
is scalar @{ $s->{workers} }, 3, 'one entry per worker';
my ($me) = grep { $_->{busy} } @{ $s->{workers} };
is $me && $me->{request}, 'GET /status', 'the busy worker shows its request';
ok $s->{uptime} >= 0 && $s->{holder_pid} > 0, 'uptime and holder';

# A request is counted once its response is out, so the client can be
# quicker than the count.  On one keep-alive connection a request is counted
# before the next is read; across connections not: a status request made on
# its own connection just before may be counted after the next look.  So the
# looks go over one connection, and the first count is taken once two looks
# in a row differ by exactly the first of them.
my $counter = raw_connect($server);
my $look = sub { JSON::PP::decode_json(get($counter, '/status', 'Accept: application/json')->{body})->{requests_total} };
my $before = wait_until(sub { my $first = $look->(); my $second = $look->(); $second == $first + 1 && $second });
get($busy, '/') for 1 .. 5;
my $looks = 0;
my $more = wait_until(sub {
    my $n = $look->() - $before - $looks++;
    return $n >= 6 && $n;
});
is $more, 6, 'five requests and one status request later, six more';
close $counter;

my $text = wait_until(sub {
    my $res = get(raw_connect($server), '/status', 'Connection: close');
    return $res->{body} =~ /^Processing: 1$/m && $res->{body} =~ /^Waiting: 8$/m && $res;
});
ok $text, 'plain text by default' or $text = { body => '' };
like $text->{body}, qr/^Waiting: 8$/m;
like $text->{body}, qr/^Queued: 0$/m;

my $forbidden = start_server(
    app => Plack::Middleware::SerowStatus->wrap($app, allow => ['10.0.0.0/8']),
    options => ['--workers', 1]);
is get(raw_connect($forbidden), '/server-status', 'Connection: close')->{status}, 403,
    'an address outside the allow list gets 403';
is get(raw_connect($forbidden), '/', 'Connection: close')->{status}, 200, 'other paths reach the app';

is $server->stop, 0;
is $forbidden->stop, 0;
done_testing;
