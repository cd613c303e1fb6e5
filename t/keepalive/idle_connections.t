use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use POSIX ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect read_response wait_until);

# 2,000 idle keep-alive connections cost no worker: with 4 workers, other
# clients are served while they sit idle, the holder ends up holding them,
# and every one of them answers again afterwards.

use constant IDLE => 2000;

my $open_max = POSIX::sysconf(POSIX::_SC_OPEN_MAX()) // 0;
plan skip_all => "needs an open-file limit above " . (IDLE + 200) . " (ulimit -n is $open_max)"
    if $open_max < IDLE + 200;

my $app = sub { [200, ['Content-Type' => 'text/plain'], ["ok $$"]] };
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 4, '--keepalive-timeout', 300]);

sub request {
    my ($sock, $path, %headers) = @_;
    my $extra = join '', map { "$_: $headers{$_}\r\n" } sort keys %headers;
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n$extra\r\n";
    return read_response($sock);
}

sub status {
    my $sock = raw_connect($server);
    my $res = request($sock, '/server-status', Accept => 'application/json', Connection => 'close');
    return $res ? JSON::PP::decode_json($res->{body}) : {};
}

my @idle;
for my $i (1 .. IDLE) {
    my $sock = raw_connect($server);
    my $res = request($sock, "/idle/$i");
    die "connection $i got no answer" unless $res && $res->{status} == 200;
    push @idle, $sock;
}
pass(IDLE . ' connections opened, one request each');

my $served = 0;
my $active = raw_connect($server);
for (1 .. 200) {
    my $res = request($active, '/active');
    $served++ if $res && $res->{status} == 200;
}
is $served, 200, 'other clients are served while they sit idle';

my $held = wait_until(sub { my $s = status(); ($s->{held_by_holder} // 0) >= IDLE && $s });
ok $held, 'the connection holder holds every idle connection';
is $held && $held->{waiting}, IDLE + 1, 'Waiting counts them (and the active client\'s connection)';
is $held && $held->{processing}, 1, 'Processing: only the status request';

my $answered = 0;
for my $sock (@idle) {
    my $res = request($sock, '/again');
    $answered++ if $res && $res->{status} == 200;
}
is $answered, IDLE, 'every idle connection answers again';

is $server->stop, 0, 'clean stop';
done_testing;
