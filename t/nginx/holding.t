use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages start_server raw_connect wait_until);
use Serow::Test::Holding qw(held_app check_stream check_long_poll publish_to read_for server_status);
use Serow::Test::Nginx qw(start_nginx);
use Serow::Test::NginxConfig ();

# Held requests behind nginx (docs/holding.md, "Behind nginx or HAProxy").
#
# With eg/nginx/serow-live.conf (location /events: proxy_buffering off, a
# longer read timeout): a stream's head, first body and every publish are
# passed on at once, and a client that leaves is let go by Serow.  In its
# location / too (buffering on): with proxy_http_version 1.1 Serow's stream
# is chunked, and nginx passes on each chunk as it comes.  Long polls work
# in location /, answered one after the other on one client connection.
#
# With nginx's defaults (proxy_pass alone: proxy_http_version 1.0, so a
# close-delimited stream, and buffering on), nginx keeps the events until
# its buffer fills or the stream ends; X-Accel-Buffering: no from the app
# turns its buffering off for that response.

need_debian_packages('nginx');

my $server = start_server(app => held_app(), options => ['--workers', 2, '--grip']);
$server->wait_until_serving('/plain');

my $nginx = Serow::Test::Nginx->start(upstream => $server, live => '/events');
my %samples = Serow::Test::NginxConfig::samples();
my ($location) = $samples{'serow-live.conf'} =~ /^(    location \/events \{.*?^    \}\n)/ms;
like $location, qr/proxy_buffering off;.*proxy_read_timeout/s, 'the sample has a location for held requests';
# (what nginx runs has no comments, and sits in a whole nginx.conf)
sub settings { my ($text) = @_; $text =~ s/^\s*#.*\n//mg; $text =~ s/^\s+//mg; $text }
my ($running) = $nginx->config_text =~ /^(\s*location \/events \{.*?^\s*\}\n)/ms;
is settings($running // ''), settings($location), 'nginx runs it';
my $doc = do { local $/; open my $fh, '<', 'docs/holding.md' or die $!; <$fh> };
ok index($doc, "```nginx\n$location```") >= 0, 'docs/holding.md shows it';
subtest 'a stream in location /events (proxy_buffering off)' => sub { check_stream($server, $nginx, '/events') };
subtest 'a stream in location / (buffering on, chunked from Serow)' => sub {
    check_stream($server, $nginx, '/other/events') };
subtest 'long polls in location /' => sub { check_long_poll($server, $nginx, '/poll') };
is $nginx->stop, 0, 'nginx stops cleanly';

my $upstream = '127.0.0.1:' . $server->port;
my $defaults = start_nginx(config => sub {
    my ($listen) = @_;
    return "server {\n    listen $listen;\n    location / { proxy_pass http://$upstream; }\n}\n";
});
subtest "nginx's defaults: events kept until the stream ends" => sub {
    my $sock = raw_connect($defaults);
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    ok wait_until(sub { (server_status($server)->{grip_held} // 0) == 1 }), 'held by the holder';
    publish_to($server, '/publish/kept');
    # A wait for what must not happen: it passes however loaded the machine.
    ok !read_for($sock, \$buf, qr/data: item kept\n/, 2), 'a publish is not passed on while the stream is open';
    publish_to($server, '/close');
    ok read_for($sock, \$buf, qr/data: item kept\n/), 'it comes when the stream ends' or diag $buf;
};
subtest "nginx's defaults, the app sending X-Accel-Buffering: no" => sub {
    check_stream($server, $defaults, '/events?accel') };
is $defaults->stop, 0, 'nginx stops cleanly';

is $server->stop, 0, 'serow stops cleanly';
done_testing;
