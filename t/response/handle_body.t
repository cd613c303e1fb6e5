# Bodies that are handles: a real file goes out with sendfile(2) (strace
# sees it, and no read of the file into the worker); anything else (an
# in-memory handle, an IO::Handle-like object, a file with a :crlf layer)
# is read with getline, 64 KiB at a time.  close is always called.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response parse_response raw_request wait_until);
use Serow::Test::Trace qw(have_strace worker_pids trace_syscalls mark client_writes);

# A file of a few MB whose bytes are not all alike.
my $file = File::Temp->new;
binmode $file;
my $size = 5 * 1024 * 1024 + 123;
{
    my $seed = 'serow';
    my $data = '';
    while (length $data < $size) {
        $seed = Digest::MD5::md5($seed . length $data);
        $data .= $seed x 64;
    }
    print {$file} substr($data, 0, $size);
    close $file or die;
}
my $file_md5 = do { open(my $fh, '<:raw', "$file") or die; Digest::MD5->new->addfile($fh)->hexdigest };
my $file_bytes = do { local $/; open(my $fh, '<:raw', "$file") or die; <$fh> };

my $closed_dir = File::Temp->newdir;

# A getline/close object that records the $/ it was called under.
package Lines {
    sub new { my ($class, %args) = @_; bless {%args, seen => []}, $class }
    sub getline {
        my ($self) = @_;
        push @{ $self->{seen} }, ref $/ ? ${$/} : $/;
        return shift @{ $self->{parts} };
    }
    sub close {
        my ($self) = @_;
        # written whole, then renamed: the test may look at any moment
        open(my $fh, '>', "$self->{mark}.tmp") or die;
        print {$fh} join(',', @{ $self->{seen} });
        close $fh;
        rename "$self->{mark}.tmp", $self->{mark} or die;
    }
}
# ... and one whose second getline dies.
package DyingLines {
    our @ISA = ('Lines');
    sub getline { my ($self) = @_; $self->{n}++ ? die "getline broke\n" : 'first' }
}
package main;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my @type = ('Content-Type' => 'application/octet-stream');
    if ($path eq '/mark') {
        mark();
        return [204, [], []];
    }
    if ($path eq '/file') {
        open(my $fh, '<:raw', "$file") or die;
        return [200, \@type, $fh];
    }
    if ($path eq '/file-io-handle') {
        require IO::File;
        return [200, \@type, IO::File->new("$file", '<')];
    }
    if ($path eq '/file-from-offset') {
        # The app read the first line: the body is the rest, from where
        # PerlIO says the app is (not where its read-ahead left the fd).
        open(my $fh, '<:raw', "$file") or die;
        read($fh, my $first, 1000);
        return [200, \@type, $fh];
    }
    if ($path eq '/crlf') {
        my $text = "one\r\ntwo\r\n";
        my $dir = File::Temp->newdir;
        open(my $out, '>:raw', "$dir/t") or die;
        print {$out} $text;
        close $out;
        open(my $fh, '<:crlf', "$dir/t") or die;
        return [200, \@type, $fh];
    }
    if ($path eq '/memory') {
        my $data = $file_bytes;
        open(my $fh, '<', \$data) or die;
        return [200, \@type, $fh];
    }
    if ($path =~ m{\A/object/(\w+)\z}) {
        return [200, \@type, Lines->new(parts => ['abc', '', 'def', 'x' x 70000],
                                         mark => "$closed_dir/$1")];
    }
    if ($path =~ m{\A/dying-object/(\w+)\z}) {
        return [200, \@type, DyingLines->new(mark => "$closed_dir/$1")];
    }
    return [404, ['Content-Type' => 'text/plain'], ['not found']];
};

my $server = start_server(app => $app, options => ['--workers', 1]);

sub get {
    my ($path, %opts) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    return read_response($sock, %opts);
}

subtest 'a file: intact, with its Content-Length' => sub {
    for my $path ('/file', '/file-io-handle') {
        my $res = get($path);
        is $res->{status}, 200;
        is $res->{headers}{'content-length'}, $size, "$path: Content-Length is the file's size";
        is length $res->{body}, $size;
        is md5_hex($res->{body}), $file_md5, "$path: md5 matches";
    }
};

subtest 'a file the app has read from: the rest of it' => sub {
    my $res = get('/file-from-offset');
    is $res->{headers}{'content-length'}, $size - 1000;
    ok $res->{body} eq substr($file_bytes, 1000), 'the bytes after the first 1000';
};

subtest 'HEAD of a file: its length, no body' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "HEAD /file HTTP/1.1\r\nHost: x\r\n\r\nGET /file HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buffer = '';
    my $head = read_response($sock, head_request => 1, buffer => \$buffer);
    is $head->{headers}{'content-length'}, $size;
    my $get = read_response($sock, buffer => \$buffer);
    is md5_hex($get->{body}), $file_md5, 'the next response on the connection is intact';
};

subtest 'a file over HTTP/1.0' => sub {
    my $res = parse_response(raw_request($server, "GET /file HTTP/1.0\r\n\r\n"));
    is $res->{headers}{'content-length'}, $size;
    is md5_hex($res->{body}), $file_md5;
};

subtest 'a :crlf handle is read through its layer, not sent raw' => sub {
    my $res = get('/crlf');
    is $res->{body}, "one\ntwo\n";
};

subtest 'an in-memory handle: read 64 KiB at a time' => sub {
    my $res = get('/memory');
    is md5_hex($res->{body}), $file_md5;
    is $res->{headers}{'transfer-encoding'}, 'chunked';
    my @chunks = @{ $res->{chunks} };
    pop @chunks; # the last, empty chunk
    is scalar(grep { $_ == 65536 } @chunks[0 .. $#chunks - 1]), $#chunks,
        'every chunk but the last is 64 KiB';
};

subtest 'an IO::Handle-like object: getline under $/ = \65536, then close' => sub {
    my $res = get('/object/one');
    is $res->{body}, 'abcdef' . ('x' x 70000);
    # close is called once the response is out: the client may see it first
    ok wait_until(sub { -e "$closed_dir/one" }), 'close was called';
    open(my $fh, '<', "$closed_dir/one") or die "close was not called: $!";
    my @seen = split /,/, <$fh>;
    is scalar(@seen), 5, 'getline until undef';
    is_deeply [grep { $_ ne '65536' } @seen], [], '$/ was \65536 each time';
};

subtest 'a getline that dies: the response is cut, close is still called, the worker goes on' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /dying-object/two HTTP/1.1\r\nHost: x\r\n\r\n";
    my $res = read_response($sock);
    ok !$res, 'no complete response';
    ok wait_until(sub { -e "$closed_dir/two" }), 'close was called';
    is get('/file')->{status}, 200, 'the next request is served';
    like $server->log, qr/getline broke/, 'the error is logged';
};

SKIP: {
    skip 'strace is not installed (tools/setup installs it)', 1 unless have_strace();
    subtest 'a file goes out with sendfile(2), never through the worker' => sub {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /404 HTTP/1.1\r\nHost: x\r\n\r\n";
        read_response($sock);
        my ($worker) = worker_pids($server->pid);
        my $res;
        my @calls = trace_syscalls($worker, sub {
            syswrite $sock, "GET /file HTTP/1.1\r\nHost: x\r\n\r\n";
            $res = read_response($sock);
            syswrite $sock, "GET /mark HTTP/1.1\r\nHost: x\r\n\r\n";
            read_response($sock);
        });
        is md5_hex($res->{body}), $file_md5, 'md5 matches';
        my @sendfile = grep { $_->{name} eq 'sendfile' } @calls;
        ok scalar(@sendfile), 'sendfile was called';
        my $sent = 0;
        $sent += $_->{result} for grep { $_->{result} > 0 } @sendfile; # not EAGAIN
        is $sent, $size, 'sendfile sent the whole file';
        my ($file_fd) = $sendfile[0]{args} =~ /\A\d+, (\d+)/;
        my @file_reads = grep { $_->{name} =~ /read/ && ($_->{fd} // -1) == $file_fd } @calls;
        is scalar(@file_reads), 0, 'the worker did not read the file';
        my $written = 0;
        $written += $_->{result} for grep { $_->{result} > 0 && $_->{name} ne 'sendfile' } client_writes(@calls);
        is $written, $res->{head_length}, 'only the head went out through writes';
    };
}

is $server->stop, 0, 'the server stops cleanly';
done_testing;
