package Serow::Listener;
use strict;
use warnings;

# Sockets with Socket's functions, not IO::Socket::IP: the master loads
# nothing it can do without, since every worker carries what it loaded
# (IO::Socket::IP and what it pulls in were 3 MB of each worker's RSS).
use Socket qw(IPPROTO_TCP IPPROTO_IPV6 IPV6_V6ONLY TCP_NODELAY SOL_SOCKET SO_REUSEADDR
              SOCK_STREAM SHUT_RDWR AF_UNIX AF_INET AF_INET6 AI_PASSIVE AI_NUMERICSERV
              getaddrinfo pack_sockaddr_un sockaddr_family unpack_sockaddr_in
              unpack_sockaddr_in6 inet_ntop);

# Linux's TCP_DEFER_ACCEPT: accept() only once the client has sent data, so a
# worker woken for a connection finds the request already there.
use constant TCP_DEFER_ACCEPT => 9;
use constant DEFER_ACCEPT_SECONDS => 10;

# A listener is { socket, fd, is_unix, name (as given), server_name, server_port,
# tls (its connections are TLS: --listen HOST:PORT:ssl, --enable-ssl) }.

sub _describe_sockname {
    my ($socket) = @_;
    my $sockname = getsockname($socket) or return;
    my $family = sockaddr_family($sockname);
    if ($family == AF_UNIX) {
        my $path = eval { Socket::unpack_sockaddr_un($sockname) } // '';
        return { is_unix => 1, server_name => 'localhost', server_port => 0, name => $path };
    }
    my ($port, $addr) = $family == AF_INET6 ? unpack_sockaddr_in6($sockname) : unpack_sockaddr_in($sockname);
    my $host = inet_ntop($family, $addr);
    my $name = $family == AF_INET6 ? "[$host]:$port" : "$host:$port";
    return { is_unix => 0, server_name => $host, server_port => $port, name => $name };
}

sub _tune_tcp {
    my ($socket) = @_;
    setsockopt($socket, IPPROTO_TCP, TCP_NODELAY, 1);
    setsockopt($socket, IPPROTO_TCP, TCP_DEFER_ACCEPT, DEFER_ACCEPT_SECONDS);
}

# Parses "host:port", "[v6]:port", ":port", "port" or a path, each with
# ":ssl" after it for TLS (Starman's form).
sub parse_address {
    my ($class, $address) = @_;
    if ($address =~ /\A(.+):ssl\z/) {
        my $parsed = $class->parse_address($1);
        defined $parsed->{path} and die "--listen: '$address': TLS on a UNIX socket is not served\n";
        return { %$parsed, tls => 1 };
    }
    return { path => $address } if $address =~ m{/};
    return { host => $1, port => $2 } if $address =~ /\A\[([0-9a-fA-F:.]+)\]:(\d+)\z/;
    return { host => ($1 eq '' || $1 eq '*' ? '0.0.0.0' : $1), port => $2 }
        if $address =~ /\A([^:\[\]]*):(\d+)\z/;
    return { host => '0.0.0.0', port => $address } if $address =~ /\A\d+\z/;
    die "--listen: '$address' is not HOST:PORT, [IPv6]:PORT, :PORT or a socket path\n";
}

sub open_address {
    my ($class, $address, %opts) = @_;
    my $parsed = $class->parse_address($address);
    my $socket;
    if (defined $parsed->{path}) {
        my $path = $parsed->{path};
        if (-S $path) {
            # A socket file nobody answers on is left over from a crash.
            socket(my $probe, AF_UNIX, SOCK_STREAM, 0) or die "--listen: cannot make a socket: $!\n";
            die "--listen: $path is in use by another server\n"
                if connect($probe, pack_sockaddr_un($path));
            close $probe;
            unlink $path;
        }
        my $mode = defined $opts{socket_mode} ? oct $opts{socket_mode} : undef;
        # With a mode asked for, the socket is created with no more
        # permissions than that: no client can connect before the chmod.
        my $umask = defined $mode ? umask(~$mode & 0777) : undef;
        $socket = _unix_listen($path, $opts{backlog});
        my $error = $!;
        umask $umask if defined $umask;
        $socket or die "--listen: cannot listen on $path: $error\n";
        if (defined $mode) {
            chmod $mode, $path or die "--socket-mode: cannot chmod $path: $!\n";
        }
    } else {
        die "--listen: port '$parsed->{port}' is out of range\n" if $parsed->{port} > 65535;
        $socket = eval { _tcp_listen($parsed->{host}, $parsed->{port}, $opts{backlog}) }
            or die "--listen: cannot listen on $address: $@";
        _tune_tcp($socket);
    }
    my $listener = $class->_wrap($socket, $parsed->{path});
    $listener->{tls} = 1 if $parsed->{tls};
    return $listener;
}

sub _unix_listen {
    my ($path, $backlog) = @_;
    socket(my $socket, AF_UNIX, SOCK_STREAM, 0) or return undef;
    bind($socket, pack_sockaddr_un($path)) && listen($socket, $backlog) or return undef;
    return $socket;
}

# A listening TCP socket on the first of host's addresses that binds (a name
# may have several); dies with the reason the last one failed.
sub _tcp_listen {
    my ($host, $port, $backlog) = @_;
    my ($error, @addresses) = getaddrinfo($host, $port, {
        flags => AI_PASSIVE | AI_NUMERICSERV, socktype => SOCK_STREAM, protocol => IPPROTO_TCP });
    die "$error\n" if $error;
    for my $address (@addresses) {
        socket(my $socket, $address->{family}, $address->{socktype}, $address->{protocol}) or do { $error = "$!"; next };
        setsockopt($socket, SOL_SOCKET, SO_REUSEADDR, 1) or do { $error = "$!"; next };
        # An IPv6 address given as such listens for IPv6 only: 0.0.0.0 on the
        # same port is another listener.
        if ($address->{family} == AF_INET6 && $host =~ /:/) {
            setsockopt($socket, IPPROTO_IPV6, IPV6_V6ONLY, 1) or do { $error = "$!"; next };
        }
        bind($socket, $address->{addr}) && listen($socket, $backlog) or do { $error = "$!"; next };
        return $socket;
    }
    die(($error // 'no address') . "\n");
}

sub _wrap {
    my ($class, $socket, $path) = @_;
    my $info = _describe_sockname($socket) or die "cannot read the address of a listen socket: $!\n";
    $info->{name} = $path if defined $path;
    $info->{path} = $path;
    $info->{socket} = $socket;
    $info->{fd} = fileno($socket);
    return bless $info, $class;
}

# A socket the caller opened and listens on (Plack's listen_sock).
sub from_socket {
    my ($class, $socket) = @_;
    my $listener = $class->_wrap($socket, undef);
    _tune_tcp($socket) unless $listener->{is_unix};
    return $listener;
}

# Sockets handed over by Server::Starter: SERVER_STARTER_PORT is
# "addr=fd;addr=fd", one entry per port, TCP and UNIX alike.
sub from_server_starter {
    my ($class, $spec) = @_;
    my @listeners;
    for my $entry (split /;/, $spec) {
        my ($addr, $fd) = $entry =~ /\A(.*)=(\d+)\z/
            or die "SERVER_STARTER_PORT: cannot read '$entry'\n";
        open(my $socket, '+<&=', $fd) or die "SERVER_STARTER_PORT: fd $fd for $addr: $!\n";
        my $listener = $class->_wrap($socket, undef);
        _tune_tcp($socket) unless $listener->{is_unix};
        $listener->{name} = $addr;
        push @listeners, $listener;
    }
    return @listeners;
}

# Sockets from systemd socket activation (LISTEN_FDS, starting at fd 3).
sub from_systemd {
    my ($class, $count) = @_;
    my @listeners;
    for my $fd (3 .. 3 + $count - 1) {
        open(my $socket, '+<&=', $fd) or die "LISTEN_FDS: fd $fd: $!\n";
        my $listener = $class->_wrap($socket, undef);
        _tune_tcp($socket) unless $listener->{is_unix};
        push @listeners, $listener;
    }
    return @listeners;
}

# TERM, INT, QUIT: a socket Serow opened (--listen) stops taking
# connections at once, in every process that has it: new clients are
# refused (a balancer or a proxy tries elsewhere) instead of waiting in the
# backlog for a worker that will not come.  shutdown acts on the socket, not
# on this process's descriptor.  Sockets handed over (Server::Starter,
# systemd, listen_sockets) are left open: they outlive this server.
sub stop_accepting {
    my ($self) = @_;
    shutdown($self->{socket}, SHUT_RDWR) if $self->{owned};
}

sub close_and_unlink {
    my ($self) = @_;
    close $self->{socket};
    unlink $self->{path} if defined $self->{path} && $self->{owned};
}

1;
__END__

=head1 NAME

Serow::Listener - the listen sockets of a Serow server

=head1 DESCRIPTION

Opens the sockets named by C<--listen> (IPv4, IPv6 and UNIX), or takes the
ones Server::Starter (C<SERVER_STARTER_PORT>) or systemd (C<LISTEN_FDS>)
hand over. TCP sockets get C<TCP_NODELAY> and C<TCP_DEFER_ACCEPT>.

=cut
