# Pushpin's publish endpoint (lib/Serow/Publish/Endpoint.pm) under a real
# Serow: first as the app, then on --publish-listen, where the worker answers
# it for that listener's requests and the app for the others.  What is
# published is recorded by the worker in a file the test reads (the
# endpoint takes its publish function as a parameter; with --publish-listen
# the worker uses Serow::Holding::publish, which this test defines).
use strict;
use warnings;
use Test::More;
use File::Temp ();
use HTTP::Tiny ();
use JSON::PP ();
use Net::EmptyPort ();
use lib 't/lib';
use Serow::Test qw(start_server run_serow);
use Serow::Publish::Endpoint ();

my $dir = File::Temp->newdir;
my $record = "$dir/published";
my $json = JSON::PP->new->utf8->canonical;

# The worker appends each published item as a line of JSON.
sub recorder {
    return sub {
        my ($item) = @_;
        die "refused by the test's recorder\n" if $item->{channel} eq 'fails';
        open my $fh, '>>', $record or die "$record: $!";
        print $fh $json->encode($item), "\n";
        close $fh or die "$record: $!";
        return 1;
    };
}

sub published {
    open my $fh, '<', $record or return [];
    return [map { $json->decode($_) } <$fh>];
}

my $http = HTTP::Tiny->new(timeout => 30);
sub post {
    my ($url, $body, %headers) = @_;
    return $http->request('POST', $url, { content => $body, headers => \%headers });
}
sub items { $json->encode({ items => [@_] }) }

my $app_endpoint = Serow::Publish::Endpoint->new(publish => recorder(), max_body => 2000, max_item => 500);
my $server = start_server(app => $app_endpoint->to_app, options => ['--workers', 1]);
my $url = $server->url;

my $res = post("$url/publish/", items({ channel => 'news', id => '1', 'http-stream' => { content => "data: hi\n\n" } },
    { channel => 'inbox', formats => { 'http-response' => { code => 200, headers => { 'X-A' => 'b' }, body => 'r' } } },
    { channel => 'nobody', formats => { 'x-unknown' => {} } }));
is $res->{status}, 200, 'a good publish: 200';
is $res->{content}, "Published\n", 'Pushpin\'s answer';
is_deeply published(), [
    { channel => 'news', id => '1', http_stream => { content => "data: hi\n\n" } },
    { channel => 'inbox', http_response => { code => 200, reason => '', headers => [['X-A', 'b']], body => 'r' } },
], 'each item given to the publish function once, in order; an item with only unknown formats reaches nobody';

unlink $record;
$res = post("$url/publish", items({ channel => 'a', 'http-stream' => { content => 'x' } }));
is $res->{status}, 200, '/publish without the slash too';
is scalar @{ published() }, 1, 'published';

unlink $record;
$res = post("$url/publish/", '{"items": [');
is $res->{status}, 400, 'malformed JSON: 400';
like $res->{content}, qr/^malformed JSON/, 'with the reason';
$res = post("$url/publish/", items({ channel => 'a', 'http-stream' => { content => 'x' } }, { channel => 'b c', 'http-stream' => { content => 'x' } }));
is $res->{status}, 400, 'one bad item: 400';
like $res->{content}, qr/^items\[1\]: .*channel name/, 'naming the item';
$res = post("$url/publish/", items({ channel => 'a', 'http-stream' => { content => 'x' x 600 } }));
is $res->{status}, 413, 'an item over max_item: 413';
$res = post("$url/publish/", items(map { { channel => 'a', 'http-stream' => { content => 'x' x 100 } } } 1 .. 20));
is $res->{status}, 413, 'a body over max_body: 413';
like $res->{content}, qr/larger than the limit of 2000 bytes/, 'with the reason';
is_deeply published(), [], 'a refused request delivers nothing';

$res = post("$url/publish/", items({ channel => 'ok', 'http-stream' => { content => 'x' } }, { channel => 'fails', 'http-stream' => { content => 'x' } }));
is $res->{status}, 500, 'the publish function dies: 500';
like $res->{content}, qr/^items\[1\]: not published: refused by the test's recorder/, 'with its reason';
unlink $record;

$res = $http->get("$url/publish/");
is $res->{status}, 405, 'GET: 405';
is $res->{headers}{allow}, 'POST', 'with Allow: POST';
$res = post("$url/elsewhere", items());
is $res->{status}, 404, 'another path: 404';
$res = post("$url/publish/", items({ channel => 'a', 'http-stream' => { content => 'x' } }), 'X-Forwarded-For' => '127.0.0.1');
is $res->{status}, 403, 'a request through a proxy: 403';
is_deeply published(), [], 'nothing published';
$server->stop;

# The allow list, without a server: a client outside it gets 403.
my $outside = Serow::Publish::Endpoint->new(publish => sub { die "not to be called\n" }, max_body => 100, max_item => 100);
is $outside->call({ REMOTE_ADDR => '10.1.2.3', PATH_INFO => '/publish/', REQUEST_METHOD => 'POST' })->[0], 403,
    'outside the default allow list (this machine): 403';
my $lan = Serow::Publish::Endpoint->new(publish => sub { 1 }, allow => ['10.0.0.0/8'], max_body => 100, max_item => 100);
is $lan->call({ REMOTE_ADDR => '127.0.0.1', PATH_INFO => '/publish/', REQUEST_METHOD => 'POST' })->[0], 403,
    'outside a given allow list: 403';

# --publish-listen: a listener of its own.  The worker's publish function is
# Serow::Holding::publish, defined here and inherited by the forked server.
{
    no warnings qw(once redefine);
    *Serow::Holding::publish = recorder();
}
my $publish_port = Net::EmptyPort::empty_port();
my $app = sub { [200, ['Content-Type' => 'text/plain'], ["the app\n"]] };
$server = start_server(app => $app, options => ['--workers', 1, '--publish-listen', "127.0.0.1:$publish_port"]);
ok $server->wait_for_log(qr/publishing on 127\.0\.0\.1:$publish_port/), 'the start-up line names the publish listener';
my $publish_url = "http://127.0.0.1:$publish_port";
$res = post("$publish_url/publish/", items({ channel => 'live', 'http-stream' => { content => 'x' } }));
is $res->{status}, 200, 'on --publish-listen: published';
is_deeply published(), [{ channel => 'live', http_stream => { content => 'x' } }], 'through Serow::Holding::publish';
is $http->get("$publish_url/")->{status}, 404, 'another path on --publish-listen: 404, not the app';
is $http->get($server->url . '/')->{content}, "the app\n", 'the app on its own listener';
$res = post($server->url . '/publish/', items({ channel => 'no', 'http-stream' => { content => 'x' } }));
is $res->{content}, "the app\n", 'POST /publish/ on the app\'s listener is the app\'s';
is scalar @{ published() }, 1, 'and publishes nothing';
$server->stop;

unlink $record;
$publish_port = Net::EmptyPort::empty_port();
$server = start_server(app => $app, options => ['--workers', 1, '--publish-listen', "127.0.0.1:$publish_port",
    '--publish-allow', '10.0.0.0/8']);
ok $server->wait_for_log(qr/publishing on/), 'started';
$res = post("http://127.0.0.1:$publish_port/publish/", items({ channel => 'live', 'http-stream' => { content => 'x' } }));
is $res->{status}, 403, '--publish-allow without this machine: 403';
is_deeply published(), [], 'nothing published';
$server->stop;

# Refused at start, naming the option.
my ($status, $output) = run_serow('--publish-listen', "$dir/publish.sock", 't/apps/pid.psgi');
isnt $status, 0, '--publish-listen with a socket path: refused';
like $output, qr/--publish-listen: '\Q$dir\E\/publish\.sock' is a socket path, not HOST:PORT/, 'saying why';
($status, $output) = run_serow('--publish-listen', '127.0.0.1:' . Net::EmptyPort::empty_port(),
    '--publish-allow', '10.0.0.300/8', 't/apps/pid.psgi');
isnt $status, 0, 'a bad --publish-allow: refused';
like $output, qr/--publish-allow: '10\.0\.0\.300\/8' is not an IPv4 or IPv6 address/, 'saying why';

done_testing;
