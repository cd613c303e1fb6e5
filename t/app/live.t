use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select;
use Time::HiRes ();
use Serow::Test qw(start_server raw_connect raw_request wait_until);
use Serow::Test::Holding qw(read_for);

# eg/live/live.psgi, the example of held server-sent events: a subscriber gets
# what POST /say publishes, and one that reconnects with Last-Event-ID gets
# what it missed.

my $server = start_server(app_file => 'eg/live/live.psgi', options => ['--workers', 2, '--grip']);
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

is $server->stop, 0, 'clean stop';
done_testing;
