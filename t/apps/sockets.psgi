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

sub describe {
    my ($fd) = @_;
    my $dup = POSIX::dup($fd) // return;
    open(my $sock, '+<&=', $dup) or do { POSIX::close($dup); return };
    my $listening = getsockopt($sock, SOL_SOCKET, SO_ACCEPTCONN);
    my $name = getsockname($sock);
    my $line;
    if ($listening && unpack('i', $listening) && $name) {
        my $family = sockaddr_family($name);
        my $tcp = $family != AF_UNIX;
        $line = sprintf 'listen %d %s nodelay=%d defer=%d cloexec=%d', $fd,
            $family == AF_UNIX ? 'unix' : $family == AF_INET6 ? 'inet6' : 'inet',
            $tcp ? int_option($sock, IPPROTO_TCP, TCP_NODELAY) : 0,
            $tcp ? int_option($sock, IPPROTO_TCP, TCP_DEFER_ACCEPT) : 0,
            fd_flags($fd) & O_CLOEXEC ? 1 : 0;
    }
    close $sock;
    return $line;
}

sub {
    my ($env) = @_;
    my @lines;
    my $io = $env->{'psgix.io'};
    my $conn = readlink("/proc/self/fd/" . fileno($io)) // '';
    for my $path (glob '/proc/self/fd/*') {
        my ($fd) = $path =~ /(\d+)$/;
        next if $fd == fileno($io);
        my $target = readlink($path) // next;
        next unless $target =~ /^socket:/;
        if ($target eq $conn) {
            my $flags = fd_flags($fd);
            my $tcp = sockaddr_family(getsockname($io)) != AF_UNIX;
            push @lines, sprintf 'conn %d %s nodelay=%d cloexec=%d nonblock=%d', $fd, $tcp ? 'tcp' : 'unix',
                $tcp ? int_option($io, IPPROTO_TCP, TCP_NODELAY) : 0,
                $flags & O_CLOEXEC ? 1 : 0, $flags & O_NONBLOCK ? 1 : 0;
        } elsif (defined(my $line = describe($fd))) {
            push @lines, $line;
        }
    }
    return [200, ['Content-Type' => 'text/plain'], [join("\n", sort @lines) . "\n"]];
};
