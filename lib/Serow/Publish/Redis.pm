package Serow::Publish::Redis;
use strict;
use warnings;

use Serow (); # the XS: prefix_ok, the rule of src/holder/redis_link.h

# --publish-redis redis://HOST:PORT[/PREFIX] (docs/holding.md): the URL read
# and checked once, at start-up, so that a bad one stops the server with a
# message naming the option rather than a holder that cannot connect.  The
# holder's C (src/holder/redis_relay.c) gets its parts.

use constant { DEFAULT_PORT => 6379, DEFAULT_PREFIX => 'serow' };

# { host, port, prefix } of a URL, or a die naming --publish-redis and what
# is wrong.  The port and the prefix may be left out (6379, serow); the
# prefix names the channels (PREFIX:CHANNEL), not a database: pub/sub has
# none.
sub parse {
    my ($class, $url) = @_;
    my $bad = sub { die "--publish-redis: '$url': $_[0]\n" };
    $bad->('rediss:// (TLS) is not supported: reach Redis over a private network, or through a TLS tunnel on this host')
        if $url =~ m{\Arediss://}i;
    $bad->('a socket path is not supported: give redis://HOST:PORT') if $url =~ m{\A(?:unix|redis\+unix)://}i;
    my ($authority, $path) = $url =~ m{\Aredis://([^/?#]*)(/[^?#]*)?\z}i
        or $bad->('not redis://HOST:PORT[/PREFIX]' . ($url =~ /[?#]/ ? ' (no query or fragment)' : ''));
    $bad->('a user or password is not supported (Serow sends no AUTH): keep Redis on a private network')
        if $authority =~ /@/;
    my ($host, $port) = $authority =~ /\A\[([0-9A-Fa-f:.]+)\](?::(\d*))?\z/;
    ($host, $port) = $authority =~ /\A([A-Za-z0-9._-]+)(?::(\d*))?\z/ unless defined $host;
    $bad->('no host') if $authority eq '' || $authority =~ /\A:/;
    $bad->('the host is not a name, an IPv4 address or an [IPv6] address') unless defined $host;
    $port = DEFAULT_PORT if !defined $port || $port eq '';
    $bad->("the port $port is not between 1 and 65535") unless $port =~ /\A\d{1,5}\z/ && $port >= 1 && $port <= 65535;
    my $prefix = defined $path && $path ne '/' ? substr($path, 1) : DEFAULT_PREFIX;
    $bad->("the prefix '$prefix' is not 1 to 64 bytes of printable ASCII without space, \" , ; = \\ * ? [ ]")
        unless prefix_ok($prefix);
    return { host => $host, port => $port + 0, prefix => $prefix };
}

1;
__END__

=head1 NAME

Serow::Publish::Redis - the C<--publish-redis> URL, read and checked

=head1 SYNOPSIS

    my $redis = Serow::Publish::Redis->parse('redis://10.0.0.5:6379/shop');
    # { host => '10.0.0.5', port => 6379, prefix => 'shop' }

=head1 DESCRIPTION

C<redis://HOST:PORT[/PREFIX]>: the Redis every Serow sharing it publishes
through (F<docs/holding.md>). The port is 6379 and the prefix C<serow> when
left out. A bad URL dies with a message naming C<--publish-redis> and the
problem.

=cut
