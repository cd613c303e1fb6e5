package Serow::Bench::CpuStalls;
use strict;
use warnings;

# What took the server's CPU, or the load generator's, away while it was
# measured.
#
# A p99 of a millisecond or two is decided by a handful of stretches in which
# the server, or the client timing it, could not run at all.  On a shared VM
# those are other processes on its CPU: here the VM's agent (tokio-rt-worker,
# a thread of PID 1; stretches of 2 to 60 ms, and more of them with 10,000
# connections open) and kdamond (1 to 4 ms).  Without a record of them, a p99
# that moves between rounds cannot be told apart from a change in the server.
# This module records the scheduler's switches on the given CPUs (perf record
# -e sched:sched_switch -C CPUS, the recorder pinned to one CPU) and sums, per
# CPU, the stretches in which the CPU ran neither its own processes (the
# server's, or the load generator's) nor nothing (idle).
#
#   my $rec = Serow::Bench::CpuStalls::start([0, 1], 1) or ...;   # CPUs 0 and 1, perf on CPU 1
#   ... the measurement ...
#   my $each = Serow::Bench::CpuStalls::stop_each($rec,
#       { 0 => \@server_pids, 1 => sub { $_[1] eq 'wrk' } },   # own: pids, or a test of (pid, name)
#       { 1 => 'wrk' });                                       # CPU 1: only while wrk ran
#   # $each: { 0 => $s, 1 => $s }, each
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

# Starts recording the switches on $cpus (a CPU number or a list of them), the
# recorder pinned to $recorder_cpu.  Returns undef when perf cannot.
sub start {
    my ($cpus, $recorder_cpu) = @_;
    my $cpu_list = join ',', ref $cpus ? @$cpus : $cpus;
    return undef unless available();
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    my $file = "$dir/switches.data";
    my $pid = fork;
    return undef unless defined $pid;
    if (!$pid) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        { exec 'taskset', '-c', $recorder_cpu, 'perf', 'record', '-q', '-e', 'sched:sched_switch',
            '-C', $cpu_list, '-o', $file }
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



# Stops a recording and summarises each CPU named for its own
# processes: $own_by_cpu->{CPU} is a list of pids or a test of (pid, name).
# $during_by_cpu->{CPU}, a process name, limits that CPU's summary to the
# time from the first switch to such a process to the last switch away from
# one: the program measured, without the recorder's own start and end (the
# load generator's CPU also runs this program, which starts and stops it).
sub stop_each {
    my ($rec, $own_by_cpu, $during_by_cpu) = @_;
    my $lines = stop_recording($rec) or return undef;
    my %by_cpu;
    push @{ $by_cpu{ $_->[0] } }, $_->[1] for @$lines;
    my %each;
    for my $cpu (keys %$own_by_cpu) {
        my $cpu_lines = $by_cpu{$cpu} // [];
        $cpu_lines = lines_during($cpu_lines, $during_by_cpu->{$cpu}) if $during_by_cpu && $during_by_cpu->{$cpu};
        $each{$cpu} = summarize($cpu_lines, $own_by_cpu->{$cpu});
    }
    return \%each;
}

# The switches from the first one to a process named $name to the last one
# away from such a process.
sub lines_during {
    my ($lines, $name) = @_;
    my ($first) = grep { $lines->[$_] =~ /==> next_comm=\Q$name\E next_pid=/ } 0 .. $#$lines;
    my ($last) = grep { $lines->[$_] =~ /prev_comm=\Q$name\E prev_pid=/ } reverse 0 .. $#$lines;
    return [] unless defined $first && defined $last && $last >= $first;
    return [@$lines[$first .. $last]];
}

# Stops the recorder; returns its switches as [cpu, line] pairs.
sub stop_recording {
    my ($rec) = @_;
    return undef unless $rec;
    kill 'INT', $rec->{pid};
    waitpid $rec->{pid}, 0;
    delete $recording{ $rec->{pid} };
    # (perf script warns on stderr that 'trace' is no field of other kinds
    # of events: there are none here)
    open my $fh, '-|', 'sh', '-c', 'exec perf script -F cpu,time,trace -i "$1" 2>/dev/null', 'sh', $rec->{file}
        or return undef;
    my @lines = map { /^\s*\[(\d+)\]\s*(.*)/s ? [$1 + 0, $2] : () } <$fh>;
    close $fh;
    return \@lines;
}

# From `perf script -F time,trace` lines of sched_switch events on one CPU;
# $own: the pids of the processes whose CPU it is, or a test of (pid, name).
# The CPU runs, from each switch to the next, the task switched to.  A switch
# whose previous task is not the one we think runs means the recorder lost an
# event (seen with the agent's thread): the stretch goes to the task we knew,
# so a stall is never shortened, at worst lengthened by a few microseconds.
sub summarize {
    my ($lines, $own) = @_;
    my %own_pid = ref $own eq 'ARRAY' ? (map { $_ => 1 } @$own) : ();
    my $is_own = ref $own eq 'CODE' ? $own : sub { $own_pid{ $_[0] } };
    my (%by, @stretches);
    my ($first, $last, $running, $running_name, $since);
    my ($stretch_start, $stretch_by);
    for my $line (@$lines) {
        my ($t, $prev_name, $prev_pid, $next_name, $next_pid) = $line =~
            /^\s*([\d.]+):\s+prev_comm=(.*?) prev_pid=(\d+) .*==> next_comm=(.*?) next_pid=(\d+)/
            or next;
        $first //= $t;
        $last = $t;
        # a task that executed another program meanwhile switches out under
        # its new name (taskset becomes wrk): that is who it was
        $running_name = $prev_name if defined $running && $prev_pid == $running;
        if (defined $running) {
            my $other = $running != 0 && !$is_own->($running, $running_name);
            if ($other) {
                $by{$running_name} += $t - $since;
                $stretch_start //= $since;
                $stretch_by //= {};
                $stretch_by->{$running_name} += $t - $since;
            }
            # the stretch ends when an own process or nothing runs next
            if (defined $stretch_start && ($next_pid == 0 || $is_own->($next_pid, $next_name))) {
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
