# Plack::Test::Suite->run_server_tests through Plack::Handler::Serow, the way
# plackup and Plack::Loader start it.  The suite's server side is given a
# coderef so that the listen socket is bound here first and handed over
# (SERVER_STARTER_PORT): no port is guessed, and Test::TCP finds the socket
# listening at once.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Fcntl ();
use IO::Socket::IP ();
use Plack::Loader ();
use Plack::Test::Suite;

my $listen = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 128,
    ReuseAddr => 1) or die "cannot listen: $@";
my $port = $listen->sockport;
fcntl($listen, Fcntl::F_SETFD(), 0) or die "fcntl: $!";

Plack::Test::Suite->run_server_tests(sub {
    my ($port, $app) = @_;
    $ENV{SERVER_STARTER_PORT} = "127.0.0.1:$port=" . fileno($listen);
    open(STDERR, '>', '/dev/null') unless $ENV{TEST_VERBOSE};
    my $server = Plack::Loader->load('Serow', host => '127.0.0.1', port => $port, workers => 1);
    $server->run(Plack::Middleware::Lint->wrap($app));
}, $port);

done_testing;
