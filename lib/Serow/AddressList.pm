package Serow::AddressList;
use strict;
use warnings;

use Socket qw(inet_pton AF_INET AF_INET6);

# An allow list of IPv4 and IPv6 addresses and networks ("10.0.0.0/8",
# "::1"), for the pages the server or its middleware show only to some
# clients (Plack::Middleware::SerowStatus, --metrics-path).

# $what names the list in error messages ("SerowStatus: allow",
# "--metrics-allow").
sub new {
    my ($class, $what, @cidrs) = @_;
    return bless { networks => [ map { _parse_cidr($what, $_) } @cidrs ] }, $class;
}

# "10.0.0.0/8", "::1", "2001:db8::/32" -> [packed address, mask]
sub _parse_cidr {
    my ($what, $cidr) = @_;
    my ($addr, $bits) = split m{/}, $cidr, 2;
    my $packed = inet_pton($addr =~ /:/ ? AF_INET6 : AF_INET, $addr)
        or die "$what: '$cidr' is not an IPv4 or IPv6 address or network\n";
    my $max = length($packed) * 8;
    $bits //= $max;
    die "$what: '$cidr' has a prefix length outside 0..$max\n"
        unless $bits =~ /\A\d+\z/ && $bits <= $max;
    my $mask = pack 'B*', ('1' x $bits) . ('0' x ($max - $bits));
    return [$packed & $mask, $mask];
}

# Whether the address (REMOTE_ADDR) is in the list.
sub allows {
    my ($self, $remote) = @_;
    return 0 unless defined $remote;
    $remote =~ s/\A::ffff:(\d+\.\d+\.\d+\.\d+)\z/$1/i; # IPv4 seen through IPv6
    my $packed = inet_pton($remote =~ /:/ ? AF_INET6 : AF_INET, $remote) // return 0;
    for my $net (@{ $self->{networks} }) {
        my ($addr, $mask) = @$net;
        return 1 if length $addr == length $packed && ($packed & $mask) eq $addr;
    }
    return 0;
}

1;
__END__

=head1 NAME

Serow::AddressList - an allow list of IPv4 and IPv6 addresses and CIDR networks

=head1 SYNOPSIS

    my $allow = Serow::AddressList->new('--metrics-allow', '127.0.0.1', '10.0.0.0/8', '::1');
    $allow->allows($env->{REMOTE_ADDR}) or return [403, ...];

=head1 DESCRIPTION

C<new> dies with a message that starts with its first argument when an
entry is not an address or network. C<allows> matches IPv4-mapped IPv6
addresses (C<::ffff:10.1.2.3>) against IPv4 entries.

=cut
