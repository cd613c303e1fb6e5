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

# The headers a reverse proxy sets for the client behind it, as the env
# names them.
my @PROXY_HEADERS = qw(HTTP_X_FORWARDED_FOR HTTP_FORWARDED HTTP_X_REAL_IP);

# Whether a request may see the page.  Its peer is what REMOTE_ADDR says;
# but a request that carries a proxy's header (X-Forwarded-For, Forwarded,
# X-Real-IP) came through a proxy, and a proxy on this machine makes every
# client look like 127.0.0.1.  So such a request is refused, unless its
# peer is one of $trusted_proxies (an AddressList, or undef): then the
# address that proxy put in each of those headers is the client, and each
# must be in the list.
sub allows_request {
    my ($self, $env, $trusted_proxies) = @_;
    my @headers = grep { exists $env->{$_} } @PROXY_HEADERS;
    return $self->allows($env->{REMOTE_ADDR}) unless @headers;
    return 0 unless $trusted_proxies && $trusted_proxies->allows($env->{REMOTE_ADDR});
    for my $header (@headers) {
        return 0 unless $self->allows(_forwarded_client($header, $env->{$header}));
    }
    return 1;
}

# The client a proxy named in a header: the last entry, the one the proxy
# next to us added (those before it came with the request, and anyone can
# write them).  undef when there is none, or it is no address ("unknown", an
# obfuscated name).
sub _forwarded_client {
    my ($header, $value) = @_;
    my $last = (split /,/, $value // '')[-1] // return undef;
    if ($header eq 'HTTP_FORWARDED') {
        # for=192.0.2.60;proto=http  for="[2001:db8::1]:4711"
        ($last) = $last =~ /(?:\A|;)\s*for\s*=\s*("[^"]*"|[^;\s]*)/i or return undef;
        $last =~ tr/"//d;
    }
    $last =~ s/\A\s+|\s+\z//g;
    return $1 if $last =~ /\A\[([^\]]+)\](?::\d+)?\z/; # [v6] or [v6]:port
    $last =~ s/:\d+\z// if $last =~ /\A[\d.]+:\d+\z/;  # v4:port
    return $last;
}

1;
__END__

=head1 NAME

Serow::AddressList - an allow list of IPv4 and IPv6 addresses and CIDR networks

=head1 SYNOPSIS

    my $allow = Serow::AddressList->new('--metrics-allow', '127.0.0.1', '10.0.0.0/8', '::1');
    $allow->allows($env->{REMOTE_ADDR}) or return [403, ...];
    my $proxies = Serow::AddressList->new('--metrics-trusted-proxy', '127.0.0.1');
    $allow->allows_request($env, $proxies) or return [403, ...];

=head1 DESCRIPTION

C<new> dies with a message that starts with its first argument when an
entry is not an address or network. C<allows> matches IPv4-mapped IPv6
addresses (C<::ffff:10.1.2.3>) against IPv4 entries.

C<allows_request> judges a request (its env). One with an
C<X-Forwarded-For>, C<Forwarded> or C<X-Real-IP> header came through a
proxy, and is refused unless its C<REMOTE_ADDR> is in the second list (the
trusted proxies); then the last address in each of those headers (the one
that proxy added) must be in the list. A request without them is judged by
C<REMOTE_ADDR>.

=cut
