use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use JSON::PP ();
use Net::EmptyPort ();
use Plack::Util ();
use Serow::Test qw(need_debian_packages start_server raw_connect read_until_close wait_until
    http_get gate);
use Serow::Test::Prometheus ();

# eg/chat/chat.psgi in a real browser: two tabs of headless Chromium open
# the chat page, whose WebSocket the holder keeps; a message sent from one
# shows in both.  With 2 workers and both pages connected, both workers
# take a slow request at once, and the chat goes on while one of them is
# busy: no worker is kept by a WebSocket.  Then the same app with its
# publishes sent to a publish endpoint, as behind Pushpin (here Serow's own,
# --publish-listen, which speaks Pushpin's).
#
# Chromium offers permessage-deflate; nothing here depends on whether the
# server accepts it.

need_debian_packages('chromium');
require Serow::Test::Chromium;

my $chat = Plack::Util::load_psgi('eg/chat/chat.psgi');
my $dir = File::Temp->newdir;
my $gate = gate();
my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/slow') {
        # keeps its worker until the test opens the gate
        open my $fh, '>', "$dir/in-$$-" . int(rand 1e9) or die $!;
        close $fh;
        $gate->wait;
        return [200, ['Content-Type' => 'text/plain'], ["pid $$\n"]];
    }
    return $chat->($env);
};
my $server = start_server(app => $app,
    options => ['--workers', 2, '--grip', '--metrics-path', '/metrics']);
$server->wait_until_serving('/');

sub metric {
    my ($name) = @_;
    my $res = http_get($server, '/metrics');
    return undef unless $res && $res->{status} == 200;
    return Serow::Test::Prometheus::value(Serow::Test::Prometheus::parse($res->{body}), $name);
}

my $browser = Serow::Test::Chromium->start;
my @pages = map { $browser->new_page } 1, 2;

# The page's address and what its state line says.
sub state_of {
    my ($page) = @_;
    return $browser->evaluate($page, q{(function () { var s = document.getElementById('state');
        return location.href + ' ' + (s ? s.textContent : '') })()});
}
# Both pages at $url, connected (not the page they were on before).
sub open_chat {
    my ($url) = @_;
    $browser->call($_, 'Page.navigate', { url => "$url/" }) for @pages;
    return wait_until(sub { !grep { state_of($_) ne "$url/ connected" } @pages }, 60);
}
# Types $text into the page's form and sends it.
sub say_on {
    my ($page, $text) = @_;
    my $js = JSON::PP->new->ascii->allow_nonref->encode($text);
    $browser->evaluate($page, qq{(function () { var f = document.getElementById('say');
        f.elements.text.value = $js; f.requestSubmit(); return true })()});
}
sub shown {
    my ($page) = @_;
    return join "\n", @{ $browser->evaluate($page,
        q{Array.prototype.map.call(document.querySelectorAll('#log li'), function (li) { return li.textContent })}) };
}
# Whether every page shows @lines (and only them), within a generous time.
sub all_show {
    my @lines = @_;
    my $want = join "\n", @lines;
    return wait_until(sub { !grep { shown($_) ne $want } @pages }, 30);
}

ok open_chat($server->url), 'two pages open the chat: both connected';
ok wait_until(sub { (metric('serow_websocket_connections') // -1) == 2 }, 30),
    '... their WebSockets held by the holder (serow_websocket_connections 2)';

# Each slow request keeps a worker until the gate opens: both answered at
# once means both workers were free with the two WebSockets open.
my @slow = map {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /slow HTTP/1.0\r\n\r\n";
    $sock
} 1, 2;
ok wait_until(sub { my @in = glob "$dir/in-*"; @in == 2 }, 60),
    'with both pages connected, each of the 2 workers takes a slow request at once';
$gate->open(2);
my @pids = map { scalar(read_until_close($_)) =~ /pid (\d+)/ ? $1 : 'none' } @slow;
ok $pids[0] ne 'none' && $pids[1] ne 'none' && $pids[0] != $pids[1], '... answered by two workers';

say_on($pages[0], 'hello from one');
ok all_show('hello from one'), 'a message sent from the first page shows on both';

# one worker busy: the other answers the chat
my $busy = raw_connect($server);
syswrite $busy, "GET /slow HTTP/1.0\r\n\r\n";
ok wait_until(sub { my @in = glob "$dir/in-*"; @in == 3 }, 60), 'a worker busy with a slow request';
say_on($pages[1], "h\x{e9}llo from two");
ok all_show('hello from one', "h\x{e9}llo from two"), '... a message from the second page shows on both, in order';
$gate->open(1);
like scalar(read_until_close($busy)), qr/pid \d+/, '... the slow request answered';

# ---- behind a publish endpoint, as behind Pushpin ------------------------

my $publish_port = Net::EmptyPort::empty_port();
my $endpoint = start_server(app_file => 'eg/chat/chat.psgi',
    env => { CHAT_PUBLISH_URL => "http://127.0.0.1:$publish_port/publish/" },
    # 2 workers: the publish a worker makes in the app is answered by the other
    options => ['--workers', 2, '--grip', '--publish-listen', "127.0.0.1:$publish_port"]);
$endpoint->wait_until_serving('/');
ok open_chat($endpoint->url), 'the pages open the chat of a server whose app publishes to an endpoint';
say_on($pages[1], 'through the endpoint');
ok all_show('through the endpoint'), '... a message shows on both';

is $browser->stop, 0, 'chromium stops';
ok wait_until(sub { (metric('serow_websocket_connections') // -1) == 0 }, 30),
    'the browser gone: serow_websocket_connections 0';
is $endpoint->stop, 0, 'clean stop';
is $server->stop, 0, 'clean stop';
done_testing;
