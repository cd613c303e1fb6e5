use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response wait_until);
use Serow::Test::Prometheus qw(parse value);

# --metrics-path: the numbers match what the test did, the text is strict
# Prometheus exposition format, and other addresses get 403.

my $app = sub {
    my ($env) = @_;
    return [$env->{PATH_INFO} eq '/missing' ? 404 : 200, ['Content-Type' => 'text/plain'], ["ok\n"]];
};
my $server = start_server(app => $app,
    options => ['--workers', 2, '--metrics-path', '/metrics', '--metrics-allow', '127.0.0.0/8']);

sub get {
    my ($sock, $path, @headers) = @_;
    syswrite $sock, join "\r\n", "GET $path HTTP/1.1", 'Host: x', @headers, '', '';
    return read_response($sock);
}

my $scrapes = 0;
sub scrape {
    my $res = get(raw_connect($server), '/metrics', 'Connection: close');
    $scrapes++;
    is $res->{status}, 200, 'the metrics answer 200' unless $res && $res->{status} == 200;
    return $res;
}

# Counted once the response is out, so a scrape can come before the count of
# the request just answered: wait until the numbers are there (and never
# more than they should be: a count too high never comes down).
sub metrics_when {
    my ($cond) = @_;
    my $m;
    wait_until(sub {
        my $res = scrape();
        my $before = $scrapes - 1; # the scrapes before this one, counted as 200s
        $m = eval { parse($res->{body}) } or return 0;
        return $cond->($m, $before);
    });
    return $m;
}

my $first = scrape();
like $first->{headers}{'content-type'}, qr{\Atext/plain; version=0\.0\.4}, 'text format 0.0.4';
ok eval { parse($first->{body}) }, 'the output parses strictly' or diag "$@\n$first->{body}";

my $sock = raw_connect($server);
is get($sock, '/')->{status}, 200 for 1 .. 7;
is get($sock, '/missing')->{status}, 404 for 1 .. 3;
# Two rejected by the server itself: a malformed request line, a bad version.
my $bad = raw_connect($server);
syswrite $bad, "GET / HTTP/1.1 junk\r\nHost: x\r\n\r\n";
is read_response($bad)->{status}, 400, 'a malformed request: 400';
my $bad2 = raw_connect($server);
syswrite $bad2, "GET / HTTP/2.0\r\nHost: x\r\n\r\n";
is read_response($bad2)->{status}, 505, 'HTTP/2.0 on the wire: 505';

my $m = metrics_when(sub {
    my ($m, $before) = @_;
    return value($m, 'serow_requests_total', code => 200) == 7 + $before
        && value($m, 'serow_requests_total', code => 404) == 3
        && value($m, 'serow_requests_total', code => 400) == 1
        && value($m, 'serow_requests_total', code => 505) == 1;
});
ok $m, '7 + the scrapes 200s, 3 404s, a 400 and a 505' or diag explain $m;
$m ||= { samples => {} };
my $total = 0;
$total += $m->{samples}{$_} for grep { /\Aserow_requests_total\{/ } keys %{ $m->{samples} };
is value($m, 'serow_request_duration_seconds_count'), $total, 'histogram count = requests counted';
is value($m, 'serow_request_duration_seconds_bucket', le => '+Inf'), $total, 'le="+Inf" = count';
cmp_ok value($m, 'serow_request_duration_seconds_sum'), '>', 0, 'a duration sum';
cmp_ok value($m, 'serow_request_duration_seconds_sum'), '<', $total * 60, 'in seconds, not nanoseconds';
cmp_ok value($m, 'serow_connections_accepted_total'), '>=', 4 + 1, 'connections accepted counted';
is value($m, 'serow_worker_restarts_total'), 0, 'no worker restarted';
cmp_ok value($m, 'serow_uptime_seconds'), '>=', 0, 'uptime';
is $m->{families}{$_}{type}, 'counter', "$_ is a counter"
    for qw(serow_requests_total serow_connections_accepted_total serow_worker_restarts_total
           serow_connections_stolen_total serow_connections_gathered_total);
is $m->{families}{serow_request_duration_seconds}{type}, 'histogram', 'the duration is a histogram';
is $m->{families}{$_}{type}, 'gauge', "$_ is a gauge"
    for qw(serow_workers_busy serow_workers_idle serow_connections_idle serow_connections_queued);

# (Both workers appear once they have started, which on a slow machine may
# be after the requests above.)
ok metrics_when(sub { value($_[0], 'serow_workers_busy') == 1 && value($_[0], 'serow_workers_idle') == 1 }),
    'one worker busy (the scrape itself), the other idle';
# The idle keep-alive connection is seen as idle.
ok metrics_when(sub { value($_[0], 'serow_connections_idle') >= 1 }), 'the kept-alive connection is idle';

# The parser is strict: it refuses what a scraper could misread.
for my $broken (
    ["x_total 1\n# TYPE x_total counter\n", 'TYPE after samples'],
    ["# TYPE x counter\nx 1\n", 'a counter without _total'],
    ["# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", 'buckets going down'],
    ["# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", 'no +Inf bucket'],
    ["a{x=\"1\"} 1\na{x=\"1\"} 2\n", 'a series twice'],
    ["a{x=\"1\" } 1\n", 'a space in the labels'],
    ["a 1", 'no final line feed'],
    ["# TYPE h histogram\nh_bucket{p=\"a\",le=\"+Inf\"} 1\nh_sum{p=\"a\"} 1\nh_count{p=\"a\"} 1\n"
        . "h_bucket{p=\"b\",le=\"1\"} 2\nh_bucket{p=\"b\",le=\"+Inf\"} 1\nh_sum{p=\"b\"} 1\nh_count{p=\"b\"} 1\n",
        'a labelled histogram whose second series goes down'],
    ["# TYPE h histogram\nh_bucket{p=\"a\",le=\"+Inf\"} 1\nh_sum{p=\"a\"} 1\nh_count{p=\"a\"} 2\n",
        'a labelled histogram whose _count is not its +Inf bucket'],
    ["# TYPE h histogram\nh_bucket{p=\"a\",le=\"+Inf\"} 1\nh_sum{p=\"a\"} 1\nh_count 1\n",
        'a labelled histogram whose _count lacks the label'],
) {
    ok !eval { parse($broken->[0]); 1 }, "the test's parser refuses $broken->[1]";
}

ok eval { parse("# TYPE h histogram\nh_bucket{p=\"a\",le=\"1\"} 1\nh_bucket{p=\"a\",le=\"+Inf\"} 2\n"
    . "h_sum{p=\"a\"} 3\nh_count{p=\"a\"} 2\nh_bucket{p=\"b\",le=\"1\"} 0\nh_bucket{p=\"b\",le=\"+Inf\"} 0\n"
    . "h_sum{p=\"b\"} 0\nh_count{p=\"b\"} 0\n"); 1 }, "and takes a histogram per label value" or diag $@;

# Other paths reach the app; an address outside the allow list gets 403.
my $closed = start_server(app => $app,
    options => ['--workers', 1, '--metrics-path', '/metrics', '--metrics-allow', '10.0.0.0/8,192.168.0.0/16']);
my $res = get(raw_connect($closed), '/metrics', 'Connection: close');
is $res->{status}, 403, 'from an address outside --metrics-allow: 403';
unlike $res->{body}, qr/serow_/, 'and no numbers';
is get(raw_connect($closed), '/', 'Connection: close')->{status}, 200, 'other paths reach the app';

is $server->stop, 0;
is $closed->stop, 0;
done_testing;
