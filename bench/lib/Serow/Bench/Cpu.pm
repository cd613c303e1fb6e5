package Serow::Bench::Cpu;
use strict;
use warnings;

# CPU time during a measurement: how much the server's processes used, and
# how much of CPU 0 (the server's) and CPU 1 (the load generator's) other
# processes on this shared machine took (probe_start, probe_end; from /proc);
# and, with --record-stalls, who else ran on them and for how long
# (wrk_recording_stalls, through Serow::Bench::CpuStalls).

use POSIX ();
use Serow::Bench::Config qw(%opt);
use Serow::Bench::CpuStalls ();
use Serow::Bench::Load qw(wrk);
use Serow::Bench::Process qw(group_processes);
use Serow::Bench::Util qw(slurp);

use Exporter 'import';
our @EXPORT_OK = qw(probe_start probe_end wrk_recording_stalls);

my $CLK_TCK = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;

# (busy, total) ticks of one CPU.  Interrupt and softirq time are left out of
# busy: on loopback much of it is the benchmark's own traffic.
sub cpu_ticks {
    my ($cpu) = @_;
    my ($line) = (slurp('/proc/stat') // '') =~ /^cpu$cpu (.*)$/m or return (0, 0);
    my ($user, $nice, $system, $idle, $iowait, $irq, $softirq, $steal) = split ' ', $line;
    my $busy = $user + $nice + $system + ($steal // 0);
    return ($busy, $busy + $idle + $iowait + $irq + $softirq);
}

sub group_ticks {
    my (@groups) = @_;
    my %pg = map { $_->{pid} => 1 } grep { defined } @groups;
    my $ticks = 0;
    for my $stat_file (glob '/proc/[0-9]*/stat') {
        my $stat = slurp($stat_file) // next;
        $stat =~ /\) (.*)$/s or next;
        my @f = split ' ', $1;
        # after the command: state ppid pgrp ... utime (12th) stime (13th),
        # then cutime and cstime, the children's that were waited for: a
        # worker that exits during the measurement (Starlet's end after 100
        # requests) leaves the sum, and its parent's cutime brings its time back.
        $ticks += $f[11] + $f[12] + $f[13] + $f[14] if $pg{ $f[2] };
    }
    return $ticks;
}

# wrk, recording what else ran on CPU 0 (the server's) and CPU 1 (the load
# generator's) meanwhile, with --record-stalls (Serow::Bench::CpuStalls, when
# perf can; perf on CPU 1 lengthens wrk's p99, docs/benchmarks.md): adds
# stall_ms (CPU 0's time given to other processes, per second of the run),
# stall_longest_ms and stall_longest_by, and the same for CPU 1 as
# loadgen_stall_ms, ... (other than wrk and bench/client, whose idle
# connections it holds, from wrk's start to its end; perf itself, the
# recorder, runs there and counts).
sub wrk_recording_stalls {
    my ($p, %w) = @_;
    return wrk(%w) unless $opt{record_stalls};
    my $rec = Serow::Bench::CpuStalls::start([0, 1], 1);
    my $r = wrk(%w);
    my $each = Serow::Bench::CpuStalls::stop_each($rec, {
        0 => [map { $_->{pid} } group_processes($p)],
        1 => sub { $_[1] eq 'wrk' || $_[1] eq 'client' },
    }, { 1 => 'wrk' });
    for my $cpu (0, 1) {
        my $s = $each && $each->{$cpu};
        next unless $s && $s->{seconds} > 0;
        my $prefix = $cpu ? 'loadgen_' : '';
        $r->{"${prefix}stall_ms"} = $s->{other_ms} / $s->{seconds};
        $r->{"${prefix}stall_longest_ms"} = $s->{longest_ms};
        $r->{"${prefix}stall_longest_by"} = $s->{longest_by};
    }
    return $r;
}

sub probe_start {
    my (@groups) = @_;
    my ($busy0, $total0) = cpu_ticks(0);
    my ($busy1, $total1) = cpu_ticks(1);
    my (undef, undef, $cuser, $csys) = times;
    return { groups => \@groups, busy0 => $busy0, total0 => $total0, busy1 => $busy1, total1 => $total1,
        children => $cuser + $csys, server => group_ticks(@groups) };
}

# Adds cpu0_other and cpu1_other (the share of CPU 0, where the server runs,
# and of CPU 1, where the load generator runs, that other processes took)
# and, given a request count, cpu_us (server CPU time per request, in
# microseconds).  The load generator's own time comes from times(): it is a
# child that has been waited for.
sub probe_end {
    my ($probe, $r, $requests) = @_;
    my ($busy0, $total0) = cpu_ticks(0);
    my ($busy1, $total1) = cpu_ticks(1);
    my (undef, undef, $cuser, $csys) = times;
    my $server = group_ticks(@{ $probe->{groups} }) - $probe->{server};
    my $client = ($cuser + $csys - $probe->{children}) * $CLK_TCK;
    if ((my $dt = $total0 - $probe->{total0}) > 0) {
        my $other = ($busy0 - $probe->{busy0}) - $server;
        $r->{cpu0_other} = $other > 0 ? $other / $dt : 0;
    }
    if ((my $dt = $total1 - $probe->{total1}) > 0) {
        my $other = ($busy1 - $probe->{busy1}) - $client;
        $r->{cpu1_other} = $other > 0 ? $other / $dt : 0;
    }
    $r->{cpu_us} = $server / $CLK_TCK * 1e6 / $requests if $requests;
}

1;
