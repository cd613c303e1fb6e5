use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Plack::Middleware::SerowStatus ();
use Plack::Util ();
use Serow::Test qw(need_debian_packages start_server raw_request wait_until);
use Serow::Test::Holding qw(server_status);

# eg/live/live.psgi in a real browser: headless Chromium loads the page, its
# EventSource gets a publish; the stream is ended (a published close), an
# item is published while the browser is away, and EventSource's own
# reconnection (with Last-Event-ID, which the app turns into prev-id) gets
# the item it missed, once, in order, then live ones again.
#
# The test drives Chromium with the DevTools protocol (Serow::Test::Chromium)
# and holds each of the page's requests for /events (Fetch.requestPaused)
# until it lets it go: it knows when the browser is away.  The app notes the
# Last-Event-ID of each (Chromium adds it below what the protocol shows);
# what the page shows is read from its list of messages.

need_debian_packages('chromium');
require Serow::Test::Chromium;

my $live = Plack::Util::load_psgi('eg/live/live.psgi');
my $dir = File::Temp->newdir;
my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/events') {
        open my $fh, '>>', "$dir/last-event-ids" or die $!;
        print {$fh} $env->{HTTP_LAST_EVENT_ID} // '(none)', "\n";
    }
    if ($env->{PATH_INFO} eq '/test/close') { # ends every stream on the channel
        Serow::Holding::publish({ channel => 'chat', http_stream => { close => 1 } });
        return [200, ['Content-Type' => 'text/plain'], ["closed\n"]];
    }
    return $live->($env);
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
    options => ['--workers', 2, '--grip']);
$server->wait_until_serving('/');

sub last_event_ids { open my $fh, '<', "$dir/last-event-ids" or return ''; local $/; <$fh> }
sub held { server_status($server)->{grip_held} // -1 }

sub say {
    my ($text) = @_;
    my $body = "text=$text";
    my $res = raw_request($server, "POST /say HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        . "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " . length($body)
        . "\r\n\r\n$body") // '';
    return $res =~ /published (\S+)/ ? $1 : die "POST /say: $res\n";
}

my $browser = Serow::Test::Chromium->start;
my $page = $browser->new_page;
$browser->call($page, 'Fetch.enable', { patterns => [{ urlPattern => '*/events*' }] });

# Waits for the page's next request for /events: its id in the protocol.
sub events_request { $browser->wait_event('Fetch.requestPaused')->{requestId} }
sub let_go { $browser->call($page, 'Fetch.continueRequest', { requestId => $_[0] }) }

sub shown {
    return $browser->evaluate($page,
        q{Array.prototype.map.call(document.querySelectorAll('#log li'), function (li) { return li.textContent })});
}
sub shows {
    my ($want) = @_;
    my $last;
    wait_until(sub { $last = join ',', @{ shown() }; $last eq join ',', @$want }, 30);
    return $last;
}

$browser->call($page, 'Page.navigate', { url => "http://127.0.0.1:" . $server->port . "/" });
my $request = events_request();
ok $request, "the page's EventSource asks for /events";
let_go($request);
# (a publish before the hold reaches the holder would miss a subscriber
# with no prev-id)
ok wait_until(sub { held() == 1 }, 30), 'its stream is held';

my $one = say('one');
is shows(['one']), 'one', 'the page shows a publish';

raw_request($server, "GET /test/close HTTP/1.0\r\n\r\n");
$request = events_request();
ok wait_until(sub { held() == 0 }, 30), 'a published close ended the stream; EventSource reconnects';

say('two'); # the browser is away: its request waits on the test
let_go($request);
is shows(['one', 'two']), 'one,two', 'after the reconnection the page shows the item it missed, once';
is last_event_ids(), "(none)\n$one\n", 'the reconnection sent the id of the last event it had as Last-Event-ID';
ok wait_until(sub { held() == 1 }, 30), 'held again';
say('three');
is shows(['one', 'two', 'three']), 'one,two,three', 'then live ones again, in order, each once';

is $browser->stop, 0, 'chromium stops';
is $server->stop, 0, 'clean stop';
done_testing;
