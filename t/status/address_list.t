use strict;
use warnings;
use Test::More;
use Serow::AddressList ();

# The allow list of the status page and the metrics: addresses and CIDR
# networks, IPv4 and IPv6, and IPv4 seen through IPv6.

my $list = Serow::AddressList->new('test', '127.0.0.1', '10.0.0.0/8', '192.168.1.128/25',
    '2001:db8::/32', '::1');
for my $case (
    ['127.0.0.1', 1], ['127.0.0.2', 0], ['10.255.1.2', 1], ['11.0.0.1', 0],
    ['192.168.1.128', 1], ['192.168.1.255', 1], ['192.168.1.127', 0],
    ['2001:db8:1::5', 1], ['2001:db9::1', 0], ['::1', 1], ['::2', 0],
    ['::ffff:10.1.2.3', 1], ['::FFFF:127.0.0.1', 1], ['::ffff:8.8.8.8', 0],
    ['not an address', 0], [undef, 0],
) {
    my ($addr, $allowed) = @$case;
    is $list->allows($addr) ? 1 : 0, $allowed, ($addr // 'undef') . ($allowed ? ' allowed' : ' refused');
}
ok(Serow::AddressList->new('test', '0.0.0.0/0')->allows('203.0.113.9'), '/0 allows every IPv4 address');
ok(!Serow::AddressList->new('test', '0.0.0.0/0')->allows('2001:db8::1'), 'but no IPv6 address');
ok(!Serow::AddressList->new('test')->allows('127.0.0.1'), 'an empty list allows nobody');
for my $bad (['10.0.0.0/33', qr/\Atest: '10\.0\.0\.0\/33' has a prefix length outside 0\.\.32\n/],
             ['::/129', qr/outside 0\.\.128/], ['10.0.0.0/x', qr/outside/],
             ['example.com', qr/\Atest: 'example\.com' is not an IPv4 or IPv6 address or network\n/]) {
    ok !eval { Serow::AddressList->new('test', $bad->[0]); 1 }, "'$bad->[0]' refused";
    like $@, $bad->[1], 'with a message that names it';
}

# A request through a proxy (allows_request): refused unless its peer is a
# trusted proxy, then judged by the address that proxy added last.
my $local = Serow::AddressList->new('test', '127.0.0.1', '::1', '10.0.0.0/8');
my $proxies = Serow::AddressList->new('test', '127.0.0.1');
for my $case (
    # [headers, peer, trusted proxies?, allowed, what]
    [{}, '127.0.0.1', 0, 1, 'no proxy header: the peer decides'],
    [{}, '203.0.113.9', 0, 0, 'no proxy header: a peer outside the list'],
    [{ HTTP_X_FORWARDED_FOR => '127.0.0.1' }, '127.0.0.1', 0, 0, 'X-Forwarded-For, no trusted proxy'],
    [{ HTTP_FORWARDED => 'for=127.0.0.1' }, '127.0.0.1', 0, 0, 'Forwarded, no trusted proxy'],
    [{ HTTP_X_REAL_IP => '127.0.0.1' }, '127.0.0.1', 0, 0, 'X-Real-IP, no trusted proxy'],
    [{ HTTP_X_FORWARDED_FOR => '' }, '127.0.0.1', 0, 0, 'an empty header is a proxy header too'],
    [{ HTTP_X_FORWARDED_FOR => '10.1.2.3' }, '127.0.0.1', 1, 1, 'a trusted proxy: its client is in the list'],
    [{ HTTP_X_FORWARDED_FOR => '203.0.113.9' }, '127.0.0.1', 1, 0, 'a trusted proxy: its client is not'],
    [{ HTTP_X_FORWARDED_FOR => '10.1.2.3' }, '10.9.9.9', 1, 0, 'a proxy that is not trusted'],
    [{ HTTP_X_FORWARDED_FOR => '127.0.0.1, 203.0.113.9' }, '127.0.0.1', 1, 0,
        'the last entry counts, not one the client wrote before it'],
    [{ HTTP_X_FORWARDED_FOR => '203.0.113.9,10.1.2.3' }, '127.0.0.1', 1, 1, 'the last entry, without spaces'],
    [{ HTTP_FORWARDED => 'for=203.0.113.9, for=10.1.2.3;proto=http' }, '127.0.0.1', 1, 1, 'Forwarded: the last element'],
    [{ HTTP_FORWARDED => 'proto=https;For="[::1]:4711"' }, '127.0.0.1', 1, 1, 'Forwarded: a quoted IPv6 address and port'],
    [{ HTTP_FORWARDED => 'for=10.1.2.3:8080' }, '127.0.0.1', 1, 1, 'Forwarded: IPv4 and port'],
    [{ HTTP_FORWARDED => 'for=unknown' }, '127.0.0.1', 1, 0, 'Forwarded: unknown'],
    [{ HTTP_FORWARDED => 'for=_hidden' }, '127.0.0.1', 1, 0, 'Forwarded: an obfuscated name'],
    [{ HTTP_FORWARDED => 'proto=http' }, '127.0.0.1', 1, 0, 'Forwarded without for'],
    [{ HTTP_X_REAL_IP => ' 10.1.2.3 ' }, '127.0.0.1', 1, 1, 'X-Real-IP'],
    [{ HTTP_X_REAL_IP => '10.1.2.3', HTTP_X_FORWARDED_FOR => '203.0.113.9' }, '127.0.0.1', 1, 0,
        'every header present must name a client in the list'],
) {
    my ($headers, $peer, $trusted, $allowed, $what) = @$case;
    my $env = { %$headers, REMOTE_ADDR => $peer };
    is $local->allows_request($env, $trusted ? $proxies : undef) ? 1 : 0, $allowed, $what;
}

done_testing;
