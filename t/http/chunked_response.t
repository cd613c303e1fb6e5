# Response framing (RFC 9112 6, 7.1): a body whose length the server knows
# (an array, a file) gets a Content-Length; one it does not know (a streaming
# writer, a handle that is no file) is chunked for HTTP/1.1, ended by the
# close for HTTP/1.0.  Either way the connection stays usable when it can.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response read_until_close parse_response raw_request);

my $file = File::Temp->new;
print $file "from a file\n" x 3;
close $file;
my $file_name = $file->filename;

{
    package Serow::Test::LineHandle; # a body object with getline/close, not a file
    sub new { my ($class, @lines) = @_; bless [@lines], $class }
    sub getline { shift @{ $_[0] } }
    sub close { 1 }
}

my %routes = (
    '/array' => sub { [200, ['Content-Type' => 'text/plain'], ['one ', 'two ', '', 'three']] },
    '/array-empty' => sub { [200, [], []] },
    '/writer' => sub {
        sub {
            my $w = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $w->write($_) for 'first,', '', 'second,', 'third';
            $w->close;
        }
    },
    '/writer-with-length' => sub {
        sub {
            my $w = $_[0]->([200, ['Content-Length' => 6]]);
            $w->write($_) for 'abc', 'def';
            $w->close;
        }
    },
    '/writer-nothing' => sub { sub { $_[0]->([200, []])->close } },
    '/object' => sub { [200, [], Serow::Test::LineHandle->new("line 1\n", "line 2\n")] },
    '/scalar-handle' => sub {
        open my $fh, '<', \"in memory\n" or die;
        return [200, [], $fh];
    },
    '/file' => sub {
        open my $fh, '<', $file_name or die;
        return [200, [], $fh];
    },
    '/app-chunked' => sub {
        # the app frames the body itself, as Plack::Middleware::Chunked does
        [200, ['Transfer-Encoding' => 'chunked'], ["5\r\nhello\r\n", "0\r\n\r\n"]]
    },
);
my $server = start_server(app => sub { $routes{ $_[0]{PATH_INFO} }->() },
    options => ['--workers', 1]);

# Fetches $path twice on one HTTP/1.1 connection (so that broken framing
# shows in the second answer) and returns the first response.
sub fetch {
    my ($path) = @_;
    my $sock = raw_connect($server);
    my $buf = '';
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\nGET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    my $res = read_response($sock, buffer => \$buf);
    my $again = read_response($sock, buffer => \$buf);
    is $again && $again->{body}, $res && $res->{body}, "$path: the connection is usable after it";
    return $res;
}

sub length_ok {
    my ($res, $body, $name) = @_;
    is $res->{body}, $body, "$name: body";
    is $res->{headers}{'content-length'}, length $body, "$name: Content-Length";
    ok !exists $res->{headers}{'transfer-encoding'}, "$name: not chunked";
}

sub chunked_ok {
    my ($res, $body, $name) = @_;
    is $res->{body}, $body, "$name: body";
    is lc($res->{headers}{'transfer-encoding'} // ''), 'chunked', "$name: chunked";
    ok !exists $res->{headers}{'content-length'}, "$name: no Content-Length";
    ok !grep({ $_ == 0 } @{ $res->{chunks} }[0 .. $#{ $res->{chunks} } - 1]),
        "$name: no empty chunk before the last (it would end the body)";
}

subtest 'array bodies get a computed Content-Length' => sub {
    length_ok(fetch('/array'), 'one two three', 'parts');
    length_ok(fetch('/array-empty'), '', 'no parts');
};

subtest 'a file handle gets the length of the file' => sub {
    length_ok(fetch('/file'), "from a file\n" x 3, 'file');
};

subtest 'a streaming writer is chunked, one chunk per write' => sub {
    my $res = fetch('/writer');
    chunked_ok($res, 'first,second,third', 'writer');
    is_deeply $res->{chunks}, [6, 7, 5, 0], 'the empty write sent nothing';
};

subtest 'a streaming writer with a Content-Length is not chunked' => sub {
    length_ok(fetch('/writer-with-length'), 'abcdef', 'writer with length');
};

subtest 'a streaming writer that writes nothing' => sub {
    chunked_ok(fetch('/writer-nothing'), '', 'empty writer');
};

subtest 'handles that are not files are chunked' => sub {
    chunked_ok(fetch('/object'), "line 1\nline 2\n", 'getline object');
    chunked_ok(fetch('/scalar-handle'), "in memory\n", 'in-memory handle');
};

subtest 'a body the app chunked itself is sent as it is, without a Content-Length' => sub {
    my $res = fetch('/app-chunked');
    is $res->{body}, 'hello', 'decodes to the body';
    ok !exists $res->{headers}{'content-length'}, 'no Content-Length beside Transfer-Encoding';
    is lc $res->{headers}{'transfer-encoding'}, 'chunked';

    my $sock = raw_connect($server);
    syswrite $sock, "HEAD /app-chunked HTTP/1.1\r\nHost: x\r\n\r\nGET /array HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buf = '';
    my $head = read_response($sock, buffer => \$buf, head_request => 1);
    ok !exists $head->{headers}{'content-length'}, 'HEAD: no Content-Length either';
    is read_response($sock, buffer => \$buf)->{body}, 'one two three', 'HEAD: no body follows';
};

subtest 'HTTP/1.0: no chunking; a body of unknown length ends with the connection' => sub {
    for my $path ('/writer', '/object') {
        my ($raw, $closed);
        $raw = raw_request($server, "GET $path HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", eof => \$closed);
        my $res = parse_response($raw);
        ok !exists $res->{headers}{'transfer-encoding'}, "$path: not chunked";
        ok !exists $res->{headers}{'content-length'}, "$path: no length";
        is lc $res->{headers}{connection}, 'close', "$path: Connection: close";
        ok $closed, "$path: closed";
    }
    my $res = parse_response(raw_request($server, "GET /array HTTP/1.0\r\n\r\n"));
    is $res->{body}, 'one two three';
    is $res->{headers}{'content-length'}, 13, 'an array body still has its length';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
