# --min-body-rate: a body the worker reads while serving (over 64 KiB, so not
# read ahead in the event loop) must average the rate after --read-timeout of
# grace.  A client that sends a few bytes just often enough to beat
# --read-timeout would otherwise hold the worker for ever: it gets 408.
use strict;
use warnings;
use Test::More;
use IO::Select ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect answered_and_closed http_get);

use constant DECLARED => 200_000; # over the 64 KiB read ahead in the loop
use constant FIRST => 70_000;     # sent at once: 0.7 s of allowance at 100 KB/s
use constant GIVE_UP => 120;      # seconds of trickling before the test fails

my $server = start_server(app => sub { [200, [], ["pid $$"]] },
    options => ['--workers', 1, '--read-timeout', 2, '--min-body-rate', '100K']);
my $before = http_get($server, '/')->{body};

my $sock = raw_connect($server);
syswrite $sock, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " . DECLARED . "\r\n\r\n" . ('a' x FIRST);
# Ten bytes every 0.2 s: progress well within --read-timeout, far below the rate.
my $sel = IO::Select->new($sock);
my ($sent, $deadline, $answered) = (FIRST, time + GIVE_UP, 0);
while (time < $deadline && $sent < DECLARED) {
    if ($sel->can_read(0.2)) {
        $answered = 1;
        last;
    }
    syswrite($sock, 'b' x 10) or last;
    $sent += 10;
}
# (Had the client stopped, --read-timeout alone would have answered 408.)
ok $answered, 'the server answered while the client was still sending';
answered_and_closed($sock, 408); # a body slower than --min-body-rate
is http_get($server, '/')->{body}, $before, 'the same worker serves the next request';

is $server->stop, 0;
done_testing;
