use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select;
use Time::HiRes ();
use Plack::Util ();
use Serow::Test qw(start_server raw_connect raw_request wait_until);
use Serow::Test::Holding qw(read_for);

# eg/live/live.psgi, the example of held server-sent events: a subscriber gets
# what POST /say publishes, and one that reconnects with Last-Event-ID gets
# what it missed, also when its stream was ended by a published close (the
# test adds GET /test/close for that).  t/app/live_browser.t does the same
# with a browser.

my $live = Plack::Util::load_psgi('eg/live/live.psgi');
my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/test/close') {
        Serow::Holding::publish({ channel => 'chat', http_stream => { close => 1 } });
        return [200, ['Content-Type' => 'text/plain'], ["closed\n"]];
    }
    return $live->($env);
};
my $server = start_server(app => $app, options => ['--workers', 2, '--grip']);
ok wait_until(sub { (raw_request($server, "GET / HTTP/1.0\r\n\r\n") // '') =~ /EventSource/ }),
    'the page, with its EventSource';


sub subscribe {
    my ($last) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: x\r\n"
        . (defined $last ? "Last-Event-ID: $last\r\n" : '') . "\r\n";
    my $buf = '';
    read_for($sock, \$buf, qr/:connected\n\n/);
    return ($sock, \$buf);
}

sub say {
    my ($text) = @_;
    my $body = "text=$text";
    my $res = raw_request($server, "POST /say HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        . "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " . length($body)
        . "\r\n\r\n$body");
    return $res =~ /published (\S+)/ ? $1 : undef;
}

# (The hold reaches the holder just after the head: a publish in between
# would miss a subscriber with no prev-id.  One with a prev-id the channel
# never had gets every kept item, so it sees the publish either way.)
my ($sock, $buf) = subscribe('0');
say('one');
ok read_for($sock, $buf, qr/data: one\n/), 'a subscriber gets a publish';
my ($id) = $$buf =~ /id: (\S+)\ndata: one\n/;
ok defined $id, 'with its id';
close $sock;
my $second = say('two');
my ($again, $again_buf) = subscribe($id);
ok read_for($again, $again_buf, qr/data: two\n/), 'a reconnect with Last-Event-ID gets what it missed';
unlike $$again_buf, qr/data: one\n/, '... and not what it had';

# A close ends the streams open when it is published; it is kept in the
# channel's items, but not replayed: a client coming back after it gets the
# items published after its last one, and stays.
raw_request($server, "GET /test/close HTTP/1.0\r\n\r\n");
ok read_for($again, $again_buf, qr/\r\n0\r\n\r\n\z/), 'a published close ends the stream';
my $third = say('three');
my ($back, $back_buf) = subscribe($second);
ok read_for($back, $back_buf, qr/data: three\n/), 'a reconnect after it gets the item published since';
my $four = say('four');
ok read_for($back, $back_buf, qr/data: four\n/), '... and is still held: it gets the next';
unlike $$back_buf, qr/\r\n0\r\n\r\n/, '... its stream not ended by the close';

is $server->stop, 0, 'clean stop';
done_testing;
