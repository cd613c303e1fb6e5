# Reports, from inside a worker, the options of its listen sockets and of the
# connection it answers on, one line each:
#   listen FD FAMILY nodelay=N defer=N cloexec=N
#   conn FD tcp|unix nodelay=N cloexec=N nonblock=N
use strict;
use warnings;
use POSIX ();
use Socket qw(SOL_SOCKET SO_ACCEPTCONN IPPROTO_TCP TCP_NODELAY AF_UNIX AF_INET AF_INET6 sockaddr_family);

use constant TCP_DEFER_ACCEPT => 9;
use constant O_CLOEXEC => 02000000;
use constant O_NONBLOCK => 04000;

# The flags of one descriptor of this process, from /proc (per descriptor:
# a dup shares the socket but not FD_CLOEXEC).
sub fd_flags {
    my ($fd) = @_;
    open(my $fh, '<', "/proc/self/fdinfo/$fd") or return 0;
    local $/;
    return (<$fh> =~ /^flags:\s*([0-7]+)/m) ? oct $1 : 0;
}

sub int_option {
    my ($sock, $level, $name) = @_;
    my $v = getsockopt($sock, $level, $name);
    return defined $v ? unpack('i', $v) : -1;
}

# The line of descriptor $fd if it is a listen socket, or the connection of
# the request (a TCP socket whose peer's port is $remote_port, or an
# accepted UNIX socket: bound to the listen path, not listening).  The
# connection is found so, not through psgix.io: that handle makes the
# connection blocking for as long as the app has it (docs/psgi.md).
sub describe {
    my ($fd, $remote_port) = @_;
    my $dup = POSIX::dup($fd) // return;
    open(my $sock, '+<&=', $dup) or do { POSIX::close($dup); return };
    my $listening = getsockopt($sock, SOL_SOCKET, SO_ACCEPTCONN);
    $listening = $listening && unpack('i', $listening);
    my $name = getsockname($sock);
    my $family = $name ? sockaddr_family($name) : -1;
    my $tcp = $family == AF_INET || $family == AF_INET6;
    my $line;
    if ($listening && $name) {
        $line = sprintf 'listen %d %s nodelay=%d defer=%d cloexec=%d', $fd,
            $family == AF_UNIX ? 'unix' : $family == AF_INET6 ? 'inet6' : 'inet',
            $tcp ? int_option($sock, IPPROTO_TCP, TCP_NODELAY) : 0,
            $tcp ? int_option($sock, IPPROTO_TCP, TCP_DEFER_ACCEPT) : 0,
            fd_flags($fd) & O_CLOEXEC ? 1 : 0;
    } elsif ($name && is_connection($sock, $family, $name, $remote_port)) {
        my $flags = fd_flags($fd);
        $line = sprintf 'conn %d %s nodelay=%d cloexec=%d nonblock=%d', $fd, $tcp ? 'tcp' : 'unix',
            $tcp ? int_option($sock, IPPROTO_TCP, TCP_NODELAY) : 0,
            $flags & O_CLOEXEC ? 1 : 0, $flags & O_NONBLOCK ? 1 : 0;
    }
    close $sock;
    return $line;
}

sub is_connection {
    my ($sock, $family, $name, $remote_port) = @_;
    if ($family == AF_UNIX) {
        # (the worker's channels to the connection holder are unnamed pairs)
        return length((Socket::unpack_sockaddr_un($name))[0] // '') > 0;
    }
    my $peer = getpeername($sock) or return 0;
    my ($port) = $family == AF_INET6 ? Socket::unpack_sockaddr_in6($peer) : Socket::unpack_sockaddr_in($peer);
    return $port == $remote_port;
}

sub {
    my ($env) = @_;
    my @lines;
    for my $path (glob '/proc/self/fd/*') {
        my ($fd) = $path =~ /(\d+)$/;
        my $target = readlink($path) // next;
        next unless $target =~ /^socket:/;
        my $line = describe($fd, $env->{REMOTE_PORT});
        push @lines, $line if defined $line;
    }
    return [200, ['Content-Type' => 'text/plain'], [join("\n", sort @lines) . "\n"]];
};
