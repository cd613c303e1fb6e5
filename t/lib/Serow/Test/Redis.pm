package Serow::Test::Redis;
use strict;
use warnings;

# A real redis-server for a test (--publish-redis): on a port the OS gave
# free, no persistence, in a temporary directory; stopped and started again
# on the same port (a Redis that restarts).  Skips the test when Debian's
# redis-server cannot be had.
#
#   my $redis = Serow::Test::Redis->start;   # or plan skip_all
#   $redis->url('prefix')                    # redis://127.0.0.1:PORT/prefix
#   $redis->stop; $redis->start_again;
#   $redis->pause; $redis->kill_now;            # frozen, then gone without a word

use File::Temp ();
use IO::Socket::IP ();
use Net::EmptyPort ();
use POSIX ();
use Test::More ();
use Serow::Test::Components qw(find_command need_debian_packages);
use Serow::Test::Process qw(wait_until);

sub start {
    my ($class) = @_;
    need_debian_packages('redis-server');
    my $binary = find_command('redis-server', '/usr/bin', '/usr/sbin')
        or Test::More::plan(skip_all => 'redis-server is installed but not found');
    my $self = bless { binary => $binary, dir => File::Temp->newdir,
                       port => Net::EmptyPort::empty_port() }, $class;
    $self->start_again or die "redis-server did not start on port $self->{port}\n";
    return $self;
}

sub port { $_[0]{port} }
sub url { my ($self, $prefix) = @_; "redis://127.0.0.1:$self->{port}" . (defined $prefix ? "/$prefix" : '') }

# Started (again) on its port; true once it accepts connections.  The port
# was free when picked: another process could take it meanwhile, and then
# this fails and says so.
sub start_again {
    my ($self) = @_;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', '/dev/null';
        exec $self->{binary}, '--port', $self->{port}, '--bind', '127.0.0.1', '--save', '',
            '--appendonly', 'no', '--dir', "$self->{dir}", '--daemonize', 'no', '--loglevel', 'warning'
            or POSIX::_exit(127);
    }
    $self->{pid} = $pid;
    my $exited = 0;
    my $up = wait_until(sub {
        $exited = waitpid($pid, POSIX::WNOHANG()) == $pid;
        $exited || IO::Socket::IP->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port});
    }, 60);
    delete $self->{pid} if $exited; # (reaped: no pid of ours to stop)
    $self->stop unless $up;
    return $up && !$exited;
}

# Frozen (SIGSTOP): it takes commands into its sockets and answers none.
sub pause { kill 'STOP', $_[0]{pid} }

# Killed at once (frozen or not): the kernel closes its connections.
sub kill_now { $_[0]->stop('KILL') }

# Stopped, and waited for: its clients' connections are closed.
sub stop {
    my ($self, $signal) = @_;
    my $pid = delete $self->{pid} or return;
    kill $signal // 'TERM', $pid;
    waitpid $pid, 0; # (at once when it exited already)
}

sub DESTROY { $_[0]->stop }

1;
