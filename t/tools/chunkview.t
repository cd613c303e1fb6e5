use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use IO::Socket::IP ();
use IO::Compress::Gzip ();
use POSIX ();
use Serow::Test qw(start_server);

# script/serow-chunkview against a real Serow server (streaming, fixed-length
# and HTTP/1.0 responses, a UNIX socket) and against canned bytes for what
# Serow never sends (a gzip header alone in a chunk, a trailer, malformed or
# cut framing).

my $ROOT = Serow::Test::root();

sub chunkview {
    my (@args) = @_;
    my $errors = File::Temp->new;
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open(STDERR, '>&', $errors) or POSIX::_exit(111);
        { exec $^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch", "$ROOT/script/serow-chunkview", @args }
        POSIX::_exit(112);
    }
    my $stdout = do { local $/; <$out> } // '';
    close $out;
    my $status = $? >> 8;
    seek($errors, 0, 0);
    my $stderr = do { local $/; <$errors> } // '';
    return ($status, $stdout, $stderr);
}

# A server that answers one request with $bytes and closes.
sub canned_server {
    my ($bytes) = @_;
    my $listen = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 5)
        or die "listen: $@";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $client = $listen->accept or POSIX::_exit(1);
        my $request = '';
        while ($request !~ /\r\n\r\n/) { sysread($client, $request, 65536, length $request) or last }
        syswrite($client, $bytes);
        close $client;
        POSIX::_exit(0);
    }
    my $port = $listen->sockport;
    close $listen;
    return ("http://127.0.0.1:$port/canned", $pid);
}

my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/stream') {
        return sub {
            my $writer = shift->([200, ['Content-Type' => 'text/plain',
                                        'X-Seen' => $env->{HTTP_X_TEST} // 'none']]);
            $writer->write("hello\r\n");
            $writer->write('x' x 300);
            $writer->write("\x00\x01\xff\"end");
            $writer->close;
        };
    }
    return [200, ['Content-Type' => 'text/plain'], ['fixed body']];
};
my $server = start_server(app => $app, options => ['--workers', 1]);
my $url = $server->url;

{
    my ($status, $out, $err) = chunkview('-H', 'X-Test: from -H', "$url/stream");
    is $status, 0, 'chunked: exit 0' or diag $err;
    like $out, qr{\AHTTP/1\.1 200 OK\n}, 'the status line first';
    like $out, qr{^Transfer-Encoding: chunked$}m, 'the header fields as they came';
    like $out, qr{^X-Seen: from -H$}m, '-H sends a header field';
    like $out, qr{^chunk\s+size hex\s+size\s+at ms\s+first bytes$}m, 'the table';
    like $out, qr{^\s+1\s+7\s+7\s+[\d.]+\s+"hello\\r\\n"$}m, 'chunk 1: size in hex and decimal, bytes escaped';
    like $out, qr{^\s+2\s+12c\s+300\s+[\d.]+\s+"x{16}"\.\.\.$}m, 'chunk 2: the first 16 bytes, then ...';
    like $out, qr{^\s+3\s+7\s+7\s+[\d.]+\s+"\\x00\\x01\\xff\\"end"$}m, 'chunk 3: binary and quotes escaped';
    like $out, qr{^\s+4\s+0\s+0\s+[\d.]+\s+\(last chunk\)$}m, 'the last chunk';
    like $out, qr{^body: 3 chunks of data, 314 bytes$}m, 'the total';
    like $out, qr{^trailer: none$}m, 'no trailer';
}
{
    my ($status, $out) = chunkview("$url/fixed");
    is $status, 0, 'Content-Length: exit 0';
    like $out, qr{^Content-Length: 10$}m, 'the header field';
    like $out, qr{^body: Content-Length 10, 10 bytes$}m, 'the length and what came';
    unlike $out, qr{^chunk}m, 'no chunk table';
}
{
    my ($status, $out) = chunkview('--http1.0', "$url/stream");
    is $status, 0, '--http1.0: exit 0';
    like $out, qr{\AHTTP/1\.1 200 OK\n}, 'an HTTP/1.1 status line';
    like $out, qr{^body: no Content-Length, not chunked: delimited by the close, 314 bytes$}m,
        'the stream is delimited by the close';
}
{
    my ($status, $out) = chunkview('-X', 'HEAD', "$url/fixed");
    is $status, 0, 'HEAD: exit 0';
    like $out, qr{^no body \(HEAD request, status 200\)$}m, 'no body read';
}
{
    my ($status, $out) = chunkview('--raw', "$url/fixed");
    is $status, 0, '--raw: exit 0';
    like $out, qr{\AHTTP/1\.1 200 OK\r\n.*\r\n\r\nfixed body\z}s, 'the bytes as they came, nothing else';
}
{
    my $unix = start_server(app => $app, listen => 'unix', options => ['--workers', 1]);
    my ($status, $out) = chunkview('--unix-socket', $unix->path, 'http://localhost/fixed');
    is $status, 0, '--unix-socket: exit 0';
    like $out, qr{^body: Content-Length 10, 10 bytes$}m, 'through the UNIX socket';
    is $unix->stop, 0;
}

# Canned responses.
{
    my $gzip;
    IO::Compress::Gzip::gzip(\('hello ' x 100) => \$gzip) or die;
    my ($header, $rest) = (substr($gzip, 0, 10), substr($gzip, 10));
    my ($canned, $pid) = canned_server("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
        . "Transfer-Encoding: chunked\r\n\r\n"
        . sprintf("a;note=header\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Checksum: 42\r\n\r\n", $header, length $rest, $rest));
    my ($status, $out) = chunkview($canned);
    waitpid $pid, 0;
    is $status, 0, 'gzip: exit 0';
    like $out, qr{^\s+1\s+a\s+10\s+[\d.]+\s+"\\x1f\\x8b\\x08.*" extensions ";note=header"$}m,
        'chunk extensions are shown';
    like $out, qr{^Content-Encoding: gzip, ${\ length $gzip} bytes compressed, 600 bytes decompressed$}m,
        'compressed and decompressed sizes';
    like $out, qr{^gzip header: chunk 1 is the 10-byte gzip header alone$}m, 'the gzip header alone is seen';
    like $out, qr{^trailer:\n  X-Checksum: 42$}m, 'the trailer';
}
{
    my $gzip;
    IO::Compress::Gzip::gzip(\'hello' => \$gzip) or die;
    my ($canned, $pid) = canned_server("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
        . "Transfer-Encoding: chunked\r\n\r\n" . sprintf("%x\r\n%s\r\n0\r\n\r\n", length $gzip, $gzip));
    my ($status, $out) = chunkview($canned);
    waitpid $pid, 0;
    like $out, qr{^gzip header: in chunk 1 with ${\ (length($gzip) - 10)} bytes of compressed data$}m,
        'a gzip header sharing its chunk';
}
{
    my ($canned, $pid) = canned_server("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        . "5\r\nhello\r\nzz\r\n");
    my ($status, $out, $err) = chunkview($canned);
    waitpid $pid, 0;
    is $status, 1, 'a malformed chunk size line: exit 1';
    like $out, qr{^\s+1\s+5\s+5\s}m, 'the chunks before it are shown';
    like $err, qr{malformed chunk size line at byte 10 after the head: "zz"}, 'where and what';
}
{
    my ($canned, $pid) = canned_server("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
    my ($status, $out, $err) = chunkview($canned);
    waitpid $pid, 0;
    is $status, 1, 'a body cut short: exit 1';
    like $out, qr{^body: Content-Length 100, but only 5 bytes came$}m, 'how much came';
}

# Errors.
{
    my $listen = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0, Listen => 1);
    my $port = $listen->sockport;
    close $listen; # nothing listens there now
    my ($status, $out, $err) = chunkview("http://127.0.0.1:$port/");
    is $status, 1, 'a refused connection: exit 1';
    like $err, qr{\Aserow-chunkview: cannot connect to 127\.0\.0\.1 port $port: Connection refused\n},
        'it says so';
}
for my $case (['ftp://example.org/', qr{'ftp://example\.org/' is not an http:// URL}],
              ['https://example.org/', qr{https is not supported}],
              ['http://host:99999/', qr{is not an http:// URL}]) {
    my ($status, $out, $err) = chunkview($case->[0]);
    is $status, 2, "$case->[0]: exit 2";
    like $err, $case->[1], "$case->[0]: a clear error";
}
{
    my ($status, $out, $err) = chunkview('--no-such-option', "$url/");
    is $status, 2, 'an unknown option: exit 2';
    like $err, qr{Unknown option: no-such-option.*Usage:}s, 'the option named, and the usage';
    ($status, $out, $err) = chunkview('-H', 'no colon', "$url/");
    like $err, qr{-H: 'no colon' is not 'Name: value'}, 'a bad -H';
    ($status, $out, $err) = chunkview('--timeout', '0', "$url/");
    like $err, qr{--timeout: '0' is not a positive number of seconds}, 'a bad --timeout';
    ($status, $out) = chunkview('--help');
    is $status, 0, '--help: exit 0';
    like $out, qr{Options:.*--unix-socket}s, '--help prints the options';
}

is $server->stop, 0 or diag $server->log;
done_testing;
