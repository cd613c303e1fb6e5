use strict;
use warnings;
use Test::More;
use lib 't/lib';
use IO::Select;
use Time::HiRes ();
use JSON::PP ();
use Plack::Middleware::SerowStatus ();
use Serow::Test qw(start_server raw_connect read_response read_until_close http_get wait_until);
use Serow::Test::Holding qw(server_status);

# --grip: long polls (Grip-Hold: response) answered by a publish and at
# Grip-Timeout with the app's own response; the connection then serves its
# next request.  A stream ended by a published close; an HTTP/1.0 stream;
# a malformed instruction is the app's bug (500, logged); Grip-* headers
# without Grip-Hold are stripped.

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path =~ m{^/poll/(\w+)$}) {
        return [200, ['Content-Type' => 'application/json', 'Grip-Hold' => 'response',
            'Grip-Channel' => "inbox-$1", 'Grip-Timeout' => 5, 'Grip-Status' => '204'],
            ['{"messages":[]}']];
    }
    if ($path eq '/answer') {
        Serow::Holding::publish({ channel => 'inbox-a', id => 'm1',
            http_response => { code => 200, headers => [['Content-Type', 'application/json'],
                ['X-From', 'publish']], body => '{"messages":["hi"]}' } });
        return [200, [], ['ok']];
    }
    if ($path eq '/stream') {
        return [200, ['Content-Type' => 'text/plain', 'Grip-Hold' => 'stream',
            'Grip-Channel' => 'feed', 'Content-Length' => 5], ["first"]];
    }
    if ($path eq '/feed') {
        Serow::Holding::publish({ channel => 'feed', http_stream => { content => 'more' } });
        Serow::Holding::publish({ channel => 'feed', http_stream => { close => 1 } });
        return [200, [], ['ok']];
    }
    if ($path eq '/writer') {
        return sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain', 'Grip-Hold' => 'stream',
                'Grip-Channel' => 'feed']]);
            $w->write('first');
            $w->close;
        };
    }
    if ($path eq '/writer-poll') {
        return sub {
            my $w = eval { $_[0]->([200, ['Grip-Hold' => 'response', 'Grip-Channel' => 'x']]) };
            $_[0]->([200, [], ["refused: $@"]]) unless $w;
        };
    }
    if ($path eq '/bad') {
        return [200, ['Grip-Hold' => 'stream', 'Grip-Channel' => 'bad"name'], ['x']];
    }
    if ($path eq '/status-only') {
        return [200, ['Content-Type' => 'text/plain', 'Grip-Status' => '200'], ['plain']];
    }
    if ($path eq '/publish-bad') {
        my $ok = eval { Serow::Holding::publish({ channel => 'a b', http_stream => { content => 'x' } }) };
        return [200, [], [$ok ? 'published' : "refused: $@"]];
    }
    return [200, ['Content-Type' => 'text/plain'], ['plain']];
};
my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app), options => ['--workers', 2, '--grip', '--access-log', '-', '--access-log-format', 'access: %r %>s %b %D']);
$server->wait_until_serving('/plain');

# Held connections now (a publish before the hold arrives reaches nobody).
sub held { server_status($server)->{grip_held} // -1 }

# a long poll answered by a publish
my $poll = raw_connect($server);
syswrite $poll, "GET /poll/a HTTP/1.1\r\nHost: x\r\n\r\n";
ok wait_until(sub { held() == 1 }), 'a long poll is held';
my $t = http_get($server, '/answer');
is $t && $t->{status}, 200, 'publish an http-response';
my $res = read_response($poll);
is $res && $res->{status}, 200, 'the long poll is answered by the publish';
is $res && $res->{body}, '{"messages":["hi"]}', '... with its body';
is $res && $res->{headers}{'x-from'}, 'publish', '... and its headers';
ok $res && !grep(/^grip-/, keys %{ $res->{headers} }), 'no Grip-* header';
# the same connection serves its next request (an idle keep-alive connection again)
syswrite $poll, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n";
$res = read_response($poll);
is $res && $res->{body}, 'plain', 'the connection then serves another request';

ok $server->wait_for_log(qr{access: GET /poll/a HTTP/1\.1 200 \d+ \d+}, undef, 0),
    "the holder's access log line when the hold ends: the published answer's status, bytes, duration";
ok $server->wait_for_log(qr{access: GET /poll/a HTTP/1\.1 204 - \d+}, undef, 0),
    "and the worker's, when the app answered (Grip-Status, nothing written)";

# a long poll answered at Grip-Timeout (its minimum, 5 s: time passes on purpose)
my $slow = raw_connect($server);
syswrite $slow, "GET /poll/b HTTP/1.1\r\nHost: x\r\n\r\n";
$res = read_response($slow, timeout => 30);
is $res && $res->{status}, 204, 'answered at Grip-Timeout with Grip-Status';
ok $res && !grep(/^grip-/, keys %{ $res->{headers} }), 'no Grip-* header in the timeout answer';
syswrite $slow, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n";
$res = read_response($slow);
is $res && $res->{body}, 'plain', 'and the connection serves the next request';

# a stream ended by a published close (the app's Content-Length dropped)
my $s = raw_connect($server);
syswrite $s, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
my $buf = '';
my $sel = IO::Select->new($s);
sysread($s, $buf, 65536, length $buf) while $buf !~ /first\r\n/ && $sel->can_read(10);
unlike $buf, qr/Content-Length/i, "a stream's head has no Content-Length";
ok wait_until(sub { held() == 1 }), 'the stream is held';
http_get($server, '/feed');
my ($rest, $closed) = read_until_close($s);
$buf .= $rest;
like $buf, qr/\r\n\r\n5\r\nfirst\r\n4\r\nmore\r\n0\r\n\r\n\z/, 'a published close ends the chunked body';
ok $closed, '... and the connection';

# a stream started with a streaming writer: its close leaves the body to the holder
$s = raw_connect($server);
syswrite $s, "GET /writer HTTP/1.1\r\nHost: x\r\n\r\n";
$buf = '';
$sel = IO::Select->new($s);
sysread($s, $buf, 65536, length $buf) while $buf !~ /first\r\n/ && $sel->can_read(10);
unlike $buf, qr/^Grip-/mi, 'writer: no Grip-* header';
ok wait_until(sub { held() == 1 }), 'writer: the stream is held after the close';
http_get($server, '/feed');
($rest, $closed) = read_until_close($s);
like $buf . $rest, qr/\r\n\r\n5\r\nfirst\r\n4\r\nmore\r\n0\r\n\r\n\z/, 'writer: what is published follows';
$res = http_get($server, '/writer-poll');
like $res && $res->{body}, qr/^refused: .*Grip-Hold: response needs the whole response/,
    'writer: a response hold is refused (its answer must be whole)';

# HEAD: a stream hold has no body to stream: an ordinary response
($rest, $closed) = read_until_close(do {
    my $h = raw_connect($server);
    syswrite $h, "HEAD /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    $h;
});
like $rest, qr{\AHTTP/1\.1 200 }, 'HEAD of a stream: its head';
unlike $rest, qr/first|^Grip-/mi, '... no body, no Grip-* header';
ok $closed, '... and the response ends';

# HTTP/1.0: close-delimited
my $old = raw_connect($server);
syswrite $old, "GET /stream HTTP/1.0\r\n\r\n";
$buf = '';
$sel = IO::Select->new($old);
sysread($old, $buf, 65536, length $buf) while $buf !~ /first/ && $sel->can_read(10);
unlike $buf, qr/Transfer-Encoding/i, 'HTTP/1.0: no chunked framing';
ok wait_until(sub { held() == 1 }), 'the stream is held';
http_get($server, '/feed');
($rest, $closed) = read_until_close($old);
like $buf . $rest, qr/\r\n\r\nfirstmore\z/, 'HTTP/1.0: the body is the bytes, ended by the close';
ok $closed, '... of the connection';

# the app's bugs
$res = http_get($server, '/bad');
is $res && $res->{status}, 500, 'a malformed Grip-* instruction: 500';
ok $server->wait_for_log(qr/invalid Grip-\* instruction in the response/), '... logged with the reason';
$res = http_get($server, '/status-only');
is $res && $res->{body}, 'plain', 'Grip-* without Grip-Hold: an ordinary response';
ok $res && !exists $res->{headers}{'grip-status'}, '... with the Grip-* headers stripped';
$res = http_get($server, '/publish-bad');
like $res && $res->{body}, qr/^refused: Serow::Holding::publish: /, 'a bad item dies with the reason';

is $server->stop, 0, 'clean stop';
done_testing;
