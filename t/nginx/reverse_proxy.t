use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Socket::IP ();
use JSON::PP ();
use Plack::Builder;
use Serow::Test qw(need_debian_packages start_server send_all read_response);
use Serow::Test::Nginx;

# Behind nginx, the app sees nginx as its client; with
# Plack::Middleware::ReverseProxy and the X-Forwarded-* headers of the
# configuration in docs/deployment.md it sees the real client again.  The
# client connects from 127.0.0.5 (any 127/8 address is this machine) so
# that its address differs from nginx's.  A forged X-Forwarded-For from the
# client does not win: nginx appends the address it saw, and ReverseProxy
# takes the last one.

need_debian_packages('nginx', 'libplack-middleware-reverseproxy-perl');

my $client_address = '127.0.0.5';

my $inner = sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'application/json'], [JSON::PP->new->canonical->encode({
        remote_addr => $env->{REMOTE_ADDR}, scheme => $env->{'psgi.url_scheme'},
        host => $env->{HTTP_HOST},
    })]];
};
my %apps = (plain => $inner, reverse_proxy => builder { enable 'ReverseProxy'; $inner });

sub seen {
    my ($nginx, @headers) = @_;
    my $sock = IO::Socket::IP->new(LocalHost => $client_address, PeerHost => '127.0.0.1',
        PeerPort => $nginx->port) or die "connect from $client_address: $@";
    my $buffer = '';
    send_all($sock, join("\r\n", 'GET / HTTP/1.1', 'Host: app.example', @headers, '', ''), buffer => \$buffer);
    my $res = read_response($sock, buffer => \$buffer);
    return $res && $res->{status} == 200 ? JSON::PP::decode_json($res->{body}) : {};
}

for my $listen (qw(tcp unix)) {
    for my $name (sort keys %apps) {
        my $serow = start_server(app => $apps{$name}, listen => $listen, options => ['--workers', 1]);
        my $nginx = Serow::Test::Nginx->start(upstream => $serow);
        subtest "over $listen, $name" => sub {
            my $seen = seen($nginx);
            is $seen->{host}, 'app.example', 'the Host the client sent';
            is $seen->{scheme}, 'http', 'the scheme';
            if ($name eq 'plain') {
                isnt $seen->{remote_addr} // '', $client_address, 'without ReverseProxy: not the client address';
            } else {
                is $seen->{remote_addr}, $client_address, "with ReverseProxy: the client's address";
                $seen = seen($nginx, 'X-Forwarded-For: 203.0.113.7');
                is $seen->{remote_addr}, $client_address, 'a forged X-Forwarded-For does not win';
            }
        };
        is $nginx->stop, 0, 'nginx stops cleanly';
        is $serow->stop, 0, 'serow stops cleanly';
    }
}

done_testing;
