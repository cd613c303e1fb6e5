package Serow::Test::Process;
use strict;
use warnings;

# Processes, for Serow's tests: polling for a condition, what /proc says of a
# process and its children (a master's workers, its connection holder), and
# the life of a process a test starts (its own group, stopped with a bound,
# killed with its group) or runs to its end.

use Exporter 'import';
use POSIX ();
use Time::HiRes ();
use Serow::Test::Common qw(READ_TIMEOUT);

our @EXPORT_OK = qw(wait_until proc_stat_fields process_alive all_child_pids child_pids
                    is_connection_holder is_generation generation_pids fork_group wait_for_exit kill_group run_command);

# Polls $cond until it is true or $timeout seconds pass.  For conditions no
# event announces (a process count in /proc); returns the last value.
sub wait_until {
    my ($cond, $timeout) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    my $interval = 0.01;
    for (;;) {
        my $v = $cond->();
        return $v if $v || Time::HiRes::time > $deadline;
        Time::HiRes::usleep($interval * 1e6);
        $interval *= 2 if $interval < 0.2;
    }
}

# ---- /proc -------------------------------------------------------------------

# Every child of $pid, the connection holder included.
sub all_child_pids {
    my ($pid) = @_;
    my @children;
    for my $file (glob "/proc/$pid/task/*/children") {
        open(my $fh, '<', $file) or next;
        push @children, split ' ', scalar(<$fh>) // '';
    }
    return @children;
}

# The fields of /proc/PID/stat from the state on (state, ppid, ...; utime and
# stime are the 12th and 13th), or () when the process is gone.  The line is
# "pid (comm) state ppid ...", and comm may hold spaces and parentheses.
sub proc_stat_fields {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/stat") or return ();
    my $line = <$fh> // return ();
    return split ' ', substr($line, rindex($line, ')') + 2);
}

sub _parent_pid { (proc_stat_fields($_[0]))[1] // 0 }

sub _cmdline {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/cmdline") or return '';
    return scalar(<$fh>) // '';
}

# Whether $pid is a server's connection holder.  A child of the master names
# itself in $0 ("serow worker", "serow connection holder") just after fork;
# until then it shows the master's name, so this waits (bounded) for a child
# that still does.
sub is_connection_holder { _settled_cmdline($_[0]) =~ /\Aserow connection holder/ }

# Whether $pid is a generation process (serow FILE: it loaded the app and
# forks the workers; Serow::Generation).
sub is_generation { _settled_cmdline($_[0]) =~ /\Aserow generation/ }

# The generation processes of the master $pid, oldest first.
sub generation_pids {
    my ($pid) = @_;
    return sort { $a <=> $b } grep { is_generation($_) } all_child_pids($pid);
}

# $pid's command line, once it has named itself: a child the master has
# just forked is still called "serow master" for a moment.
sub _settled_cmdline {
    my ($pid) = @_;
    my $cmdline = _cmdline($pid);
    if ($cmdline =~ /\Aserow master/ && _cmdline(_parent_pid($pid)) =~ /\Aserow master/) {
        wait_until(sub { $cmdline = _cmdline($pid); $cmdline !~ /\Aserow master/ });
    }
    return $cmdline;
}

# The pids whose parent is $pid (from /proc), zombies, the connection
# holder and generation processes left out (for a Serow master: its
# workers); in scalar context, how many.
sub child_pids {
    my ($pid) = @_;
    my @children;
    for my $dir (glob '/proc/[0-9]*') {
        my ($child) = $dir =~ /(\d+)\z/;
        my ($state, $ppid) = proc_stat_fields($child) or next; # the process may be gone already
        push @children, $child
            if $ppid == $pid && $state ne 'Z' && !is_connection_holder($child) && !is_generation($child);
    }
    @children = sort { $a <=> $b } @children;
    return wantarray ? @children : scalar @children;
}

# Whether $pid runs (a zombie does not).
sub process_alive {
    my ($state) = proc_stat_fields($_[0]);
    return defined $state && $state ne 'Z';
}

# ---- processes a test starts ---------------------------------------------------

# fork_group(sub { ...; exec ... }): forks a child that leads a process group
# of its own (so that the test can kill it with whatever it started) and gets
# a TERM from the kernel should the test die without stopping it (a signal, a
# crash).  The child runs the code with SIGPIPE back to its default (an
# ignored signal would stay ignored across exec), and exits 112 if the code
# returns (an exec that failed).  Returns the child's pid.
sub fork_group {
    my ($child) = @_;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        POSIX::setpgid(0, 0);
        # The death signal survives exec.
        eval { require Serow; Serow::set_parent_death_signal(POSIX::SIGTERM()) };
        $SIG{PIPE} = 'DEFAULT';
        $child->();
        POSIX::_exit(112);
    }
    # The child does this too; whichever runs first, the group exists before
    # anything here may signal it.
    POSIX::setpgid($pid, $pid);
    return $pid;
}

# Waits for the child $pid to exit; returns its wait status, or undef when
# $timeout seconds pass first.
sub wait_for_exit {
    my ($pid, $timeout) = @_;
    my $status;
    eval {
        local $SIG{ALRM} = sub { die "timeout\n" };
        alarm($timeout);
        my $r = waitpid($pid, 0);
        alarm 0;
        $status = $? if $r == $pid;
    };
    alarm 0;
    return $status;
}

# Kills the process group $pid leads (the whole group: a worker would
# outlive a killed master) and reaps $pid; returns its wait status.
sub kill_group {
    my ($pid) = @_;
    kill 'KILL', -$pid;
    waitpid($pid, 0);
    return $?;
}

# Runs @command to its end; returns { status, output }: its exit status (or
# 128 + the signal that killed it) and its standard output and error.
sub run_command {
    my @command = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if (!$pid) {
        open(STDERR, '>&', \*STDOUT) or POSIX::_exit(111);
        { exec { $command[0] } @command }
        print "exec $command[0]: $!\n";
        POSIX::_exit(127);
    }
    local $/;
    my $output = <$fh> // '';
    close $fh;
    my $status = $? & 127 ? 128 + ($? & 127) : $? >> 8;
    return { status => $status, output => $output };
}

1;
