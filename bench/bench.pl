#!/usr/bin/perl
# bench/bench.pl - Serow's benchmark.  Run it through bench/run, which
# installs the tools, builds Serow and the load client, and raises the
# open-file limit first.  See docs/benchmarks.md.
#
# Every server runs with all its processes pinned to CPU 0 (taskset -c 0),
# the load generator on CPU 1 (taskset -c 1, one thread).  Each scenario runs
# every server in turn, round after round, and reports the median over the
# rounds and the ratio to Serow measured in the same run.
use strict;
use warnings;
use 5.020;

use Cwd ();
use File::Basename ();
use File::Path ();
use File::Temp ();
use Getopt::Long ();
use IO::Handle ();
use IO::Socket::INET ();
use IO::Socket::UNIX ();
use IPC::Open2 ();
use POSIX qw(WNOHANG);
use Time::HiRes ();

my $ROOT;
BEGIN { $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/..') }
use lib "$ROOT/t/lib", "$ROOT/bench/lib";
use Serow::Test::NginxConfig ();
use Serow::Bench::CpuStalls ();
chdir $ROOT or die "$ROOT: $!\n";
my $BENCH = "$ROOT/bench";
my $CLIENT = "$BENCH/.build/client";

# ---- options ---------------------------------------------------------------

my %opt = (rounds => 3, duration => 5, quick => 0, servers => '', out => "$BENCH/results");
Getopt::Long::GetOptions(
    'rounds|r=i'   => \$opt{rounds},
    'duration|d=i' => \$opt{duration},
    'quick|q'      => \$opt{quick},
    'servers|s=s'  => \$opt{servers},
    'out|o=s'      => \$opt{out},
    'record-stalls' => \$opt{record_stalls},
    'list|l'       => \$opt{list},
    'help|h'       => \$opt{help},
) or usage(2);
usage(0) if $opt{help};

# Names and titles of the servers, in the order of every table.
my @SERVERS = qw(serow starman uwsgi hsp nginx);
my %TITLE = (serow => 'Serow', starman => 'Starman', uwsgi => 'uWSGI', hsp => 'HTTP::Server::PSGI',
    nginx => 'nginx');

# The scenarios, in the order they run; each is a function below.
my @SCENARIOS = (
    [hello_keepalive => 'hello, keep-alive, 16 connections (and worker RSS)'],
    [hello_close     => 'hello, Connection: close, 16 connections'],
    [body_8k         => '8 KiB body, keep-alive, 16 connections'],
    [file_2_4mb      => '2.4 MB file from a file handle, 4 connections'],
    [post_64k        => 'POST 64 KiB body, 16 connections'],
    [streaming       => 'streamed response (8 writes), 16 connections'],
    [behind_nginx_unix => 'behind nginx over a UNIX socket, 16 connections'],
    [idle_10k        => '(a) 10,000 idle keep-alive connections + 32 active'],
    [blocking_10ms   => '(b) 10 ms blocking app, 200 clients, 8 workers'],
    [slow_2pct       => '(c) 2% of requests block 50 ms, 64 clients, 8 workers'],
    [nginx_front     => '(d) nginx in front, upstream keep-alive 32, 64 clients, 4 workers'],
);
my %SCENARIO = map { $_->[0] => $_->[1] } @SCENARIOS;

if ($opt{list}) {
    printf "%-18s %s\n", @$_ for @SCENARIOS;
    exit 0;
}

my @run = @ARGV ? @ARGV : map { $_->[0] } @SCENARIOS;
for (@run) {
    die "bench: unknown scenario '$_' (bench/run --list shows them)\n" unless $SCENARIO{$_};
}
my %only = map { $_ => 1 } split /,/, $opt{servers};
for (keys %only) {
    die "bench: unknown server '$_' (one of: @SERVERS)\n" unless $TITLE{$_};
}

my $QUICK = $opt{quick};
my $ROUNDS = $QUICK ? 1 : $opt{rounds};
my $DURATION = $QUICK ? 1 : $opt{duration};
my $WARMUP = 1;
die "bench: --rounds and --duration must be at least 1\n" if $ROUNDS < 1 || $DURATION < 1;
# In --quick mode (a CI smoke test, not a measurement) the connection counts
# are smaller too.
my $IDLE = $QUICK ? 300 : 10_000;
# (a)'s active connections, beside the idle ones.
my $ACTIVE = $QUICK ? 8 : 32;
my $FD_LIMIT = (POSIX::sysconf(POSIX::_SC_OPEN_MAX()) || 1024) + 0;
if ($IDLE + 500 > $FD_LIMIT) {
    $IDLE = $FD_LIMIT - 500;
    note("the open-file limit is $FD_LIMIT: the idle scenario holds $IDLE connections, not 10,000");
}

sub usage {
    print <<'EOF';
Usage: bench/run [--rounds N] [--duration S] [--quick] [--servers a,b] [scenario ...]

  --rounds N     rounds per scenario; the median is reported (default 3)
  --duration S   seconds each measurement lasts (default 5)
  --quick        1 round of 1 s with fewer connections: a smoke test, not a measurement
  --servers LIST only these of: serow,starman,uwsgi,hsp,nginx
  --out DIR      where the results go (default bench/results)
  --record-stalls  in (a), record the scheduler's switches of both CPUs while
                 wrk runs (perf), to see who else took them; the recording
                 takes CPU 1 from wrk and lengthens its p99, so it is off
                 unless asked for
  --list         list the scenarios

Writes DIR/latest.md and DIR/latest.png (--quick: quick.md and quick.png).
EOF
    exit $_[0];
}

# ---- small helpers -----------------------------------------------------------

my @NOTES;
sub note { push @NOTES, $_[0]; say STDERR "bench: note: $_[0]" }
sub logf { my $fmt = shift; printf STDERR "$fmt\n", @_ }

sub median {
    my @v = sort { $a <=> $b } grep { defined } @_;
    return undef unless @v;
    return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2;
}

sub slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return undef;
    local $/;
    return scalar <$fh>;
}

sub loadavg { (split ' ', slurp('/proc/loadavg') // '? ? ?')[0] }

my $TMP = File::Temp->newdir('serow-bench-XXXXXX', TMPDIR => 1);
chmod 0755, "$TMP";

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

my $unix_counter = 0;
sub unix_path { "$TMP/backend" . ++$unix_counter . '.sock' }

# ---- processes ---------------------------------------------------------------

# Starts a command in its own session (so its whole process group can be
# stopped), pinned to CPU 0.  Returns a handle for stop().
my $log_counter = 0;
my %LIVE;
sub spawn {
    my ($name, @cmd) = @_;
    my $log = "$TMP/" . ++$log_counter . ".$name.log";
    my $pid = fork // die "bench: fork: $!\n";
    if (!$pid) {
        POSIX::setsid();
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $log;
        open STDERR, '>&', \*STDOUT;
        exec 'taskset', '-c', '0', @cmd or POSIX::_exit(127);
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

# TERM to the whole group; KILL what is left after 10 s.
sub stop {
    my ($p) = @_;
    return unless $p;
    kill 'TERM', -$p->{pid};
    my $deadline = Time::HiRes::time + 10;
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

# Which of a server's processes are its workers.
sub workers_of {
    my ($server, $p, @procs) = @_;
    return grep { $_->{cmd} eq 'serow worker' } @procs if $server eq 'serow';
    return grep { $_->{cmd} =~ /^starman worker/ } @procs if $server eq 'starman';
    return grep { $_->{ppid} == $p->{pid} } @procs if $server eq 'uwsgi';
    return grep { $_->{cmd} =~ /worker process/ } @procs if $server eq 'nginx';
    return @procs; # HTTP::Server::PSGI: one process does everything
}

# ---- servers ----------------------------------------------------------------

sub app_file { "$BENCH/apps/$_[0].psgi" }

# The command that starts $server on $listen (HOST:PORT or a UNIX socket).
#   workers: prefork servers' worker count
#   keepalive: keep-alive timeout for the idle scenario (servers that have one)
#   close_mode: the scenario sends Connection: close or streams without a length
sub server_command {
    my ($server, %o) = @_;
    my $listen = $o{listen};
    my $workers = $o{workers} // 4;
    my $app = app_file($o{app});
    if ($server eq 'serow') {
        return ($^X, '-Mblib', 'script/serow', '--listen', $listen, '--workers', $workers,
            ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()), $app);
    }
    if ($server eq 'starman') {
        return ('starman', '--preload-app', '--workers', $workers, '--listen', $listen,
            ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()), $app);
    }
    if ($server eq 'uwsgi') {
        # --http11-socket keeps connections alive but ignores Connection: close
        # and cannot frame a streamed response: --http-socket (one request per
        # connection) there.
        my $socket = $o{close_mode} ? '--http-socket' : '--http11-socket';
        return ('uwsgi', '--plugins', 'psgi', $socket, $listen, '--psgi', $app,
            '--processes', $workers, '--master', '--disable-logging', '--die-on-term',
            '--listen', 1024, ($listen =~ m{^/} ? ('--chmod-socket=666') : ()),
            ($o{keepalive} ? ('--socket-timeout', $o{keepalive}) : ()));
    }
    if ($server eq 'hsp') {
        return ('plackup', '-E', 'deployment', '-s', 'HTTP::Server::PSGI', '--listen', $listen, $app);
    }
    die "server_command: $server\n";
}

# nginx with a generated configuration (Serow::Test::NginxConfig, the one
# t/nginx/ and docs/deployment.md use).  %o: listen, and one of
#   body => text (return 200 "text"), root => dir (static files, sendfile),
#   upstream => address (proxy with upstream keep-alive 32);
#   connections => worker_connections.
my $nginx_counter = 0;
sub nginx_config {
    my (%o) = @_;
    my $dir = "$TMP/nginx" . ++$nginx_counter;
    File::Path::make_path("$dir/logs");
    open my $fh, '>', "$dir/nginx.conf" or die "$dir/nginx.conf: $!\n";
    # Upstream connections are not recycled during a run (keepalive_requests).
    print {$fh} Serow::Test::NginxConfig::main(keepalive_requests => 1_000_000, %o,
        dir => "$dir/logs", access_log => 0,
        connections => $o{connections} // 4096, rlimit_nofile => $FD_LIMIT,
        comment => 'generated by bench/bench.pl');
    close $fh;
    return ('nginx', '-p', $dir, '-c', "$dir/nginx.conf", '-e', "$dir/logs/error.log");
}

# Starts one server for a scenario and waits until it answers.  Returns the
# process handle and the address, or (undef, error).
sub start {
    my ($server, %o) = @_;
    my $listen = $o{listen} // '127.0.0.1:' . free_port();
    my @cmd = $server eq 'nginx'
        ? nginx_config(listen => $listen, %{ $o{nginx} }, connections => $o{connections})
        : server_command($server, %o, listen => $listen);
    my $p = spawn($server, @cmd);
    my $status = wait_ready($p, $listen, $o{path});
    if (!defined $status || $status !~ /^2/) {
        my $log = slurp($p->{log}) // '';
        $log =~ s/\s+\z//;
        stop($p);
        return (undef, "$TITLE{$server} did not answer on $listen"
            . (defined $status ? " (status $status)" : '') . ($log ? ": " . substr($log, -400) : ''));
    }
    $p->{listen} = $listen;
    return ($p);
}

# ---- load generators ---------------------------------------------------------

sub to_ms {
    my ($v) = @_;
    return undef unless defined $v && $v =~ /^([\d.]+)(us|ms|s|m)$/;
    return $1 / 1000 if $2 eq 'us';
    return $1 if $2 eq 'ms';
    return $1 * 1000 if $2 eq 's';
    return $1 * 60000;
}

# wrk on CPU 1, one thread.  Returns { rps, requests, p50, p99 (ms), errors, ... }.
sub wrk {
    my (%o) = @_;
    my @cmd = ('taskset', '-c', '1', 'wrk', '-t1', "-c$o{conns}", "-d$o{duration}s",
        '--timeout', '5s', '--latency');
    push @cmd, '-H', 'Connection: close' if $o{close};
    push @cmd, '-s', $o{script} if $o{script};
    push @cmd, "http://$o{addr}$o{path}";
    my ($out, $conns);
    if ($o{sample}) {
        # Near the end, how many bytes each of wrk's connections has received:
        # wrk's latency figures cover only the requests that were answered,
        # and cannot show a connection that a server left waiting.
        open my $fh, '-|', @cmd or die "bench: wrk: $!\n";
        Time::HiRes::sleep($o{duration} > 1 ? $o{duration} - 0.5 : 0.7);
        $conns = connection_bytes($o{addr});
        local $/;
        $out = <$fh> // '';
        close $fh;
    } else {
        $out = run_capture(@cmd);
    }
    my %r = (output => $out);
    if ($conns && @$conns) {
        my @b = sort { $a <=> $b } @$conns;
        $r{conns_seen} = @b;
        $r{conns_answered} = grep { $_ > 0 } @b;
        my $med = median(@b);
        $r{least_share} = $med > 0 ? $b[0] / $med : 0;
    }
    ($r{rps}) = $out =~ /Requests\/sec:\s+([\d.]+)/;
    ($r{requests}) = $out =~ /(\d+) requests in/;
    $r{p50} = to_ms($out =~ /^\s+50%\s+(\S+)/m ? $1 : undef);
    $r{p99} = to_ms($out =~ /^\s+99%\s+(\S+)/m ? $1 : undef);
    my ($c, $rd, $w, $t) = $out =~ /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/;
    my ($non2xx) = $out =~ /Non-2xx or 3xx responses: (\d+)/;
    @r{qw(err_connect err_read err_write err_timeout non2xx)} = map { $_ // 0 } ($c, $rd, $w, $t, $non2xx);
    $r{errors} = $r{err_connect} + $r{err_read} + $r{err_write} + $r{err_timeout} + $r{non2xx};
    $r{rps} //= 0;
    $r{requests} //= 0;
    # no answer, no latency (wrk prints zeros)
    $r{p50} = $r{p99} = undef unless $r{requests};
    return \%r;
}

# Bytes received so far by each established client connection to $addr
# (tcp_info from ss(8)); undef when ss is missing.
sub connection_bytes {
    my ($addr) = @_;
    my ($port) = $addr =~ /:(\d+)$/ or return undef;
    open my $fh, '-|', 'ss', '-Htin', 'state', 'established', "( dport = :$port )" or return undef;
    local $/;
    my $text = <$fh> // '';
    close $fh or return undef;
    my @bytes;
    # one entry per connection: the address line, then an indented info line
    for my $entry (split /\n(?=\S)/, $text) {
        next unless $entry =~ /\S/;
        push @bytes, $entry =~ /bytes_received:(\d+)/ ? $1 : 0;
    }
    return \@bytes;
}

sub run_capture {
    my @cmd = @_;
    open my $fh, '-|', @cmd or die "bench: $cmd[0]: $!\n";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return $out;
}

# bench/client load: per-connection answer counts and the longest wait.
sub client_load {
    my (%o) = @_;
    my ($host, $port) = split /:/, $o{addr};
    my @cmd = ('taskset', '-c', '1', $CLIENT, 'load', '--port', $port, '--conns', $o{conns},
        '--duration', $o{duration}, '--timeout', $o{duration} + 30);
    push @cmd, '--slow-every', $o{slow_every}, '--slow-path', '/slow' if $o{slow_every};
    my $out = run_capture(@cmd);
    my %r = map { split ' ', $_, 2 } grep { /\S/ } split /\n/, $out;
    $r{rps} = $r{req_per_sec} // 0;
    # the same kinds as wrk's, so that an error says what it was
    @r{qw(err_connect err_read err_write err_timeout)} =
        map { $r{$_} // 0 } qw(errors_connect errors_read errors_write errors_timeout);
    $r{non2xx} //= 0;
    $r{errors} = $r{err_connect} + $r{err_read} + $r{err_write} + $r{err_timeout} + $r{non2xx};
    return \%r;
}

# Connections per request during a measurement, from the kernel's count of
# accepted TCP connections (machine-wide: other activity adds a little).
sub passive_opens {
    my $snmp = slurp('/proc/net/snmp') // return undef;
    my @lines = grep { /^Tcp:/ } split /\n/, $snmp;
    my @names = split ' ', $lines[0];
    my @values = split ' ', $lines[1];
    my %t;
    @t{@names} = @values;
    return $t{PassiveOpens};
}

# CPU time during a measurement: how much the server's processes used, and
# how much of CPU 0 (the server's) and CPU 1 (the load generator's) other
# processes on this shared machine took.
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
        # after the command: state ppid pgrp ... utime (12th) stime (13th)
        $ticks += $f[11] + $f[12] if $pg{ $f[2] };
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

# ---- results -----------------------------------------------------------------

# rs('scenario', 'server') = [ per-round hashes ]
my %RESULTS;
my %FAILED;      # "server in scenario" => reason
my %LOAD;        # scenario => [load averages seen]
my $ANY_FAILURE = 0;

# Lookups that create nothing (no autovivification).
sub rs { $RESULTS{ $_[0] } ? $RESULTS{ $_[0] }{ $_[1] } : undef }
sub failed { $FAILED{ $_[0] } ? $FAILED{ $_[0] }{ $_[1] } : undef }

sub fail {
    my ($scenario, $server, $why) = @_;
    $FAILED{$scenario}{$server} //= $why;
    $ANY_FAILURE = 1;
    logf("  %s: FAILED: %s", $TITLE{$server}, $why);
}

sub servers_for {
    my (@list) = @_;
    return grep { !%only || $only{$_} } @list;
}

# Runs $measure->($server, $round) for each round and server in turn; a round
# in which the server process died (something outside stopped it) is run again
# once.
sub rounds {
    my ($scenario, $servers, $measure) = @_;
    for my $round (1 .. $ROUNDS) {
        push @{ $LOAD{$scenario} }, loadavg();
        for my $server (@$servers) {
            next if failed($scenario, $server);
            for my $try (1, 2) {
                my $r = eval { $measure->($server, $round) };
                if (!$r) {
                    my $err = $@ || 'no result';
                    chomp $err;
                    if ($err =~ /^RETRY: (.*)/ && $try == 1) {
                        note("$scenario, $TITLE{$server}, round $round: $1; the round was run again");
                        next;
                    }
                    $err =~ s/^RETRY: //;
                    fail($scenario, $server, $err);
                    last;
                }
                push @{ $RESULTS{$scenario}{$server} }, $r;
                logf("  round %d %-20s %s", $round, $TITLE{$server}, summary($r));
                last;
            }
        }
    }
}

sub summary {
    my ($r) = @_;
    my @s = (sprintf '%.0f req/s', $r->{rps});
    push @s, sprintf 'p99 %.2f ms', $r->{p99} if defined $r->{p99};
    push @s, "errors $r->{errors}" . (defined $r->{err_read}
        ? " (connect $r->{err_connect}, read $r->{err_read}, write $r->{err_write}, timeout $r->{err_timeout}, non-2xx $r->{non2xx})"
        : '') if $r->{errors};
    push @s, sprintf 'server CPU %.1f us/req', $r->{cpu_us} if defined $r->{cpu_us};
    push @s, sprintf 'others took %.0f%% of CPU 0, %.0f%% of CPU 1', 100 * $r->{cpu0_other}, 100 * ($r->{cpu1_other} // 0)
        if defined $r->{cpu0_other};
    push @s, $r->{extra} if $r->{extra};
    return join ', ', @s;
}

# Dies with RETRY when the server is gone after a measurement.
sub check_alive {
    my ($p) = @_;
    return if alive($p);
    my $log = slurp($p->{log}) // '';
    die "RETRY: the server exited during the measurement ("
        . (($p->{status} // 0) & 127 ? 'signal ' . ($p->{status} & 127) : 'status ' . (($p->{status} // 0) >> 8))
        . ')' . ($log =~ /(received SIG\w+)/ ? ": it $1 from outside the benchmark" : '') . "\n";
}

# Starts $server with %$start, runs $body->($p) and stops the server, also
# when the body dies (the error is passed on).  Returns what the body returned.
sub with_server {
    my ($server, $start, $body) = @_;
    my ($p, $err) = start($server, %$start);
    die "$err\n" unless $p;
    my $r = eval { $body->($p) };
    my $e = $@;
    stop($p);
    die $e unless $r;
    return $r;
}

# One wrk measurement of a server started with %start; warm-up first.
sub measure_wrk {
    my ($server, %o) = @_;
    return with_server($server, $o{start}, sub {
        my ($p) = @_;
        my %w = (addr => $p->{listen}, path => $o{path} // '/', conns => $o{conns},
            close => $o{close}, script => $o{script});
        wrk(%w, duration => $WARMUP);
        my $opens = passive_opens();
        my $probe = probe_start($p);
        my $r = wrk(%w, duration => $DURATION, sample => !$o{close} && !$o{close_mode} && $server ne 'hsp');
        probe_end($probe, $r, $r->{requests});
        my $opens_after = passive_opens();
        $r->{conn_per_req} = ($opens_after - $opens) / $r->{requests} if $r->{requests} && defined $opens;
        check_alive($p);
        die "no request was answered: " . ($r->{output} =~ s/\s+/ /gr) . "\n" unless $r->{requests} > 0;
        $o{after}->($p, $r) if $o{after};
        $r;
    });
}

# ---- throughput scenarios -----------------------------------------------------

sub throughput {
    my ($scenario, %o) = @_;
    my @servers = servers_for(@{ $o{servers} // \@SERVERS });
    rounds($scenario, \@servers, sub {
        my ($server) = @_;
        my %start = (app => $o{app}, close_mode => $o{close_mode}, path => $o{path},
            nginx => $o{nginx});
        return measure_wrk($server, start => \%start, conns => $o{conns} // 16, path => $o{path},
            close => $o{close}, close_mode => $o{close_mode}, script => $o{script}, after => $o{after});
    });
}

sub scenario_hello_keepalive {
    throughput('hello_keepalive', app => 'hello', nginx => { body => 'Hello World' },
        after => sub {
            my ($p, $r) = @_;
            # worker RSS after the run: the same app in every server
            my @procs = group_processes($p);
            my @workers = workers_of($p->{name}, $p, @procs);
            $r->{worker_rss} = median(map { $_->{rss} } @workers);
            $r->{worker_pss} = median(map { $_->{pss} } @workers);
            $r->{all_rss} = 0;
            $r->{all_rss} += $_->{rss} for @procs;
            $r->{all_pss} = 0;
            $r->{all_pss} += $_->{pss} for @procs;
            $r->{processes} = scalar @procs;
            $r->{nworkers} = scalar @workers;
        });
}

sub scenario_hello_close {
    throughput('hello_close', app => 'hello', close => 1, close_mode => 1,
        nginx => { body => 'Hello World' });
}

sub scenario_body_8k {
    # nginx's configuration takes no 8 KiB string: it serves the same bytes
    # from a file instead.
    my $dir = "$TMP/static8k";
    File::Path::make_path($dir);
    open my $fh, '>', "$dir/body8k" or die "$dir/body8k: $!\n";
    print {$fh} 'x' x 8192;
    close $fh;
    chmod 0644, "$dir/body8k";
    throughput('body_8k', app => 'body8k', path => '/body8k', nginx => { root => $dir });
}

my $BIG_FILE;
sub big_file {
    return $BIG_FILE if $BIG_FILE;
    my $dir = "$TMP/static";
    File::Path::make_path($dir);
    $BIG_FILE = "$dir/big.bin";
    open my $fh, '>', $BIG_FILE or die "$BIG_FILE: $!\n";
    binmode $fh;
    my $block = join '', map { chr(($_ * 7 + 3) % 256) } 0 .. 65535;
    my $size = 2_400_000;
    print {$fh} substr($block x (int($size / 65536) + 1), 0, $size);
    close $fh;
    chmod 0644, $BIG_FILE;
    $ENV{SEROW_BENCH_FILE} = $BIG_FILE;
    return $BIG_FILE;
}

sub scenario_file_2_4mb {
    my $file = big_file();
    throughput('file_2_4mb', app => 'file', conns => 4, path => '/big.bin',
        nginx => { root => File::Basename::dirname($file) });
}

sub scenario_post_64k {
    # nginx answers without reading the body into anything: a ceiling only.
    throughput('post_64k', app => 'post', script => "$BENCH/apps/post.lua",
        nginx => { body => 'read 65536 bytes' });
}

sub scenario_streaming {
    throughput('streaming', app => 'stream', close_mode => 1, servers => [qw(serow starman uwsgi hsp)]);
}

# The server behind one nginx worker that keeps 32 upstream connections alive.
sub start_behind_nginx {
    my ($server, %o) = @_;
    my $backend = $o{unix} ? unix_path() : '127.0.0.1:' . free_port();
    my ($b, $err) = start($server, app => $o{app}, workers => $o{workers}, listen => $backend,
        nginx => { body => 'Hello World' });
    die "$err\n" unless $b;
    my $front_addr = '127.0.0.1:' . free_port();
    my $front = spawn('nginx-front', nginx_config(listen => $front_addr, upstream => $backend));
    my $status = wait_ready($front, $front_addr);
    if (!defined $status || $status ne '200') {
        stop($front);
        stop($b);
        die "nginx in front of $TITLE{$server} did not answer 200" . (defined $status ? " ($status)" : '') . "\n";
    }
    $front->{listen} = $front_addr;
    return ($front, $b);
}

sub measure_behind_nginx {
    my ($server, %o) = @_;
    my ($front, $b) = start_behind_nginx($server, %o);
    my $r = eval {
        wrk(addr => $front->{listen}, path => '/', conns => $o{conns}, duration => $WARMUP);
        my $probe = probe_start($front, $b);
        my $r = wrk(addr => $front->{listen}, path => '/', conns => $o{conns}, duration => $DURATION);
        probe_end($probe, $r, $r->{requests});
        check_alive($b);
        check_alive($front);
        die "no request was answered\n" unless $r->{requests} > 0;
        $r;
    };
    my $e = $@;
    stop($front);
    stop($b);
    die $e unless $r;
    return $r;
}

sub scenario_behind_nginx_unix {
    my @servers = servers_for(qw(serow starman uwsgi nginx));
    rounds('behind_nginx_unix', \@servers, sub {
        my ($server) = @_;
        return measure_behind_nginx($server, app => 'hello', unix => 1, conns => 16, workers => 4);
    });
}

# ---- keep-alive fairness --------------------------------------------------------

# (a) IDLE idle keep-alive connections while 32 connections load the server.
sub scenario_idle_10k {
    my @servers = servers_for(qw(serow starman uwsgi nginx));
    rounds('idle_10k', \@servers, sub {
        my ($server) = @_;
        my ($p, $err) = start($server, app => 'hello', workers => 4, keepalive => 120,
            connections => $IDLE + 1000, nginx => { body => 'Hello World' });
        die "$err\n" unless $p;
        my ($port) = $p->{listen} =~ /:(\d+)$/;
        my ($client_out, $client_in);
        my $client_pid;
        my $r = eval {
            my %w = (addr => $p->{listen}, path => '/', conns => $ACTIVE);
            wrk(%w, duration => $WARMUP);
            my $base = wrk_recording_stalls($p, %w, duration => $DURATION);
            # the same load from bench/client, which leaves CPU 1 more room
            # than wrk (docs/keepalive.md, "The load generator's share")
            my %l = (addr => $p->{listen}, conns => $w{conns}, duration => $DURATION);
            my $base_client = client_load(%l);
            my %before = map { $_->{pid} => $_ } group_processes($p);
            $client_pid = IPC::Open2::open2($client_out, $client_in, 'taskset', '-c', '1', $CLIENT,
                'idle', '--port', $port, '--conns', $IDLE, '--timeout', 10);
            my %c;
            while (my $line = <$client_out>) {
                my ($k, $v) = split ' ', $line;
                $c{$k} = $v;
                last if $k eq 'tried';
            }
            Time::HiRes::sleep(1.5); # Serow moves connections idle for 0.5 s to its holder
            my @after = group_processes($p);
            my $probe = probe_start($p);
            my $loaded = wrk_recording_stalls($p, %w, duration => $DURATION);
            probe_end($probe, $loaded, $loaded->{requests});
            my $loaded_client = client_load(%l);
            print {$client_in} "go\n";
            close $client_in;
            while (my $line = <$client_out>) {
                my ($k, $v) = split ' ', $line;
                $c{$k} = $v;
            }
            waitpid $client_pid, 0;
            undef $client_pid;
            # Without them again, so that each round's "without" brackets its
            # "with": the machine's speed drifts by more than the target's 10%
            # within a round (docs/keepalive.md), and the mean of the runs
            # before and after cancels a steady drift where one run cannot.
            wrk(%w, duration => $WARMUP);
            my $after = wrk(%w, duration => $DURATION);
            check_alive($p);
            my %r = (rps => $loaded->{rps}, p99 => $loaded->{p99}, errors => $loaded->{errors},
                cpu0_other => $loaded->{cpu0_other}, cpu1_other => $loaded->{cpu1_other},
                base_rps => $base->{rps}, base_p99 => $base->{p99}, base_errors => $base->{errors},
                after_rps => $after->{rps}, after_p99 => $after->{p99}, after_errors => $after->{errors},
                # what else took CPU 0 and CPU 1 (wrk_recording_stalls), with and without
                (map { ($_ => $loaded->{$_}, "base_$_" => $base->{$_}) }
                    map { ("${_}stall_ms", "${_}stall_longest_ms", "${_}stall_longest_by") } '', 'loadgen_'),
                client_rps => $loaded_client->{rps}, client_p99 => $loaded_client->{p99_ms},
                client_errors => $loaded_client->{errors},
                base_client_rps => $base_client->{rps}, base_client_p99 => $base_client->{p99_ms},
                base_client_errors => $base_client->{errors},
                opened => $c{opened} // 0, again_ok => $c{again_ok} // 0,
                again_closed => $c{again_closed} // 0, again_failed => $c{again_failed} // 0,
                closed_while_idle => $c{closed_while_idle} // 0);
            # "the same run without idle connections": the mean of the two
            # runs around the one with them
            my @without = grep { defined } $base->{rps}, $after->{rps};
            my $without_sum = 0;
            $without_sum += $_ for @without;
            $r{without_rps} = @without ? $without_sum / @without : undef;
            # memory of the idle connections: the holder (Serow) or the
            # worker (nginx), RSS after minus before
            my ($holder) = grep { $_->{cmd} eq 'serow connection holder' } @after;
            ($holder) = grep { $_->{cmd} =~ /worker process/ } @after if $server eq 'nginx';
            if ($holder && $before{ $holder->{pid} } && $r{opened} >= 100) {
                $r{holder_rss_before} = $before{ $holder->{pid} }{rss};
                $r{holder_rss_after} = $holder->{rss};
                $r{holder_fds} = $holder->{fds};
                $r{bytes_per_idle} = ($holder->{rss} - $before{ $holder->{pid} }{rss}) * 1024 / $r{opened};
            }
            my ($sum_before, $sum_after) = (0, 0);
            $sum_before += $_->{pss} for values %before;
            $sum_after += $_->{pss} for @after;
            $r{server_pss_per_idle} = ($sum_after - $sum_before) * 1024 / $r{opened} if $r{opened} >= 100;
            $r{extra} = sprintf 'without idle %.0f req/s p99 %.2f ms, after them %.0f req/s p99 %.2f ms; '
                . 'bench/client p99 %.2f ms, without idle %.2f ms; idle opened %d, answered again %d',
                $r{base_rps}, $r{base_p99} // -1, $r{after_rps} // -1, $r{after_p99} // -1,
                $r{client_p99} // -1, $r{base_client_p99} // -1,
                $r{opened}, $r{again_ok};
            \%r;
        };
        my $e = $@;
        if ($client_pid) {
            kill 'KILL', $client_pid;
            waitpid $client_pid, 0;
        }
        stop($p);
        die $e unless $r;
        return $r;
    });
}

# (b) Every request blocks for 10 ms; 200 clients, 8 workers: 800 req/s ideal.
sub scenario_blocking_10ms {
    my @servers = servers_for(qw(serow starman uwsgi));
    my $clients = $QUICK ? 50 : 200;
    rounds('blocking_10ms', \@servers, sub {
        my ($server) = @_;
        return with_server($server, { app => 'sleep', workers => 8 }, sub {
            my ($p) = @_;
            wrk(addr => $p->{listen}, path => '/', conns => 8, duration => $WARMUP);
            my $probe = probe_start($p);
            my $r = client_load(addr => $p->{listen}, conns => $clients, duration => $DURATION);
            probe_end($probe, $r, $r->{requests});
            check_alive($p);
            $r->{p99} = $r->{p99_ms};
            $r->{extra} = sprintf 'p50 %.1f ms, longest wait %.0f ms, answers per connection min %d median %d max %d, unserved %d',
                $r->{p50_ms}, $r->{longest_wait_ms}, $r->{answers_min}, $r->{answers_median},
                $r->{answers_max}, $r->{connections_unserved};
            $r;
        });
    });
}

# (c) 2% of the requests block for 50 ms; 64 clients, 8 workers.  Capacity:
# 8 workers / (0.02 x 50 ms + the server's own time per fast request, from a
# run of fast requests only).
sub scenario_slow_2pct {
    my @servers = servers_for(qw(serow starman uwsgi));
    my $clients = $QUICK ? 16 : 64;
    rounds('slow_2pct', \@servers, sub {
        my ($server) = @_;
        return with_server($server, { app => 'mixed', workers => 8 }, sub {
            my ($p) = @_;
            wrk(addr => $p->{listen}, path => '/', conns => $clients, duration => $WARMUP);
            my $fast = wrk(addr => $p->{listen}, path => '/', conns => $clients, duration => $DURATION);
            my $probe = probe_start($p);
            my $r = client_load(addr => $p->{listen}, conns => $clients, duration => $DURATION,
                slow_every => 50);
            probe_end($probe, $r, $r->{requests});
            check_alive($p);
            $r->{fast_rps} = $fast->{rps};
            $r->{capacity} = $fast->{rps} > 0 ? 8 / (0.02 * 0.050 + 1 / $fast->{rps}) : 0;
            $r->{p99} = $r->{p99_ms};
            $r->{extra} = sprintf 'capacity %.0f (fast only %.0f), p50 %.2f p90 %.2f ms, longest wait %.0f ms, answers min %d, unserved %d',
                $r->{capacity}, $r->{fast_rps}, $r->{p50_ms}, $r->{p90_ms}, $r->{longest_wait_ms},
                $r->{answers_min}, $r->{connections_unserved};
            $r;
        });
    });
}

# (d) nginx in front (upstream keep-alive 32), 64 clients, 4 workers.
sub scenario_nginx_front {
    my @servers = servers_for(qw(serow starman uwsgi nginx));
    rounds('nginx_front', \@servers, sub {
        my ($server) = @_;
        return measure_behind_nginx($server, app => 'hello', conns => $QUICK ? 16 : 64, workers => 4);
    });
}

# ---- report ------------------------------------------------------------------

sub med_of {
    my ($scenario, $server, $key) = @_;
    my $rs = rs($scenario, $server) or return undef;
    return median(map { $_->{$key} } @$rs);
}

# (a)'s p99 in units of the mean latency, the median over the rounds.  Each
# of the active connections has one request out at a time, so the mean
# latency is connections / req/s (Little's law): the ratio is the tail's
# shape, apart from the server's speed, which sets the mean.  $prefix picks
# the run: '' (wrk with idle connections), 'base_' (wrk before they open),
# 'client_' (bench/client with them).
#
# A server that left idle connections unanswered (a prefork one, whose
# workers keep theirs) leaves some of wrk's waiting too, and wrk's p99 covers
# only the answered ones: no figure for it.
sub p99_in_mean_latencies {
    my ($server, $prefix) = @_;
    my $rs = rs('idle_10k', $server) or return undef;
    return undef if grep { ($_->{again_ok} // 0) < $IDLE } @$rs;
    return median(map {
        my ($p99, $rps) = ($_->{"${prefix}p99"}, $_->{"${prefix}rps"});
        defined $p99 && $rps ? $p99 / 1000 * $rps / $ACTIVE : undef
    } @$rs);
}

# "3.1 ms/s; longest 17.9 (tokio-rt-worker) / 2.9 (kdamond.0)" from the
# rounds' CPU 0 or CPU 1 stall records (wrk_recording_stalls), fields under
# $prefix.
sub stalls_cell {
    my ($rs, $prefix) = @_;
    my $per_s = median(map { $_->{"${prefix}stall_ms"} } @$rs);
    return '—' unless defined $per_s;
    my @longest;
    for my $r (@$rs) {
        my ($ms, $by) = ($r->{"${prefix}stall_longest_ms"}, $r->{"${prefix}stall_longest_by"});
        push @longest, !defined $ms ? '?' : $by ? sprintf('%.1f (%s)', $ms, $by) : sprintf('%.1f', $ms);
    }
    return sprintf('%.1f ms/s; longest %s', $per_s, join(' / ', @longest));
}

sub fmt_rps {
    my ($v) = @_;
    return '—' unless defined $v;
    return sprintf '%.1fk', $v / 1000 if $v >= 10000;
    return sprintf '%.0f', $v;
}

sub fmt_ms { defined $_[0] ? sprintf('%.2f ms', $_[0]) : '—' }

sub ratio {
    my ($a, $b) = @_;
    return undef unless defined $a && defined $b && $b > 0;
    return $a / $b;
}

sub fmt_x { defined $_[0] ? sprintf('%.2fx', $_[0]) : '—' }

sub cell {
    my ($scenario, $server) = @_;
    return 'failed' if failed($scenario, $server) && !rs($scenario, $server);
    my $v = med_of($scenario, $server, 'rps');
    return '—' unless defined $v;
    my $serow = med_of($scenario, 'serow', 'rps');
    my $x = $server eq 'serow' ? '' : defined $serow && $serow > 0 ? sprintf(' (%.2fx)', $v / $serow) : '';
    return fmt_rps($v) . $x;
}

sub versions {
    my %v;
    my $git = `git -C "$ROOT" describe --always --dirty 2>/dev/null` // '';
    chomp $git;
    $v{serow} = "Serow " . (`$^X -Mblib -MSerow -e 'print \$Serow::VERSION' 2>/dev/null` || '?')
        . ($git ? " ($git)" : '');
    $v{starman} = "Starman " . (`perl -MStarman -e 'print \$Starman::VERSION' 2>/dev/null` || '?');
    ($v{uwsgi} = "uWSGI " . (`uwsgi --version 2>/dev/null` || '?') . " (psgi plugin)") =~ s/\n//g;
    $v{hsp} = "HTTP::Server::PSGI (Plack " . (`perl -MPlack -e 'print \$Plack::VERSION' 2>/dev/null` || '?') . ")";
    ($v{nginx} = `nginx -v 2>&1` // '?') =~ s/^nginx version: //;
    chomp $v{nginx};
    ($v{wrk} = `dpkg-query -W -f '\${Version}' wrk 2>/dev/null` || '?');
    $v{wrk} = "wrk $v{wrk}";
    $v{perl} = sprintf 'perl %vd', $^V;
    return \%v;
}

sub conditions {
    my $cpuinfo = slurp('/proc/cpuinfo') // '';
    my ($model) = $cpuinfo =~ /^model name\s*:\s*(.+)$/m;
    my $cores = () = $cpuinfo =~ /^processor\s*:/mg;
    my ($mem) = (slurp('/proc/meminfo') // '') =~ /^MemTotal:\s+(\d+)/m;
    chomp(my $kernel = `uname -r`);
    return { cpu => $model // '?', cores => $cores, kernel => $kernel,
        memory => sprintf('%.1f GiB', ($mem // 0) / 1024 / 1024) };
}

# The targets from the issues, each PASS or MISS from this run's medians.
sub targets {
    my @t;
    my $add = sub {
        my ($what, $target, $measured, $pass) = @_;
        push @t, [$what, $target, $measured, !defined $pass ? 'n/a' : $pass ? 'PASS' : 'MISS'];
    };
    my $s = sub { med_of($_[0], 'serow', $_[1] // 'rps') };
    my $o = sub { med_of($_[0], $_[1], $_[2] // 'rps') };
    my $r;

    if ($RESULTS{hello_keepalive}) {
        $r = ratio($s->('hello_keepalive'), $o->('hello_keepalive', 'uwsgi'));
        $add->('hello keep-alive vs uWSGI', '>= 1.5x', fmt_x($r), defined $r ? $r >= 1.5 : undef);
        $r = ratio($s->('hello_keepalive'), $o->('hello_keepalive', 'nginx'));
        $add->('hello keep-alive vs nginx', '>= 0.5x', fmt_x($r), defined $r ? $r >= 0.5 : undef);
    }
    if ($RESULTS{hello_close}) {
        $r = ratio($s->('hello_close'), $o->('hello_close', 'nginx'));
        $add->('Connection: close vs nginx', '>= 0.9x', fmt_x($r), defined $r ? $r >= 0.9 : undef);
    }
    if ($RESULTS{body_8k}) {
        $r = ratio($s->('body_8k'), $o->('body_8k', 'uwsgi'));
        $add->('8 KiB body vs uWSGI', '>= 1.5x', fmt_x($r), defined $r ? $r >= 1.5 : undef);
    }
    if ($RESULTS{file_2_4mb}) {
        $r = ratio($s->('file_2_4mb'), $o->('file_2_4mb', 'nginx'));
        $add->('2.4 MB file vs nginx static', '>= 0.95x', fmt_x($r), defined $r ? $r >= 0.95 : undef);
    }
    if ($RESULTS{hello_keepalive}) {
        my ($a, $b) = ($s->('hello_keepalive', 'worker_rss'), $o->('hello_keepalive', 'uwsgi', 'worker_rss'));
        $add->('worker RSS, Serow vs uWSGI', '<= uWSGI',
            defined $a && defined $b ? sprintf('%.1f MB vs %.1f MB', $a / 1024, $b / 1024) : '—',
            defined $a && defined $b ? $a <= $b : undef);
    }
    if (my $rs = rs('idle_10k', 'serow')) {
        my $min_ok = (sort { $a <=> $b } map { $_->{again_ok} } @$rs)[0];
        $add->("(a) every idle connection answers again", "$IDLE of $IDLE, every round",
            "at least $min_ok of $IDLE", $min_ok >= $IDLE);
        # Each round measures the same server without the idle connections,
        # with them, and without them again (scenario_idle_10k): the issue's
        # "against the same run without" is the mean of the two runs around
        # the one with them.  The machine's speed moves more than 10% between
        # rounds (docs/keepalive.md), so each round gives a ratio and the
        # target takes their median; the ratio of the two medians, which may
        # come from different rounds, is shown beside it.
        my @round_ratios = grep { defined } map { ratio($_->{rps}, $_->{without_rps}) } @$rs;
        $r = median(@round_ratios);
        my $of_medians = ratio($s->('idle_10k'), $s->('idle_10k', 'without_rps'));
        $add->('(a) throughput with idle vs without (median of the rounds)', '>= 90%',
            defined $r ? sprintf('%.0f%% (rounds %s; ratio of the medians %s)', 100 * $r,
                join(' / ', map { sprintf '%.0f%%', 100 * $_ } @round_ratios),
                defined $of_medians ? sprintf('%.0f%%', 100 * $of_medians) : '—') : '—',
            defined $r ? $r >= 0.9 : undef);
        # As wrk measured it and as bench/client did (whose p99 does not move
        # with the idle connections: docs/keepalive.md, "The load generator's
        # share"), each with nginx's in the same run beside it.
        # The p99 in mean latencies beside it: a server as fast as nginx
        # with the same shape of tail has nginx's p99.
        for my $measure (['', 'wrk'], ['client_', 'bench/client']) {
            my ($prefix, $by) = @$measure;
            my $key = "${prefix}p99";
            my ($p99, $nginx_p99) = ($s->('idle_10k', $key), $o->('idle_10k', 'nginx', $key));
            my $vs_nginx = ratio($p99, $nginx_p99);
            my ($shape, $nginx_shape) = map { p99_in_mean_latencies($_, $prefix) } 'serow', 'nginx';
            my @beside;
            push @beside, sprintf('nginx in the same run %s: %.2fx', fmt_ms($nginx_p99), $vs_nginx)
                if defined $vs_nginx;
            push @beside, sprintf('in mean latencies %.1f, nginx %.1f', $shape, $nginx_shape)
                if defined $shape && defined $nginx_shape;
            $add->("(a) p99 with idle connections ($by)", '<= 2 ms',
                fmt_ms($p99) . (@beside ? ' (' . join('; ', @beside) . ')' : ''),
                defined $p99 ? $p99 <= 2 : undef);
        }
        my $bpi = $s->('idle_10k', 'bytes_per_idle');
        $add->('(a) holder memory per idle connection', '<= 1 KiB',
            defined $bpi ? sprintf('%.0f bytes', $bpi) : '—', defined $bpi ? $bpi <= 1024 : undef);
    }
    if (my $rs = rs('blocking_10ms', 'serow')) {
        my $rps = $s->('blocking_10ms');
        my $unserved = (sort { $b <=> $a } map { $_->{connections_unserved} } @$rs)[0];
        $add->('(b) throughput vs ideal 800 req/s', '>= 95%', sprintf('%.1f%%', $rps / 8), $rps >= 760);
        $add->('(b) every connection served', 'all, every round',
            $unserved ? "$unserved unserved" : 'all', !$unserved);
    }
    if (my $rs = rs('slow_2pct', 'serow')) {
        my $pct = median(map { $_->{capacity} ? $_->{rps} / $_->{capacity} : undef } @$rs);
        $add->('(c) throughput vs capacity', '>= 95%', defined $pct ? sprintf('%.1f%%', 100 * $pct) : '—',
            defined $pct ? $pct >= 0.95 : undef);
        my $unserved = (sort { $b <=> $a } map { $_->{connections_unserved} } @$rs)[0];
        $add->('(c) every connection served', 'all, every round',
            $unserved ? "$unserved unserved" : 'all', !$unserved);
    }
    if (my $rs = rs('nginx_front', 'serow')) {
        $r = ratio($s->('nginx_front'), $o->('nginx_front', 'nginx'));
        $add->('(d) vs nginx in front of nginx', '>= 0.95x', fmt_x($r), defined $r ? $r >= 0.95 : undef);
        my $errors = 0;
        $errors += $_->{errors} for @$rs;
        $add->('(d) errors', '0', $errors, $errors == 0);
        my ($a, $b) = ($s->('nginx_front', 'p99'), $o->('nginx_front', 'nginx', 'p99'));
        $r = ratio($a, $b);
        $add->('(d) p99 vs nginx in front of nginx', '<= 1.2x',
            defined $r ? sprintf('%s vs %s (%.2fx)', fmt_ms($a), fmt_ms($b), $r) : '—',
            defined $r ? $r <= 1.2 : undef);
    }
    return @t;
}

sub table {
    my ($head, @rows) = @_;
    my $md = '| ' . join(' | ', @$head) . " |\n|" . join('|', map { '---' } @$head) . "|\n";
    $md .= '| ' . join(' | ', map { $_ // '—' } @$_) . " |\n" for @rows;
    return $md;
}

sub rounds_list {
    my ($scenario, $server, $key) = @_;
    my $rs = rs($scenario, $server) or return '';
    return join ' / ', map { defined $_->{$key // 'rps'} ? sprintf('%.0f', $_->{$key // 'rps'}) : '?' } @$rs;
}

sub report {
    my ($started, $finished, $load_start, $load_end) = @_;
    my $c = conditions();
    my $v = versions();
    my $md = "# Serow benchmark results\n\n";
    $md .= "Generated by `bench/run"
        . ($QUICK ? ' --quick' : " --rounds $ROUNDS --duration $DURATION")
        . ($opt{servers} ? " --servers $opt{servers}" : '')
        . ($opt{record_stalls} ? ' --record-stalls' : '')
        . (@ARGV ? " @ARGV" : '') . "`"
        . ($QUICK ? ' — a smoke test, **not a measurement**' : '') . ".\n\n";
    $md .= table(['condition', 'value'],
        ['date', "$started to $finished"],
        ['CPU', "$c->{cpu}, $c->{cores} cores, $c->{memory} memory"],
        ['kernel', $c->{kernel}],
        ['pinning', 'server (all its processes, nginx in front included) on CPU 0 (`taskset -c 0`); wrk and bench/client on CPU 1 (`taskset -c 1`, one thread)'],
        ['rounds', "$ROUNDS per scenario, servers in turn within a round; the median is reported"],
        ['duration', "${DURATION} s per measurement after a ${WARMUP} s warm-up"],
        ['open-file limit', "$FD_LIMIT (`ulimit -n`)"],
        ['load average (1 min)', "$load_start at the start, $load_end at the end; per scenario below. "
            . 'The machine is shared: compare ratios within one run, not absolute numbers'],
        ['versions', join '; ', map { $v->{$_} } qw(serow starman uwsgi hsp nginx wrk perl)],
    );

    my @t = targets();
    if (@t) {
        $md .= "\n## Targets\n\n";
        $md .= table(['target', 'wanted', 'measured (Serow, median)', 'result'], @t);
    }

    my @tp = grep { $RESULTS{$_} || $FAILED{$_} } qw(hello_keepalive hello_close body_8k file_2_4mb post_64k streaming behind_nginx_unix);
    if (@tp) {
        $md .= "\n## Throughput (requests/s, median; in brackets: ratio to Serow)\n\n";
        $md .= table(['scenario', map { $TITLE{$_} } @SERVERS],
            map { my $s = $_; [$SCENARIO{$s}, map { cell($s, $_) } @SERVERS] } @tp);
        $md .= "\nEvery round, p99 latency and errors:\n\n";
        my @rows;
        for my $s (@tp) {
            for my $server (@SERVERS) {
                next unless rs($s, $server);
                my $errors = errors_by_kind(rs($s, $server));
                my $cpr = med_of($s, $server, 'conn_per_req');
                my @rs = grep { defined $_->{conns_seen} } @{ rs($s, $server) };
                my $answered = '';
                if (@rs) {
                    my ($worst) = sort { $a->{conns_answered} <=> $b->{conns_answered}
                        || $a->{least_share} <=> $b->{least_share} } @rs;
                    $answered = sprintf '%d of %d; least-served got %.0f%% of the median',
                        $worst->{conns_answered}, $worst->{conns_seen}, 100 * $worst->{least_share};
                }
                my $cpu = med_of($s, $server, 'cpu_us');
                my $other = med_of($s, $server, 'cpu0_other');
                my $other1 = med_of($s, $server, 'cpu1_other');
                push @rows, [$s, $TITLE{$server}, rounds_list($s, $server), fmt_ms(med_of($s, $server, 'p99')),
                    $errors, $answered, defined $cpr && $s eq 'hello_close' ? sprintf('%.2f', $cpr) : '',
                    defined $cpu ? sprintf('%.1f', $cpu) : '—',
                    defined $other ? sprintf('%.0f%% / %.0f%%', 100 * $other, 100 * ($other1 // 0)) : '—'];
            }
        }
        $md .= table(['scenario', 'server', 'req/s per round', 'p99 (answered requests)', 'errors (all rounds)',
            'wrk connections answered (worst round)', 'new connections per request',
            'server CPU per request (us)', 'CPU 0 / CPU 1 taken by other processes'], @rows);
        $md .= "\nwrk's latency covers only the requests that were answered: a server that leaves some of wrk's\n"
            . "connections waiting (a prefork worker keeps its keep-alive connection) shows a low p99 for the others.\n"
            . "The answered connections are sampled with ss(8) half a second before the end (bytes received per connection).\n"
            . "Server CPU per request: user + system time of all the server's processes during the measurement, divided by\n"
            . "the requests answered; less sensitive to the machine's other load than requests/s. CPU 0 / CPU 1 taken by\n"
            . "other processes: the share of the server's and of the load generator's CPU that went to other processes.\n"
            . "uWSGI (`--http-socket`) and HTTP::Server::PSGI end answers by closing the connection in hello_close and\n"
            . "streaming: wrk counts each such close as a read error.\n";
    }

    if ($RESULTS{hello_keepalive}) {
        $md .= "\n## Memory on the hello app (after the hello keep-alive run)\n\n";
        my @rows;
        for my $server (@SERVERS) {
            next unless rs('hello_keepalive', $server);
            my $k = sub { my $x = med_of('hello_keepalive', $server, $_[0]); defined $x ? sprintf('%.1f MB', $x / 1024) : '—' };
            push @rows, [$TITLE{$server}, $k->('worker_rss'), $k->('worker_pss'),
                med_of('hello_keepalive', $server, 'nworkers'), med_of('hello_keepalive', $server, 'processes'),
                $k->('all_pss')];
        }
        $md .= table(['server', 'worker RSS (median)', 'worker PSS', 'workers', 'processes', 'all processes, PSS'], @rows);
        $md .= "\nRSS counts shared pages in full in every process that touched them; PSS divides them among the sharers.\n";
    }

    if (my $res = $RESULTS{idle_10k}) {
        $md .= "\n## (a) $IDLE idle keep-alive connections + $ACTIVE active (wrk)\n\n";
        my (@rows, @client_rows);
        # with --record-stalls (wrk_recording_stalls)
        my $recorded = grep { defined $_->{stall_ms} || defined $_->{loadgen_stall_ms} } map { @$_ } values %$res;
        for my $server (@SERVERS) {
            my $rs = $res->{$server} or next;
            my $m = sub { med_of('idle_10k', $server, $_[0]) };
            my $min = sub { my $k = shift; (sort { $a <=> $b } map { $_->{$k} } @$rs)[0] };
            my ($errors, $client_errors) = (0, 0);
            $errors += $_->{errors} + ($_->{base_errors} // 0) + ($_->{after_errors} // 0) for @$rs;
            $client_errors += ($_->{client_errors} // 0) + ($_->{base_client_errors} // 0) for @$rs;
            push @client_rows, [$TITLE{$server}, fmt_rps($m->('base_client_rps')), fmt_ms($m->('base_client_p99')),
                fmt_rps($m->('client_rps')), fmt_ms($m->('client_p99')) . ' ('
                    . join(' / ', map { defined $_->{client_p99} ? sprintf('%.1f', $_->{client_p99}) : '?' } @$rs) . ')',
                $client_errors];
            my $before_after = join ' / ', map {
                join ', ', map { defined $_ ? fmt_rps($_) : '?' } $_->{base_rps}, $_->{after_rps}
            } @$rs;
            push @rows, [$TITLE{$server}, fmt_rps($m->('without_rps')) . " ($before_after)",
                fmt_ms($m->('base_p99')) . ', ' . fmt_ms($m->('after_p99')),
                fmt_rps($m->('rps')), fmt_ms($m->('p99')) . ' (' . join(' / ', map { defined $_->{p99} ? sprintf('%.1f', $_->{p99}) : '?' } @$rs) . ')',
                join(' / ', map { defined $_ ? sprintf('%.1f', $_) : '—' }
                    map { p99_in_mean_latencies($server, $_) } 'base_', ''), $errors,
                "min " . $min->('opened') . ", median " . $m->('opened'),
                "min " . $min->('again_ok') . ", median " . $m->('again_ok'),
                $m->('again_closed') . ' / ' . $m->('again_failed'),
                defined $m->('bytes_per_idle') ? sprintf('%.0f', $m->('bytes_per_idle')) : '—',
                defined $m->('server_pss_per_idle') ? sprintf('%.0f', $m->('server_pss_per_idle')) : '—',
                $recorded ? (stalls_cell($rs, 'base_'), stalls_cell($rs, ''),
                    stalls_cell($rs, 'base_loadgen_'), stalls_cell($rs, 'loadgen_')) : ()];
        }
        $md .= table(['server', 'req/s without idle (per round: before, after)', 'p99 without (before, after)',
            'req/s with idle', 'p99 with (per round, ms)', 'p99 in mean latencies, without (before) / with',
            'wrk errors (all runs)', 'idle opened', 'idle answered again', 'closed / failed again',
            'bytes per idle connection (holder or nginx worker RSS)', 'bytes per idle connection (all processes, PSS)',
            $recorded ? ('CPU 0 to other processes, without idle', 'CPU 0 to other processes, with idle',
                'CPU 1 to other processes, without idle', 'CPU 1 to other processes, with idle') : ()], @rows);
        $md .= "\nWithout idle: wrk before the idle connections open and after they close, in each round; the "
            . "round's figure is the mean of the two, and the throughput target takes each round's ratio of "
            . "with to that.\n";
        $md .= "p99 in mean latencies: the p99 divided by the mean latency, which is " . $ACTIVE
            . " connections / req/s (each has one request out at a time): the shape of the tail apart from the "
            . "server's speed (median of the rounds); not for a server that left idle connections unanswered, "
            . "which leaves some of wrk's waiting too.\n";
        $md .= "The memory is what the process's RSS grew by while it held the idle connections; kernel socket buffers are not in it.\n";
        $md .= "CPU 0 to other processes (--record-stalls): how much of the server's CPU went to processes not the "
            . "server's while wrk ran (median ms per second; per round, the longest stretch in ms and who ran in it), "
            . "from the scheduler's switches (perf); a p99 of 1-2 ms follows these stretches.  CPU 1 to other "
            . "processes: the same on the load generator's CPU (other than wrk and bench/client; perf, the "
            . "recorder, runs there): a stretch there holds wrk's timing of every request in flight just as one on "
            . "CPU 0 holds the server.  The recording itself lengthens wrk's p99 (docs/benchmarks.md).\n"
            if $recorded;
        if (my $rs = $res->{serow}) {
            $md .= sprintf "Serow's holder had %s descriptors open with the idle connections (median).\n",
                med_of('idle_10k', 'serow', 'holder_fds') // '?';
        }
        $md .= "\nThe same load from `bench/client` (the same $ACTIVE connections, one request at a time "
            . "each), right after each wrk run, with the same idle connections open or not.  At these rates it "
            . "keeps CPU 1 less busy than wrk (about 72% against 87%); how the two p99s differ is in "
            . "docs/keepalive.md.\n\n";
        $md .= table(['server', 'req/s without idle', 'p99 without', 'req/s with idle', 'p99 with (per round, ms)',
            'errors'], @client_rows);
    }

    if (my $res = $RESULTS{blocking_10ms}) {
        $md .= "\n## (b) 10 ms blocking app, " . ($QUICK ? 50 : 200) . " clients, 8 workers (ideal 800 req/s)\n\n";
        $md .= fairness_table('blocking_10ms', $res, 800);
    }
    if (my $res = $RESULTS{slow_2pct}) {
        $md .= "\n## (c) 2% of requests block 50 ms, " . ($QUICK ? 16 : 64) . " clients, 8 workers\n\n";
        $md .= fairness_table('slow_2pct', $res);
        $md .= "\nCapacity = 8 workers / (2% x 50 ms + 1 / the same server's req/s on fast requests only, wrk, same connections).\n";
    }
    if (my $res = $RESULTS{nginx_front}) {
        $md .= "\n## (d) nginx in front (one worker, upstream keep-alive 32, HTTP/1.1), " . ($QUICK ? 16 : 64) . " clients, 4 workers\n\n";
        my @rows;
        my $ref = med_of('nginx_front', 'nginx', 'rps');
        for my $server (@SERVERS) {
            my $rs = $res->{$server} or next;
            my $errors = 0;
            $errors += $_->{errors} for @$rs;
            my $m = med_of('nginx_front', $server, 'rps');
            my $cpu = med_of('nginx_front', $server, 'cpu_us');
            push @rows, [$server eq 'nginx' ? 'nginx (behind nginx)' : $TITLE{$server}, fmt_rps($m),
                fmt_x(ratio($m, $ref)), fmt_ms(med_of('nginx_front', $server, 'p99')), $errors,
                rounds_list('nginx_front', $server), join(' / ', map { defined $_->{p99} ? sprintf('%.1f', $_->{p99}) : '?' } @$rs),
                defined $cpu ? sprintf('%.1f', $cpu) : '—'];
        }
        $md .= table(['backend', 'req/s', 'vs nginx behind nginx', 'p99', 'errors (all rounds)', 'req/s per round',
            'p99 per round (ms)', 'CPU per request, nginx in front included (us)'], @rows);
    }

    if (%FAILED) {
        $md .= "\n## Failures\n\n";
        for my $s (sort keys %FAILED) {
            for my $server (sort keys %{ $FAILED{$s} }) {
                (my $why = $FAILED{$s}{$server}) =~ s/\s+/ /g;
                $md .= "- $s, $TITLE{$server}: $why\n";
            }
        }
    }

    $md .= "\n## Load on the machine during each scenario\n\n";
    my @load_rows;
    for my $sc (grep { $LOAD{$_} } map { $_->[0] } @SCENARIOS) {
        my @m = grep { defined $_->{cpu0_other} } map { @{ rs($sc, $_) // [] } } @SERVERS;
        my $f = sub {
            my @o = sort { $a <=> $b } map { $_->{$_[0]} // 0 } @m;
            @o ? sprintf('%.0f%% (median), %.0f%% (most)', 100 * median(@o), 100 * $o[-1]) : '—';
        };
        push @load_rows, [$sc, join(' / ', @{ $LOAD{$sc} }), $f->('cpu0_other'), $f->('cpu1_other')];
    }
    $md .= table(['scenario', 'load average (1 min) at the start of each round',
        'CPU 0 (server) taken by other processes', 'CPU 1 (load generator) taken by other processes'], @load_rows);
    $md .= "\nOther processes on this shared machine are not pinned: what they took of CPU 0 is time the server\n"
        . "waited, what they took of CPU 1 is time the load generator waited; both lower requests/s and lengthen the\n"
        . "latency tail, and not equally for every server.  User and system time only (interrupts and softirqs,\n"
        . "much of them the benchmark's own loopback traffic, are left out).\n";

    $md .= <<"EOF";

## How each server runs

- Serow: `perl -Mblib script/serow --listen ADDR --workers 4 APP` (8 in (b) and (c)); in (a) also
  `--keepalive-timeout 120` (its default cap on connections, the open-file limit less a tenth, is above 10,032).
- Starman: `starman --preload-app --workers 4 --listen ADDR APP` (8 in (b) and (c)); in (a) `--keepalive-timeout 120`.
- uWSGI: `uwsgi --plugins psgi --http11-socket ADDR --psgi APP --processes 4 --master --disable-logging --die-on-term --listen 1024`;
  `--http-socket` (one request per connection) for Connection: close and streaming, because `--http11-socket`
  ignores `Connection: close` and sends a streamed body without chunked framing; in (a) `--socket-timeout 120`.
- HTTP::Server::PSGI: `plackup -E deployment -s HTTP::Server::PSGI --listen ADDR APP` (one process, one request per connection).
- nginx: one worker, `access_log off`, `keepalive_requests 1000000`, `keepalive_timeout 120s`; `return 200 "same body"`
  for the hello and POST scenarios (for POST it discards the body: a ceiling, not a peer); the 8 KiB body and the
  2.4 MB file from disk with `sendfile on` (its configuration takes no 8 KiB string).  In front: `upstream { keepalive 32; }`, `proxy_http_version 1.1`,
  `proxy_set_header Connection ""`: the configuration of docs/deployment.md (Serow::Test::NginxConfig), with upstream `keepalive_requests 1000000`.
- Apps: `bench/apps/*.psgi`; every body is the same for every server.  wrk: `-t1 --timeout 5s --latency`.
  (b) and (c) use `bench/client` (closed loop, one request at a time per connection, counts answers per connection).
EOF
    if (@NOTES) {
        $md .= "\n## Notes from this run\n\n";
        $md .= "- $_\n" for @NOTES;
    }
    return $md;
}

# The errors of some rounds added up, with their kinds: "3 (read 2, timeout 1)".
sub errors_by_kind {
    my ($rounds) = @_;
    my $errors = 0;
    $errors += $_->{errors} for @$rounds;
    return $errors unless $errors;
    my %k;
    for my $r (@$rounds) { $k{$_} += $r->{"err_$_"} // 0 for qw(connect read write timeout) }
    $k{'non-2xx'} += $_->{non2xx} // 0 for @$rounds;
    return "$errors (" . join(', ', map { "$_ $k{$_}" } grep { $k{$_} } qw(connect read write timeout non-2xx)) . ')';
}

sub fairness_table {
    my ($scenario, $res, $ideal) = @_;
    my @rows;
    for my $server (@SERVERS) {
        my $rs = $res->{$server} or next;
        my $m = sub { med_of($scenario, $server, $_[0]) };
        my $worst = sub { my $k = shift; (sort { $b <=> $a } map { $_->{$k} } @$rs)[0] };
        my $best_min = (sort { $a <=> $b } map { $_->{answers_min} } @$rs)[0];
        my $cap = $ideal // $m->('capacity');
        push @rows, [$TITLE{$server}, fmt_rps($m->('rps')),
            defined $cap && $cap > 0 ? sprintf('%.1f%% of %s', 100 * $m->('rps') / $cap, fmt_rps($cap)) : '—',
            fmt_ms($m->('p50_ms')), fmt_ms($m->('p90_ms')), fmt_ms($m->('p99_ms')),
            sprintf('%.0f ms', $worst->('longest_wait_ms')),
            "$best_min / " . $m->('answers_median') . ' / ' . $m->('answers_max'),
            $worst->('connections_unserved'),
            errors_by_kind([(sort { $b->{errors} <=> $a->{errors} } @$rs)[0]])];
    }
    return table(['server', 'req/s', 'of ideal/capacity', 'p50', 'p90', 'p99',
        'longest wait (incl. unanswered)', 'answers per connection min / median / max',
        'connections never answered (worst round)', 'errors (worst round)'], @rows);
}

sub plot {
    my ($png) = @_;
    my @scen = grep { $RESULTS{$_} } map { $_->[0] } @SCENARIOS;
    return unless @scen;
    my @servers = grep { my $s = $_; grep { rs($_, $s) } @scen } @SERVERS;
    my $data = "$TMP/plot.dat";
    open my $fh, '>', $data or die "$data: $!\n";
    print {$fh} join("\t", 'scenario', map { "\"$TITLE{$_}\"" } @servers), "\n";
    my $max = 1;
    for my $s (@scen) {
        my $label = $s =~ s/_/ /gr;
        my @v = map { my $x = med_of($s, $_, 'rps'); $max = $x if defined $x && $x > $max; defined $x && $x > 0 ? sprintf('%.1f', $x) : '-' } @servers;
        print {$fh} join("\t", "\"$label\"", @v), "\n";
    }
    close $fh;
    my $n = @servers;
    my $script = <<"EOF";
set terminal pngcairo size 1400,700 font "sans,10"
set output "$png"
set title "Serow benchmark: requests/s per server core (median of $ROUNDS round(s) of ${DURATION} s); server on CPU 0, load generator on CPU 1"
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [10:${\ ($max * 3)}]
set ylabel "requests/s (log scale)"
set grid ytics
set key top right
set xtics rotate by -25 noenhanced
set key noenhanced
set bmargin 7
set label 1 "No bar: the server was not run in that scenario, or answered nothing (idle 10k: Starman and uWSGI, whose workers all hold idle connections)" at screen 0.01, screen 0.02 font "sans,9" noenhanced
plot for [i=2:${\ ($n + 1)}] "$data" using i:xtic(1) title columnheader(i)
EOF
    open my $g, '|-', 'gnuplot' or do { note("gnuplot did not run: $!"); return };
    print {$g} $script;
    close $g or note("gnuplot failed: $?");
}

# ---- main ----------------------------------------------------------------------

$SIG{INT} = $SIG{TERM} = sub { logf("bench: interrupted"); exit 130 };
$SIG{PIPE} = 'IGNORE';
my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_start = loadavg();
logf("bench: %d round(s) of %d s, scenarios: %s", $ROUNDS, $DURATION, join(' ', @run));
for my $scenario (@run) {
    logf("== %s: %s", $scenario, $SCENARIO{$scenario});
    no strict 'refs';
    &{"scenario_$scenario"}();
}
my $finished = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_end = loadavg();

File::Path::make_path($opt{out});
my $base = $QUICK ? 'quick' : 'latest';
my $md = report($started, $finished, $load_start, $load_end);
open my $out, '>', "$opt{out}/$base.md" or die "$opt{out}/$base.md: $!\n";
print {$out} $md;
close $out;
plot(Cwd::abs_path($opt{out}) . "/$base.png");
print $md;
logf("bench: wrote %s/%s.md and %s.png", $opt{out}, $base, $base);
if ($ANY_FAILURE) {
    logf("bench: some server did not answer (see Failures)");
    exit 1;
}
exit 0;
