package Serow::Test::HAProxy;
use strict;
use warnings;

# A real HAProxy (Debian's) in front of Serow servers a test started, with
# eg/haproxy/serow.cfg (shown in docs/deployment.md) changed only where a
# test must: its address (a free port), its hosts, its check interval.  In
# the foreground, its log in a temp dir, stopped by the test.
#
#   use Serow::Test qw(need_debian_packages start_server http_get);
#   use Serow::Test::HAProxy;
#   need_debian_packages('haproxy');
#   my @servers = map { start_server(...) } 1 .. 2;  # with the status page
#   my $haproxy = Serow::Test::HAProxy->start(servers => \@servers);
#   http_get($haproxy, '/');                          # { port } like a server
#   $haproxy->stop;

use parent 'Serow::Test::Daemon';
use IO::Socket::IP ();
use Net::EmptyPort ();
use POSIX ();
use Serow::Test::Process qw(wait_until fork_group);

use constant SAMPLE => 'eg/haproxy/serow.cfg';
use constant START_TIMEOUT => 60;

# The sample, listening on 127.0.0.1:$port, with @$servers as its hosts.
sub sample_config {
    my (%o) = @_;
    my $config = do { local $/; open my $fh, '<', SAMPLE or die SAMPLE . ": $!"; <$fh> };
    $config =~ s/^(\s*bind) :80$/$1 127.0.0.1:$o{port}/m or die 'no bind line';
    $config =~ s/^\s*server app\d .*\n//mg or die 'no server lines';
    $config =~ s/\binter 2s\b/inter $o{check_interval}/ or die 'no check interval' if $o{check_interval};
    $config .= join '', map { "    server app$_ 127.0.0.1:" . $o{servers}[$_]->port . " check\n" }
        0 .. $#{ $o{servers} };
    return $config;
}

# start(servers => [...], check_interval => '200ms'): checked (haproxy -c)
# and started; dies with HAProxy's words when it does not start.
sub start {
    my ($class, %o) = @_;
    my $self = $class->new('haproxy');
    $self->{port} = Net::EmptyPort::empty_port();
    my $dir = "$self->{dir}";
    open my $fh, '>', "$dir/haproxy.cfg" or die $!;
    print {$fh} "global\n    pidfile $dir/haproxy.pid\n\n",
        sample_config(%o, port => $self->{port});
    close $fh;
    my $check = do { local $ENV{LD_PRELOAD}; delete $ENV{LD_PRELOAD}; `haproxy -c -f $dir/haproxy.cfg 2>&1` };
    die "haproxy -c refuses the configuration:\n$check" if $?;
    $self->{pid} = fork_group(sub {
        open(STDOUT, '>', "$dir/haproxy.log");
        open(STDERR, '>&', \*STDOUT);
        # The listen sockets handed to the servers stay open across exec:
        # haproxy holding them would keep a stopped server's port accepting.
        $_->close_listen_socket for @{ $o{servers} };
        delete $ENV{LD_PRELOAD}; # tools/test-sanitized's libasan is for perl
        exec 'haproxy', '-db', '-f', "$dir/haproxy.cfg";
    });
    my $up = wait_until(sub {
        if (waitpid($self->{pid}, POSIX::WNOHANG()) == $self->{pid}) {
            $self->{exit_status} = $?;
            return 'exited';
        }
        IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $self->{port}) ? 'listening' : 0;
    }, START_TIMEOUT) // '';
    die "haproxy did not start:\n" . $self->log unless $up eq 'listening';
    return $self;
}

sub log { $_[0]->_slurp('haproxy.log') }

# TERM: HAProxy stops at once.
sub ask_to_stop { kill 'TERM', $_[0]{pid} }

1;
