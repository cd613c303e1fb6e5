# Pipelining (RFC 9112 9.3.2): requests sent back to back in one write are
# all answered, in order; the bytes after a request's body (Content-Length or
# chunked) are the next request, whatever the method.
use strict;
use warnings;
use Test::More;
use JSON::PP ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close parse_response echo_app send_all);

my $server = start_server(app => echo_app(), options => ['--workers', 2, '--keepalive-timeout', 30]);

my @requests = (
    ["GET /get?a=1 HTTP/1.1\r\nHost: x\r\n\r\n", 'GET', '/get', ''],
    ["HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n", 'HEAD', '/head', undef],
    ["POST /post HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world", 'POST', '/post', 'hello world'],
    ["PUT /put HTTP/1.1\r\nHost: x\r\nContent-Length: 31\r\n\r\nGET /not-a-request HTTP/1.1\r\n\r\n",
        'PUT', '/put', "GET /not-a-request HTTP/1.1\r\n\r\n"],
    ["POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nchunky\r\n5;ext=1\r\n body\r\n0\r\nX-Trailer: t\r\n\r\n",
        'POST', '/chunked', 'chunky body'],
    ["PATCH /patch HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nP", 'PATCH', '/patch', 'P'],
    ["DELETE /delete HTTP/1.1\r\nHost: x\r\n\r\n", 'DELETE', '/delete', ''],
    ["OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 'OPTIONS', '*', ''],
    ["POST /empty HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 'POST', '/empty', ''],
    ["PUT /chunked-empty HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 'PUT', '/chunked-empty', ''],
    ["TRACE /trace HTTP/1.1\r\nHost: x\r\n\r\n", 'TRACE', '/trace', ''],
    ["GET /last HTTP/1.1\r\nHost: x\r\n\r\n", 'GET', '/last', ''],
);

sub check_responses {
    my ($responses) = @_;
    is scalar @$responses, scalar @requests, 'one response per request';
    for my $i (0 .. $#requests) {
        my (undef, $method, $path, $body) = @{ $requests[$i] };
        my $res = $responses->[$i];
        is $res && $res->{status}, 200, "$method $path: 200";
        next if $method eq 'HEAD';
        my $seen = eval { JSON::PP::decode_json($res->{body}) } || {};
        is $seen->{method}, $method, "$method $path: answered in order";
        # OPTIONS *: PATH_INFO is empty (PSGI), REQUEST_URI keeps the "*"
        is $path eq '*' ? $seen->{uri} : $seen->{path}, $path, "$method $path: its path";
        is $seen->{body}, $body, "$method $path: its body";
    }
}

subtest 'every method, in one write, answered in order' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, join '', map { $_->[0] } @requests;
    my $buf = '';
    my @responses;
    for my $req (@requests) {
        push @responses, read_response($sock, buffer => \$buf, head_request => $req->[1] eq 'HEAD');
    }
    check_responses(\@responses);
};

subtest 'the same ending with Connection: close: nothing more after the last' => sub {
    my @without_head = grep { $_->[1] ne 'HEAD' } @requests;
    (my $last = $without_head[-1][0]) =~ s/\r\n\r\n\z/\r\nConnection: close\r\n\r\n/;
    my $sock = raw_connect($server);
    syswrite $sock, join('', map { $_->[0] } @without_head[0 .. $#without_head - 1]) . $last
        . "GET /after-close HTTP/1.1\r\nHost: x\r\n\r\n";
    my ($raw, $closed) = read_until_close($sock);
    ok $closed, 'closed after the last response';
    my @responses = parse_response($raw);
    is_deeply [map { my $seen = eval { JSON::PP::decode_json($_->{body}) } || {};
                     $seen->{method} && $seen->{method} eq 'OPTIONS' ? $seen->{uri} : $seen->{path} } @responses],
        [map { $_->[2] } @without_head], 'all answered in order, the request after close not at all';
    is lc $responses[-1]{headers}{connection}, 'close';
};

subtest 'a request trickled in across many writes' => sub {
    my $sock = raw_connect($server);
    my $all = join '', map { $_->[0] } @requests;
    my $buf = '';
    my @responses;
    # in pieces of 7 bytes: heads, bodies and chunk lines split everywhere
    for (my $i = 0; $i < length $all; $i += 7) {
        syswrite $sock, substr($all, $i, 7);
    }
    for my $req (@requests) {
        push @responses, read_response($sock, buffer => \$buf, head_request => $req->[1] eq 'HEAD');
    }
    check_responses(\@responses);
};

subtest 'large bodies spanning many reads, each followed by the next request' => sub {
    my $big = join '', map { sprintf "%07d\n", $_ } 1 .. 40_000; # 320 KB
    my $chunked = join('', map { sprintf("%x\r\n", length $_) . "$_\r\n" } unpack '(a50000)*', $big) . "0\r\n\r\n";
    my $sock = raw_connect($server);
    my $buf = '';
    send_all($sock, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($big) . "\r\n\r\n$big"
        . "POST /big-chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n$chunked"
        . "GET /after HTTP/1.1\r\nHost: x\r\n\r\n", buffer => \$buf);
    my @seen = map { my $r = read_response($sock, buffer => \$buf); $r && JSON::PP::decode_json($r->{body}) } 1 .. 3;
    is $seen[0]{path}, '/big';
    ok $seen[0]{body} eq $big, 'the Content-Length body arrived whole';
    is $seen[1]{path}, '/big-chunked';
    ok $seen[1]{body} eq $big, 'the chunked body arrived whole';
    is $seen[1]{content_length}, length $big, 'with its decoded length';
    is $seen[2]{path}, '/after', 'the request after them is answered';
};

subtest 'many requests in one write' => sub {
    my $n = 200;
    my $sock = raw_connect($server);
    my $buf = '';
    send_all($sock, join('', map { "POST /$_ HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($_) . "\r\n\r\n$_" } 1 .. $n),
        buffer => \$buf);
    my @bodies = map { my $r = read_response($sock, buffer => \$buf); $r && JSON::PP::decode_json($r->{body})->{body} } 1 .. $n;
    is_deeply \@bodies, [1 .. $n], "$n answers in order";
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
