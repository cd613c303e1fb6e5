# --max-header-size and --max-headers: a larger header section or more fields
# get 431 (RFC 6585 5) and a closed connection, also when the section is still
# arriving, so that the server never buffers more than the limits.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_request raw_connect read_response read_until_close parse_response echo_app rejects
    answer_to_unfinished_head);

use constant { SIZE_LIMIT => 2048, COUNT_LIMIT => 10 };
my $server = start_server(app => echo_app(), options => ['--workers', 1,
    '--max-header-size', SIZE_LIMIT, '--max-headers', COUNT_LIMIT, '--header-timeout', 30]);

sub head_with_fields { "GET / HTTP/1.1\r\n" . join('', map { "$_\r\n" } @_) . "\r\n" }

subtest 'a header section within both limits is accepted' => sub {
    # Host, Connection and COUNT_LIMIT - 2 more: exactly COUNT_LIMIT fields.
    my @fields = ('Host: x', 'Connection: close', map { "X-F$_: v" } 1 .. COUNT_LIMIT - 2);
    my $res = parse_response(raw_request($server, head_with_fields(@fields)));
    is $res->{status}, 200, 'COUNT_LIMIT fields';
    # one field filling the section: "X-Big: " + value + CRLF and the others
    my $used = length("Host: x\r\nConnection: close\r\n") + length("X-Big: \r\n");
    $res = parse_response(raw_request($server,
        head_with_fields('Host: x', 'Connection: close', 'X-Big: ' . ('v' x (SIZE_LIMIT - $used)))));
    is $res->{status}, 200, 'a section of SIZE_LIMIT bytes';
};

rejects($server, head_with_fields('Host: x', map { "X-F$_: v" } 1 .. COUNT_LIMIT), 431,
    'one field too many');
rejects($server, head_with_fields('Host: x', map { "X-F$_: v" } 1 .. 500), 431, 'far too many fields');
rejects($server, head_with_fields('Host: x', 'X-Big: ' . ('v' x SIZE_LIMIT)), 431,
    'one field larger than the whole limit');
rejects($server, head_with_fields('Host: x', map { "X-F$_: " . ("v" x 250) } 1 .. 9), 431,
    'many fields together over the limit');
rejects($server, head_with_fields('Host: x', 'X-Big: ' . ('v' x 1_000_000)), 431,
    'a field of a megabyte');

subtest 'a field over the size limit is answered before it ends' => sub {
    my $res = answer_to_unfinished_head($server, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: v",
        'v' x (2 * SIZE_LIMIT));
    is $res && $res->{status}, 431;
    is lc(($res && $res->{headers}{connection}) // ''), 'close';
};

subtest 'a section over the size limit is answered before it ends' => sub {
    my $res = answer_to_unfinished_head($server, "GET / HTTP/1.1\r\nHost: x\r\n",
        join('', map { "X-F$_: " . ('v' x 250) . "\r\n" } 1 .. 9));
    is $res && $res->{status}, 431;
};

subtest 'too many fields are answered before the section ends' => sub {
    my $res = answer_to_unfinished_head($server, "GET / HTTP/1.1\r\nHost: x\r\n",
        join('', map { "X-F$_: v\r\n" } 1 .. COUNT_LIMIT));
    is $res && $res->{status}, 431;
};

is $server->stop, 0, 'the server stops cleanly';

subtest 'a --max-headers above 1024 is honoured as given' => sub {
    my $big = start_server(app => echo_app(), options => ['--workers', 1, '--max-headers', 2000]);
    my @fields = ('Host: x', 'Connection: close');
    my $res = parse_response(raw_request($big, head_with_fields(@fields, map { "X-$_: v" } 1 .. 1998)));
    is $res && $res->{status}, 200, '2000 fields are accepted';
    $res = parse_response(raw_request($big, head_with_fields(@fields, map { "X-$_: v" } 1 .. 1999)));
    is $res && $res->{status}, 431, '2001 are not';
    is $big->stop, 0, 'that server stops cleanly';
};
done_testing;
