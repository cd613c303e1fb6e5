use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port can_bind);
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get);

# Several listeners at once, of every kind, all served by every worker.

my $dir = File::Temp->newdir;
my $path = "$dir/multi.sock";
my $v4 = empty_port();
my $v6 = can_bind('::1') ? empty_port({ host => '::1' }) : undef;

my @listen = ('--listen', "127.0.0.1:$v4", ($v6 ? ('--listen', "[::1]:$v6") : ()),
    '--listen', $path, '--socket-mode', '0660');
my $server = start_server(listen => 'none', app_file => 't/apps/pid.psgi', options => [@listen, '--workers', 3]);
ok wait_port({ port => $v4, max_wait => 30 }), 'IPv4 listens' or diag $server->log;
ok wait_port({ host => '::1', port => $v6, max_wait => 30 }), 'IPv6 listens' if $v6;
my $v6_url = $v6 ? "http://[::1]:$v6, " : '';
ok $server->wait_for_log(qr{listening on http://127\.0\.0\.1:$v4, \Q$v6_url$path\E with 3 workers}),
    'the log names every listener';
is sprintf('%04o', (stat $path)[2] & 07777), '0660', 'the UNIX socket has its mode';

my %targets = (
    ipv4 => [{ port => $v4 }, qr/ server 127\.0\.0\.1:$v4$/],
    ($v6 ? (ipv6 => [{ host => '::1', port => $v6 }, qr/ server ::1:$v6$/]) : ()),
    unix => [{ path => $path }, qr/ server localhost:0$/],
);
# Round after round over every listener: each stays served whichever worker
# takes the connection.
for my $round (1 .. 5) {
    for my $kind (sort keys %targets) {
        my ($target, $expect) = @{ $targets{$kind} };
        my $res = http_get($target, '/');
        ok $res && $res->{status} == 200 && $res->{body} =~ $expect, "round $round: $kind is served"
            or diag explain $res;
    }
}
is $server->stop, 0;
ok !-e $path, 'the socket file is removed at the stop';
done_testing;
