use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages start_server raw_connect send_all read_response echo_app);
use Serow::Test::Nginx;

# Requests nginx accepts and passes on but Serow refuses (RFC 9110/9112 are
# stricter than nginx): Serow's 400 reaches the client, nginx drops that
# upstream connection (Serow closed it), and the next request on the same
# client connection is served on a fresh one.

need_debian_packages('nginx');

my $serow = start_server(app => echo_app(), options => ['--workers', 2]);
my $nginx = Serow::Test::Nginx->start(upstream => $serow, keepalive => 8);
my $sock = raw_connect($nginx);

sub request {
    my ($head) = @_;
    my $buffer = '';
    send_all($sock, $head, buffer => \$buffer) or return undef;
    return read_response($sock, buffer => \$buffer);
}

for my $case (
    ['a control byte in a header value', "GET / HTTP/1.1\r\nHost: x\r\nX-Ctl: a\x01b\r\n\r\n"],
    ['a DEL in a header value', "GET / HTTP/1.1\r\nHost: x\r\nX-Del: a\x7fb\r\n\r\n"],
    ['a non-ASCII byte in the target', "GET /caf\xe9 HTTP/1.1\r\nHost: x\r\n\r\n"],
) {
    my ($name, $bytes) = @$case;
    subtest $name => sub {
        my $res = request($bytes);
        is $res && $res->{status}, 400, 'the client gets a 400' or diag $nginx->error_log;
        note $res->{body} if $res;
        unlike $res ? $res->{body} : '', qr/<center>nginx/, "Serow's, not nginx's own";
        $res = request("GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
        is $res && $res->{status}, 200, 'the next request on the client connection is served';
        like $res ? $res->{body} : '', qr{"path":"/after"}, 'by the app';
    };
}

is $nginx->stop, 0, 'nginx stops cleanly';
is $serow->stop, 0, 'serow stops cleanly';
done_testing;
