use strict;
use warnings;
use Test::More;
use lib 'bench/lib';
use Serow::Bench::CpuStalls ();

# The benchmark's record of what else ran on the server's CPU
# (bench/lib/Serow/Bench/CpuStalls.pm): the summary of scheduler switches.

sub switch {
    my ($t, $prev, $prev_pid, $next, $next_pid) = @_;
    return sprintf "%12.6f:   prev_comm=%s prev_pid=%d prev_prio=120 prev_state=R ==> next_comm=%s next_pid=%d next_prio=120\n",
        $t, $prev, $prev_pid, $next, $next_pid;
}

subtest 'stretches of other processes, merged until the server or idle runs' => sub {
    my @lines = (
        switch(10.000, 'serow worker', 100, 'kdamond.0', 77),
        switch(10.002, 'kdamond.0', 77, 'tokio-rt-worker', 75),   # 2 ms, then straight on
        switch(10.005, 'tokio-rt-worker', 75, 'serow worker', 100), # 3 ms: one stretch of 5
        switch(10.100, 'serow worker', 100, 'swapper/0', 0),
        switch(10.200, 'swapper/0', 0, 'kworker/0:1', 29),          # idle is not a stall
        switch(10.2005, 'kworker/0:1', 29, 'swapper/0', 0),         # 0.5 ms
        switch(10.300, 'swapper/0', 0, 'serow holder', 101),
        switch(10.301, 'serow holder', 101, 'serow worker', 100),
    );
    my $s = Serow::Bench::CpuStalls::summarize(\@lines, [100, 101]);
    is sprintf('%.3f', $s->{seconds}), '0.301', 'from the first switch to the last';
    is sprintf('%.1f', $s->{other_ms}), '5.5', 'time given to other processes';
    is sprintf('%.1f', $s->{longest_ms}), '5.0', 'the longest stretch, two processes merged';
    is $s->{longest_by}, 'tokio-rt-worker, kdamond.0', 'who ran in it, longest first';
    is $s->{stretches_over_1ms}, 1, 'one stretch of at least 1 ms';
    is sprintf('%.1f', $s->{by}{'kdamond.0'}), '2.0', 'time by process';
};

subtest 'a lost switch: the stretch goes to the task known to run' => sub {
    my @lines = (
        switch(20.000, 'serow worker', 100, 'tokio-rt-worker', 75),
        # tokio -> holder was not recorded; the holder's switch out is
        switch(20.004, 'serow holder', 101, 'serow worker', 100),
    );
    my $s = Serow::Bench::CpuStalls::summarize(\@lines, [100, 101]);
    is sprintf('%.1f', $s->{longest_ms}), '4.0', 'counted as the agent\'s, never shorter';
    is $s->{longest_by}, 'tokio-rt-worker';
};

subtest 'no switches at all' => sub {
    my $s = Serow::Bench::CpuStalls::summarize([], [100]);
    is $s->{seconds}, 0;
    is $s->{longest_ms}, 0;
    is $s->{stretches_over_1ms}, 0;
};

subtest 'a real recording: a busy process on the recorded CPU is seen' => sub {
    plan skip_all => 'perf cannot record scheduler switches here' unless Serow::Bench::CpuStalls::available();
    my $cpus = () = grep { /^processor/ } do { open my $f, '<', '/proc/cpuinfo' or die; <$f> };
    plan skip_all => 'needs 2 CPUs' if $cpus < 2;
    my $rec = Serow::Bench::CpuStalls::start(0, 1);
    ok $rec, 'recording';
    # a process pinned to CPU 0 that computes for a while, then a "server"
    # that only sleeps: the busy one must show up as another process's time
    my $busy = fork // die "fork: $!";
    if (!$busy) {
        exec 'taskset', '-c', '0', $^X, '-e', 'my $x = 0; $x++ for 1 .. 20_000_000;';
        exit 127;
    }
    waitpid $busy, 0;
    my $s = Serow::Bench::CpuStalls::stop($rec, [$$]);
    ok $s && $s->{seconds} > 0, 'switches were recorded';
    cmp_ok $s->{by}{perl} // 0, '>', 0, 'the busy perl took CPU 0 from the server';
    cmp_ok $s->{longest_ms}, '>', 0, 'in at least one stretch';
};

done_testing;
