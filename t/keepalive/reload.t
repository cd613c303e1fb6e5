use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select ();
use Serow::Test qw(start_server raw_connect read_response);

# HUP replaces the workers but not the kept-alive connections: the old
# workers hand theirs to the holder, and the new workers answer on them.
# A graceful stop closes idle connections cleanly (EOF, not a reset).

my $server = start_server(app => sub { [200, ['Content-Type' => 'text/plain'], ["$$"]] },
    options => ['--workers', 2, '--keepalive-timeout', 300]);

sub request {
    my ($sock) = @_;
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    return read_response($sock);
}

my @idle = map { raw_connect($server) } 1 .. 10;
my %old_pids = map { request($_)->{body} => 1 } @idle;

$server->signal('HUP');
ok $server->wait_for_log(qr/received SIGHUP/), 'HUP received';
# The old workers are gone once every connection is answered by new ones.
my ($answered, $by_new) = (0, 0);
for my $sock (@idle) {
    my $res = request($sock) or next;
    $answered++ if $res->{status} == 200;
}
is $answered, 10, 'every kept-alive connection still answers after HUP';

# Again, until the old workers have left: then only new ones answer.
my $all_new = 0;
for my $round (1 .. 50) {
    my %pids = map { (request($_) // {})->{body} // 'none' => 1 } @idle;
    if (!grep { $old_pids{$_} || $_ eq 'none' } keys %pids) { $all_new = 1; last }
}
ok $all_new, 'and are then answered by the new workers only';

$server->signal('TERM');
my $clean = 0;
for my $sock (@idle) {
    next unless IO::Select->new($sock)->can_read(30);
    my $n = sysread($sock, my $buf, 1);
    $clean++ if defined $n && $n == 0;
}
is $clean, 10, 'a graceful stop closes idle connections with EOF';
is $server->wait_exit, 0, 'and the server exits 0';
done_testing;
