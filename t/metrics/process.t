use strict;
use warnings;
use Test::More;
use Time::HiRes ();
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until all_child_pids is_connection_holder generation_pids);
use Serow::Test::Prometheus qw(parse value);

# The process metrics: process_* for the whole server, serow_process_* for
# each process (master, holder, workers by slot and pid), read from /proc
# when /metrics is scraped.  Plausible values, labels that name the running
# processes, and a CPU counter that does not go down when a worker that
# used CPU is replaced.

my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/burn') {
        # CPU time, measured by the worker's own clock: a condition, not a duration.
        my $until = (times)[0] + 0.5;
        my $x = 0;
        $x += sqrt($_) for 1 .. 1e5;
        while ((times)[0] < $until) { $x += sqrt($_) for 1 .. 1e5 }
        return [200, ['Content-Type' => 'text/plain'], ["$$\n"]];
    }
    if ($env->{PATH_INFO} eq '/leave') {
        $env->{'psgix.harakiri.commit'} = 1;
        return [200, ['Content-Type' => 'text/plain'], ["$$\n"]];
    }
    return [200, ['Content-Type' => 'text/plain'], ["$$\n"]];
};

my $before = time;
my $server = start_server(app => $app, options => ['--workers', 2, '--metrics-path', '/metrics']);
my $after = time;

sub scrape {
    my $res = http_get($server, '/metrics') or return undef;
    return eval { parse($res->{body}) } || do { diag "unparsable: $@\n$res->{body}"; undef };
}

# The samples of a family by their labels: { "role pid slot" => value }.
sub by_process {
    my ($m, $name) = @_;
    my %v;
    for my $s (@{ $m->{families}{$name}{samples} || [] }) {
        my $l = $s->{labels};
        $v{ join ' ', $l->{role}, $l->{pid}, $l->{slot} // '-' } = $s->{value};
    }
    return \%v;
}

# (The server answers before the master has forked every process.)
my ($holder, @workers);
ok wait_until(sub {
    my @children = all_child_pids($server->pid);
    ($holder) = grep { is_connection_holder($_) } @children;
    @workers = sort { $a <=> $b } grep { $_ != ($holder // 0) } @children;
    return $holder && @workers == 2;
}), 'the holder and two workers run';

# Once the two workers have marked their slots.
my $m = wait_until(sub {
    my $m = scrape() or return 0;
    my @workers = grep { $_->{labels}{role} eq 'worker' }
        @{ $m->{families}{serow_process_resident_memory_bytes}{samples} || [] };
    return @workers == 2 && $m;
});
ok $m, 'the metrics parse strictly' or BAIL_OUT('no metrics');

for my $name (qw(process_resident_memory_bytes process_virtual_memory_bytes process_cpu_seconds_total
                 process_open_fds process_max_fds process_start_time_seconds)) {
    ok exists $m->{samples}{"$name\{}"}, "$name, without labels";
    ok $m->{families}{"serow_$name"}, "serow_$name, by process";
}
is $m->{families}{process_cpu_seconds_total}{type}, 'counter', 'CPU seconds: a counter';
is $m->{families}{process_resident_memory_bytes}{type}, 'gauge', 'memory: a gauge';

my $rss = by_process($m, 'serow_process_resident_memory_bytes');
# The slots are the shared memory's; the pids must be the running processes.
my @roles = sort map { /\A(\w+ \d+)/ } keys %$rss;
my @expected = sort("master " . $server->pid, "holder $holder", map { "worker $_" } @workers);
is_deeply \@roles, \@expected, 'one sample per process: the master, the holder and the workers, by pid'
    or diag explain $rss;
my @slots = sort map { /\Aworker \d+ (\d+)\z/ ? $1 : () } keys %$rss;
is_deeply \@slots, [0, 1], 'each worker with its slot';

cmp_ok $_, '>', 0, 'resident memory > 0' for values %$rss;
my $sum = 0;
$sum += $_ for values %$rss;
is value($m, 'process_resident_memory_bytes'), $sum, 'process_resident_memory_bytes: the sum of the processes';
cmp_ok value($m, 'process_virtual_memory_bytes'), '>=', value($m, 'process_resident_memory_bytes'),
    'virtual memory >= resident';

my $fds = by_process($m, 'serow_process_open_fds');
my ($master_fds) = map { $fds->{$_} } grep { /\Amaster / } keys %$fds;
# 0, 1, 2 and the listen socket at least.
cmp_ok $master_fds, '>=', 4, 'the master: standard descriptors and the listen socket';
cmp_ok $_, '>=', 4, 'each process has its descriptors open' for values %$fds;
cmp_ok value($m, 'process_open_fds'), '>=', 4 * 4, 'process_open_fds: the sum';
my $limit = (split ' ', `sh -c 'ulimit -n'`)[0];
is value($m, 'process_max_fds'), $limit, 'process_max_fds: the soft limit' if $limit =~ /\A\d+\z/;

my $start = value($m, 'process_start_time_seconds');
# (the kernel's boot time is in whole seconds: a second either side)
cmp_ok $start, '>=', $before - 2, 'the start time is the master\'s, not the machine\'s';
cmp_ok $start, '<=', $after + 2, '... and not later than the server started';
my $starts = by_process($m, 'serow_process_start_time_seconds');
my ($master_start) = map { $starts->{$_} } grep { /\Amaster / } keys %$starts;
is $start, $master_start, 'process_start_time_seconds: the master\'s';

subtest 'the CPU of a worker that left still counts' => sub {
    # Both workers are likely to burn, and whichever answers /leave is then
    # counted in the master's cutime once it is waited for.
    for (1 .. 4) {
        my $res = http_get($server, '/burn');
        is $res && $res->{status}, 200, 'a request that uses half a second of CPU';
    }
    my $before_leave = scrape() or return fail('a scrape');
    my $cpu = value($before_leave, 'process_cpu_seconds_total');
    cmp_ok $cpu, '>=', 1, 'the CPU the requests used is counted';
    my $left = http_get($server, '/leave');
    chomp(my $gone = $left->{body} // '');
    my $cpu_after;
    ok wait_until(sub {
        my $now = scrape() or return 0;
        my $rss = by_process($now, 'serow_process_resident_memory_bytes');
        return 0 if grep { /\Aworker \Q$gone\E / } keys %$rss;      # still there
        return 0 if 2 != grep { /\Aworker / } keys %$rss;            # not replaced yet
        $cpu_after = value($now, 'process_cpu_seconds_total');
        1;
    }), "worker $gone left and was replaced";
    cmp_ok $cpu_after, '>=', $cpu, 'process_cpu_seconds_total did not go down';
};

is $server->stop, 0, 'the server stops cleanly';

# serow FILE: the generation process, which holds a compiled copy of the
# app, is one of the processes; after a HUP, the new one (the old one left).
subtest 'serow FILE: the generation process is counted, the new one after a HUP' => sub {
    my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--workers', 1, '--metrics-path', '/metrics']);
    ok $server->wait_for_log(qr/worker \d+ started/), 'a worker started' or return diag $server->log;
    my ($generation) = generation_pids($server->pid);
    ok $generation, 'the generation process' or return;
    my $generations = sub {
        my $res = http_get($server, '/metrics') or return '';
        my $m = eval { parse($res->{body}) } or return '';
        return join ' ', sort map { /\Ageneration (\d+) / ? $1 : () }
            keys %{ by_process($m, 'serow_process_resident_memory_bytes') };
    };
    ok wait_until(sub { $generations->() eq $generation }), 'serow_process_*{role="generation"}, its pid'
        or diag $generations->();
    $server->signal('HUP');
    my $new;
    ok wait_until(sub { my @now = generation_pids($server->pid);
                        ($new) = grep { $_ != $generation } @now;
                        $new && !grep { $_ == $generation } @now }),
        'HUP: a new generation, the old one gone';
    ok wait_until(sub { $generations->() eq ($new // '') }), 'the metrics follow' or diag $generations->();
    is $server->stop, 0;
};

done_testing;
