# What the app returns is checked before a byte goes out: a bad status, bad
# header names or values (CR, LF, NUL, undef, wide characters), an odd
# header list, a broken Content-Length or an app that dies all give a logged
# 500, never a broken response, and the worker goes on serving.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response parse_response raw_request);

my %responses = (
    'status undef'          => [undef, ['Content-Type' => 'text/plain'], ['x']],
    'status word'           => ['OK', ['Content-Type' => 'text/plain'], ['x']],
    'status with reason'    => ['200 OK', ['Content-Type' => 'text/plain'], ['x']],
    'status 99'             => [99, ['Content-Type' => 'text/plain'], ['x']],
    'status 600'            => [600, ['Content-Type' => 'text/plain'], ['x']],
    'status 2000'           => [2000, ['Content-Type' => 'text/plain'], ['x']],
    'status 200.5'          => [200.5, ['Content-Type' => 'text/plain'], ['x']],
    'status 100 as final'   => [100, [], []],
    'status 103 as final'   => [103, [], []],
    'headers not an array'  => [200, { 'Content-Type' => 'text/plain' }, ['x']],
    'headers odd'           => [200, ['Content-Type' => 'text/plain', 'X-Lonely'], ['x']],
    'name undef'            => [200, [undef, 'x'], ['x']],
    'name empty'            => [200, ['' => 'x'], ['x']],
    'name with space'       => [200, ['X Foo' => 'x'], ['x']],
    'name with colon'       => [200, ['X-Foo:' => 'x'], ['x']],
    'name with CR LF'       => [200, ["X-Foo\r\nX-Injected" => 'x'], ['x']],
    'name with NUL'         => [200, ["X-Foo\0" => 'x'], ['x']],
    'name wide'             => [200, ["X-F\x{263a}o" => 'x'], ['x']],
    'value undef'           => [200, ['X-Foo' => undef], ['x']],
    'value with CR LF'      => [200, ['X-Foo' => "a\r\nX-Injected: 1"], ['x']],
    'value with LF'         => [200, ['X-Foo' => "a\nb"], ['x']],
    'value with CR'         => [200, ['X-Foo' => "a\rb"], ['x']],
    'value with NUL'        => [200, ['X-Foo' => "a\0b"], ['x']],
    'value with DEL'        => [200, ['X-Foo' => "a\x7fb"], ['x']],
    'value with ESC'        => [200, ['X-Foo' => "a\x1bb"], ['x']],
    'value wide'            => [200, ['X-Foo' => "\x{263a}"], ['x']],
    'Content-Length word'   => [200, ['Content-Length' => 'ten'], ['x']],
    'Content-Length signed' => [200, ['Content-Length' => '-1'], ['x']],
    'Content-Length twice'  => [200, ['Content-Length' => 1, 'Content-Length' => 1], ['x']],
    'Content-Length and Transfer-Encoding' =>
        [200, ['Content-Length' => 1, 'Transfer-Encoding' => 'chunked'], ['x']],
    'body wide'             => [200, ['Content-Type' => 'text/plain'], ["caf\x{e9} \x{263a}"]],
);

my $app = sub {
    my ($env) = @_;
    my $case = $env->{HTTP_X_CASE} // '';
    if ($case eq 'dies') {
        die "deliberate\n";
    }
    if ($case eq 'returns a string') {
        return 'hello';
    }
    if ($case eq 'returns a short array') {
        return [200];
    }
    if ($case eq 'pid') {
        return [200, ['Content-Type' => 'text/plain'], [$$]];
    }
    if ($case eq 'latin-1 characters') {
        my $s = "caf\x{e9}";
        utf8::upgrade($s);
        my $h = "\x{e9}t\x{e9}";
        utf8::upgrade($h);
        return [200, ['Content-Type' => 'text/plain', 'X-Summer' => $h], [$s]];
    }
    if ($case eq 'valid odd headers') {
        return [200, ['Content-Type' => 'text/plain', 'X-Tab' => "a\tb", 'X-Empty' => '',
                      "X-Token!#\$%&'*+.^_`|~" => 'ok', 'X-Obs' => "\xe9\xff"], ['ok']];
    }
    my $res = $responses{$case} or return [404, ['Content-Type' => 'text/plain'], ['?']];
    return [@$res];
};

my $server = start_server(app => $app, options => ['--workers', 1]);

# A keep-alive request: the server must close the connection itself after
# an error.  Returns the response and what followed it until the close.
sub request {
    my ($case) = @_;
    my $raw = raw_request($server, "GET / HTTP/1.1\r\nHost: x\r\nX-Case: $case\r\n\r\n");
    my $res = Serow::Test::parse_response_head($raw) or return undef;
    my $len = $res->{headers}{'content-length'} // 0;
    $res->{body} = substr($raw, $res->{head_length}, $len);
    $res->{rest} = substr($raw, $res->{head_length} + $len);
    return $res;
}

sub worker_pid {
    my $raw = raw_request($server, "GET / HTTP/1.1\r\nHost: x\r\nX-Case: pid\r\nConnection: close\r\n\r\n");
    return parse_response($raw)->{body};
}

my $pid = worker_pid();
ok $pid, 'the worker answers';

for my $case ((sort keys %responses), 'dies', 'returns a string', 'returns a short array') {
    subtest $case => sub {
        my $res = request($case);
        ok $res, 'a complete response';
        is $res->{status}, 500, 'status 500';
        is $res->{rest}, '', 'nothing after it';
        is lc($res->{headers}{connection} // ''), 'close', 'the connection is closed';
        unlike join("\n", map { "$_->[0]: $_->[1]" } @{ $res->{header_list} }), qr/X-Injected|X-Foo/i,
            'none of the app\'s headers went out';
        is worker_pid(), $pid, 'the same worker answers the next request';
    };
}

like $server->log, qr/invalid response header 'X-Foo': the value is undefined or holds CR, LF, NUL/,
    'a bad value is logged with its header name';
like $server->log, qr/invalid status in the response/, 'a bad status is logged';
like $server->log, qr/deliberate/, 'the app\'s error is logged';
like $server->log, qr/wide character/, 'wide characters are logged';

subtest 'Latin-1 character strings go out as Latin-1 bytes' => sub {
    my $res = parse_response(raw_request($server,
        "GET / HTTP/1.1\r\nHost: x\r\nX-Case: latin-1 characters\r\nConnection: close\r\n\r\n"));
    is $res->{status}, 200;
    is $res->{body}, "caf\xe9";
    is $res->{headers}{'content-length'}, 4;
    is $res->{headers}{'x-summer'}, "\xe9t\xe9";
};

subtest 'what the rules allow goes out as given' => sub {
    my $res = parse_response(raw_request($server,
        "GET / HTTP/1.1\r\nHost: x\r\nX-Case: valid odd headers\r\nConnection: close\r\n\r\n"));
    is $res->{status}, 200;
    my %h = map { @$_ } @{ $res->{header_list} };
    is $h{'X-Tab'}, "a\tb", 'a tab in a value';
    is $h{'X-Empty'}, '', 'an empty value';
    is $h{"X-Token!#\$%&'*+.^_`|~"}, 'ok', 'every token character in a name';
    is $h{'X-Obs'}, "\xe9\xff", 'obs-text bytes in a value';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
