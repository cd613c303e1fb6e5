use strict;
use warnings;
use Test::More;
use lib 't/lib';
use HTTP::Tiny ();
use JSON::PP ();
use Net::EmptyPort ();
use Serow::Test qw(start_server raw_connect http_get run_serow);
use Serow::Test::Holding qw(read_for);

# The limits a publish and a hold meet, each at its boundary and the same
# wherever it is checked: --publish-max-item (default 64K) over HTTP (413)
# and from Perl (publish dies), never refused later by the holder for its
# encoding; --hold-max-channels (a hold naming more channels: 500, logged).

use constant MAX_ITEM => 64 * 1024;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my $n = ($env->{QUERY_STRING} // '') =~ /n=(\d+)/ ? $1 : 1;
    if ($path eq '/events') {
        return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
            'Grip-Channel' => join(', ', map { "c$_" } 1 .. $n)], [":ok\n\n"]];
    }
    if ($path eq '/publish') {
        # content of n bytes on channel c1 (2 bytes): an item of n + 2
        my $ok = eval { Serow::Holding::publish({ channel => 'c1', http_stream => { content => 'p' x $n } }) };
        return [200, ['Content-Type' => 'text/plain'], [$ok ? 'published' : "refused: $@"]];
    }
    return [200, ['Content-Type' => 'text/plain'], ['plain']];
};
my $publish_port = Net::EmptyPort::empty_port();
my $server = start_server(app => $app, options => ['--workers', 1, '--hold-max-channels', 3,
    '--publish-listen', "127.0.0.1:$publish_port"]);
ok $server->wait_for_log(qr/publishing on 127\.0\.0\.1:$publish_port/), 'the server runs';

my $http = HTTP::Tiny->new(timeout => 30);
sub publish_http {
    my ($content_bytes) = @_;
    return $http->request('POST', "http://127.0.0.1:$publish_port/publish/",
        { content => JSON::PP->new->encode({ items => [{ channel => 'c1',
            formats => { 'http-stream' => { content => 'h' x $content_bytes } } }] }) });
}

sub subscribe {
    my ($n) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /events?n=$n HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    read_for($sock, \$buf, qr/:ok\n\n\r\n|\r\n\r\n.*Internal/s);
    return ($sock, \$buf);
}

subtest '--hold-max-channels' => sub {
    my ($sock, $buf) = subscribe(3);
    like $$buf, qr{\AHTTP/1\.1 200 .*:ok\n\n}s, 'a hold on as many channels as --hold-max-channels is held';
    my ($over, $over_buf) = subscribe(4);
    like $$over_buf, qr{\AHTTP/1\.1 500 }, 'one on more: 500';
    ok $server->wait_for_log(qr/Grip-Channel: 4 channels, more than --hold-max-channels 3/), 'logged with the reason';
};

my ($sub, $buf) = subscribe(1);
like $$buf, qr/:ok/, 'a stream on c1 is held';

# (the chunk of an item of n bytes on the stream)
sub chunk_of { my ($byte, $n) = @_; return sprintf("%x\r\n", $n) . ($byte x $n) . "\r\n" }

subtest 'over HTTP' => sub {
    my $res = publish_http(MAX_ITEM - 2);
    is $res->{status}, 200, 'an item of exactly --publish-max-item bytes: 200';
    ok read_for($sub, $buf, qr/\Q${\ chunk_of('h', MAX_ITEM - 2)}\E/), 'and delivered whole';
    $res = publish_http(MAX_ITEM - 1);
    is $res->{status}, 413, 'one byte more: 413';
    like $res->{content}, qr/65537 bytes, more than the limit of 65536 \(--publish-max-item\)/, 'saying why';
};

subtest 'from Perl' => sub {
    my $res = http_get($server, '/publish?n=' . (MAX_ITEM - 2));
    is $res->{body}, 'published', 'an item of exactly --publish-max-item bytes is published';
    ok read_for($sub, $buf, qr/\Q${\ chunk_of('p', MAX_ITEM - 2)}\E/), 'and delivered whole';
    $res = http_get($server, '/publish?n=' . (MAX_ITEM - 1));
    like $res->{body}, qr/^refused: .*the item is 65537 bytes, more than --publish-max-item 65536/,
        'one byte more: publish dies, saying why';
};

unlike $server->log, qr/refused by the channel store/, 'the holder refused nothing the workers let through';
is $server->stop, 0, 'clean stop';

subtest 'the options are bounded' => sub {
    for my $case ([['--hold-max-channels', 0], qr/--hold-max-channels: 0 is not between 1 and 64/],
                  [['--hold-max-channels', 65], qr/--hold-max-channels: 65 is not between 1 and 64/],
                  [['--publish-max-item', '129K'], qr/--publish-max-item: 132096 is not between 1 and 131072/]) {
        my ($status, $out) = run_serow('--grip', @{ $case->[0] }, 'eg/hello.psgi');
        isnt $status, 0, "@{ $case->[0] }: refused";
        like $out, $case->[1], 'named';
    }
};

done_testing;
