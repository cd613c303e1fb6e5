package Serow::Bench::Process;
use strict;
use warnings;

# The processes of a benchmark: a free port, starting a command in a session
# of its own (so that its whole process group can be stopped), waiting until
# it answers HTTP, stopping it, and what its processes are (RSS, PSS,
# descriptors).  Used by bench/bench.pl and bench/profile.

use File::Temp ();
use IO::Handle ();
use IO::Socket::INET ();
use IO::Socket::UNIX ();
use POSIX qw(WNOHANG);
use Time::HiRes ();
use Serow::Bench::Util qw(slurp);

use Exporter 'import';
our @EXPORT_OK = qw(free_port unix_path spawn start_process alive stop wait_ready group_processes);

# A free TCP port on 127.0.0.1, below the ephemeral range (the idle scenario
# uses thousands of ephemeral ports), never the same twice in a run.
my %used_port;
sub free_port {
    for (1 .. 200) {
        my $port = 10000 + int rand 22000;
        next if $used_port{$port}++;
        my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 1,
            Proto => 'tcp') or next;
        close $s;
        return $port;
    }
    die "bench: found no free port\n";
}

# Logs and UNIX sockets go here unless the caller says where.
my $DIR;
sub dir {
    return "$DIR" if $DIR;
    $DIR = File::Temp->newdir('serow-bench-XXXXXX', TMPDIR => 1);
    chmod 0755, "$DIR";
    return "$DIR";
}

my $unix_counter = 0;
sub unix_path { dir() . "/backend" . ++$unix_counter . '.sock' }

# Starts a command in its own session, pinned to CPU 0.  Returns a handle for
# stop().
sub spawn {
    my ($name, @cmd) = @_;
    return start_process({ name => $name, cpu => 0 }, @cmd);
}

# start_process({ name, cpu, log, env, chdir }, @cmd): the command in its own
# session, stdin from /dev/null, stdout and stderr to log (by default a new
# file in dir()); cpu: taskset -c CPU first; env: variables to set.
my $log_counter = 0;
my %LIVE;
sub start_process {
    my ($o, @cmd) = @_;
    my $name = $o->{name} // $cmd[0];
    my $log = $o->{log} // dir() . "/" . ++$log_counter . ".$name.log";
    my $pid = fork // die "bench: fork: $!\n";
    if (!$pid) {
        POSIX::setsid();
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $log;
        open STDERR, '>&', \*STDOUT;
        @ENV{ keys %{ $o->{env} } } = values %{ $o->{env} } if $o->{env};
        chdir $o->{chdir} if defined $o->{chdir};
        unshift @cmd, 'taskset', '-c', $o->{cpu} if defined $o->{cpu};
        exec @cmd or POSIX::_exit(127);
    }
    my $p = { name => $name, pid => $pid, log => $log, cmd => \@cmd };
    $LIVE{$pid} = $p;
    return $p;
}

# Whatever is still running when the benchmark ends or is interrupted.
END {
    my $status = $?;
    stop($_) for values %LIVE;
    $? = $status;
}

sub alive {
    my ($p) = @_;
    return 0 if $p->{exited};
    my $r = waitpid $p->{pid}, WNOHANG;
    if ($r == $p->{pid}) {
        $p->{exited} = 1;
        $p->{status} = $?;
        return 0;
    }
    return 1;
}

sub group_alive { kill 0, -$_[0]{pid} }

# TERM to the whole group; KILL what is left after $grace seconds (10 s).
sub stop {
    my ($p, $grace) = @_;
    return unless $p;
    kill 'TERM', -$p->{pid};
    my $deadline = Time::HiRes::time + ($grace // 10);
    while (Time::HiRes::time < $deadline) {
        alive($p);
        last if $p->{exited} && !group_alive($p);
        Time::HiRes::sleep(0.05);
    }
    if (group_alive($p)) {
        kill 'KILL', -$p->{pid};
        Time::HiRes::sleep(0.1);
    }
    waitpid $p->{pid}, 0 unless $p->{exited};
    $p->{exited} = 1;
    delete $LIVE{ $p->{pid} };
}

# Waits (up to 60 s: a busy machine can be slow) until the address accepts a
# connection and answers an HTTP request; returns the status line or undef.
sub wait_ready {
    my ($p, $addr, $path) = @_;
    $path //= '/';
    my $deadline = Time::HiRes::time + 60;
    while (Time::HiRes::time < $deadline) {
        return undef if $p && !alive($p);
        my $s = connect_to($addr);
        if ($s) {
            my $status = http_get($s, $path);
            return $status if defined $status;
        }
        Time::HiRes::sleep(0.1);
    }
    return undef;
}

sub connect_to {
    my ($addr) = @_;
    return $addr =~ m{^/}
        ? IO::Socket::UNIX->new(Peer => $addr, Type => IO::Socket::UNIX::SOCK_STREAM())
        : IO::Socket::INET->new(PeerAddr => $addr, Proto => 'tcp', Timeout => 5);
}

sub http_get {
    my ($s, $path) = @_;
    $s->autoflush(1);
    print {$s} "GET $path HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" or return undef;
    my $line;
    eval {
        local $SIG{ALRM} = sub { die "timeout\n" };
        alarm 10;
        $line = <$s>;
        alarm 0;
    };
    alarm 0;
    return undef unless defined $line && $line =~ m{^HTTP/1\.\d (\d{3})};
    return $1;
}

# The processes of a group: pid, ppid, cmdline, RSS and PSS in KiB, fds.
sub group_processes {
    my ($p) = @_;
    my @procs;
    for my $stat_file (glob '/proc/[0-9]*/stat') {
        my $stat = slurp($stat_file) // next;
        $stat =~ /^(\d+) \(.*\) \S+ (\d+) (\d+)/s or next;
        my ($pid, $ppid, $pgrp) = ($1, $2, $3);
        next unless $pgrp == $p->{pid};
        my $cmdline = slurp("/proc/$pid/cmdline") // next;
        $cmdline =~ tr/\0/ /;
        $cmdline =~ s/\s+\z//;
        my $status = slurp("/proc/$pid/status") // '';
        my ($rss) = $status =~ /^VmRSS:\s+(\d+)/m;
        my $rollup = slurp("/proc/$pid/smaps_rollup") // '';
        my ($pss) = $rollup =~ /^Pss:\s+(\d+)/m;
        my @fds = glob "/proc/$pid/fd/*";
        push @procs, { pid => $pid, ppid => $ppid, cmd => $cmdline, rss => $rss // 0,
            pss => $pss // 0, fds => scalar @fds };
    }
    return sort { $a->{pid} <=> $b->{pid} } @procs;
}

1;
