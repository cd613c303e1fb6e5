use strict;
use warnings;
use Test::More;
use lib 't/lib';
use JSON::PP ();
use Time::HiRes ();
use Serow::Test qw(raw_connect read_response);
use Serow::Test::StatusPage qw(server_with_held_request);

# Which view a request gets (JSON, HTML, plain text), and the HTML as served:
# what came from requests is escaped in it (t/status/dashboard.t checks the
# page in a browser).

my $HOSTILE = q{/slow/</script><script>alert(1)</script>&amp;"'};

my $before = Time::HiRes::time();
my ($server, $held, $gate, $status) = server_with_held_request($HOSTILE);
ok $status, 'a request is held in flight';
my ($held_worker) = grep { $_->{busy} && $_->{request} =~ /slow/ } @{ $status->{workers} || [] };
# An order of events, not a speed: the request came after $before and before
# the snapshot (allowing a millisecond for the clocks' rounding).
cmp_ok $held_worker && $held_worker->{busy_since}, '>=', $before - 0.002,
    'busy_since: after the test sent the request';
cmp_ok $held_worker && $held_worker->{busy_since}, '<=', Time::HiRes::time(), 'and not in the future';
cmp_ok $status->{started}, '>=', $before - 0.002, 'started: after the test started the server';

sub get {
    my ($target, @headers) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, join "\r\n", "GET $target HTTP/1.1", 'Host: x', 'Connection: close', @headers, '', '';
    return read_response($sock);
}

my $browser_accept = 'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
for my $case (
    ['/status', [], 'text/plain', 'no Accept: plain text'],
    ['/status', ['Accept: */*'], 'text/plain', 'curl (*/*): plain text'],
    ['/status', ['Accept: application/json'], 'application/json', 'Accept: application/json'],
    ['/status', [$browser_accept], 'text/html', "a browser's Accept: HTML"],
    ['/status?html', [], 'text/html', '?html'],
    ['/status?x=1&html', ['Accept: application/json'], 'text/html', '?html over the Accept header'],
    ['/status?json', [$browser_accept], 'application/json', '?json over the Accept header'],
) {
    my ($target, $headers, $type, $name) = @$case;
    my $res = get($target, @$headers);
    like $res->{headers}{'content-type'}, qr{\A\Q$type\E}, $name;
    is $res->{headers}{vary}, 'Accept', "$name: Vary: Accept";
}

my $html = get('/status?html')->{body};
like $html, qr{<script type="application/json" id="serow-status-data">\{.*\}</script>}s,
    'the snapshot is embedded';
my ($json) = $html =~ m{id="serow-status-data">(.*?)</script>}s;
my $snapshot = JSON::PP::decode_json($json);
my ($busy) = grep { ($_->{request} // '') =~ /slow/ } @{ $snapshot->{workers} };
is $busy && $busy->{request}, "GET $HOSTILE", 'the embedded snapshot holds the request line as it was';
unlike $json, qr/[<>&]/, 'with no <, > or & left in it';
like $html, qr{<pre>.*GET /slow/&lt;/script&gt;&lt;script&gt;alert\(1\)&lt;/script&gt;&amp;amp;&quot;&#39;}s,
    'the plain-text fallback (noscript) is escaped';
unlike $html, qr{<script>alert}, 'the request line appears nowhere as markup';
like $html, qr{<meta http-equiv="refresh" content="\d+">}, 'without script the page reloads itself';
unlike $html, qr{<(?:script|link|img)[^>]+(?:src|href)=}i, 'no external assets';
my $policy = get('/status?html')->{headers}{'content-security-policy'} // '';
like $policy, qr{\Adefault-src 'none'; script-src 'sha256-[A-Za-z0-9+/]{43}='; style-src 'sha256-}, 
    'a Content Security Policy: only the page\'s own script and style, by their hashes';
like $policy, qr{connect-src 'self'}, 'and requests to its own server';

$gate->open(1);
is read_response($held)->{status}, 200, 'the held request is answered';
is $server->stop, 0;
done_testing;
