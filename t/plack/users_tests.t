# How a user tests an app through a real Serow, as the POD of
# Plack::Handler::Serow shows it: Plack::Test with the Server implementation
# and PLACK_SERVER=Serow, and Test::TCP with Plack::Runner (plackup's
# options).  Each answer says which process answered, so a fall-back to
# another server (Plack::Loader does that when Serow fails to load) fails.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use HTTP::Request::Common qw(GET POST);
use Plack::Test;
use Plack::Runner;
use Test::TCP qw(test_tcp);
use HTTP::Tiny;

my $app = sub {
    my ($env) = @_;
    my $body = '';
    while ($env->{'psgi.input'}->read(my $part, 65536)) { $body .= $part }
    return [200, ['Content-Type' => 'text/plain'], ["$0: $env->{REQUEST_METHOD} $env->{PATH_INFO} $body"]];
};

# The servers write their start-up lines on STDERR: out of the TAP stream.
my $log = File::Temp->new;
open(my $stderr, '>&', \*STDERR) or die;
sub quiet { open(STDERR, '>&', $log) or die unless $ENV{TEST_VERBOSE} }
sub loud { open(STDERR, '>&', $stderr) or die }

subtest 'Plack::Test, Impl Server, PLACK_SERVER=Serow' => sub {
    no warnings 'once';
    local $Plack::Test::Impl = 'Server';
    local $ENV{PLACK_SERVER} = 'Serow';
    quiet();
    test_psgi $app, sub {
        my ($cb) = @_;
        loud();
        my $res = $cb->(GET '/hello');
        is $res->content, 'serow worker: GET /hello ', 'a GET, answered by a Serow worker';
        $res = $cb->(POST '/form', [name => 'serow']);
        is $res->content, 'serow worker: POST /form name=serow', 'a POST form';
        quiet();
    };
    loud();
};

subtest 'Test::TCP and Plack::Runner (plackup -s Serow)' => sub {
    quiet();
    test_tcp(
        client => sub {
            my ($port) = @_;
            loud();
            my $ua = HTTP::Tiny->new(keep_alive => 1, timeout => 30);
            for my $path ('/a', '/b') {
                my $res = $ua->get("http://127.0.0.1:$port$path");
                is $res->{content}, "serow worker: GET $path ", "GET $path, answered by a Serow worker";
            }
            quiet();
        },
        server => sub {
            my ($port) = @_;
            my $runner = Plack::Runner->new;
            $runner->parse_options('-s', 'Serow', '-E', 'deployment', '--listen', "127.0.0.1:$port",
                '--workers', 2);
            $runner->run($app);
        },
    );
    loud();
};

done_testing;
