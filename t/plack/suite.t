# Plack's own server test suite (Plack::Test::Suite), run against Serow with
# three clients: HTTP::Tiny as the suite uses it (HTTP/1.1, keep-alive), LWP
# speaking HTTP/1.1 (keep-alive, chunked) and LWP speaking HTTP/1.0
# (close-delimited streaming bodies).  Every request goes through
# Plack::Middleware::Lint, as in Plack::Test::Suite->run_server_tests.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server);
use Plack::Test::Suite;
use Plack::LWPish;
use Plack::Util;
use LWP::UserAgent;

my @tests = @Plack::Test::Suite::TEST;

# Tells the client which protocol the server saw, so that the HTTP/1.0 pass
# is known to have been HTTP/1.0 on the wire.
my $app = Plack::Middleware::Lint->wrap(Plack::Test::Suite->test_app_handler);
my $tagged = sub {
    my ($env) = @_;
    my $protocol = $env->{SERVER_PROTOCOL};
    return Plack::Util::response_cb($app->($env), sub {
        push @{ $_[0][1] }, 'X-Seen-Protocol' => $protocol;
        return;
    });
};

my $server = start_server(app => $tagged, options => ['--workers', 1]);

my %clients = (
    'HTTP::Tiny HTTP/1.1' => [Plack::LWPish->new(no_proxy => ['127.0.0.1']), undef],
    'LWP HTTP/1.1' => [LWP::UserAgent->new(keep_alive => 4, env_proxy => 0), 'HTTP/1.1'],
    'LWP HTTP/1.0' => [LWP::UserAgent->new(keep_alive => 0, env_proxy => 0), 'HTTP/1.0'],
);

for my $client (sort keys %clients) {
    my ($ua, $protocol) = @{ $clients{$client} };
    my $expected_protocol = $protocol // 'HTTP/1.1';
    for my $i (0 .. $#tests) {
        my ($name, $client_side) = @{ $tests[$i] };
        subtest "$client: $name" => sub {
            my $cb = sub {
                my ($req) = @_;
                $req->uri->port($server->port);
                $req->header('X-Plack-Test' => $i);
                $req->protocol($protocol) if $protocol;
                my $res = $ua->request($req);
                # (the app that dies gets the server's own 500, untagged)
                is $res->header('X-Seen-Protocol'), $expected_protocol,
                    "the request went out as $expected_protocol"
                    unless $name eq 'Do not crash when the app dies';
                return $res;
            };
            $client_side->($cb);
        };
    }
}

is $server->stop, 0, 'the server stops cleanly';
my @errors = grep { /\[error\]/ && !/Throwing an exception from app handler/ } split /\n/, $server->log;
is_deeply \@errors, [], 'nothing logged but the suite\'s own deliberate exception';
done_testing;
