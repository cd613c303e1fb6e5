use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_request parse_response);

# The status page and --metrics-path are for this machine by default.  A
# proxy on this machine (nginx in front of Serow) connects from 127.0.0.1
# too, for any client on the internet: a request that carries a proxy's
# header (X-Forwarded-For, Forwarded, X-Real-IP) is not local, and gets 403
# unless the operator trusts that proxy's word for the client's address
# (SerowStatus's trusted_proxy, --metrics-trusted-proxy).

my $app = sub { [200, ['Content-Type' => 'text/plain'], ['app']] };

sub get {
    my ($server, $path, @headers) = @_;
    return scalar parse_response(raw_request($server,
        join("\r\n", "GET $path HTTP/1.1", 'Host: x', @headers, 'Connection: close', '', '')));
}

my %proxy_headers = (
    'X-Forwarded-For' => 'X-Forwarded-For: 127.0.0.1',
    'Forwarded' => 'Forwarded: for=127.0.0.1;proto=http',
    'X-Real-IP' => 'X-Real-IP: 127.0.0.1',
);

subtest 'default allow lists' => sub {
    my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
        options => ['--workers', 1, '--metrics-path', '/metrics']);
    for my $path ('/server-status', '/metrics') {
        is get($server, $path)->{status}, 200, "$path straight from this machine: 200";
        for my $name (sort keys %proxy_headers) {
            my $res = get($server, $path, $proxy_headers{$name});
            is $res->{status}, 403, "$path with $name: 403";
            is $res->{body}, "Forbidden\n", 'as any refused address';
        }
    }
    is get($server, '/', $proxy_headers{'X-Forwarded-For'})->{body}, 'app', 'the app is not concerned';
    is $server->stop, 0;
};

subtest 'the operator trusts the proxy on this machine' => sub {
    my $server = start_server(
        app => Plack::Middleware::SerowStatus->wrap($app, allow => ['10.0.0.0/8'], trusted_proxy => ['127.0.0.1']),
        options => ['--workers', 1, '--metrics-path', '/metrics', '--metrics-allow', '10.0.0.0/8',
                    '--metrics-trusted-proxy', '127.0.0.1']);
    for my $path ('/server-status', '/metrics') {
        is get($server, $path, 'X-Forwarded-For: 10.1.2.3')->{status}, 200,
            "$path for a client in the allow list, forwarded by a trusted proxy: 200";
        is get($server, $path, 'Forwarded: for="10.1.2.3:4711"')->{status}, 200, '(Forwarded)';
        is get($server, $path, 'X-Real-IP: 10.1.2.3')->{status}, 200, '(X-Real-IP)';
        is get($server, $path, 'X-Forwarded-For: 10.1.2.3, 203.0.113.9')->{status}, 403,
            'a client outside it (what the client wrote before does not count): 403';
        is get($server, $path)->{status}, 403, 'the proxy itself (127.0.0.1) is not in the allow list: 403';
    }
    is $server->stop, 0;
};

subtest 'bad entries are refused at start' => sub {
    ok !eval { Plack::Middleware::SerowStatus->wrap($app, trusted_proxy => ['nginx']); 1 }, 'SerowStatus';
    like $@, qr/SerowStatus: trusted_proxy: 'nginx' is not an IPv4 or IPv6 address/;
    my ($status, $text) = Serow::Test::run_serow('--metrics-path', '/metrics', '--metrics-trusted-proxy',
        'nginx', '--listen', '127.0.0.1:0', Serow::Test::root() . '/eg/hello.psgi');
    is $status, 2, '--metrics-trusted-proxy: exit status 2';
    like $text, qr/--metrics-trusted-proxy: 'nginx' is not an IPv4 or IPv6 address/;
};

done_testing;
