use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Serow::Test qw(need_debian_packages start_server wait_until);
use Serow::Test::TLS qw(test_pki test_cert tls_connect tls_request);

# HUP reads the certificate and key again: the new workers serve the new
# certificate, and a TLS connection open at the HUP (kept alive, idle) goes
# on, answered by the new workers from the record state it carries.  A file
# that cannot be used at the HUP is logged, naming the option and the file,
# and the certificate read before serves on.  The app is a file (serow
# FILE): the HUP's new generation process, forked after the master read
# the files, forks the new workers.

need_debian_packages(qw(openssl libio-socket-ssl-perl libnet-ssleay-perl));

my $pki = test_pki();
my %cert = (A => test_cert($pki, 'cert-a', 'cert A', ['localhost']),
            B => test_cert($pki, 'cert-b', 'cert B', ['localhost']));
my $dir = File::Temp->newdir;
my ($cert_file, $key_file) = ("$dir/server.pem", "$dir/server.key");

# As a deploy would: each file replaced whole (a new file renamed over it).
sub install {
    my ($cert, $key) = @_;
    for ([$cert, $cert_file], [$key, $key_file]) {
        my ($from, $to) = @$_;
        open(my $in, '<', $from) or die "$from: $!";
        open(my $out, '>', "$to.new") or die "$to.new: $!";
        print $out do { local $/; <$in> };
        close $out or die "$to.new: $!";
        rename "$to.new", $to or die "rename $to: $!";
    }
}
install($cert{A}{cert}, $cert{A}{key});

open(my $app, '>', "$dir/app.psgi") or die $!;
print $app 'sub { [200, ["Content-Type" => "text/plain"], ["pid=$$"]] };', "\n";
close $app;

my $server = start_server(app_file => "$dir/app.psgi",
    options => ['--workers', 2, '--keepalive-timeout', 300, '--enable-ssl', '--ssl-cert', $cert_file,
                '--ssl-key', $key_file]);

sub subject {
    my ($sock) = @_;
    return $sock ? $sock->peer_certificate('commonName') : "no connection: $@";
}

sub pid_of {
    my ($sock, $path) = @_;
    my $res = tls_request($sock, $path);
    return $res && $res->{status} == 200 && $res->{body} =~ /\Apid=(\d+)\z/ ? $1 : undef;
}

my $kept = tls_connect($server, $pki) or BAIL_OUT("no TLS connection: $@");
is subject($kept), 'cert A', 'at start, certificate A';
ok pid_of($kept, '/first'), 'a kept-alive connection is answered';

# Waits for a HUP's new workers: until the old ones have left, the kept
# connection asks again; it must be answered each time.
sub hup_and_wait {
    my %old = map { $_ => 1 } $server->worker_pids;
    $server->signal('HUP');
    my ($answered, $lost) = (0, 0);
    my $new = wait_until(sub {
        my $pid = pid_of($kept, '/during');
        $pid ? $answered++ : $lost++;
        return !$lost && $pid && !$old{$pid} && !grep { $old{$_} } $server->worker_pids;
    });
    ok $new && !$lost, "after HUP the connection open before it is answered by a new worker ($answered requests, each answered)";
}

subtest 'HUP with new files: the new certificate, and the open connection goes on' => sub {
    install($cert{B}{cert}, $cert{B}{key});
    my $mark = $server->log_mark;
    hup_and_wait();
    ok $server->wait_for_log(qr/TLS: read \S+server\.pem again/, undef, $mark), 'the files read again';
    my $new = tls_connect($server, $pki);
    is subject($new), 'cert B', 'a new connection gets certificate B';
    ok pid_of($new, '/new'), '... and is answered';
    ok pid_of($kept, '/kept'), 'the connection from before still answers';
};

for my $case (
    ['a certificate file that is not PEM', sub {
         open(my $fh, '>', "$cert_file.new") or die $!; print $fh "not PEM\n"; close $fh;
         rename "$cert_file.new", $cert_file or die $!;
     }, qr/\[error\].*TLS: --ssl-cert: \S+server\.pem holds no PEM certificate.*the certificates read before/],
    ['the key of another certificate', sub { install($cert{A}{cert}, $cert{B}{key}) },
     qr/\[error\].*TLS: --ssl-key: \S+server\.key is not the key of the certificate in \S+server\.pem/],
    ['a missing key', sub { unlink $key_file or die $! },
     qr/\[error\].*TLS: --ssl-key: cannot read \S+server\.key/],
) {
    my ($what, $break, $logged) = @$case;
    subtest "HUP with $what: logged, and certificate B serves on" => sub {
        $break->();
        my $mark = $server->log_mark;
        hup_and_wait();
        ok $server->wait_for_log($logged, undef, $mark), 'the error is logged, naming the option and file';
        my $new = tls_connect($server, $pki);
        is subject($new), 'cert B', 'a new connection still gets certificate B';
        ok pid_of($new, '/new'), '... and is answered';
        ok pid_of($kept, '/kept'), 'the connection from the start still answers';
    };
}

is $server->stop, 0, 'clean stop';
done_testing;
