use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use IO::Select ();
use POSIX ();
use Compress::Zlib ();
use IO::Uncompress::Gunzip ();
use Time::HiRes ();
use Serow::Test qw(start_server raw_connect read_response gate need_debian_packages);

# A compressed stream's first bytes on the wire.  A gzip (10 bytes) or zlib
# (2 bytes, Content-Encoding: deflate) header written on its own decodes to
# nothing: Serow holds such a first write and sends it with the next write or
# the end of the body, so that it never sits in a chunk of its own.  Every
# other write goes out at once: a server-sent event or a long-poll answer is
# not held back.  Plack::Middleware::Deflater is looked at through
# serow-chunkview.

need_debian_packages('libplack-middleware-deflater-perl');
require Plack::Middleware::Deflater;

my $ROOT = Serow::Test::root();
my $gate = gate();
my $GZIP_HEADER = pack('nccVcc', 0x1f8b, 8, 0, 0, 0, 3); # RFC 1952: magic, deflate, no flags

# A gzip stream of @events in the pieces an encoder that flushes after each
# event writes: the header, one piece per event (each decodes on its own),
# the end (the last deflate block and the CRC and length trailer).
sub gzip_parts {
    my (@events) = @_;
    my ($deflater) = Compress::Zlib::deflateInit(-WindowBits => -Compress::Zlib::MAX_WBITS());
    my @pieces = map {
        my ($out) = $deflater->deflate($_);
        my ($flushed) = $deflater->flush(Compress::Zlib::Z_SYNC_FLUSH());
        $out . $flushed;
    } @events;
    my ($end) = $deflater->flush(Compress::Zlib::Z_FINISH());
    my $all = join '', @events;
    return ($GZIP_HEADER, @pieces, $end . pack('VV', Compress::Zlib::crc32($all), length $all));
}

# Text that compresses so little that zlib has output before the end: 160 KB
# of random letters, written 40 KB at a time.
srand(6);
my $text = join '', map { chr(0x41 + int rand 26) } 1 .. 160_000;
my $streams = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my @gzip = ('Content-Type' => 'text/plain', 'Content-Encoding' => 'gzip');
    return sub {
        my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
        $writer->write(substr($text, $_ * 40000, 40000)) for 0 .. 3;
        $writer->close;
    } if $path eq '/stream';
    return [200, ['Content-Type' => 'text/plain'], Plack::Util::inline_object(
        getline => do { my $i = 0; sub { $i < 4 ? substr($text, 40000 * $i++, 40000) : undef } },
        close => sub {})] if $path eq '/handle';
    return sub {
        # The gzip header alone, as some encoders write it, then the data.
        my $writer = shift->([200, [@gzip]]);
        $writer->write($_) for gzip_parts('hello');
        $writer->close;
    } if $path eq '/gzip-header-alone';
    return sub {
        # Server-sent events, plain: a small event, then a pause.
        my $writer = shift->([200, ['Content-Type' => 'text/event-stream']]);
        $writer->write("data: 1\n\n");
        $gate->wait;
        $writer->write("data: 2\n\n");
        $writer->close;
    } if $path eq '/events';
    return sub {
        # Server-sent events, gzipped: the header alone, an event, a pause.
        my $writer = shift->([200, ['Content-Type' => 'text/event-stream', 'Content-Encoding' => 'gzip']]);
        my ($header, $first, @rest) = gzip_parts("data: 1\n\n", "data: 2\n\n");
        $writer->write($header);
        $writer->write($first);
        $gate->wait;
        $writer->write($_) for @rest;
        $writer->close;
    } if $path eq '/gzip-events';
    return [404, [], ['not found']];
};
my $app = sub {
    my ($env) = @_;
    return $env->{PATH_INFO} =~ m{\A/deflater(/.*)\z}
        ? Plack::Middleware::Deflater->wrap($streams)->({ %$env, PATH_INFO => $1 })
        : $streams->($env);
};
my $server = start_server(app => $app, options => ['--workers', 2]);

sub chunkview {
    my (@args) = @_;
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        { exec $^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch", "$ROOT/script/serow-chunkview", @args }
        POSIX::_exit(112);
    }
    my $stdout = do { local $/; <$out> } // '';
    close $out;
    return $stdout;
}

sub chunk_sizes {
    my ($view) = @_;
    return map { $_ + 0 } $view =~ /^\s+\d+\s+[0-9a-f]+\s+(\d+)\s/mg;
}

# Plack::Middleware::Deflater (Debian's 0.12) puts the gzip header in front of
# its first compressed bytes, so the header never leaves alone; its deflate
# encoding writes the 2-byte zlib header alone, and that is held.
for my $path ('/deflater/stream', '/deflater/handle') {
    my $view = chunkview('-H', 'Accept-Encoding: gzip', $server->url . $path);
    like $view, qr{^Content-Encoding: gzip, \d+ bytes compressed, ${\ length $text} bytes decompressed$}m,
        "$path, gzip: the whole text";
    like $view, qr{^gzip header: in chunk 1 with \d+ bytes of compressed data$}m,
        "$path, gzip: the header shares its chunk" or diag $view;
    $view = chunkview('-H', 'Accept-Encoding: deflate', $server->url . $path);
    like $view, qr{^Content-Encoding: deflate, \d+ bytes compressed, ${\ length $text} bytes decompressed$}m,
        "$path, deflate: the whole text";
    my @sizes = chunk_sizes($view);
    cmp_ok $sizes[0], '>', 2, "$path, deflate: the zlib header shares its chunk"
        or diag $view;
}

{
    my $view = chunkview($server->url . '/gzip-header-alone');
    like $view, qr{^gzip header: in chunk 1 with \d+ bytes of compressed data$}m,
        'a gzip header written alone leaves with the next write' or diag $view;
    like $view, qr{^Content-Encoding: gzip, \d+ bytes compressed, 5 bytes decompressed$}m, 'intact';
}

# Reads from $sock into $$buffer until $re matches (or 30 s pass).
sub read_until {
    my ($sock, $buffer, $re) = @_;
    my $select = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + 30;
    while ($$buffer !~ $re) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !$select->can_read($left);
        sysread($sock, $$buffer, 65536, length $$buffer) or return 0;
    }
    return 1;
}

{
    my $sock = raw_connect($server);
    syswrite $sock, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buffer = '';
    ok read_until($sock, \$buffer, qr{\r\n\r\n9\r\ndata: 1\n\n\r\n}),
        'a small event goes out at once, while the app waits' or diag $buffer;
    $gate->open(1);
    ok read_until($sock, \$buffer, qr{9\r\ndata: 2\n\n\r\n0\r\n\r\n\z}), 'the next after the pause';
}
{
    my $sock = raw_connect($server);
    syswrite $sock, "GET /gzip-events HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buffer = '';
    my (undef, $first) = gzip_parts("data: 1\n\n", "data: 2\n\n");
    my $size = 10 + length $first;
    my $hex = sprintf '%x', $size;
    ok read_until($sock, \$buffer, qr{\r\n\r\n$hex\r\n\x1f\x8b}),
        'a held gzip header leaves with the first event, not at the end' or diag $buffer;
    ok read_until($sock, \$buffer, qr{\r\n\r\n$hex\r\n.{$size}\r\n}s), 'the whole first event';
    $gate->open(1);
    ok read_until($sock, \$buffer, qr{\r\n0\r\n\r\n\z}), 'the rest after the pause';
    my $compressed = '';
    my $chunks = substr($buffer, index($buffer, "\r\n\r\n") + 4);
    while ($chunks =~ s/\A([0-9a-f]+)\r\n//) {
        my $n = hex $1;
        $compressed .= substr($chunks, 0, $n, '');
        $chunks =~ s/\A\r\n//;
    }
    is $compressed, join('', gzip_parts("data: 1\n\n", "data: 2\n\n")), 'every byte, in order';
    IO::Uncompress::Gunzip::gunzip(\$compressed => \my $plain);
    is $plain, "data: 1\n\ndata: 2\n\n", 'and they decompress';
}

is $server->stop, 0 or diag $server->log;
done_testing;
