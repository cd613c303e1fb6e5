use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(read_response need_debian_packages headless_chromium);
use Serow::Test::StatusPage qw(server_with_held_request);

# The HTML view in a real browser: Debian's Chromium, headless, loads the
# dashboard while a request is held in flight, runs its script for a few
# seconds of virtual time (the script fetches the JSON view every second)
# and hands back the DOM as the script left it.

need_debian_packages('chromium');

# A request target that would run script if the page put it in as markup:
# "</script>" would end the element the snapshot is embedded in, and the
# img's onerror would run if the script used innerHTML.
my $HOSTILE = q{/slow/x</script><script>document.title='pwned'</script>}
    . q{<img/src='x'/onerror='document.title="pwned"'>};

my ($server, $held, $gate, $before) = server_with_held_request($HOSTILE);
ok $before, 'the held request is in flight (Processing 2: it and the status request)'
    or die "no held request: the rest would only fail\n";

my $dom = headless_chromium($server->url . '/status', '--dump-dom', '--virtual-time-budget=5000');
ok defined $dom, 'chromium rendered the page' or $dom = '';

sub key_value {
    my ($key) = @_;
    return $dom =~ /data-key="$key">([^<]*)</ ? $1 : undef;
}

like $dom, qr{<title>Serow status: 127\.0\.0\.1:\d+</title>}, 'a browser gets the HTML view';
my ($refreshes) = $dom =~ /<body[^>]* data-refreshes="(\d+)"/;
cmp_ok $refreshes // 0, '>=', 2, 'the script fetched the JSON view and re-rendered, twice or more';
is key_value('processing'), 2, 'Processing: the held request and the page\'s own';
is key_value('queued'), 0, 'Queued: none';
is key_value('worker_count'), 2, 'two workers';
like key_value('uptime'), qr/^\d+ s$/, 'uptime';
# The page itself was rendered with at most one request more than the look
# before it; each fetch after it is one more.
cmp_ok key_value('requests_total'), '>=', $before->{requests_total} + 3,
    'the total in the page is the refreshed one, not the first';
like $dom, qr{<span id="live"[^>]*>live, updated \d\d:\d\d:\d\d</span>}, 'live badge';

my @rows = $dom =~ m{(<tr class="(?:busy|idle)" data-pid="\d+">.*?</tr>)}g;
is scalar @rows, 2, 'a row per worker';
my ($held_row) = grep { /slow/ } @rows;
ok $held_row, 'the held request is shown' or $held_row = '';
my $escaped = $HOSTILE =~ s/&/&amp;/gr =~ s/</&lt;/gr =~ s/>/&gt;/gr; # as the DOM dump writes text
like $held_row, qr{<td class="request">GET \Q$escaped\E</td>}, 'as text, exactly';
like $held_row, qr{<span class="state">busy</span>}, 'busy';
like $held_row, qr{<td class="since">\d\d:\d\d:\d\d</td>}, 'since when';
like $held_row, qr{<td class="num busy-for">\d+(?:\.\d)? m?s</td>}, 'for how long';

unlike $dom, qr/pwned<\/title>/, 'the request target ran no script';
unlike $dom, qr{<img}i, 'and made no element';

$gate->open(1);
my $res = read_response($held);
is $res && $res->{status}, 200, 'the held request is answered';
is $server->stop, 0, 'the server stops cleanly';
done_testing;
