# psgi.input: always there, also without a body; a body up to
# --body-memory-limit is read into memory, a larger one into a temp file
# that has no name on disk; either way it arrives intact (Content-Length
# and chunked) and can be read, seeked and read by lines.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use JSON::PP ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response parse_response raw_request);
use Serow::Test::Trace qw(worker_pids);

my $json = JSON::PP->new->utf8->canonical;
my $limit = 64 * 1024;

my $app = sub {
    my ($env) = @_;
    my $in = $env->{'psgi.input'};
    my $path = $env->{PATH_INFO};
    my %out;
    if ($path eq '/abuse') {
        # What an app may do to an empty psgi.input; the next request must
        # not notice.
        my $how = $env->{QUERY_STRING};
        if ($how eq 'close') { close $in }
        elsif ($how eq 'seek') { seek($in, 10, 0) }
        elsif ($how eq 'ungetc') { $in->ungetc(ord 'X') }
        elsif ($how eq 'binmode') { binmode($in, ':encoding(UTF-16LE)') }
        elsif ($how eq 'read') { 1 while $in->read(my $b, 10) }
        return [200, ['Content-Type' => 'text/plain'], ['done']];
    }
    my $md5 = Digest::MD5->new;
    my $length = 0;
    while (my $n = $in->read(my $buffer, 8192)) {
        $md5->add($buffer);
        $length += $n;
    }
    $out{read_returns} = $in->read(my $nothing, 10);
    $out{md5} = $md5->hexdigest;
    $out{length} = $length;
    $out{tell} = tell($in);
    $out{seek} = $in->seek(0, 0) ? 1 : 0;
    my $lines = 0;
    my $again = Digest::MD5->new;
    while (defined(my $line = <$in>)) { $lines++; $again->add($line) }
    $out{lines} = $lines;
    $out{md5_again} = $again->hexdigest;
    $out{fileno} = fileno($in);
    $out{real_file} = (defined fileno($in) && fileno($in) >= 0 && -f $in) ? 1 : 0;
    $out{links} = $out{real_file} ? (stat $in)[3] : undef;
    $out{layers} = join ',', PerlIO::get_layers($in);
    $out{CONTENT_LENGTH} = $env->{CONTENT_LENGTH};
    $out{HTTP_TRANSFER_ENCODING} = $env->{HTTP_TRANSFER_ENCODING};
    $out{pid} = $$;
    return [200, ['Content-Type' => 'application/json'], [$json->encode(\%out)]];
};

my $server = start_server(app => $app,
    options => ['--workers', 1, '--body-memory-limit', $limit, '--max-body-size', '512M']);

sub post {
    my ($body, %opts) = @_;
    my $sock = raw_connect($server);
    my $head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n";
    if ($opts{chunked}) {
        syswrite $sock, "${head}Transfer-Encoding: chunked\r\n\r\n";
        my $offset = 0;
        while ($offset < length $body) {
            my $n = 1 + ($offset * 7919) % 40000; # chunks of uneven sizes
            my $part = substr($body, $offset, $n);
            _write_all($sock, sprintf("%x\r\n", length $part) . $part . "\r\n");
            $offset += length $part;
        }
        _write_all($sock, "0\r\n\r\n");
    } else {
        _write_all($sock, "${head}Content-Length: " . length($body) . "\r\n\r\n");
        my $offset = 0;
        while ($offset < length $body) {
            $offset += _write_all($sock, substr($body, $offset, 1024 * 1024));
        }
    }
    my $res = read_response($sock);
    return $res && $res->{status} == 200 ? $json->decode($res->{body}) : $res;
}

sub _write_all {
    my ($sock, $bytes) = @_;
    my $done = 0;
    while ($done < length $bytes) {
        my $n = syswrite($sock, $bytes, length($bytes) - $done, $done) // die "write: $!";
        $done += $n;
    }
    return $done;
}

# Bytes that are not all alike, with some newlines among them.
sub body_of {
    my ($size) = @_;
    my $data = '';
    my $seed = "body$size";
    while (length $data < $size) {
        $seed = Digest::MD5::md5($seed);
        $data .= $seed . "\n" . Digest::MD5::md5_hex($seed);
    }
    return substr($data, 0, $size);
}

subtest 'no body: an empty psgi.input that reads 0 bytes, seekable' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    my $env = $json->decode(read_response($sock)->{body});
    is $env->{length}, 0;
    is $env->{read_returns}, 0, 'read returns 0, not undef';
    is $env->{tell}, 0;
    is $env->{seek}, 1, 'seek works';
    is $env->{lines}, 0, '<$fh> gives nothing';
    ok !defined $env->{CONTENT_LENGTH}, 'no CONTENT_LENGTH';
};

subtest 'an app cannot spoil the empty psgi.input of later requests' => sub {
    my $sock = raw_connect($server);
    for my $how (qw(read close seek ungetc binmode)) {
        syswrite $sock, "GET /abuse?$how HTTP/1.1\r\nHost: x\r\n\r\n";
        is read_response($sock)->{body}, 'done', "an app did $how";
        syswrite $sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        my $env = $json->decode(read_response($sock)->{body});
        is $env->{read_returns}, 0, "after $how: read returns 0";
        is $env->{length}, 0, "after $how: nothing to read";
        is $env->{tell}, 0, "after $how: at 0";
        is $env->{seek}, 1, "after $how: seekable";
    }
};

for my $chunked (0, 1) {
    my $framing = $chunked ? 'chunked' : 'Content-Length';
    for my $size (0, 1, 5000, $limit, $limit + 1, 3 * 1024 * 1024 + 17) {
        next if $chunked && $size == 0;
        my $in_memory = $size <= $limit;
        subtest "$framing, $size bytes: " . ($in_memory ? 'in memory' : 'in a temp file') => sub {
            my $body = body_of($size);
            my $env = post($body, chunked => $chunked);
            is $env->{length}, $size, 'the whole body';
            is $env->{md5}, md5_hex($body), 'md5 matches';
            is $env->{md5_again}, md5_hex($body), 'the same again by lines after seek(0, 0)';
            is $env->{read_returns}, 0, 'read returns 0 at the end';
            is $env->{CONTENT_LENGTH}, $size, 'CONTENT_LENGTH';
            ok !defined $env->{HTTP_TRANSFER_ENCODING}, 'no HTTP_TRANSFER_ENCODING';
            if ($in_memory) {
                is $env->{real_file}, 0, 'an in-memory handle';
            } else {
                is $env->{real_file}, 1, 'a real file';
                is $env->{links}, 0, 'with no name on disk';
                unlike $env->{layers}, qr/crlf|utf8|encoding/, 'binary';
            }
        };
    }
}

subtest 'a large body is never all in memory' => sub {
    my ($worker) = worker_pids($server->pid);
    my $peak = sub {
        open(my $fh, '<', "/proc/$worker/status") or return undef;
        my ($kb) = join('', <$fh>) =~ /^VmHWM:\s+(\d+) kB/m;
        return $kb * 1024;
    };
    my $before = $peak->();
    my $size = 96 * 1024 * 1024;
    my $body = body_of(1024 * 1024) x 96;
    my $env = post($body);
    is $env->{md5}, md5_hex($body), 'md5 matches';
    is $env->{links}, 0, 'it was in a temp file';
    my $growth = $peak->() - $before;
    cmp_ok $growth, '<', $size / 4,
        "the worker's peak memory grew by less than a quarter of the body ($growth bytes)";
};

is $server->stop, 0, 'the server stops cleanly';
unlike $server->log, qr/\[error\]/, 'no errors logged';
done_testing;
