use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close wait_until gate);
use Serow::Test::Prometheus qw(parse value);

# serow_request_phase_seconds{phase="queue|app|write"}: where the time of
# the requests the workers served went, as histograms summed over the
# workers' slots in shared memory.  An app that sleeps shows in the app
# phase; a response the app streams while the test holds it, in the write
# phase; requests the server rejected itself are in none.

my $gate = gate();
my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    select(undef, undef, undef, 0.3) if $path eq '/sleep';
    if ($path eq '/stream') {
        return sub {
            my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
            $writer->write("first\n");
            $gate->wait;
            $writer->close;
        };
    }
    return [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
};
my $server = start_server(app => $app, options => ['--workers', 2, '--metrics-path', '/metrics']);

sub get {
    my ($path) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    return read_response($sock);
}

sub scrape { parse(get('/metrics')->{body}) }

sub phase { my ($m, $phase, $suffix, @le) = @_; value($m, "serow_request_phase_seconds$suffix", phase => $phase, @le) }

my $m0 = scrape();
ok exists $m0->{families}{serow_request_phase_seconds}, 'the histogram is there';
is $m0->{families}{serow_request_phase_seconds}{type}, 'histogram', 'typed histogram';

is get('/sleep')->{status}, 200, 'an app that sleeps 0.3 s';
my $held = raw_connect($server);
syswrite $held, "GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
ok wait_until(sub { my $r = ''; sysread($held, $r, 4096, length $r); $r =~ /first/ }),
    'a streamed response has begun';
select(undef, undef, undef, 0.3); # the write phase to measure (nothing waits on it)
$gate->open;
like read_until_close($held), qr/0\r\n\r\n\z/, 'and ended with its last chunk';
my $bad = raw_connect($server);
syswrite $bad, "GET / HTTP/1.1 junk\r\n\r\n";
is read_response($bad)->{status}, 400, 'a request the server rejects';

# Counted once the response is out: wait for the scrape that shows them.
# The scrapes are served requests too (each counted after it is answered).
my $m;
ok wait_until(sub {
    $m = scrape();
    phase($m, 'queue', '_count') - phase($m0, 'queue', '_count') >= 3;
}), 'the requests are counted';
my $served = phase($m, 'queue', '_count') - phase($m0, 'queue', '_count');
is phase($m, 'app', '_count') - phase($m0, 'app', '_count'), $served,
    'app: as many as queue (every served request gave a head)';
is phase($m, 'write', '_count') - phase($m0, 'write', '_count'), $served, 'write too';
is value($m, 'serow_requests_total', code => 400), 1, 'the rejected one is counted by status';
is $served, value($m, 'serow_request_duration_seconds_count') - value($m0, 'serow_request_duration_seconds_count') - 1,
    'but in no phase: the phases count the served requests only';

my $slow_apps = phase($m, 'app', '_count') - phase($m, 'app', '_bucket', le => '0.25');
cmp_ok $slow_apps, '>=', 1, 'the sleeping app is above 0.25 s in the app phase';
cmp_ok phase($m, 'app', '_sum'), '>=', 0.3, 'and in its sum';
my $slow_writes = phase($m, 'write', '_count') - phase($m, 'write', '_bucket', le => '0.25');
cmp_ok $slow_writes, '>=', 1, 'the held stream is above 0.25 s in the write phase';
cmp_ok phase($m, 'write', '_sum'), '>=', 0.3, 'and in its sum';

$server->stop;
done_testing;
