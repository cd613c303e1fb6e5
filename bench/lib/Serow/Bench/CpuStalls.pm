package Serow::Bench::CpuStalls;
use strict;
use warnings;

# What took the server's CPU away while it was measured.
#
# A p99 of a millisecond or two is decided by a handful of stretches in which
# the server could not run at all.  On a shared VM those are other processes
# on its CPU: here the VM's agent (a thread of PID 1 at nice -10, stretches of
# 2 to 18 ms) and kdamond (1 to 4 ms, more often with 10,000 connections
# open).  Without a record of them, a p99 that moves between rounds cannot be
# told apart from a change in the server.  This module records the
# scheduler's switches on that CPU (perf record -e sched:sched_switch -C CPU,
# the recorder itself on another CPU) and sums the stretches in which the CPU
# ran neither the server's processes nor nothing (idle).
#
#   my $rec = Serow::Bench::CpuStalls::start(0, 1) or ...;   # CPU 0, perf on CPU 1
#   ... the measurement ...
#   my $s = Serow::Bench::CpuStalls::stop($rec, \@server_pids);
#   # $s: { seconds, other_ms, longest_ms, longest_by, stretches_over_1ms, by => { name => ms } }

use File::Temp ();
use POSIX ();

# Stretches at least this long are counted apart: at ~100k requests a second,
# a stall of 1 ms holds every request in flight for longer than the p99 of a
# server that is not stalled (0.4-0.7 ms here).
use constant LONG_STRETCH_MS => 1;

my $available;

# Recorders still running when the program ends (it died between start and
# stop) are stopped, not left recording for ever.  (A ^C reaches them anyway:
# they are in the terminal's process group.)  Only by the process that
# started them: a child forked meanwhile that exits runs this END too.
my %recording; # recorder pid => pid of the process that started it
END {
    my @mine = grep { $recording{$_} == $$ } keys %recording;
    kill 'INT', @mine if @mine;
}

# Whether perf can record scheduler switches here (it needs the tracepoint,
# which root or perf_event_paranoid <= -1 may read).
sub available {
    return $available if defined $available;
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    my $status = system("perf record -q -e sched:sched_switch -C 0 -o $dir/probe.data -- true >/dev/null 2>&1");
    return $available = $status == 0 && -s "$dir/probe.data" ? 1 : 0;
}

# Starts recording the switches on $cpu, the recorder pinned to $recorder_cpu.
# Returns undef when perf cannot.
sub start {
    my ($cpu, $recorder_cpu) = @_;
    return undef unless available();
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    my $file = "$dir/switches.data";
    my $pid = fork;
    return undef unless defined $pid;
    if (!$pid) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        { exec 'taskset', '-c', $recorder_cpu, 'perf', 'record', '-q', '-e', 'sched:sched_switch',
            '-C', $cpu, '-o', $file }
        POSIX::_exit(127);
    }
    # perf writes its header once it records; wait for it (bounded), so that
    # the measurement that follows is covered from its start
    for (1 .. 200) {
        last if -s $file;
        select undef, undef, undef, 0.01;
    }
    $recording{$pid} = $$;
    return { pid => $pid, file => $file, dir => $dir };
}



# Stops the recording and summarises it for the processes in @$server_pids.
sub stop {
    my ($rec, $server_pids) = @_;
    return undef unless $rec;
    kill 'INT', $rec->{pid};
    waitpid $rec->{pid}, 0;
    delete $recording{ $rec->{pid} };
    # (perf script warns on stderr that 'trace' is no field of other kinds
    # of events: there are none here)
    open my $fh, '-|', 'sh', '-c', 'exec perf script -F time,trace -i "$1" 2>/dev/null', 'sh', $rec->{file}
        or return undef;
    my @lines = <$fh>;
    close $fh;
    return summarize(\@lines, $server_pids);
}

# From `perf script -F time,trace` lines of sched_switch events on one CPU.
# The CPU runs, from each switch to the next, the task switched to.  A switch
# whose previous task is not the one we think runs means the recorder lost an
# event (seen with the agent's thread): the stretch goes to the task we knew,
# so a stall is never shortened, at worst lengthened by a few microseconds.
sub summarize {
    my ($lines, $server_pids) = @_;
    my %server = map { $_ => 1 } @$server_pids;
    my (%by, @stretches);
    my ($first, $last, $running, $running_name, $since);
    my ($stretch_start, $stretch_by);
    for my $line (@$lines) {
        my ($t, $prev_name, $prev_pid, $next_name, $next_pid) = $line =~
            /^\s*([\d.]+):\s+prev_comm=(.*?) prev_pid=(\d+) .*==> next_comm=(.*?) next_pid=(\d+)/
            or next;
        $first //= $t;
        $last = $t;
        if (defined $running) {
            my $other = $running != 0 && !$server{$running};
            if ($other) {
                $by{$running_name} += $t - $since;
                $stretch_start //= $since;
                $stretch_by //= {};
                $stretch_by->{$running_name} += $t - $since;
            }
            # the stretch ends when the server or nothing runs next
            if (defined $stretch_start && ($next_pid == 0 || $server{$next_pid})) {
                push @stretches, [$t - $stretch_start, $stretch_by];
                undef $stretch_start;
                undef $stretch_by;
            }
        }
        ($running, $running_name, $since) = ($next_pid, $next_name, $t);
    }
    push @stretches, [$last - $stretch_start, $stretch_by] if defined $stretch_start;
    my ($longest) = sort { $b->[0] <=> $a->[0] } @stretches;
    my $other = 0;
    $other += $_ for values %by;
    return {
        seconds => defined $first ? $last - $first : 0,
        other_ms => 1000 * $other,
        longest_ms => $longest ? 1000 * $longest->[0] : 0,
        longest_by => $longest ? join(', ', sort { $longest->[1]{$b} <=> $longest->[1]{$a} } keys %{ $longest->[1] }) : '',
        stretches_over_1ms => scalar(grep { $_->[0] * 1000 >= LONG_STRETCH_MS } @stretches),
        by => { map { $_ => 1000 * $by{$_} } keys %by },
    };
}

1;
