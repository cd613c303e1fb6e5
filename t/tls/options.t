use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use File::Copy ();
use Serow::Test qw(need_debian_packages run_serow start_server);
use Serow::Test::TLS qw(test_pki tls_connect tls_request);
use Serow::Options ();

# TLS's options (Starman's names) and their checks: each refusal stops the
# start with the option and the problem, before any address is bound.

need_debian_packages('openssl');

my $pki = test_pki();
my $app = 'eg/hello.psgi';

subtest 'what the options need of each other' => sub {
    for my $case (
        [['--enable-ssl'], qr/--enable-ssl: needs --ssl-cert/],
        [['--enable-ssl', '--ssl-cert', 'c.pem'], qr/--enable-ssl: needs --ssl-key/],
        [['--listen', '127.0.0.1:0:ssl', '--ssl-key', 'k.pem'], qr/--listen HOST:PORT:ssl: needs --ssl-cert/],
        [['--ssl-cert', 'c.pem', '--ssl-key', 'k.pem'], qr/--ssl-cert: no address serves TLS/],
        [['--ssl-priorities', 'NORMAL'], qr/--ssl-priorities: no address serves TLS/],
        [['--enable-ssl', '--ssl-cert', 'a.pem', '--ssl-key', 'a.key', '--ssl-cert', 'b.pem'],
         qr/--ssl-key: 1 for 2 --ssl-cert: give one key for each certificate, in the same order/],
        [['--enable-ssl', '--ssl-cert', 'c.pem', '--ssl-key', 'k.pem', '--ssl-session-tickets', 'no'],
         qr/--ssl-session-tickets: 'no' is not one of on, off/],
    ) {
        my ($argv, $message) = @$case;
        ok !eval { Serow::Options->from_argv(@$argv, $app); 1 }, "@$argv: refused";
        like $@, $message, "@$argv: says why";
    }
    my ($opts) = Serow::Options->from_hash(ssl => 1, ssl_cert => 'c', ssl_key => 'k');
    is $opts->{enable_ssl}, 1, 'plackup --enable-ssl (ssl => 1) is --enable-ssl';
};

subtest 'files and priorities refused at start' => sub {
    my $dir = File::Temp->newdir;
    open(my $fh, '>', "$dir/garbage.pem") or die; print $fh "not PEM\n"; close $fh;
    my @tls = ('--listen', '127.0.0.1:0:ssl');
    for my $case (
        [['--ssl-cert', "$dir/missing.pem", '--ssl-key', $pki->{key}],
         qr/--ssl-cert: cannot read \Q$dir\E\/missing\.pem: No such file/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', "$dir/missing.key"],
         qr/--ssl-key: cannot read \Q$dir\E\/missing\.key: No such file/],
        [['--ssl-cert', "$dir/garbage.pem", '--ssl-key', $pki->{key}],
         qr/--ssl-cert: \S+garbage\.pem holds no PEM certificate/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', "$dir/garbage.pem"],
         qr/--ssl-key: \S+garbage\.pem holds no PEM private key/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{other_key}],
         qr/--ssl-key: \S+other\.key is not the key of the certificate in \S+server\.pem/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key}, '--ssl-priorities', 'NO-SUCH-THING'],
         qr/--ssl-priorities: 'NO-SUCH-THING' is not a GnuTLS priority string/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key}, '--ssl-priorities', 'NORMAL'],
         qr/--ssl-priorities: 'NORMAL' allows the cipher \S+; Serow's record layer has AES-128-GCM/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key}, '--ssl-priorities',
          'NORMAL:-CIPHER-ALL:+AES-128-GCM:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.1'],
         qr/--ssl-priorities: .* allows TLS1\.1; TLS 1\.2 is the oldest Serow serves/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key}, '--ssl-cert', "$dir/garbage.pem",
          '--ssl-key', $pki->{key}],
         qr/--ssl-cert: \S+garbage\.pem holds no PEM certificate/],
        [['--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key}, '--ssl-cert', $pki->{cert},
          '--ssl-key', $pki->{other_key}],
         qr/--ssl-key: \S+other\.key is not the key of the certificate in \S+server\.pem/],
        [['--listen', '/tmp/serow-tls-test.sock:ssl', '--ssl-cert', $pki->{cert}, '--ssl-key', $pki->{key}],
         qr/--listen: .*TLS on a UNIX socket is not served/],
    ) {
        my ($argv, $message) = @$case;
        my @argv = (@$argv, ($argv->[0] eq '--listen' ? () : @tls));
        my ($status, $text) = run_serow(@argv, $app);
        is $status, 2, "@$argv: serow exits with status 2";
        like $text, $message, '... saying why';
        unlike $text, qr/listening on/, '... before it serves';
    }
};

# A file's name is whole, whatever it holds: --ssl-cert and --ssl-key are
# repeated for several certificates, never split on commas.
subtest 'a certificate whose path holds a comma' => sub {
    my $dir = File::Temp->newdir;
    mkdir "$dir/a,b" or die "$dir/a,b: $!";
    File::Copy::copy($pki->{$_}, "$dir/a,b/$_.pem") or die "copy $_: $!" for qw(cert key);
    my ($opts) = Serow::Options->from_argv('--enable-ssl', '--ssl-cert', "$dir/a,b/cert.pem",
        '--ssl-key', "$dir/a,b/key.pem", $app);
    is_deeply $opts->{ssl_cert}, ["$dir/a,b/cert.pem"], 'one --ssl-cert is one file';
    my $server = start_server(app_file => $app,
        options => ['--enable-ssl', '--ssl-cert', "$dir/a,b/cert.pem", '--ssl-key', "$dir/a,b/key.pem"]);
    my $sock = tls_connect($server, $pki) or die "TLS connect: $@";
    my $res = tls_request($sock, '/');
    is $res && $res->{status}, 200, 'the server serves with it';
};

done_testing;
