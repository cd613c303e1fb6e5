use strict;
use warnings;
use Test::More;
use lib 'bench/lib';
use File::Temp ();
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

subtest 'own processes named by a test of (pid, name)' => sub {
    my @lines = (
        switch(30.000, 'wrk', 300, 'tokio-rt-worker', 75),
        switch(30.010, 'tokio-rt-worker', 75, 'client', 301),       # 10 ms
        switch(30.011, 'client', 301, 'perf', 302),
        switch(30.012, 'perf', 302, 'wrk', 300),                    # 1 ms
    );
    my $s = Serow::Bench::CpuStalls::summarize(\@lines, sub { $_[1] eq 'wrk' || $_[1] eq 'client' });
    is sprintf('%.1f', $s->{other_ms}), '11.0', 'the agent and the recorder';
    is sprintf('%.1f', $s->{longest_ms}), '10.0', 'two stretches: client ran between them';
    is $s->{longest_by}, 'tokio-rt-worker';
};

subtest 'only while a named process ran' => sub {
    my @lines = (
        switch(40.000, 'perl', 400, 'taskset', 401),                # before: not counted
        switch(40.020, 'taskset', 401, 'wrk', 401),
        switch(40.030, 'wrk', 401, 'tokio-rt-worker', 75),
        switch(40.032, 'tokio-rt-worker', 75, 'wrk', 401),          # 2 ms
        switch(40.040, 'wrk', 401, 'perl', 400),
        switch(40.090, 'perl', 400, 'perf', 402),                   # after: not counted
    );
    my $during = Serow::Bench::CpuStalls::lines_during(\@lines, 'wrk');
    is scalar @$during, 4, 'from the switch to wrk to the last one away from it';
    my $s = Serow::Bench::CpuStalls::summarize($during, sub { $_[1] eq 'wrk' });
    is sprintf('%.1f', $s->{other_ms}), '2.0', 'only the agent, inside';
    is_deeply Serow::Bench::CpuStalls::lines_during(\@lines, 'nobody'), [], 'never ran: nothing';
};

subtest 'a task that executed another program counts under its new name' => sub {
    my @lines = (
        switch(50.000, 'perl', 400, 'taskset', 401),
        switch(50.003, 'wrk', 401, 'tokio-rt-worker', 75),          # taskset became wrk
        switch(50.005, 'tokio-rt-worker', 75, 'wrk', 401),
    );
    my $s = Serow::Bench::CpuStalls::summarize(\@lines, sub { $_[1] eq 'wrk' });
    is sprintf('%.1f', $s->{other_ms}), '2.0', 'the 3 ms of taskset-then-wrk are wrk\'s';
    ok !exists $s->{by}{taskset}, 'not counted as taskset';
};

subtest 'no switches at all' => sub {
    my $s = Serow::Bench::CpuStalls::summarize([], [100]);
    is $s->{seconds}, 0;
    is $s->{longest_ms}, 0;
    is $s->{stretches_over_1ms}, 0;
};

subtest 'a real recording of two CPUs: a busy process is seen on its own CPU' => sub {
    plan skip_all => 'perf cannot record scheduler switches here' unless Serow::Bench::CpuStalls::available();
    my $cpus = () = grep { /^processor/ } do { open my $f, '<', '/proc/cpuinfo' or die; <$f> };
    plan skip_all => 'needs 2 CPUs' if $cpus < 2;
    my $rec = Serow::Bench::CpuStalls::start([0, 1], 1);
    ok $rec, 'recording';
    # a process pinned to each CPU that computes for a while, under names
    # of their own; the "server" only sleeps: each busy one must show up as
    # another process's time on its CPU, and only there
    # (named by a symbolic link to perl: a process's name in the switches is
    # that of the file it executed, from its first instruction on)
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    my @busy;
    for my $cpu (0, 1) {
        symlink $^X, "$dir/busy-on-cpu$cpu" or die "symlink: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            exec 'taskset', '-c', $cpu, "$dir/busy-on-cpu$cpu", '-e', 'my $x = 0; $x++ for 1 .. 20_000_000;';
            exit 127;
        }
        push @busy, $pid;
    }
    waitpid $_, 0 for @busy;
    my $each = Serow::Bench::CpuStalls::stop_each($rec, { 0 => [$$], 1 => sub { $_[0] == $$ } });
    for my $cpu (0, 1) {
        my $s = $each->{$cpu};
        ok $s && $s->{seconds} > 0, "switches were recorded on CPU $cpu";
        cmp_ok $s->{by}{"busy-on-cpu$cpu"} // 0, '>', 0, "the busy process pinned to CPU $cpu took it";
        ok !$s->{by}{ 'busy-on-cpu' . (1 - $cpu) }, 'the other CPU\'s is not counted here';
        cmp_ok $s->{longest_ms}, '>', 0, 'in at least one stretch';
    }
};

done_testing;
