use strict;
use warnings;
use Test::More;
use Net::EmptyPort ();
use lib 't/lib', 'bench/lib';
use Serow::Test qw(raw_connect read_response);
use Serow::Bench::Config ();
use Serow::Bench::Process qw(stop);
use Serow::Bench::Servers qw(%TITLE start how_it_runs missing);

# bench/run's report gives the command line each server ran with, as it ran
# (Serow::Bench::Servers::start records it); and each peer from CPAN runs
# with its keep-alive on where it has one: two requests on one connection.
# The peers run where they are installed (in @INC, or PERL5LIB=DIR/lib/perl5
# for a local lib); not in CI.

Serow::Bench::Config::setup(opt => { quick => 1, rounds => 1, duration => 1 },
    scenarios => [[hello_keepalive => 'hello, keep-alive']], args => []);
local $Serow::Bench::Servers::SCENARIO = 'hello_keepalive';

# Starts $server on the hello app, asks twice on one connection, stops it.
# Returns how many of the two were answered, or undef with the error.
sub answers_on_one_connection {
    my ($server) = @_;
    my $port = Net::EmptyPort::empty_port();
    my ($p, $err) = start($server, app => 'hello', listen => "127.0.0.1:$port");
    return (undef, $err) unless $p;
    my $answered = 0;
    my $sock = eval { raw_connect({ port => $port }) };
    for (1, 2) {
        last unless $sock && syswrite $sock, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        my $res = read_response($sock);
        last unless $res && $res->{status} == 200 && $res->{body} eq 'Hello World';
        $answered++;
    }
    stop($p);
    return $answered;
}

my ($answered, $err) = answers_on_one_connection('serow');
is $answered, 2, 'Serow answers twice on one connection' or diag $err;
like how_it_runs('serow'),
    qr{^  - `perl -Mblib script/serow --listen ADDR --workers 4 bench/apps/hello\.psgi` \(hello_keepalive\)$}m,
    "the report shows Serow's command line";

my %keepalive = (feersum => '--keepalive 1', feersum1 => '--keepalive 1',
    starlet => '--max-keepalive-reqs 1000000', monoceros => '');
for my $server (sort keys %keepalive) {
    SKIP: {
        skip "$TITLE{$server} is not installed: " . missing($server), 2 if missing($server);
        my ($answered, $err) = answers_on_one_connection($server);
        is $answered, 2, "$TITLE{$server} keeps the connection alive" or diag $err;
        like how_it_runs($server), qr{^  - `plackup -E deployment -s \w+ --listen ADDR .*\Q$keepalive{$server}\E.* bench/apps/hello\.psgi` \(hello_keepalive\)$}m,
            "the report shows $TITLE{$server}'s command line";
    }
}

done_testing;
