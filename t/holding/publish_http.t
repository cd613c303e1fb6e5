use strict;
use warnings;
use Test::More;
use lib 't/lib';
use HTTP::Tiny ();
use JSON::PP ();
use Net::EmptyPort ();
use Serow::Test qw(start_server raw_connect read_response);
use Serow::Test::Holding qw(read_for);

# Pushpin's publish endpoint end to end: --publish-listen (which turns holding
# on by itself) takes {"items": [...]} and the holder delivers each item to
# the connections held on its channel: an http-stream item to every stream,
# an http-response item to a long poll.  A request with one bad item delivers
# nothing, not even its good items.

my $app = sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
        'Grip-Channel' => 'news'], [":ok\n\n"]] if $env->{PATH_INFO} eq '/events';
    return [200, ['Content-Type' => 'application/json', 'Grip-Hold' => 'response',
        'Grip-Channel' => 'inbox', 'Grip-Timeout' => 60], ['{"messages":[]}']]
        if $env->{PATH_INFO} eq '/poll';
    return [200, ['Content-Type' => 'text/plain'], ['plain']];
};
my $publish_port = Net::EmptyPort::empty_port();
my $server = start_server(app => $app,
    options => ['--workers', 1, '--publish-listen', "127.0.0.1:$publish_port"]);
ok $server->wait_for_log(qr/publishing on 127\.0\.0\.1:$publish_port/), 'the publish listener is open';

my $http = HTTP::Tiny->new(timeout => 30);
my $json = JSON::PP->new->canonical;
sub publish {
    my (@items) = @_;
    return $http->request('POST', "http://127.0.0.1:$publish_port/publish/",
        { content => $json->encode({ items => \@items }), headers => { 'Content-Type' => 'application/json' } });
}

my @subscribers = map {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    read_for($sock, \$buf, qr/:ok\n\n\r\n/);
    [$sock, \$buf];
} 1 .. 3;
is scalar(grep { ${ $_->[1] } =~ /:ok\n\n/ } @subscribers), 3, 'three streams held';

my $res = publish({ channel => 'news', id => '1', formats => { 'http-stream' => { content => "data: one\n\n" } } });
is $res->{status}, 200, 'a publish over HTTP: 200';
is scalar(grep { read_for($_->[0], $_->[1], qr/data: one\n\n/) } @subscribers), 3,
    'every stream gets it';

$res = publish({ channel => 'news', 'http-stream' => { content => "data: bad\n\n" } },
    { channel => 'news', formats => {} });
is $res->{status}, 400, 'a request with a bad item: 400';
like $res->{content}, qr/^items\[1\]: no formats/, 'naming the item (its index in items)';
$res = publish({ channel => 'news', 'http-stream' => { content => "data: two\n\n" } });
is $res->{status}, 200, 'then a good one';
is scalar(grep { read_for($_->[0], $_->[1], qr/data: two\n\n/) } @subscribers), 3, 'every stream gets it';
is scalar(grep { ${ $_->[1] } =~ /data: bad/ } @subscribers), 0,
    'and none got the good item of the refused request';

my $poll = raw_connect($server);
syswrite $poll, "GET /poll HTTP/1.1\r\nHost: x\r\n\r\n";
ok Serow::Test::wait_until(sub {
    my $s = Serow::Test::http_get($server, '/plain');
    # held: the long poll's request was answered by no byte yet, and a worker is free
    $s && $s->{status} == 200 && !IO::Select->new($poll)->can_read(0);
}), 'the long poll waits, a worker free';
# The hold reaches the holder after the worker has answered the app's part:
# publish until the poll is answered (each publish to an unheld channel reaches nobody).
my $answer;
ok Serow::Test::wait_until(sub {
    publish({ channel => 'inbox', formats => { 'http-response' => { code => 200,
        headers => { 'Content-Type' => 'application/json' }, body => '{"messages":[1]}' } } });
    IO::Select->new($poll)->can_read(0.2) and $answer = read_response($poll);
    $answer;
}), 'a long poll is answered by an http-response item';
is $answer && $answer->{status}, 200, 'its code';
is $answer && $answer->{body}, '{"messages":[1]}', 'its body';

$_->[0]->close for @subscribers;
is $server->stop, 0, 'the server stops cleanly';
done_testing;
