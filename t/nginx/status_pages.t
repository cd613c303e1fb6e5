use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(need_debian_packages start_server http_get);
use Serow::Test::Nginx;

# nginx on the same host, with the configuration of eg/nginx (it sets
# X-Forwarded-For): every request reaches Serow from 127.0.0.1, which the
# default allow lists of the status page and the metrics let in.  Through
# the proxy both pages are refused; straight from this machine both answer.

need_debian_packages('nginx');

my $app = sub { [200, ['Content-Type' => 'text/plain'], ['app']] };

subtest 'default options: refused through nginx' => sub {
    my $serow = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
        options => ['--workers', 1, '--metrics-path', '/metrics']);
    my $nginx = Serow::Test::Nginx->start(upstream => $serow);
    is http_get($nginx, '/')->{body}, 'app', 'nginx passes requests to Serow';
    for my $path ('/server-status', '/metrics') {
        is http_get($nginx, $path)->{status}, 403, "$path through nginx: 403";
        is http_get($serow, $path)->{status}, 200, "$path straight from this machine: 200";
    }
    $nginx->stop;
    is $serow->stop, 0;
};

subtest 'the operator trusts nginx: its client (here 127.0.0.1) is judged' => sub {
    my $serow = start_server(app => Plack::Middleware::SerowStatus->wrap($app, trusted_proxy => '127.0.0.1'),
        options => ['--workers', 1, '--metrics-path', '/metrics', '--metrics-trusted-proxy', '127.0.0.1']);
    my $nginx = Serow::Test::Nginx->start(upstream => $serow);
    for my $path ('/server-status', '/metrics') {
        is http_get($nginx, $path)->{status}, 200, "$path through nginx for a local client: 200";
    }
    $nginx->stop;
    is $serow->stop, 0;
};

done_testing;
