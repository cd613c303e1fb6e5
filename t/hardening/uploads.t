use strict;
use warnings;
use Test::More;
use Digest::MD5 ();
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get wait_until);

# Huge uploads: a chunked and a Content-Length body reach
# the app intact (md5 of psgi.input against the md5 the client computed while
# generating the data, never holding the body) while the worker stays small,
# and a client that leaves mid-upload leaves no temp file and a worker that
# serves the next request.  64 MiB here; SEROW_LONG_TESTS=1 sends 1 GiB (the
# --max-body-size default: a body of exactly the limit is allowed).

use constant MIB => 1024 * 1024;
my $SIZE = $ENV{SEROW_LONG_TESTS} ? 1024 * MIB : 64 * MIB;
# The worker's peak RSS must stay under this whatever the body's size.
use constant MAX_WORKER_HWM_KB => 64 * 1024;
# Bodies above --body-memory-limit (1 MiB by default) go to a temp file.
use constant BLOCK => MIB;

my $tmpdir = File::Temp->newdir;
my $server = start_server(app_file => Serow::Test::root() . '/t/apps/upload_md5.psgi',
    options => ['--workers', 1], env => { TMPDIR => "$tmpdir" });

# Block $i of the body: random-looking bytes that differ from block to block.
my $seed = join '', map { pack 'N', rand(2**32) } 1 .. BLOCK / 4;
sub block { my ($i) = @_; my $b = $seed; substr($b, 0, 8, pack('NN', $i, $i ^ 0x5a5a5a5a)); $b }

sub write_all {
    my ($sock, $bytes) = @_;
    while (length $bytes) {
        my $n = syswrite($sock, $bytes) or return 0;
        substr($bytes, 0, $n, '');
    }
    return 1;
}

# Sends $blocks blocks of the body (all of $SIZE by default); returns the md5.
sub send_body {
    my ($sock, %opts) = @_;
    my $md5 = Digest::MD5->new;
    my $blocks = $opts{blocks} // $SIZE / BLOCK;
    for my $i (1 .. $blocks) {
        my $block = block($i);
        $md5->add($block);
        my $wire = $opts{chunked} ? sprintf("%x\r\n", length $block) . $block . "\r\n" : $block;
        write_all($sock, $wire) or return undef;
    }
    write_all($sock, "0\r\n\r\n") or return undef if $opts{chunked} && !defined $opts{blocks};
    return $md5->hexdigest;
}

sub head {
    my ($chunked) = @_;
    return "POST /upload HTTP/1.1\r\nHost: x\r\n"
        . ($chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: $SIZE\r\n") . "\r\n";
}

sub temp_files_of {
    my ($pid) = @_;
    return grep { defined && index($_, "$tmpdir/") == 0 } map { readlink } glob "/proc/$pid/fd/*";
}

my ($worker) = http_get($server, '/')->{body} =~ /pid (\d+)/;
ok $worker, "the worker is $worker" or BAIL_OUT($server->log);

for my $chunked (0, 1) {
    my $framing = $chunked ? 'chunked' : 'Content-Length';
    subtest "$SIZE bytes, $framing" => sub {
        my $sock = raw_connect($server);
        write_all($sock, head($chunked));
        my $sent_md5 = send_body($sock, chunked => $chunked);
        ok $sent_md5, 'the whole body was sent';
        my $res = read_response($sock, timeout => 600);
        is $res && $res->{status}, 200, 'answered' or return diag $server->log;
        my ($md5, $length, $pid, $hwm) = $res->{body} =~ /^md5 (\w+) length (\d+) pid (\d+) hwm_kb (\d+)/;
        is $length, $SIZE, 'the app read every byte';
        is $md5, $sent_md5, 'intact (md5)';
        is $pid, $worker, 'in the same worker';
        cmp_ok $hwm, '<', MAX_WORKER_HWM_KB, "the worker's peak RSS stayed at $hwm kB";
        note "$framing: worker VmHWM $hwm kB after $SIZE bytes";
        ok wait_until(sub { !temp_files_of($worker) }), 'the temp file is closed after the request';
    };
}

for my $chunked (0, 1) {
    my $framing = $chunked ? 'chunked' : 'Content-Length';
    subtest "a client leaving mid-upload ($framing)" => sub {
        my $sock = raw_connect($server);
        write_all($sock, head($chunked));
        ok send_body($sock, chunked => $chunked, blocks => 8), '8 MiB of the body sent';
        ok wait_until(sub { temp_files_of($worker) }), 'the body is being spooled to a temp file in TMPDIR';
        close $sock;
        ok wait_until(sub { !temp_files_of($worker) }), 'the worker closed the temp file';
        opendir(my $dh, "$tmpdir") or die;
        is_deeply [grep { !/^\.\.?$/ } readdir $dh], [], 'TMPDIR is empty';
        my $res = http_get($server, '/');
        is $res && $res->{status}, 200, 'the next request is served';
        like $res && $res->{body}, qr/pid $worker /, 'by the same worker';
    };
}

is $server->stop, 0, 'the server stops cleanly';
unlike $server->log, qr/\[error\]/, 'and logged no error' or diag $server->log;

done_testing;
