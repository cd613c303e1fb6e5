use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Digest::MD5 qw(md5_hex);
use File::Temp ();
use POSIX ();
use Serow::Test qw(need_debian_packages start_server);
use Serow::Test::TLS qw(test_pki tls_options);

# A client may ask for records smaller than the protocol's 16 KiB (one with
# little memory): with max_fragment_length (RFC 6066 4; openssl s_client
# -maxfraglen) or record_size_limit (RFC 8449; gnutls-cli --recordsize).
# The library agrees in the handshake; the record layer must then seal the
# responses in records that small, or the client refuses the first one
# (record_overflow).  A body of 200 KB from the app and a file body (the
# transport's sendfile), in TLS 1.3 and 1.2.  And gnutls-cli's close_notify
# sent right behind its request.

need_debian_packages(qw(openssl gnutls-bin));

my $dir = File::Temp->newdir;
my $body = join '', map { sprintf "%07d\n", $_ } 1 .. 25_000; # 200 KB
{ open my $fh, '>', "$dir/file" or die $!; print {$fh} $body; close $fh }

my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/file') {
        open(my $fh, '<', "$dir/file") or die $!;
        return [200, ['Content-Type' => 'text/plain', 'Content-Length' => -s $fh], $fh];
    }
    return [200, ['Content-Type' => 'text/plain'], [$body]];
};

my $pki = test_pki();
my $server = start_server(app => $app, options => ['--workers', 1, tls_options($pki)]);

# Runs a client with $request on its standard input: its standard output.
sub client_output {
    my ($request, @command) = @_;
    open(my $in, '>', "$dir/in") or die $!;
    print {$in} $request;
    close $in;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open(STDIN, '<', "$dir/in") or POSIX::_exit(110);
        open(STDOUT, '>', "$dir/out") or POSIX::_exit(111);
        open(STDERR, '>', "$dir/err") or POSIX::_exit(111);
        delete $ENV{LD_PRELOAD}; # (not Serow's code)
        { exec @command }
        POSIX::_exit(112);
    }
    waitpid($pid, 0);
    my ($out, $err) = map { local $/; open my $fh, '<', "$dir/$_" or die $!; scalar <$fh> } qw(out err);
    return ($out, $err);
}

# The body, by its Content-Length (gnutls-cli says more on its output after it).
sub body_of {
    my ($out) = @_;
    return '' unless $out =~ /\r\nContent-Length: (\d+)\r\n.*?\r\n\r\n/si;
    return substr($out, $+[0], $1);
}

my $port = $server->port;
for my $path ('/', '/file') {
    my $request = "GET $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    for my $version ('1.3', '1.2') {
        for my $size (512, 2048) {
            my ($out, $err) = client_output($request, 'openssl', 's_client', '-quiet', '-ign_eof',
                '-connect', "127.0.0.1:$port", '-servername', 'localhost', '-CAfile', $pki->{ca},
                '-verify_return_error', '-maxfraglen', $size, $version eq '1.3' ? '-tls1_3' : '-tls1_2');
            is md5_hex(body_of($out)), md5_hex($body),
                "$path, TLS $version, max_fragment_length $size: the body arrives whole" or diag $err;
            ($out, $err) = client_output($request, 'gnutls-cli', '--x509cafile', $pki->{ca},
                "--recordsize=$size", '--priority', "NORMAL:-VERS-ALL:+VERS-TLS$version",
                '-p', $port, 'localhost');
            is md5_hex(body_of($out)), md5_hex($body),
                "$path, TLS $version, record_size_limit $size: the body arrives whole" or diag $err;
        }
    }
}

# gnutls-cli sends its close_notify as soon as its input ends, right behind
# the request: the server, answering Connection: close, must read it before
# it closes (lingering, as after any request it did not read to the end),
# or the close is a reset that can destroy the response before the client
# reads it.
my $request = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
my $whole = 0;
for (1 .. 20) {
    my ($out, $err) = client_output($request, 'gnutls-cli', '--x509cafile', $pki->{ca},
        '--priority', 'NORMAL:-VERS-ALL:+VERS-TLS1.2', '-p', $port, 'localhost');
    $whole++ if md5_hex(body_of($out)) eq md5_hex($body);
    diag $err if $err =~ /Fatal error/;
}
is $whole, 20, 'a close_notify right behind a request: 20 whole responses of 20';

is $server->stop, 0, 'clean stop';
done_testing;
