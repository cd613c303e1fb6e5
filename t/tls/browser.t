use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use JSON::PP ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(need_debian_packages start_server wait_until);
use Serow::Test::TLS qw(test_pki tls_options tls_connect tls_request);

# Headless Chromium loads a page over https from Serow, with the test CA
# trusted the way a user trusts one: in the NSS database of its HOME
# ($HOME/.pki/nssdb, certutil -A -t C,,), which Chromium on Linux reads for
# the CAs a user added (no --ignore-certificate-errors: a certificate the
# test CA did not sign fails, which the test checks first).
#
# The page fetches on its kept-alive HTTP/1.1 connection (ALPN http/1.1),
# then opens an EventSource that Serow holds (--grip): two items published
# reach it, sealed by the holder; then a close ends the stream and the page
# fetches again.  With --max-requests 1 every request is answered by a new
# worker: the browser's TLS connection moves from process to process (to
# the holder, to the next worker) on every request.  What the page got is
# read from it; the protocol, TLS version and connection of each response
# from the DevTools protocol's Network events.

need_debian_packages(qw(chromium libnss3-tools openssl libio-socket-ssl-perl libnet-ssleay-perl));
require Serow::Test::Chromium;

my $PAGE = <<'HTML';
<!doctype html>
<html><head><title>serow tls</title></head><body>
<script>
window.results = { before: [], events: [], after: [], errors: [], done: false };
async function get(path) { const r = await fetch(path); return r.json(); }
async function run() {
    for (let i = 1; i <= 4; i++) results.before.push(await get('/n/before' + i));
    const es = new EventSource('/events');
    es.onmessage = function (e) {
        results.events.push(e.data);
        if (results.events.length == 2) {
            es.close();
            (async function () {
                for (let i = 1; i <= 3; i++) results.after.push(await get('/n/after' + i));
                results.done = true;
            })().catch(function (e) { results.errors.push(String(e)) });
        }
    };
    es.onerror = function () { if (results.events.length < 2) results.errors.push('EventSource error') };
}
run().catch(function (e) { results.errors.push(String(e)) });
</script>
</body></html>
HTML

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    return [200, ['Content-Type' => 'text/html'], [$PAGE]] if $path eq '/';
    if ($path eq '/events') {
        return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
            'Grip-Channel' => 'news'], [":ok\n\n"]];
    }
    if ($path =~ m{\A/publish/(\w+)\z}) {
        Serow::Holding::publish({ channel => 'news', id => $1,
            http_stream => { content => "id: $1\ndata: item $1\n\n" } });
        return [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
    }
    return [200, ['Content-Type' => 'application/json'], [JSON::PP->new->canonical->encode({
        path => $path, pid => $$, port => $env->{REMOTE_PORT}, https => $env->{HTTPS} })]];
};

my $pki = test_pki();
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app, allow => ['127.0.0.1']),
    options => ['--workers', 2, '--grip', '--max-requests', 1, tls_options($pki)]);
my $url = 'https://localhost:' . $server->port;

# A HOME whose NSS database trusts the test CA.
my $home = File::Temp->newdir;
mkdir "$home/.pki";
mkdir "$home/.pki/nssdb";
for my $command (['-N', '--empty-password'], ['-A', '-t', 'C,,', '-n', 'serow test CA', '-i', $pki->{ca}]) {
    my $run = Serow::Test::Process::run_command('certutil', '-d', "sql:$home/.pki/nssdb", @$command);
    $run->{status} == 0 or BAIL_OUT("certutil @$command: $run->{output}");
}

sub via_tls {
    my ($path) = @_;
    my $sock = tls_connect($server, $pki) or return undef;
    my $res = tls_request($sock, $path, headers => { Connection => 'close' });
    return $res;
}
sub held {
    my $res = via_tls('/server-status?json') or return -1;
    my $status = eval { JSON::PP::decode_json($res->{body}) } or return -1;
    return $status->{grip_held} // -1;
}

# A browser whose HOME has no such database refuses the certificate: the
# trust below comes from the database, not from any leniency.
{
    my $bare = Serow::Test::Chromium->start(home => File::Temp->newdir . '');
    my $page = $bare->new_page;
    $bare->call($page, 'Page.enable');
    $bare->call($page, 'Page.navigate', { url => "$url/n/untrusted" });
    my $text = '';
    ok wait_until(sub { $text = $bare->evaluate($page, 'document.body ? document.body.innerText : ""') // '';
                        $text =~ /ERR_CERT_AUTHORITY_INVALID|"path"/ }, 60),
        'without the CA in its NSS database, Chromium refuses the certificate'
        and unlike $text, qr{"path"}, '... and does not load the page';
    $bare->stop;
}

my $browser = Serow::Test::Chromium->start(home => "$home");
my $page = $browser->new_page;
$browser->call($page, 'Network.enable');
$browser->call($page, 'Page.navigate', { url => "$url/" });

sub results { $browser->evaluate($page, 'JSON.stringify(window.results || null)') }
my $results;
ok wait_until(sub { $results = JSON::PP::decode_json(results() // 'null'); $results && @{ $results->{before} } == 4 }, 60),
    'the page loaded over https with the test CA trusted, and made its fetches'
    or diag explain $results;
ok wait_until(sub { held() == 1 }, 60), 'its EventSource is held by the holder';
is via_tls("/publish/$_")->{status}, 200, "publish $_" for 1, 2;
ok wait_until(sub { $results = JSON::PP::decode_json(results()); $results->{done} }, 60),
    'the page got both items, closed its EventSource and fetched again' or diag explain $results;
is_deeply $results->{events}, ['item 1', 'item 2'], 'the items, each once, in order';
is_deeply $results->{errors}, [], 'no error in the page';
my @answers = (@{ $results->{before} }, @{ $results->{after} });
is_deeply [map { $_->{path} } @answers], [(map { "/n/before$_" } 1 .. 4), (map { "/n/after$_" } 1 .. 3)],
    'every fetch answered';
is scalar(grep { $_->{https} eq 'on' } @answers), 7, 'HTTPS on';
my %pids = map { $_->{pid} => 1 } @answers;
is scalar(keys %pids), 7, 'each by another worker (--max-requests 1)';

# What the browser says of each response: the protocol (ALPN), TLS version,
# and connection.
my @responses;
while (my $event = eval { $browser->wait_event('Network.responseReceived', undef, 1) }) {
    push @responses, $event->{response};
}
my @fetched = grep { $_->{url} =~ m{/n/} } @responses;
is scalar(@fetched), 7, 'Chromium saw the seven responses';
is_deeply [sort keys %{{ map { ($_->{protocol} // '?') => 1 } @fetched }}], ['http/1.1'], 'all over http/1.1 (ALPN)';
is_deeply [sort keys %{{ map { ($_->{securityDetails}{protocol} // '?') => 1 } @fetched }}], ['TLS 1.3'],
    'all over TLS 1.3';
my %connections = map { ($_->{connectionId} // '?') => 1 } @fetched;
my %ports = map { $_->{port} => 1 } @answers;
cmp_ok scalar(keys %ports), '<', 7, 'the fetches shared kept-alive connections (' . scalar(keys %ports)
    . ' for 7), which moved between workers';
diag 'connections (Chromium\'s ids): ' . join(', ', sort keys %connections);

is $browser->stop, 0, 'chromium stops';
is $server->stop, 0, 'clean stop';
done_testing;
