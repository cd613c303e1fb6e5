# Differential check: the same raw requests go to Serow and
# to Debian's nginx (an origin answering "return 200" for every location), and
# the table below records what each does: request smuggling vectors (RFC 9112
# 11.2 and public research: CL.TE, TE.CL, TE.TE obfuscation), bare LF / CR,
# obs-fold, chunk-size syntax and overflow, NUL bytes, odd versions, Host.
#
# serow: the status Serow answers.  A rejection is checked with
#   Serow::Test::rejects (one response, Connection: close, closed, the request
#   pipelined behind it not answered).  200: accepted; then a second request
#   pipelined right behind it must be answered exactly once (its own echo), or
#   the connection closed after the first: no desync either way.
# nginx: the status of nginx's first response ('0.9': an HTTP/0.9 answer, a
#   body without a status line).
# why: where the two differ, the RFC section that makes Serow's answer right.
#
# perl t/differential/nginx.t --markdown prints the table for docs/differential.md.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request echo_app rejects need_debian_packages);
use Serow::Test::HostileRequests ();

my @TABLE = Serow::Test::HostileRequests::table();

if (grep { $_ eq '--markdown' } @ARGV) {
    print "| request | Serow | nginx | why Serow's answer is right |\n| --- | --- | --- | --- |\n";
    for (@TABLE) {
        my ($name, undef, $serow, $nginx, $why) = @$_;
        $why //= q();
        s/\|/\\|/g for $name, $why;
        print "| $name | $serow | $nginx | ", ($serow eq $nginx ? '' : $why // ''), " |\n";
    }
    exit 0;
}

need_debian_packages('nginx');
require Serow::Test::Nginx;

my $serow = start_server(app => echo_app(), options => ['--workers', 1]);
my $nginx = Serow::Test::Nginx::start_nginx(config => \&Serow::Test::Nginx::origin_config);

for my $row (@TABLE) {
    my ($name, $bytes, $serow_status, $nginx_status, $why) = @$row;
    ok defined $why, "$name: the table says why Serow differs" if $serow_status ne $nginx_status;
    if ($serow_status == 200) {
        subtest "$name: Serow accepts it, without desync" => sub {
            my $raw = raw_request($serow, $bytes . Serow::Test::HostileRequests::SECOND, eof => \my $closed);
            Serow::Test::HostileRequests::check_accepted($raw, $closed);
        };
    } else {
        rejects($serow, $bytes, $serow_status, "$name: Serow answers $serow_status");
    }
    my $raw = raw_request($nginx, $bytes . Serow::Test::HostileRequests::SECOND);
    is Serow::Test::HostileRequests::first_status($raw), $nginx_status, "$name: nginx answers $nginx_status"
        or diag $raw;
}

is $nginx->stop, 0, 'nginx stops cleanly';
is $serow->stop, 0, 'Serow stops cleanly';
done_testing;
