use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until);
use Serow::Test::Prometheus qw(parse value);

# Counters survive worker restarts: a worker replaced after --max-requests
# leaves its counts in the retired totals, so no scrape ever sees a total
# go backwards, and at the end every request is counted once.

my $app = sub { [200, ['Content-Type' => 'text/plain'], ["ok\n"]] };
my $server = start_server(app => $app,
    options => ['--workers', 1, '--max-requests', 4, '--metrics-path', '/metrics']);

my (@seen, $scrapes);
sub scrape {
    my $res = http_get($server, '/metrics');
    $scrapes++;
    my $m = eval { parse($res->{body}) } or do { diag "unparsable: $@"; return undef };
    push @seen, [value($m, 'serow_requests_total', code => 200),
                 value($m, 'serow_request_duration_seconds_count'),
                 value($m, 'serow_connections_accepted_total')];
    return $m;
}

my $requests = 0;
for (1 .. 6) {
    for (1 .. 5) {
        my $res = http_get($server, '/');
        $requests++ if $res && $res->{status} == 200;
    }
    scrape();
}
is $requests, 30, '30 requests answered';

my $m = wait_until(sub {
    my $m = scrape() or return 0;
    # the scrapes before this one are 200s too
    return value($m, 'serow_requests_total', code => 200) == $requests + $scrapes - 1 && $m;
});
ok $m, 'every request counted once, across the restarts' or diag explain \@seen;
$m ||= { samples => {} };
cmp_ok value($m, 'serow_worker_restarts_total'), '>=', 5, 'the worker was replaced several times';
is value($m, 'serow_request_duration_seconds_count'), value($m, 'serow_requests_total', code => 200),
    'the histogram too';
cmp_ok value($m, 'serow_connections_accepted_total'), '>=', $requests + $scrapes,
    'and the connections accepted';

my @backwards = grep {
    my $i = $_;
    grep { $seen[$i][$_] < $seen[$i - 1][$_] } 0 .. 2
} 1 .. $#seen;
is scalar @backwards, 0, 'no total ever went backwards' or diag explain \@seen;

is $server->stop, 0;

# Replaced workers count, retired ones do not: TTOU takes a worker away
# (no restart), HUP replaces both that are left (two restarts).
my $two = start_server(app => $app, options => ['--workers', 3, '--metrics-path', '/metrics']);
sub restarts { value(parse(http_get($two, '/metrics')->{body}), 'serow_worker_restarts_total') }
$two->wait_for_log(qr/worker \d+ started/) for 1 .. 3;
$two->signal('TTOU');
ok $two->wait_for_log(qr/worker \d+ exited/), 'TTOU: a worker exited';
is restarts(), 0, 'not a restart';
$two->signal('HUP');
ok $two->wait_for_log(qr/worker \d+ exited/) && $two->wait_for_log(qr/worker \d+ exited/),
    'HUP: the two old workers exited';
is restarts(), 2, 'two restarts';
is $two->stop, 0;
done_testing;
