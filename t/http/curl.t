use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Digest::MD5 qw(md5_hex);
use File::Temp ();
use JSON::PP ();
use POSIX ();
use Serow::Test qw(need_debian_packages start_server);

# The real curl against Serow: one connection reused for several URLs,
# --data-binary @file over 1 MiB (curl sends Expect: 100-continue and
# waits for the 100), a chunked upload, --http1.0, and --unix-socket.

need_debian_packages('curl');

my $app = sub {
    my ($env) = @_;
    my $body = '';
    while ($env->{'psgi.input'}->read(my $part, 65536)) { $body .= $part }
    return [200, ['Content-Type' => 'application/json'], [JSON::PP->new->canonical->encode({
        path => $env->{PATH_INFO}, port => $env->{REMOTE_PORT}, protocol => $env->{SERVER_PROTOCOL},
        length => length $body, md5 => md5_hex($body), expect => $env->{HTTP_EXPECT},
    })]];
};

my $dir = File::Temp->newdir;

# curl -sS -v ARGS; returns its stdout, its stderr (the -v trace) and status.
sub curl {
    my (@args) = @_;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open(STDOUT, '>', "$dir/out") or POSIX::_exit(111);
        open(STDERR, '>', "$dir/err") or POSIX::_exit(111);
        # Not Serow's code: under tools/test-sanitized the preloaded libasan is
        # for perl (curl was seen to hang with it).
        delete $ENV{LD_PRELOAD};
        { exec 'curl', '-sS', '-v', '--max-time', Serow::Test::READ_TIMEOUT, @args }
        POSIX::_exit(112);
    }
    waitpid($pid, 0);
    my $status = $?;
    my ($out, $err) = map { local $/; open my $fh, '<', "$dir/$_" or die $!; scalar <$fh> } qw(out err);
    return ($out, $err, $status);
}

# The JSON documents curl printed, one per response.
sub answers { my ($out) = @_; return map { JSON::PP::decode_json($_) } $out =~ /(\{[^}]*\})/g }

my $big = join '', map { sprintf "%08d\n", $_ } 1 .. 300_000; # 2.7 MB
{ open my $fh, '>', "$dir/big" or die $!; print {$fh} $big; close $fh }

my $server = start_server(app => $app, options => ['--workers', 2]);
my $url = $server->url;

subtest 'several URLs on one connection' => sub {
    my ($out, $err, $status) = curl("$url/one", "$url/two", "$url/three");
    is $status, 0, 'curl succeeds' or diag $err;
    my @seen = answers($out);
    is_deeply [map { $_->{path} } @seen], [qw(/one /two /three)], 'three answers';
    is scalar(() = $err =~ /Re-using existing connection/g), 2, 'curl re-used its connection twice';
    is scalar(keys %{{ map { $_->{port} => 1 } @seen }}), 1, 'the app saw one client port';
};

subtest '--data-binary @file over 1 MiB: Expect: 100-continue' => sub {
    my ($out, $err, $status) = curl('--data-binary', "\@$dir/big", "$url/upload");
    is $status, 0, 'curl succeeds' or diag $err;
    like $err, qr/^> Expect: 100-continue/mi, 'curl asked for a 100';
    like $err, qr{^< HTTP/1\.1 100 Continue}mi, 'and got it';
    unlike $err, qr/Done waiting for 100-continue/i, 'without giving up waiting for it';
    my ($seen) = answers($out);
    is $seen->{length}, length $big, 'the whole body arrived';
    is $seen->{md5}, md5_hex($big), 'byte for byte';
};

subtest 'chunked upload' => sub {
    my ($out, $err, $status) = curl('-H', 'Transfer-Encoding: chunked', '--data-binary', "\@$dir/big",
        "$url/chunked");
    is $status, 0, 'curl succeeds' or diag $err;
    like $err, qr/^> Transfer-Encoding: chunked/mi, 'curl sent it chunked';
    my ($seen) = answers($out);
    is $seen->{md5}, md5_hex($big), 'the body arrived whole';
};

subtest '--http1.0' => sub {
    my ($out, $err, $status) = curl('--http1.0', "$url/old", "$url/older");
    is $status, 0, 'curl succeeds' or diag $err;
    my @seen = answers($out);
    is_deeply [map { $_->{protocol} } @seen], ['HTTP/1.0', 'HTTP/1.0'], 'the app sees HTTP/1.0';
    like $err, qr{^< HTTP/1\.[01] 200}m, 'answered';
    isnt $seen[0]{port}, $seen[1]{port}, 'a connection per request (no keep-alive asked for)';
};

$server->stop;

subtest '--unix-socket' => sub {
    my $unix = start_server(app => $app, listen => 'unix', options => ['--workers', 1]);
    my ($out, $err, $status) = curl('--unix-socket', $unix->path, 'http://localhost/a', 'http://localhost/b',
        '--data-binary', "\@$dir/big");
    is $status, 0, 'curl succeeds' or diag $err;
    my @seen = answers($out);
    is_deeply [map { $_->{md5} } @seen], [(md5_hex($big)) x 2], 'two uploads answered';
    like $err, qr/Re-using existing connection/, 'on one connection';
    is $unix->stop, 0, 'the server stops cleanly';
};

done_testing;
