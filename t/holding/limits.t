use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect read_until_close read_until_match wait_until);
use Serow::Test::Holding qw(server_status);

# --max-held-connections: a hold past the limit is closed (after the head and
# first body the worker wrote) and counted; the ones held stay.

my $app = sub {
    return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
        'Grip-Channel' => 'news'], [":ok\n\n"]];
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 1, '--grip', '--max-held-connections', 1]);
sub status { server_status($server) }


my $first = raw_connect($server);
syswrite $first, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
like read_until_match($first, qr/:ok/), qr/:ok/, 'the first stream starts';
ok wait_until(sub { (status()->{grip_held} // 0) == 1 }), 'and is held';

my $second = raw_connect($server);
syswrite $second, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
my ($bytes, $closed) = read_until_close($second);
ok $closed, 'a hold past --max-held-connections is closed';
ok $server->wait_for_log(qr/a hold refused \(--max-held-connections reached\)/), 'and logged';
my $s = status();
is $s->{grip_refused}, 1, 'and counted';
is $s->{grip_held}, 1, 'the first is still held';

is $server->stop, 0, 'clean stop';
done_testing;
