package Serow::Test::Server;
use strict;
use warnings;

# A real Serow for a test: started on a socket the test has already bound
# (so there is no port to guess and nothing to wait for: connections queue in
# the backlog until a worker takes them), its log read as it is written, and
# stopped by the test (or killed with its process group should the object go
# away first).  And script/serow run to its end, for command lines that fail
# at once.

use Exporter 'import';
use File::Temp ();
use IO::Select ();
use IO::Socket::IP ();
use POSIX ();
use Time::HiRes ();
use Fcntl ();
use Serow::Test::Common qw(root READ_TIMEOUT STOP_TIMEOUT);
use Serow::Test::Process qw(child_pids fork_group wait_for_exit kill_group run_command wait_until);
use Serow::Test::Client qw(http_get);

our @EXPORT_OK = qw(start_server run_serow serow_command);

# The command line that runs script/serow from this checkout's build, with @argv.
sub serow_command {
    my (@argv) = @_;
    my $root = root();
    return ($^X, "-I$root/blib/lib", "-I$root/blib/arch", "$root/script/serow", @argv);
}

# Runs script/serow with @argv to its end (for command lines that fail at
# once, or --help); returns (exit status, standard output and error).
sub run_serow {
    my $run = run_command(serow_command(@_));
    return ($run->{status}, $run->{output});
}

# start_server(app => CODE | app_file => PATH | command => [ARGV], options => [...],
#              listen => 'tcp' | 'unix' | 'none', env => {...})
# listen 'none' hands no socket over: the server opens the ones its --listen
# options name (find a port with Net::EmptyPort and wait for it).  command runs
# that command line instead (plackup, start_server, a perl -e), with the same
# log pipe, environment and process group.
sub start_server {
    my (%args) = @_;
    # owner: only the test process that started the server stops it when the
    # object goes away, not a process forked from it that holds a copy (the
    # master of a second server, its workers, a canned server in a test).
    my $self = bless { log => '', owner => $$ }, __PACKAGE__;
    my @fds;
    my $listen = $args{listen} // 'tcp';
    if ($listen eq 'none') {
        # nothing to hand over
    } elsif ($listen eq 'unix') {
        require IO::Socket::UNIX;
        $self->{dir} = File::Temp->newdir;
        $self->{path} = "$self->{dir}/serow.sock";
        $self->{socket} = IO::Socket::UNIX->new(Local => $self->{path}, Listen => 1024)
            or die "cannot listen on $self->{path}: $!";
        push @fds, "$self->{path}=" . fileno($self->{socket});
    } else {
        $self->{socket} = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0,
            Listen => 1024, ReuseAddr => 1) or die "cannot listen: $@";
        $self->{port} = $self->{socket}->sockport;
        push @fds, "127.0.0.1:$self->{port}=" . fileno($self->{socket});
    }
    if ($self->{socket}) {
        # The child must inherit the listen socket.
        my $flags = fcntl($self->{socket}, Fcntl::F_GETFD(), 0);
        fcntl($self->{socket}, Fcntl::F_SETFD(), $flags & ~Fcntl::FD_CLOEXEC());
    }

    pipe(my $log_read, my $log_write) or die "pipe: $!";
    my @options = @{ $args{options} || [] };
    $self->{pid} = fork_group(sub {
        close $log_read;
        POSIX::dup2(fileno($log_write), 2) or POSIX::_exit(111);
        # Not the test's stdout: a server left running must not keep prove waiting.
        open(STDOUT, '>', '/dev/null');
        if (@fds) {
            $ENV{SERVER_STARTER_PORT} = join ';', @fds;
        } else {
            delete @ENV{qw(SERVER_STARTER_PORT LISTEN_FDS LISTEN_PID)};
        }
        %ENV = (%ENV, %{ $args{env} || {} });
        if ($args{command}) {
            my @command = @{ $args{command} };
            { exec { $command[0] } @command }
            return;
        }
        if ($args{app_file}) {
            my @command = serow_command(@options, $args{app_file});
            { exec { $command[0] } @command }
            return;
        }
        require Serow::Server;
        require Serow::Options;
        my ($opts) = Serow::Options->from_argv(@options);
        delete @$opts{qw(help version)};
        my $status = eval { Serow::Server->new(%$opts)->run($args{app}) };
        print STDERR "server died: $@" unless defined $status;
        POSIX::_exit($status // 113);
    });
    close $log_write;
    $self->{log_fh} = $log_read;
    return $self;
}

sub port { $_[0]{port} }
sub path { $_[0]{path} }

# The test keeps its copy of the listen socket it handed over, so after stop
# the kernel still accepts connections on the port (and leaves them
# unanswered).  A test that needs the port to refuse connections, as it
# would once a real server is gone (a balancer's health check), closes it.
sub close_listen_socket {
    my ($self) = @_;
    close(delete $self->{socket}) if $self->{socket};
}
sub pid { $_[0]{pid} }
sub url { "http://127.0.0.1:$_[0]{port}" }

# Reads what the server has logged so far, without blocking.
sub log {
    my ($self) = @_;
    $self->_read_log(0);
    return $self->{log};
}

sub _read_log {
    my ($self, $timeout) = @_;
    my $fh = $self->{log_fh} or return 0;
    my $sel = IO::Select->new($fh);
    return 0 unless $sel->can_read($timeout);
    my $n = sysread($fh, my $chunk, 65536);
    if (!$n) {
        delete $self->{log_fh};
        return 0;
    }
    $self->{log} .= $chunk;
    return 1;
}

# Waits until a GET of $path ('/') is answered 200, bounded by wait_until's
# deadline; returns true then.  The server takes connections before its
# workers have started (they wait in the listen backlog): a test whose
# requests must not wait there first (--max-queue-wait sheds one that waited
# through a slow start) makes them once this is true.
sub wait_until_serving {
    my ($self, $path) = @_;
    return wait_until(sub { my $res = http_get($self, $path // '/'); $res && $res->{status} == 200 });
}

# Waits until the log matches $re (a line the server writes when it gets
# there), up to $timeout (READ_TIMEOUT) seconds.  Returns the match or undef.
# Each wait looks past the line the one before it matched, so that waiting
# twice for the same line waits for two of them.  Lines that different
# processes write in no fixed order are waited for from a mark instead
# (wait_for_log($re, $timeout, $mark) looks past the mark and moves nothing).
sub wait_for_log {
    my ($self, $re, $timeout, $mark) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    my $from = $mark // $self->{log_seen} // 0;
    for (;;) {
        if (substr($self->{log}, $from) =~ $re) {
            $self->{log_seen} = $from + $+[0] unless defined $mark;
            return $&;
        }
        my $left = $deadline - Time::HiRes::time;
        return undef if $left <= 0 || !$self->{log_fh};
        $self->_read_log($left);
    }
}

# Waits until $re has matched $n times; returns what its first group (or
# the whole pattern) matched each time, or as many as came in time.  With a
# $mark, as wait_for_log: from the mark, moving nothing.
sub wait_for_log_all {
    my ($self, $re, $n, $timeout, $mark) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    my $from = $mark // $self->{log_seen} // 0;
    for (;;) {
        my (@found, $end);
        my $text = substr($self->{log}, $from);
        while (@found < $n && $text =~ /$re/g) {
            push @found, defined $1 ? $1 : $&;
            $end = pos $text;
        }
        if (@found == $n || !$self->{log_fh} || Time::HiRes::time >= $deadline) {
            $self->{log_seen} = $from + $end if defined $end && !defined $mark;
            return @found;
        }
        $self->_read_log($deadline - Time::HiRes::time);
    }
}

# A mark for wait_for_log: the end of what the server has logged so far.
sub log_mark {
    my ($self) = @_;
    1 while $self->_read_log(0);
    return length $self->{log};
}

# Waits for the master to exit; returns its wait status or undef on timeout.
sub wait_exit {
    my ($self, $timeout) = @_;
    return $self->{exit_status} if defined $self->{exit_status};
    my $status = wait_for_exit($self->{pid}, $timeout // STOP_TIMEOUT);
    $self->{exit_status} = $status;
    $self->log if defined $status; # collect the last lines
    return $status;
}

sub signal {
    my ($self, $sig) = @_;
    kill $sig, $self->{pid};
}

sub stop {
    my ($self) = @_;
    return $self->{exit_status} if defined $self->{exit_status} || !$self->{pid};
    kill 'TERM', $self->{pid};
    return $self->wait_exit // ($self->{exit_status} = kill_group($self->{pid}));
}

sub DESTROY {
    my ($self) = @_;
    return unless $self->{pid} && !defined $self->{exit_status} && $self->{owner} == $$;
    local ($?, $@, $!);
    kill_group($self->{pid});
}

# The master's workers (its children but the connection holder).
sub worker_pids { child_pids($_[0]{pid}) }

1;
