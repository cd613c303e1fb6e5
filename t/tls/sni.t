use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages start_server);
use Serow::Test::TLS qw(test_pki test_cert run_client);

# Several certificates, chosen by the name the client asks for (SNI):
# repeated --ssl-cert and --ssl-key pairs, the first for a client that names
# no host or a name no certificate carries.  A wildcard name answers for one
# label; an ECDSA and an RSA certificate of one name are chosen between by
# the client's signature algorithms (TLS 1.3) or cipher (TLS 1.2).  openssl
# s_client says which certificate came (its subject), verified against the
# test CA for the name asked; curl --resolve verifies each name as a browser
# would.

need_debian_packages(qw(openssl curl));

my $pki = test_pki(); # the first, the default: CN localhost
my %cert = (
    alpha => test_cert($pki, 'alpha', 'alpha', ['alpha.test']),
    wild  => test_cert($pki, 'wild', 'wild', ['*.wild.test', 'wild.test']),
    mixed_ec  => test_cert($pki, 'mixed-ec', 'mixed ECDSA', ['mixed.test']),
    mixed_rsa => test_cert($pki, 'mixed-rsa', 'mixed RSA', ['mixed.test'], 'rsa'),
);
my @pairs = map { ('--ssl-cert', $_->{cert}, '--ssl-key', $_->{key}) }
    { cert => $pki->{cert}, key => $pki->{key} }, @cert{qw(alpha wild mixed_ec mixed_rsa)};

my $app = sub { [200, ['Content-Type' => 'text/plain'], ["hello\n"]] };
my $server = start_server(app => $app, options => ['--workers', 2, '--enable-ssl', @pairs]);
# The subject's common name of the certificate the server sent when asked
# for $name (undef: no SNI), and whether it verified for that name.
sub certificate_for {
    my ($name, @args) = @_;
    my ($status, $out) = run_client('openssl', 's_client', '-connect', '127.0.0.1:' . $server->port,
        '-CAfile', $pki->{ca}, (defined $name ? ('-servername', $name, '-verify_hostname', $name)
                                               : ('-noservername')), @args);
    my ($cn) = $out =~ /^subject=.*?CN ?= ?([^,\n]+)/m;
    my $verified = $out =~ /Verify return code: 0 \(ok\)/;
    diag $out unless $cn;
    return ($cn // '', $verified);
}

for my $case (
    ['alpha.test', 'alpha', 'a name of the second certificate'],
    ['ALPHA.Test', 'alpha', 'a name in other case (names are not case-sensitive)'],
    ['a.wild.test', 'wild', 'a name under a wildcard'],
    ['wild.test', 'wild', 'the wildcard certificate\'s own name'],
    ['localhost', 'localhost', 'the first certificate\'s name'],
) {
    my ($name, $cn, $what) = @$case;
    for my $version ('-tls1_3', '-tls1_2') {
        my ($got, $verified) = certificate_for($name, $version);
        is $got, $cn, "$version, SNI $name: $what gets its certificate";
        ok $verified, '... which verifies for that name';
    }
}

for my $case (
    ['a.b.wild.test', 'a wildcard answers for one label only'],
    ['unknown.test', 'a name no certificate carries'],
    [undef, 'no SNI'],
) {
    my ($name, $what) = @$case;
    my ($got) = certificate_for($name, '-tls1_3');
    is $got, 'localhost', "$what: the first certificate";
}

# One name, two keys: the client's algorithms choose.
for my $case (
    [['-tls1_3', '-sigalgs', 'ecdsa_secp256r1_sha256'], 'mixed ECDSA'],
    [['-tls1_3', '-sigalgs', 'rsa_pss_rsae_sha256'], 'mixed RSA'],
    [['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-GCM-SHA256'], 'mixed ECDSA'],
    [['-tls1_2', '-cipher', 'ECDHE-RSA-AES128-GCM-SHA256'], 'mixed RSA'],
) {
    my ($args, $cn) = @$case;
    my ($got, $verified) = certificate_for('mixed.test', @$args);
    is $got, $cn, "mixed.test, @$args: the $cn certificate";
    ok $verified, '... verified';
}

for my $name (qw(alpha.test x.wild.test mixed.test localhost)) {
    my $port = $server->port;
    my ($status, $out) = run_client('curl', '-sS', '-v', '--max-time', Serow::Test::READ_TIMEOUT,
        '--cacert', $pki->{ca}, '--resolve', "$name:$port:127.0.0.1", "https://$name:$port/");
    is $status, 0, "curl https://$name/: the certificate verified for the name" or diag $out;
    like $out, qr/^hello$/m, '... and answered';
}

is $server->stop, 0, 'clean stop';
done_testing;
