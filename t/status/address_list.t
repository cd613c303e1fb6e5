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
done_testing;
