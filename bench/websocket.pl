#!/usr/bin/perl
# bench/websocket.pl - WebSockets: Serow beside Pushpin and Mojolicious's
# own servers, the same client for all.  Run it through bench/websocket,
# which installs the peers, builds Serow and the client and raises the
# open-file limit first.  See docs/websocket.md, "Measured".
#
# Each round runs every server in turn, once, with CONNECTIONS (10,000)
# WebSockets opened and held throughout:
#   memory: the server side's resident memory (all its processes) before
#     the connections and once they are open (and subscribed), per connection;
#   fan-out: FANOUTS publishes to all, each timed from its publish request to
#     every connection's receipt (where a publish reaches all);
#   echo: for SECONDS, ECHO_CLIENTS of them each send a message and wait for
#     its echo before the next: echoes per second, p50 and p99;
#   check: every connection sends a message and must have its echo.
# Servers on CPU 0, the client on CPU 1 (bench/websocket-client.c, one thread).
# Writes OUT/websocket.md: the median over the rounds, and every round.
use strict;
use warnings;
use 5.020;

use Cwd ();
use File::Basename ();
use File::Path ();
use File::Temp ();
use Getopt::Long ();
use POSIX ();

my $ROOT;
BEGIN { $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/..') }
use lib "$ROOT/t/lib", "$ROOT/bench/lib";
use Serow::Bench::WebSocket qw(@SERVERS %TITLE %NO_PUBLISH start_server stop_server memory cpu missing version
    client);
use Serow::Bench::Util qw(logf median loadavg cpu_count slurp);
chdir $ROOT or die "$ROOT: $!\n";

my %opt = (rounds => 3, connections => 10_000, 'echo-clients' => 100, seconds => 10, fanouts => 5,
    'message-size' => 64, batch => 50, 'open-timeout' => 300, 'pushpin-open-rate' => 50, workers => 4, servers => join(',', @SERVERS),
    timeout => 30, out => "$ROOT/bench/results", client => "$ROOT/bench/.build/websocket-client");
my @ARGS = @ARGV;
Getopt::Long::GetOptions(\%opt, 'rounds=i', 'connections=i', 'echo-clients=i', 'seconds=f', 'fanouts=i',
    'message-size=i', 'batch=i', 'open-timeout=f', 'pushpin-open-rate=f', 'workers=i', 'servers=s', 'timeout=f', 'out=s', 'client=s',
    'help|h')
    or usage(2);
usage(0) if $opt{help};
sub usage {
    print <<'EOF';
Usage: bench/websocket [--rounds 3] [--connections 10000] [--echo-clients 100] [--seconds 10]
                       [--fanouts 5] [--message-size 64] [--batch 50] [--workers 4]
                       [--pushpin-open-rate 50]
                       [--servers serow,pushpin,mojo,mojo1] [--timeout 30]
                       [--out bench/results] [--client PATH]

  --connections N    WebSockets opened and held, for memory, fan-out and the check
  --echo-clients N   of them, those in the echo loop
  --seconds S        how long the echo loop runs
  --fanouts N        publishes timed to every connection, one after another
  --message-size N   bytes of each message (echo and publish)
  --batch N          upgrades in flight at once while opening
  --open-timeout S   the longest the connections may take to open
  --pushpin-open-rate R
                     Pushpin's upgrades started a second at most (0: as
                     many as --batch allows, as for the others).  Pushpin
                     answers the 101 before its handler has taken the
                     connection's subscription, and its proxy closes a
                     connection whose subscription the handler has not
                     acknowledged within 8 s (fixed in its source): opened
                     faster than its handler follows, connections are lost
  --workers N        Serow's workers (and those of Pushpin's origin and of
                     Mojolicious prefork)
  --servers LIST     which of serow, pushpin, mojo (prefork), mojo1 (one
                     process); a peer not installed is reported as such
  --timeout S        the longest wait for a delivery or an echo
  --client PATH      bench/websocket-client, built by bench/websocket

Writes OUT/websocket.md.
EOF
    exit $_[0];
}
my @servers = split /,/, $opt{servers};
for (@servers) { die "bench/websocket: unknown server '$_' (one of: @SERVERS)\n" unless $TITLE{$_} }
for (qw(rounds connections echo-clients fanouts batch workers)) {
    die "bench/websocket: --$_ must be at least 1\n" if $opt{$_} < 1;
}
-x $opt{client} or die "bench/websocket: no client at $opt{client} (bench/websocket builds it)\n";
-d "$ROOT/blib" or die "bench/websocket: build Serow first (tools/setup)\n";

my $DIR = File::Temp->newdir('serow-websocket-XXXXXX', TMPDIR => 1);
my (%R, %LEFT_OUT, %COMMANDS);   # server => [round results]; why left out; command lines

$SIG{INT} = $SIG{TERM} = sub { logf("bench/websocket: interrupted"); exit 130 };
$SIG{PIPE} = 'IGNORE';
my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_start = loadavg();
for my $server (@servers) {
    my $why = missing($server) or next;
    $LEFT_OUT{$server} = $why;
    logf("bench/websocket: %s: not installed: %s", $TITLE{$server}, $why);
}
my @run = grep { !$LEFT_OUT{$_} } @servers;
for my $round (1 .. $opt{rounds}) {
    for my $server (@run) {
        logf("== round %d: %s", $round, $TITLE{$server});
        my %r = (load => loadavg());
        eval { measure($server, \%r); 1 } or do {
            chomp(my $e = $@);
            $r{error} = $e;
            logf("bench/websocket: %s: %s", $TITLE{$server}, $e);
        };
        push @{ $R{$server} }, \%r;
    }
}
my $finished = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_end = loadavg();

File::Path::make_path($opt{out});
my $md = report();
open my $out, '>', "$opt{out}/websocket.md" or die "$opt{out}/websocket.md: $!\n";
print {$out} $md;
close $out or die "$opt{out}/websocket.md: $!\n";
print $md;
logf("bench/websocket: wrote %s/websocket.md", $opt{out});
exit((grep { $_->{error} } map { @$_ } values %R) ? 1 : 0);

# ---- the measures ------------------------------------------------------------

# One server, one round: started, the connections opened, every measure in
# turn on them, then both stopped.
sub measure {
    my ($server, $r) = @_;
    my $s = start_server($server, workers => $opt{workers}, message_size => $opt{'message-size'}, dir => "$DIR");
    $COMMANDS{$server}{$_} = 1 for @{ $s->{commands} };
    my $c;
    my $ok = eval {
        my $before = memory($s);
        $c = client($opt{client}, $s, conns => $opt{connections}, message_size => $opt{'message-size'},
            timeout => $opt{timeout}, open_timeout => $opt{'open-timeout'}, batch => $opt{batch}, dir => "$DIR",
            open_rate => $server eq 'pushpin' ? $opt{'pushpin-open-rate'} : 0);
        open_all($c, $r);
        my $held = memory($s);
        for my $part (keys %$before) {
            $r->{mem}{$part} = ($held->{$part} - $before->{$part}) * 1024 / $r->{held};
            $r->{mem_base}{$part} = $before->{$part};
        }
        fanout($s, $c, $r) if $s->{publish_request};
        echo($s, $c, $r);
        my $check = $c->command('check');
        $r->{$_} = $check->{$_} for qw(answered unanswered unexpected);
        $r->{lost} = $check->{lost};
        1;
    };
    my $e = $@;
    $c->quit if $c;
    stop_server($s);
    die $e unless $ok;
}

# Opens the connections, and where a publish reaches all, publishes until
# each has had one (a server may subscribe a connection after its 101).
sub open_all {
    my ($c, $r) = @_;
    my $open = $c->command('open');
    $r->{held} = $open->{opened} // 0;
    my %why = (failed_connect => 'could not connect', failed_closed => 'closed before an answer',
        failed_status => "answered $open->{last_bad_status}", failed_timeout => "not open after $opt{'open-timeout'} s");
    my @why = map { $open->{$_} ? "$open->{$_} $why{$_}" : () } sort keys %why;
    push @why, "$open->{lost} closed by the server after the 101" if $open->{lost};
    $r->{not_held} = "$r->{held} of $opt{connections} held (" . join(', ', @why) . ')'
        if $r->{held} != $opt{connections};
    die "no connection held" . ($r->{not_held} ? " ($r->{not_held})" : '') . "\n" unless $r->{held};
}

sub fanout {
    my ($s, $c, $r) = @_;
    my $ready = $c->command('ready');
    $r->{not_ready} = $r->{held} - ($ready->{ready} // 0);
    my $cpu = cpu($s);
    my $fan = $c->command("fanout $opt{fanouts}");
    $cpu = cpu($s) - $cpu;
    my $delivered = $opt{fanouts} * $fan->{connections} - $fan->{missing};
    $r->{fan_cpu_us} = $cpu * 1e6 / $delivered if $delivered > 0;
    $r->{"fan_$_"} = $fan->{$_} for qw(p50_ms p99_ms max_ms missing disordered publish_errors least_received);
}

# The echo loop, with what else ran meanwhile: the share of CPU 0 (the
# server's) and of CPU 1 (the client's) that other processes took, as
# bench/run reports it.
sub echo {
    my ($s, $c, $r) = @_;
    my @cpus = (cpu_ticks(0), cpu_ticks(1));
    my $server = cpu($s);
    my $client = proc_cpu($c->{pid}) + self_cpu();
    my $echo = $c->command("echo $opt{seconds} $opt{'echo-clients'}");
    $server = cpu($s) - $server;
    $client = proc_cpu($c->{pid}) + self_cpu() - $client;
    my @after = (cpu_ticks(0), cpu_ticks(1));
    my ($busy0, $total0, $busy1, $total1) = map { $after[$_] - $cpus[$_] } 0 .. 3;
    $r->{cpu0_other} = $total0 > 0 ? max0(($busy0 - $server * TICKS()) / $total0) : undef;
    $r->{cpu1_other} = $total1 > 0 ? max0(($busy1 - $client * TICKS()) / $total1) : undef;
    $r->{echo_cpu_us} = $server * 1e6 / $echo->{echoes} if $echo->{echoes};
    $r->{"echo_$_"} = $echo->{$_} for qw(clients echoes echoes_per_sec p50_ms p99_ms unanswered);
}

sub max0 { $_[0] > 0 ? $_[0] : 0 }

use constant TICKS => POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;

# (busy, total) ticks of one CPU, as Serow::Bench::Cpu counts them:
# interrupts and softirqs left out of busy (on loopback much of that is the
# benchmark's own traffic).
sub cpu_ticks {
    my ($cpu) = @_;
    my ($line) = (slurp('/proc/stat') // '') =~ /^cpu$cpu (.*)$/m or return (0, 0);
    my ($user, $nice, $system, $idle, $iowait, $irq, $softirq, $steal) = split ' ', $line;
    my $busy = $user + $nice + $system + ($steal // 0);
    return ($busy, $busy + $idle + $iowait + $irq + $softirq);
}

# CPU seconds of a process (the client) and of this script.
sub proc_cpu {
    my ($pid) = @_;
    my $stat = slurp("/proc/$pid/stat") // return 0;
    $stat =~ /\) (.*)$/s or return 0;
    my @f = split ' ', $1;
    return ($f[11] + $f[12]) / TICKS;
}
sub self_cpu { my ($u, $s) = times; $u + $s }

# ---- the report ----------------------------------------------------------------

sub values_of {
    my ($server, $get) = @_;
    return grep { defined } map { $get->($_) } grep { !$_->{error} } @{ $R{$server} || [] };
}

sub med { my ($server, $get) = @_; median(values_of($server, $get)) }

sub fmt_bytes {
    my ($b) = @_;
    return '-' unless defined $b;
    return sprintf('%.1f MB', $b / 1e6) if abs($b) >= 10_000_000;
    return sprintf('%.1f KB', $b / 1000) if abs($b) >= 10_000;
    return sprintf('%.0f bytes', $b);
}
sub fmt_ms { defined $_[0] ? sprintf('%.2f ms', $_[0]) : '-' }
sub fmt_us { defined $_[0] ? sprintf('%.1f us', $_[0]) : '-' }
sub fmt_pct { defined $_[0] ? sprintf('%.0f%%', $_[0] * 100) : '-' }
sub fmt_n {
    my ($n) = @_;
    return '-' unless defined $n;
    $n = sprintf '%.0f', $n;
    1 while $n =~ s/^(\d+)(\d{3})/$1,$2/;
    return $n;
}
sub ratio {
    my ($v, $serow) = @_;
    return '' unless defined $v && defined $serow && $serow > 0;
    return sprintf ' (%.2fx)', $v / $serow;
}
# a measured figure and its ratio to Serow's, or why it is missing
sub cell {
    my ($server, $fmt, $get) = @_;
    return "not installed" if $LEFT_OUT{$server};
    my $v = med($server, $get);
    return $fmt->($v) . ($server eq 'serow' ? '' : ratio($v, med('serow', $get)));
}

sub report {
    my $cpu = (slurp('/proc/cpuinfo') // '') =~ /^model name\s*:\s*(.*)$/m ? $1 : '?';
    my ($mem) = (slurp('/proc/meminfo') // '') =~ /^MemTotal:\s+(\d+)/m;
    my $ncpu = cpu_count();
    my $n = fmt_n($opt{connections});
    my $md = "# WebSockets: Serow beside Pushpin and Mojolicious\n\n";
    $md .= "Generated by `bench/websocket" . join('', map { " $_" } @ARGS) . "`. What each measure is and how to "
        . "read it: [docs/websocket.md](../../docs/websocket.md#measured).\n\n";
    $md .= "**Read the ratios, not the absolute figures.** This machine has $ncpu cores and is shared: "
        . "figures move by about ±30% from run to run, and other work may have been loading it during this run "
        . "(load average and the CPU other processes took, below). The servers ran in turn within each round, "
        . "under the same load; the ratios in brackets are to Serow's figure in the same run.\n\n";
    $md .= "| condition | value |\n|---|---|\n";
    $md .= "| date | $started to $finished |\n";
    $md .= sprintf "| CPU | %s, %d cores, %.1f GiB memory |\n", $cpu, $ncpu, ($mem // 0) / 1024 / 1024;
    $md .= "| load average (1 min) | $load_start at the start, $load_end at the end; per round below |\n";
    $md .= "| pinning | each server's processes (Pushpin's origin included) on CPU 0; the client on CPU 1, one thread |\n";
    $md .= "| rounds | $opt{rounds}, the servers in turn within a round; the median is reported |\n";
    $md .= "| connections | $n WebSockets opened (at most $opt{batch} upgrades at once"
        . ($opt{'pushpin-open-rate'} > 0 ? "; Pushpin's at most $opt{'pushpin-open-rate'} started a second" : '')
        . ") and held through every measure |\n";
    $md .= "| workers | $opt{workers} (Serow, Pushpin's origin, Mojolicious prefork) |\n";
    $md .= "| messages | $opt{'message-size'} bytes of text, masked by the client |\n";
    $md .= "| echo | $opt{'echo-clients'} of the connections in a closed loop for $opt{seconds} s |\n";
    $md .= "| fan-out | $opt{fanouts} publishes, one after another, each once the last reached every connection |\n";
    $md .= "| open-file limit | " . (POSIX::sysconf(POSIX::_SC_OPEN_MAX()) // '?') . " |\n";
    $md .= "| versions | " . join('; ', map { $LEFT_OUT{$_} ? "$TITLE{$_} not installed" : version($_) }
        grep { $_ ne 'mojo1' } @servers) . " |\n\n";

    $md .= "## Memory: $n connections held\n\n";
    $md .= "Resident memory (RSS) of all the server's processes grown from before the connections opened "
        . "to once they were open (and subscribed, where a publish reaches them), divided by their number. "
        . "The kernel's socket buffers are not in it.\n\n";
    $md .= "| server | per connection | of which | RSS before |\n|---|---|---|---|\n";
    my %parts = (serow => [[holder => 'connection holder']], pushpin => [[pushpin => 'Pushpin'], [origin => 'origin']]);
    for my $server (@servers) {
        my $of = join '; ', map {
            my ($key, $title) = @$_;
            "$title " . fmt_bytes(med($server, sub { $_[0]{mem}{$key} }));
        } @{ $parts{$server} || [] };
        $md .= sprintf "| %s | %s | %s | %s |\n", $TITLE{$server}, cell($server, \&fmt_bytes, sub { $_[0]{mem}{all} }),
            $of || '-', fmt_bytes(map { defined $_ ? $_ * 1024 : undef } med($server, sub { $_[0]{mem_base}{all} }));
    }
    $md .= "\n";

    $md .= "## Echo round trips, $opt{'echo-clients'} clients\n\n";
    $md .= "Each client sends a message and waits for its echo before sending the next, for $opt{seconds} s, "
        . "with the other connections held meanwhile. Server CPU per echo: the CPU time (user and system) of all "
        . "its processes over the loop, divided by the echoes. Others on CPU 0 / 1: the share of the server's "
        . "CPU and of the client's that other processes on this shared machine took meanwhile.\n\n";
    $md .= "| server | echoes per second | p50 | p99 | server CPU per echo | others on CPU 0 / 1 |\n|---|---|---|---|---|---|\n";
    for my $server (@servers) {
        $md .= sprintf "| %s | %s | %s | %s | %s | %s / %s |\n", $TITLE{$server},
            cell($server, \&fmt_n, sub { $_[0]{echo_echoes_per_sec} }),
            cell($server, \&fmt_ms, sub { $_[0]{echo_p50_ms} }), cell($server, \&fmt_ms, sub { $_[0]{echo_p99_ms} }),
            cell($server, \&fmt_us, sub { $_[0]{echo_cpu_us} }),
            fmt_pct(med($server, sub { $_[0]{cpu0_other} })), fmt_pct(med($server, sub { $_[0]{cpu1_other} }));
    }
    $md .= "\n";

    $md .= "## One publish to $n connections\n\n";
    $md .= "From the client writing the publish request to each connection reading the message; the median over "
        . "the $opt{fanouts} publishes of each one's p50, p99 and max (the last connection), and the fewest "
        . "connections one publish reached.\n\n";
    $md .= "| server | p50 | p99 | max (the last) | reached (fewest of the publishes) | server CPU per delivery |\n"
        . "|---|---|---|---|---|---|\n";
    for my $server (@servers) {
        if ($NO_PUBLISH{$server}) {
            $md .= "| $TITLE{$server} | does not apply: $NO_PUBLISH{$server} | | | | |\n";
            next;
        }
        my $least = med($server, sub { $_[0]{fan_least_received} });
        $md .= sprintf "| %s | %s | %s | %s | %s of %s | %s |\n", $TITLE{$server},
            cell($server, \&fmt_ms, sub { $_[0]{fan_p50_ms} }), cell($server, \&fmt_ms, sub { $_[0]{fan_p99_ms} }),
            cell($server, \&fmt_ms, sub { $_[0]{fan_max_ms} }), fmt_n($least),
            fmt_n(med($server, sub { $_[0]{held} })), cell($server, \&fmt_us, sub { $_[0]{fan_cpu_us} });
    }
    $md .= "\n";

    $md .= "## Every connection still answering after\n\n";
    $md .= "After the measures, each held connection sends a message and must have its echo within "
        . "$opt{timeout} s.\n\n| server | answered (every round) | lost during the round |\n|---|---|---|\n";
    for my $server (@servers) {
        my @rs = @{ $R{$server} || [] };
        $md .= sprintf "| %s | %s | %s |\n", $TITLE{$server},
            @rs ? join(', ', map { $_->{error} ? 'failed' : fmt_n($_->{answered}) . ' of ' . fmt_n($_->{held}) } @rs) : '-',
            @rs ? join(', ', map { fmt_n($_->{lost}) } @rs) : '-';
    }
    $md .= "\n";
    $md .= rounds_table();
    $md .= differences();
    $md .= commands();
    return $md;
}

sub rounds_table {
    my $md = "## Every round\n\n| server | round | load | held | per connection | echoes/s | echo p50 / p99 (ms) "
        . "| others on CPU 0 / 1 | fan-out p50 / p99 / max (ms) | missing | other |\n"
        . "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for my $server (@servers) {
        my $i = 0;
        for my $r (@{ $R{$server} || [] }) {
            $i++;
            my @other;
            push @other, "error: $r->{error}" if $r->{error};
            push @other, $r->{not_held} if $r->{not_held};
            push @other, "$r->{not_ready} never had a warm-up publish" if $r->{not_ready};
            push @other, "$r->{echo_unanswered} echoes unanswered in the loop" if $r->{echo_unanswered};
            push @other, "$r->{unexpected} unexpected messages" if $r->{unexpected};
            push @other, "$r->{fan_disordered} publishes out of order or twice" if $r->{fan_disordered};
            push @other, "$r->{fan_publish_errors} publishes failed" if $r->{fan_publish_errors};
            my $f = sub { my $k = shift; defined $r->{$k} ? sprintf('%.2f', $r->{$k}) : '-' };
            $md .= sprintf "| %s | %d | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s | %s |\n", $TITLE{$server}, $i,
                $r->{load}, fmt_n($r->{held}), fmt_bytes($r->{mem}{all}), fmt_n($r->{echo_echoes_per_sec}),
                $f->('echo_p50_ms'), $f->('echo_p99_ms'), fmt_pct($r->{cpu0_other}), fmt_pct($r->{cpu1_other}),
                $NO_PUBLISH{$server} ? 'does not apply' : join(' / ', map { $f->("fan_$_") } qw(p50_ms p99_ms max_ms)),
                fmt_n($r->{fan_missing}), join(', ', @other) =~ s/\|/\\|/gr;
        }
    }
    return "$md\n";
}

sub differences {
    return <<"EOF";
## What is the same and what differs

The same for all: the client and its machine, the connection count, the messages
($opt{'message-size'} bytes of text, masked), the echo loop, the CPU each side runs on.

What differs, by design of each server:

- **Serow** (`--grip`) holds the WebSockets in its connection holder, one C process; each
  message goes to any free worker of $opt{workers} as a WebSocket-over-HTTP request, and the
  app (`bench/apps/websocket.psgi`) answers it with the echo. The app subscribes each connection
  to a channel at its `OPEN` (GRIP's control message); publishes go to `--publish-listen`
  (Pushpin's JSON, a `ws-message`).
- **Pushpin** (condure in front, pushpin-proxy, pushpin-handler, and zurl to reach the origin)
  holds the WebSockets and sends each message to its origin over WebSocket-over-HTTP (an
  `over_http` route): Serow without `--grip`, with the same app and $opt{workers} workers, so
  no connection is pinned to a worker there either. Publishes go to Pushpin's HTTP endpoint,
  the same JSON. Pushpin's memory includes its origin's. Its `message_rate` and `message_hwm`
  are raised so that they do not cap the measure; its info logging is off. Its upgrades are
  paced (`--pushpin-open-rate`, in the conditions above): it answers the 101 before its
  handler has taken the connection's subscription, and its proxy closes a connection whose
  subscription is not acknowledged within 8 s (fixed in its source), so opened as fast as
  the others its handler, on the core shared with everything else, fell behind and most of
  10,000 were closed; its users' clients arrive over time.
- **Mojolicious prefork** (`bench/apps/websocket-mojo.pl prefork`, $opt{workers} workers, EV's
  loop) holds each WebSocket in the worker that accepted it, which also runs the app: a
  message is answered in that worker's event loop, with no request to any other process. Its
  app keeps its connections in a list in each process: a publish reaches one worker's, so it
  is measured in one process instead:
- **Mojolicious, one process** (`daemon`): the same app in a single process, where the
  list holds every connection and a `POST /publish` sends the message to all of them; what a
  Mojolicious chat without Redis or PostgreSQL does. Its memory and echoes are measured
  too, for comparison with the prefork's. Connections have no inactivity timeout and no cap
  below the count held (`-i 0 -c 100000`, and prefork's `-a 0`), production mode.
EOF
}

sub commands {
    my $md = "## How each server ran\n\n";
    for my $server (@servers) {
        if ($LEFT_OUT{$server}) { $md .= "- $TITLE{$server}: not installed: $LEFT_OUT{$server}.\n"; next }
        $md .= "- $TITLE{$server}:\n";
        $md .= "  - `$_`\n" for sort keys %{ $COMMANDS{$server} || {} };
    }
    $md .= "\nPushpin's configuration is generated by `bench/lib/Serow/Bench/Holding.pm`, its route by "
        . "`bench/lib/Serow/Bench/WebSocket.pm`.\n";
    return $md;
}
