use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect read_until_close wait_until gate parse_response);
use Serow::Test::Holding qw(server_status read_for);

# --grip and a graceful stop (TERM): the holder keeps the held connections
# while the workers finish, so that a publish made by a request still in a
# worker reaches them; then each hold ends as a client expects, not cut: a
# chunked stream gets its last chunk, a close-delimited one its close, a
# long poll its answer at the timeout (the app's own); each logged; the
# server exits 0.

my $gate = gate();
my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/events') {
        return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
            'Grip-Channel' => 'news'], [":ok\n\n"]];
    }
    if ($path eq '/poll') {
        return [200, ['Content-Type' => 'application/json', 'Grip-Hold' => 'response',
            'Grip-Channel' => 'inbox', 'Grip-Timeout' => 300], ['{"messages":[]}']];
    }
    if ($path eq '/slow') {
        print STDERR "slow request in worker $$\n";
        $gate->wait;
        Serow::Holding::publish({ channel => 'news', id => 'late', http_stream => { content => "id: late\ndata: late\n\n" } });
        return [200, ['Content-Type' => 'text/plain'], ['slow done']];
    }
    return [200, ['Content-Type' => 'text/plain'], ['plain']];
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 2, '--grip', '--access-log', '-']);
$server->wait_until_serving('/plain');

sub hold {
    my ($request, $until) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, $request;
    my $buf = '';
    read_for($sock, \$buf, $until) if $until;
    return ($sock, \$buf);
}
my ($chunked, $chunked_buf) = hold("GET /events HTTP/1.1\r\nHost: x\r\n\r\n", qr/:ok\n\n\r\n/);
like $$chunked_buf, qr/Transfer-Encoding: chunked/i, 'a chunked stream held';
my ($plain, $plain_buf) = hold("GET /events HTTP/1.0\r\n\r\n", qr/:ok\n\n/);
unlike $$plain_buf, qr/Transfer-Encoding/i, 'a close-delimited stream (HTTP/1.0) held';
my ($poll, $poll_buf) = hold("GET /poll HTTP/1.1\r\nHost: x\r\n\r\n");
ok wait_until(sub { (server_status($server)->{grip_held} // 0) == 3 }), 'and a long poll: 3 held';

my ($slow) = hold("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
ok $server->wait_for_log(qr/slow request in worker \d+/), 'a slow request keeps a worker busy';
$server->signal('TERM');
ok $server->wait_for_log(qr/received SIGTERM: finishing in-flight requests/), 'the server stops gracefully';
ok $server->wait_for_log(qr/worker \d+ (?:stopping|exited)/), 'the idle worker leaves';
$gate->open;

my ($slow_bytes) = read_until_close($slow);
like $slow_bytes, qr{\AHTTP/1\.1 200 .*slow done\z}s, 'the slow request is answered';

my ($bytes, $closed) = read_until_close($chunked);
$$chunked_buf .= $bytes;
ok $closed, 'the chunked stream ends';
like $$chunked_buf, qr/\r\n\w+\r\nid: late\ndata: late\n\n\r\n0\r\n\r\n\z/,
    'after the publish made while the worker finished: the last chunk, and nothing after it';

($bytes, $closed) = read_until_close($plain);
$$plain_buf .= $bytes;
ok $closed, 'the close-delimited stream ends with its close';
like $$plain_buf, qr/:ok\n\nid: late\ndata: late\n\n\z/, 'after the publish';

($bytes, $closed) = read_until_close($poll);
ok $closed, 'the long poll ends';
my $res = parse_response($bytes);
is $res && $res->{status}, 200, 'answered with its answer at the timeout';
is $res && $res->{body}, '{"messages":[]}', 'the app\'s own body';
like $bytes, qr/\r\nConnection: close\r\n/i, 'saying that the connection closes';

is $server->wait_exit, 0, 'the server exits 0';
my $log = $server->log;
is scalar(() = $log =~ m{"GET /events HTTP/1\.1" 200 }g), 2, 'the chunked stream: the worker\'s line and the holder\'s';
is scalar(() = $log =~ m{"GET /events HTTP/1\.0" 200 }g), 2, 'the close-delimited one: the same';
is scalar(() = $log =~ m{"GET /poll HTTP/1\.1" 200 }g), 2, 'the long poll: the same';
unlike $log, qr/\[error\]|had not taken their last bytes/, 'no error, nothing cut';

# TERM to the whole process group (a supervisor, ^C): the holder gets it with
# the master, and still waits for the workers' end, then ends its holds.
subtest 'TERM to the process group' => sub {
    my $gate = gate();
    my $server = start_server(app => sub {
        my ($env) = @_;
        if ($env->{PATH_INFO} eq '/slow') {
            print STDERR "slow request in worker $$\n";
            $gate->wait;
            Serow::Holding::publish({ channel => 'news', http_stream => { content => "data: late\n\n" } });
            return [200, [], ['slow done']];
        }
        return [200, ['Grip-Hold' => 'stream', 'Grip-Channel' => 'news'], [":ok\n\n"]];
    }, options => ['--workers', 1, '--grip']);
    my $stream = raw_connect($server);
    syswrite $stream, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    ok read_for($stream, \$buf, qr/:ok\n\n\r\n/), 'a stream held';
    my $slow = raw_connect($server);
    syswrite $slow, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    ok $server->wait_for_log(qr/slow request in worker/), 'a slow request in the worker';
    kill 'TERM', -$server->pid;
    ok $server->wait_for_log(qr/received SIGTERM/), 'the master has it';
    $gate->open;
    my ($bytes, $closed) = read_until_close($stream);
    ok $closed, 'the stream ends';
    like $buf . $bytes, qr/data: late\n\n\r\n0\r\n\r\n\z/, 'after the publish, with its last chunk';
    is $server->wait_exit, 0, 'the server exits 0';
    unlike $server->log, qr/\[error\]|starting a new one/, 'no error, nothing restarted';
};

done_testing;
