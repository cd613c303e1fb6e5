use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use Serow::Test qw(start_server raw_connect read_response);

# More keep-alive clients than workers on an app that blocks: every client
# gets every answer (a prefork server that gives each connection a worker
# until it closes serves the first few and starves the rest).

use constant CLIENTS => 24;
use constant REQUESTS_EACH => 5;

my $server = start_server(app => sub {
    select(undef, undef, undef, 0.01); # the app blocks 10 ms per request
    return [200, ['Content-Type' => 'text/plain'], ["$$"]];
}, options => ['--workers', 3]);

# All clients at once, each sending its next request when the last is answered.
my (%sock_of, %answers, %buffer);
my $sel = IO::Select->new;
for my $i (1 .. CLIENTS) {
    my $sock = raw_connect($server);
    $sock_of{$i} = $sock;
    $answers{$i} = 0;
    $buffer{$i} = '';
    syswrite $sock, "GET /$i HTTP/1.1\r\nHost: x\r\n\r\n";
    $sel->add([$sock, $i]);
}
my %pids;
my $deadline = time + 120;
while ($sel->count && time < $deadline) {
    for my $ready ($sel->can_read(5)) {
        my ($sock, $i) = @$ready;
        my $n = sysread($sock, $buffer{$i}, 65536, length $buffer{$i});
        if (!$n) { $sel->remove($ready); next }
        while ($buffer{$i} =~ s/\AHTTP\/1\.1 200 [^\r]*\r\n(?:[^\r]+\r\n)*?Content-Length: (\d+)\r\n(?:[^\r]+\r\n)*\r\n//i) {
            my $body = substr($buffer{$i}, 0, $1, '');
            $pids{$body}++;
            if (++$answers{$i} < REQUESTS_EACH) {
                syswrite $sock, "GET /$i HTTP/1.1\r\nHost: x\r\n\r\n";
            } else {
                $sel->remove($ready);
            }
        }
    }
}
my @starved = grep { $answers{$_} != REQUESTS_EACH } sort { $a <=> $b } keys %answers;
is scalar(@starved), 0, 'every client got all ' . REQUESTS_EACH . ' answers'
    or diag "answers: " . join ', ', map { "$_=$answers{$_}" } @starved;
is scalar(keys %pids), 3, 'all three workers answered';

is $server->stop, 0, 'clean stop';
done_testing;
