use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response wait_until);

# Serow::Loop::serve_request (src/psgi/psgi_request.c) serves every request from
# head to end, calling the worker's Perl (lib/Serow/Worker.pm) for the steps
# that are Perl's.  Each request below takes a different way through it (a
# body read by the worker, a streamed answer, a handle body, a failure...);
# each is followed, by the same single worker, by a plain request, which must
# find everything as the C path expects it (no response still open, nothing
# of the request before): on the same kept-alive connection, or on a new one
# after a response that closed it (a 500).

my $dir = File::Temp->newdir;
my $access_log = "$dir/access.log";
my $cleanup_ran = "$dir/cleanup";

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    return [200, ['Content-Type' => 'text/plain', 'Content-Length' => 5], ['plain']]
        if $path eq '/plain';
    if ($path eq '/body') {      # psgi.input to read first
        $env->{'psgi.input'}->read(my $got, 100);
        return [200, ['Content-Type' => 'text/plain'], ["got $got"]];
    }
    die "on purpose\n" if $path eq '/die';
    if ($path eq '/streaming') { # a code reference
        return sub { $_[0]->([200, ['Content-Type' => 'text/plain'], ['streamed']]) };
    }
    if ($path eq '/handle') {    # a handle as the body
        open my $fh, '<', \'from a handle' or die;
        return [200, ['Content-Type' => 'text/plain'], $fh];
    }
    return [200, ["Bad\nName" => 'x'], ['never']] if $path eq '/bad-header';
    return [200, ['Content-Type' => 'text/plain'], ['user']] if $path eq '/user'
        && ($env->{REMOTE_USER} = 'ann');
    if ($path eq '/cleanup') {
        push @{ $env->{'psgix.cleanup.handlers'} }, sub {
            open my $fh, '>>', $cleanup_ran or die;
            print $fh "ran\n";
        };
        return [200, ['Content-Type' => 'text/plain'], ['cleanup']];
    }
    return [404, ['Content-Type' => 'text/plain'], ['no such path']];
};

my $server = start_server(app => $app,
    options => ['--workers', 1, '--keepalive-timeout', 30, '--access-log', $access_log]);
my $sock;
wait_until(sub { $sock = eval { raw_connect($server) } }) or BAIL_OUT('server did not start');

sub ask {
    my ($request) = @_;
    syswrite $sock, $request;
    return read_response($sock);
}
sub get { ask("GET $_[0] HTTP/1.1\r\nHost: x\r\n\r\n") }

my @cases = (
    ['a plain request (done in C)', sub { get('/plain') }, 200, 'plain'],
    ['a body to read (handed back before the app)',
        sub { ask("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd") }, 200, 'got abcd'],
    ['an app that died (after the app)', sub { get('/die') }, 500, undef],
    ['a code reference (after the app)', sub { get('/streaming') }, 200, 'streamed'],
    ['a handle as the body (after the app)', sub { get('/handle') }, 200, 'from a handle'],
    ['a triple that cannot be sent', sub { get('/bad-header') }, 500, undef],
    ['REMOTE_USER for the access log (after sending)', sub { get('/user') }, 200, 'user'],
    ['a cleanup handler (after finishing)', sub { get('/cleanup') }, 200, 'cleanup'],
);
for my $case (@cases) {
    my ($name, $send, $status, $body) = @$case;
    subtest $name => sub {
        my $res = $send->();
        ok $res, 'answered' or return;
        is $res->{status}, $status, "status $status";
        is $res->{body}, $body, 'its body' if defined $body;
        if (($res->{headers}{connection} // '') =~ /close/i) {
            ok $status >= 500, 'closed only after a failure';
            $sock = raw_connect($server);
        }
        my $next = get('/plain');
        ok $next, 'the next request on the connection is answered' or return;
        is $next->{status}, 200, 'with 200';
        is $next->{body}, 'plain', 'and its own body';
    };
}

ok wait_until(sub { -s $cleanup_ran }), 'the cleanup handler ran';
ok wait_until(sub {
    open my $fh, '<', $access_log or return 0;
    grep { m{ ann \[.*"GET /user } } <$fh>;
}), 'the access log names the user';
like $server->log, qr{GET /die: the app died: on purpose}, 'the death is logged';
like $server->log, qr{GET /bad-header: bad response: invalid response header}, 'the bad header is logged';

close $sock;
$server->stop;
done_testing;
