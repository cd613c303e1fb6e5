use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Socket::IP ();
use Net::EmptyPort ();
use Serow::Test qw(need_debian_packages start_server http_get);
use Serow::Test::Nginx;

# The tests' nginx (Serow::Test::Nginx) takes a free port, which another test
# running beside it can take first.  nginx then retries its bind for seconds
# before it gives up, and meanwhile a connect to the port reaches the other
# test's server: the helper must wait for nginx's own listening socket and
# move to another port, never hand the test the other server.

need_debian_packages('nginx');

my $app = sub { [200, ['Content-Type' => 'text/plain'], ['serow']] };
my $serow = start_server(app => $app, options => ['--workers', 1]);

# "Another test's server": a listener on the port nginx is given first,
# which accepts and answers as a server would.
my $other = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 8, ReuseAddr => 0)
    or die "listen: $!";
my $taken = $other->sockport;
my $pid = fork // die "fork: $!";
if (!$pid) {
    while (my $c = $other->accept) {
        print $c "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nother";
        close $c;
    }
    exit 0;
}
close $other;

my @ports = ($taken);
my $empty_port = \&Net::EmptyPort::empty_port;
no warnings 'redefine';
local *Net::EmptyPort::empty_port = sub { @ports ? shift @ports : $empty_port->(@_) };
use warnings 'redefine';

my $nginx = Serow::Test::Nginx->start(upstream => $serow);
isnt $nginx->{port}, $taken, 'nginx is on another port than the one it lost';
is http_get($nginx, '/')->{body}, 'serow', 'what the test reaches is nginx, in front of Serow';
$nginx->stop;
kill 'TERM', $pid;
waitpid $pid, 0;
is $serow->stop, 0;

done_testing;
