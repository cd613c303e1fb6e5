# Pushpin's publish JSON read and checked into the items Serow::Holding::publish
# takes (lib/Serow/Publish/Items.pm): a table of good requests and the items
# they become, and a table of bad ones with their status and reason.
use strict;
use warnings;
use Test::More;
use JSON::PP ();
use MIME::Base64 qw(encode_base64);
use Serow::Publish::Items ();

my $MAX_ITEM = 1000;
my $json = JSON::PP->new->utf8->canonical;

sub parse { Serow::Publish::Items::parse(ref $_[0] ? $json->encode($_[0]) : $_[0], max_item => $MAX_ITEM) }
sub items { +{ items => [@_] } }

# [what, request (a structure, or the body's bytes), the items expected]
my @good = (
    ['stream content under formats', items({ channel => 'news', formats => { 'http-stream' => { content => "data: 1\n\n" } } }),
        [{ channel => 'news', http_stream => { content => "data: 1\n\n" } }]],
    ['formats beside channel (the short form)', items({ channel => 'news', 'http-stream' => { content => 'x' } }),
        [{ channel => 'news', http_stream => { content => 'x' } }]],
    ['id and prev-id', items({ channel => 'c', id => '2', 'prev-id' => '1', 'http-stream' => { content => 'x' } }),
        [{ channel => 'c', id => '2', prev_id => '1', http_stream => { content => 'x' } }]],
    ['content-bin is base64', items({ channel => 'c', 'http-stream' => { 'content-bin' => encode_base64("\0\xff", '') } }),
        [{ channel => 'c', http_stream => { content => "\0\xff" } }]],
    ['content as UTF-8', qq({"items":[{"channel":"c","http-stream":{"content":"\xc3\xa9\\u00e9"}}]}),
        [{ channel => 'c', http_stream => { content => "\xc3\xa9\xc3\xa9" } }]],
    ['close', items({ channel => 'c', 'http-stream' => { action => 'close' } }),
        [{ channel => 'c', http_stream => { close => 1 } }]],
    ['http-response with defaults', items({ channel => 'c', 'http-response' => {} }),
        [{ channel => 'c', http_response => { code => 200, reason => '', headers => [], body => '' } }]],
    ['http-response whole, headers as an object (sorted)', items({ channel => 'c', 'http-response' => {
            code => 404, reason => 'Gone Fishing', headers => { 'X-B' => '2', 'Content-Type' => 'text/plain' }, body => 'no' } }),
        [{ channel => 'c', http_response => { code => 404, reason => 'Gone Fishing',
            headers => [['Content-Type', 'text/plain'], ['X-B', '2']], body => 'no' } }]],
    ['http-response headers as pairs, body-bin', items({ channel => 'c', 'http-response' => {
            headers => [['X-A', '1'], ['X-A', '2']], 'body-bin' => encode_base64('hi', '') } }),
        [{ channel => 'c', http_response => { code => 200, reason => '', headers => [['X-A', '1'], ['X-A', '2']], body => 'hi' } }]],
    ['ws-message text and binary', items({ channel => 'c', 'ws-message' => { content => 't' } },
            { channel => 'd', 'ws-message' => { 'content-bin' => 'AA==' } }, { channel => 'e', 'ws-message' => { content => 'b', type => 'binary' } }),
        [{ channel => 'c', ws_message => { content => 't', type => 'text' } },
         { channel => 'd', ws_message => { content => "\0", type => 'binary' } },
         { channel => 'e', ws_message => { content => 'b', type => 'binary' } }]],
    ['every format at once', items({ channel => 'c', formats => { 'http-stream' => { content => 's' },
            'http-response' => { body => 'r' }, 'ws-message' => { content => 'w' } } }),
        [{ channel => 'c', http_stream => { content => 's' }, ws_message => { content => 'w', type => 'text' },
            http_response => { code => 200, reason => '', headers => [], body => 'r' } }]],
    ['an unknown format beside a known one is ignored', items({ channel => 'c', formats => { 'http-stream' => { content => 's' }, 'x-other' => 5 } }),
        [{ channel => 'c', http_stream => { content => 's' } }]],
    ['only an unknown format: accepted, no format', items({ channel => 'c', formats => { 'x-other' => {} } }),
        [{ channel => 'c' }]],
    ['only an unknown format, short form', items({ channel => 'c', 'x-other' => {} }), [{ channel => 'c' }]],
    ['meta is ignored', items({ channel => 'c', meta => { a => 'b' }, 'http-stream' => { content => 'x' } }),
        [{ channel => 'c', http_stream => { content => 'x' } }]],
    ['no items at all', items(), []],
    ['an item at the size limit', items({ channel => 'c', 'http-stream' => { content => 'x' x ($MAX_ITEM - 1) } }),
        [{ channel => 'c', http_stream => { content => 'x' x ($MAX_ITEM - 1) } }]],
    ['a channel name of 128 bytes', items({ channel => 'n' x 128, 'http-stream' => { content => 'x' } }),
        [{ channel => 'n' x 128, http_stream => { content => 'x' } }]],
);

for my $case (@good) {
    my ($what, $request, $expected) = @$case;
    my ($items, $status, $why) = parse($request);
    is_deeply $items, $expected, $what or diag "refused: $status $why";
}

# [what, request, status, the reason (a pattern)]
my $stream = { content => 'x' };
my @bad = (
    ['malformed JSON', '{"items": [', 400, qr/^malformed JSON/],
    ['not JSON at all', 'hello', 400, qr/^malformed JSON/],
    ['an empty body', '', 400, qr/^malformed JSON/],
    ['JSON that is not an object', '[1]', 400, qr/not a JSON object/],
    ['no items', {}, 400, qr/no "items" array/],
    ['items not an array', { items => {} }, 400, qr/no "items" array/],
    ['an item not an object', items('x'), 400, qr/^items\[0\]: not a JSON object/],
    ['no channel', items({ 'http-stream' => $stream }), 400, qr/^items\[0\]: no "channel"/],
    ['an empty channel', items({ channel => '', 'http-stream' => $stream }), 400, qr/valid channel name/],
    ['a channel with a space', items({ channel => 'a b', 'http-stream' => $stream }), 400, qr/valid channel name/],
    ['a channel with a comma', items({ channel => 'a,b', 'http-stream' => $stream }), 400, qr/valid channel name/],
    ['a channel with a quote', items({ channel => 'a"b', 'http-stream' => $stream }), 400, qr/valid channel name/],
    ['a channel over 128 bytes', items({ channel => 'n' x 129, 'http-stream' => $stream }), 400, qr/valid channel name/],
    ['a channel not ASCII', items({ channel => "caf\x{e9}", 'http-stream' => $stream }), 400, qr/valid channel name/],
    ['a channel that is a number', qq({"items":[{"channel":5,"http-stream":{"content":"x"}}]}), 400, qr/valid channel name/],
    ['an id with a newline', items({ channel => 'c', id => "a\nb", 'http-stream' => $stream }), 400, qr/"id" is not a valid item id/],
    ['an empty id', items({ channel => 'c', id => '', 'http-stream' => $stream }), 400, qr/"id" is not a valid item id/],
    ['an id over 128 bytes', items({ channel => 'c', id => 'i' x 129, 'http-stream' => $stream }), 400, qr/"id"/],
    ['a prev-id that is a number', qq({"items":[{"channel":"c","prev-id":3,"http-stream":{"content":"x"}}]}), 400, qr/"prev-id"/],
    ['no formats (short form)', items({ channel => 'c' }), 400, qr/^items\[0\]: no formats/],
    ['an empty formats object', items({ channel => 'c', formats => {} }), 400, qr/no formats/],
    ['formats not an object', items({ channel => 'c', formats => [] }), 400, qr/"formats" is not a JSON object/],
    ['a known format not an object', items({ channel => 'c', 'http-stream' => 'x' }), 400, qr/"http-stream" is not a JSON object/],
    ['a stream with no content', items({ channel => 'c', 'http-stream' => {} }), 400, qr/http-stream: no "content"/],
    ['content and content-bin both', items({ channel => 'c', 'http-stream' => { content => 'a', 'content-bin' => 'YQ==' } }), 400, qr/both/],
    ['content not a string', items({ channel => 'c', 'http-stream' => { content => [] } }), 400, qr/"content" is not a string/],
    ['content-bin not base64', items({ channel => 'c', 'http-stream' => { 'content-bin' => 'a*b=' } }), 400, qr/not base64/],
    ['content-bin badly padded', items({ channel => 'c', 'http-stream' => { 'content-bin' => 'YQ' } }), 400, qr/not base64/],
    ['an unknown action', items({ channel => 'c', 'http-stream' => { action => 'hint' } }), 400, qr/action "hint" is not supported/],
    ['code not a number', items({ channel => 'c', 'http-response' => { code => 'abc' } }), 400, qr/"code"/],
    ['code under 100', items({ channel => 'c', 'http-response' => { code => 99 } }), 400, qr/"code"/],
    ['code over 999', items({ channel => 'c', 'http-response' => { code => 1000 } }), 400, qr/"code"/],
    ['a reason with CR LF', items({ channel => 'c', 'http-response' => { reason => "OK\r\nX: y" } }), 400, qr/"reason"/],
    ['a header value with LF', items({ channel => 'c', 'http-response' => { headers => { 'X-A' => "a\nb" } } }), 400, qr/header X-A/],
    ['a header value with CR', items({ channel => 'c', 'http-response' => { headers => [['X-A', "a\rb"]] } }), 400, qr/header X-A/],
    ['a header value with NUL', items({ channel => 'c', 'http-response' => { headers => [['X-A', "a\0b"]] } }), 400, qr/header X-A/],
    ['a header name with a space', items({ channel => 'c', 'http-response' => { headers => [['X A', 'b']] } }), 400, qr/not a token/],
    ['a header name with a colon', items({ channel => 'c', 'http-response' => { headers => { 'X:A' => 'b' } } }), 400, qr/not a token/],
    ['an empty header name', items({ channel => 'c', 'http-response' => { headers => { '' => 'b' } } }), 400, qr/not a token/],
    ['a header that is not a pair', items({ channel => 'c', 'http-response' => { headers => [['X-A']] } }), 400, qr/pair/],
    ['headers that are a string', items({ channel => 'c', 'http-response' => { headers => 'X-A: b' } }), 400, qr/neither/],
    ['too many headers', items({ channel => 'c', 'http-response' => { headers => [map { ["X-$_", 'v'] } 1 .. 33] } }), 400, qr/more than 32 headers/],
    ['a ws-message of another type', items({ channel => 'c', 'ws-message' => { content => 'x', type => 'ping' } }), 400, qr/"type"/],
    ['an item over the size limit', items({ channel => 'c', 'http-stream' => { content => 'x' x $MAX_ITEM } }), 413, qr/more than the limit of $MAX_ITEM/],
    ['one bad item among good ones refuses them all',
        items({ channel => 'a', 'http-stream' => $stream }, { channel => 'b', 'http-stream' => $stream }, { channel => 'bad name', 'http-stream' => $stream }),
        400, qr/^items\[2\]: /],
);

for my $case (@bad) {
    my ($what, $request, $status, $reason) = @$case;
    my ($items, $got_status, $why) = parse($request);
    ok !$items, "$what: refused" or next;
    is $got_status, $status, "$what: $status";
    like $why, $reason, "$what: the reason";
}

# has_format: only an item with a format Serow delivers is published.
my ($items) = parse(items({ channel => 'a', 'http-stream' => $stream }, { channel => 'b', 'x-other' => {} }));
is_deeply [map { Serow::Publish::Items::has_format($_) } @$items], [1, 0], 'has_format';

# The rule for names and ids is grip_instruct.c's, reached through the XS:
# a few of its edges, so that a rule changed there shows here.
my %name = ('a' => 1, '!' => 1, '~' => 1, 'a:b/c.d-e_f' => 1, ' ' => 0, "\x7f" => 0, 'a;b' => 0, 'a=b' => 0, 'a\\b' => 0, "\xc3\xa9" => 0);
is Serow::Publish::Items::channel_name_ok($_), $name{$_}, "channel name '$_'" for sort keys %name;
my %id = ('1' => 1, 'a b' => 1, "\xc3\xa9" => 1, "a\tb" => 0, "a\x7f" => 0, '' => 0);
is Serow::Publish::Items::id_ok($_), $id{$_}, "id '$_'" for sort keys %id;

done_testing;
