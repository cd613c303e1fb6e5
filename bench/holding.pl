#!/usr/bin/perl
# bench/holding.pl - held connections: Serow beside nginx with Nchan and
# Pushpin, the same client for all three.  Run it through bench/holding,
# which installs the peers, builds Serow and raises the open-file limit
# first.  See docs/benchmarks.md, "Held connections".
#
# Each round runs every server in turn, twice:
#   held: SUBSCRIBERS (10,000) server-sent-event streams opened on one
#     channel; the server side's resident memory before and once every
#     subscriber has received a warm-up publish, and again after FANOUTS
#     publishes each timed from its publish request to every subscriber's
#     receipt;
#   rate: RATE_SUBSCRIBERS (1,000) streams and SECONDS of publishes, no more
#     than WINDOW at a time not yet at every subscriber: deliveries per second.
# Servers on CPU 0, the client on CPU 1 (bench/holding-client.c, one thread).
# Writes OUT/holding.md: the median over the rounds, and every round.
use strict;
use warnings;
use 5.020;

use Cwd ();
use File::Basename ();
use File::Temp ();
use Getopt::Long ();
use POSIX ();

my $ROOT;
BEGIN { $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/..') }
use lib "$ROOT/t/lib", "$ROOT/bench/lib";
use Serow::Bench::Holding qw(@SERVERS %TITLE start_server stop_server memory cpu missing version client);
use Serow::Bench::Peers qw(installed write_report);
use Serow::Bench::Util qw(logf median loadavg cpu_count slurp);
chdir $ROOT or die "$ROOT: $!\n";

my %opt = (rounds => 3, subscribers => 10_000, 'rate-subscribers' => 1000, fanouts => 5, seconds => 10,
    window => 16, 'message-size' => 64, batch => 50, 'open-timeout' => 300, workers => 4, servers => join(',', @SERVERS), timeout => 30,
    out => "$ROOT/bench/results", client => "$ROOT/bench/.build/holding-client");
my @ARGS = @ARGV;
Getopt::Long::GetOptions(\%opt, 'rounds=i', 'subscribers=i', 'rate-subscribers=i', 'fanouts=i', 'seconds=f',
    'window=i', 'message-size=i', 'batch=i', 'open-timeout=f', 'workers=i', 'servers=s', 'timeout=f', 'out=s', 'client=s', 'help|h')
    or usage(2);
usage(0) if $opt{help};
sub usage {
    print <<'EOF';
Usage: bench/holding [--rounds 3] [--subscribers 10000] [--rate-subscribers 1000]
                     [--fanouts 5] [--seconds 10] [--window 16] [--message-size 64] [--batch 50]
                     [--workers 4] [--servers serow,nchan,pushpin] [--timeout 30]
                     [--out bench/results] [--client PATH]

  --subscribers N       streams held for the memory and fan-out measures
  --rate-subscribers N  streams for the deliveries-per-second measure
  --fanouts N           publishes timed to every subscriber, one after another
  --seconds S           how long publishes stream in the rate measure
  --window N            publishes not yet at every subscriber, at most
  --message-size N      bytes of each event's data
  --batch N             subscribe requests in flight at once while opening
  --open-timeout S      the longest the subscribers may take to open
  --workers N           Serow's workers (and those of Pushpin's origin)
  --servers LIST        which of serow, nchan, pushpin (a peer not installed is
                        reported as such)
  --timeout S           the longest wait for a delivery
  --client PATH         bench/holding-client, built by bench/holding

Writes OUT/holding.md.
EOF
    exit $_[0];
}
my @servers = split /,/, $opt{servers};
for (@servers) { die "bench/holding: unknown server '$_' (one of: @SERVERS)\n" unless $TITLE{$_} }
for (qw(rounds subscribers rate-subscribers fanouts window batch workers)) {
    die "bench/holding: --$_ must be at least 1\n" if $opt{$_} < 1;
}
-x $opt{client} or die "bench/holding: no client at $opt{client} (bench/holding builds it)\n";
-d "$ROOT/blib" or die "bench/holding: build Serow first (tools/setup)\n";

# The parts whose memory is reported, by server: [part, title].
my %PARTS = (
    serow   => [[holder => 'Serow: connection holder'], [server => 'Serow: whole server (master, holder, workers)']],
    nchan   => [[workers => 'nginx + Nchan: worker']],
    pushpin => [[pushpin => 'Pushpin: condure, zurl, pushpin-proxy, pushpin-handler, runner'],
                [origin => 'Pushpin\'s origin (Serow without --grip)']],
);

my $DIR = File::Temp->newdir('serow-holding-XXXXXX', TMPDIR => 1);
my (%R, %COMMANDS);   # server => [round results]; command lines

$SIG{INT} = $SIG{TERM} = sub { logf("bench/holding: interrupted"); exit 130 };
$SIG{PIPE} = 'IGNORE';
my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_start = loadavg();
my ($LEFT_OUT, @run) = installed('bench/holding', \%TITLE, \&missing, @servers);
for my $round (1 .. $opt{rounds}) {
    for my $server (@run) {
        logf("== round %d: %s", $round, $TITLE{$server});
        my %r = (load => loadavg());
        eval { held($server, \%r); rate($server, \%r); 1 } or do {
            chomp(my $e = $@);
            $r{error} = $e;
            logf("bench/holding: %s: %s", $TITLE{$server}, $e);
        };
        push @{ $R{$server} }, \%r;
    }
}
my $finished = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_end = loadavg();

write_report('bench/holding', $opt{out}, 'holding.md', report());
exit((grep { $_->{error} } map { @$_ } values %R) ? 1 : 0);

# ---- the measures ------------------------------------------------------------

# Runs $body with the server started and a client of $conns subscribers that
# are open and have each received a publish; stops both after.  $r gets how
# many were held (subscribers) and, when not all, why the others were not
# (not_held).
sub with_subscribers {
    my ($server, $conns, $r, $body) = @_;
    my $s = start_server($server, workers => $opt{workers}, message_size => $opt{'message-size'}, dir => "$DIR");
    $COMMANDS{$server}{$_} = 1 for @{ $s->{commands} };
    my $c;
    my $ok = eval {
        my $before = memory($s);
        $c = client($opt{client}, $s, conns => $conns, timeout => $opt{timeout}, dir => "$DIR",
            batch => $opt{batch}, open_timeout => $opt{'open-timeout'});
        my $open = $c->command('open');
        my $ready = $c->command('ready');
        $r->{subscribers} = $ready->{ready} // 0;
        my %why = (failed_connect => 'could not connect', failed_closed => 'closed before an answer',
            failed_status => "answered $open->{last_bad_status}", failed_timeout => "not open after $opt{'open-timeout'} s",
            lost => 'closed by the server after its answer');
        my @why = map { $open->{$_} ? "$open->{$_} $why{$_}" : () }
            qw(failed_connect failed_closed failed_status failed_timeout);
        push @why, "$ready->{lost} $why{lost}" if $ready->{lost};
        $r->{not_held} = "$r->{subscribers} of $conns held (" . join(', ', @why) . ')' if $r->{subscribers} != $conns;
        die "no subscriber held" . ($r->{not_held} ? " ($r->{not_held})" : '') . "\n" unless $r->{subscribers};
        $body->($s, $c, $before, $r->{subscribers});
        1;
    };
    my $e = $@;
    $c->quit if $c;
    stop_server($s);
    die $e unless $ok;
}

sub held {
    my ($server, $r) = @_;
    with_subscribers($server, $opt{subscribers}, $r, sub {
        my ($s, $c, $before, $held_count) = @_;
        my $held = memory($s);
        my $cpu = cpu($s);
        my $fan = $c->command("fanout $opt{fanouts}");
        $cpu = cpu($s) - $cpu;
        my $after = memory($s);
        my $delivered = $opt{fanouts} * $fan->{subscribers} - $fan->{missing};
        $r->{fan_cpu_us} = $cpu * 1e6 / $delivered if $delivered > 0;
        for my $part (keys %$before) {
            $r->{mem_held}{$part} = ($held->{$part} - $before->{$part}) * 1024 / $held_count;
            $r->{mem_after}{$part} = ($after->{$part} - $before->{$part}) * 1024 / $held_count;
            $r->{mem_base}{$part} = $before->{$part};
        }
        $r->{$_} = $fan->{$_} for qw(p50_ms p99_ms max_ms missing disordered publish_errors lost);
        $r->{fan_rounds} = $fan->{rounds};
    });
}

sub rate {
    my ($server, $r) = @_;
    my %held;
    with_subscribers($server, $opt{'rate-subscribers'}, \%held, sub {
        my ($s, $c) = @_;
        my $cpu = cpu($s);
        my $rate = $c->command("rate $opt{seconds} $opt{window}");
        $cpu = cpu($s) - $cpu;
        $r->{rate}{cpu_us} = $cpu * 1e6 / $rate->{deliveries} if $rate->{deliveries};
        $r->{rate}{$_} = $rate->{$_} for qw(subscribers published deliveries expected seconds deliveries_per_sec
            missing disordered publish_errors lost);
    });
    $r->{rate}{not_held} = $held{not_held} if $held{not_held};
}

# ---- the report ----------------------------------------------------------------

sub values_of {
    my ($server, $get) = @_;
    return grep { defined } map { $get->($_) } grep { !$_->{error} } @{ $R{$server} || [] };
}

sub med { my ($server, $get) = @_; median(values_of($server, $get)) }

sub fmt_bytes {
    my ($b) = @_;
    return '-' unless defined $b;
    return sprintf('%.1f KB', $b / 1000) if abs($b) >= 10_000;
    return sprintf('%.0f bytes', $b);
}
sub fmt_ms { defined $_[0] ? sprintf('%.1f ms', $_[0]) : '-' }
sub fmt_us { defined $_[0] ? sprintf('%.1f us', $_[0]) : '-' }
sub fmt_n {
    my ($n) = @_;
    return '-' unless defined $n;
    1 while $n =~ s/^(\d+)(\d{3})/$1,$2/;
    return $n;
}
sub ratio {
    my ($v, $serow) = @_;
    return '' unless defined $v && defined $serow && $serow > 0;
    return sprintf ' (%.2fx)', $v / $serow;
}

sub report {
    my $cpu = (slurp('/proc/cpuinfo') // '') =~ /^model name\s*:\s*(.*)$/m ? $1 : '?';
    my ($mem) = (slurp('/proc/meminfo') // '') =~ /^MemTotal:\s+(\d+)/m;
    my $ncpu = cpu_count();
    my $md = "# Held connections: Serow beside nginx + Nchan and Pushpin\n\n";
    $md .= "Generated by `bench/holding" . join('', map { " $_" } @ARGS) . "`. What each measure is and how to read it: "
        . "[docs/benchmarks.md](../../docs/benchmarks.md#held-connections-benchholding).\n\n";
    $md .= "**Read the ratios, not the absolute figures.** This machine has $ncpu cores and is shared: "
        . "figures move by about ±30% from run to run, and other work was loading it during this run "
        . "(load average below). The three servers ran in turn within each round, under the same load; "
        . "the ratios in brackets are to Serow's figure in the same run.\n\n";
    $md .= "| condition | value |\n|---|---|\n";
    $md .= "| date | $started to $finished |\n";
    $md .= sprintf "| CPU | %s, %d cores, %.1f GiB memory |\n", $cpu, $ncpu, ($mem // 0) / 1024 / 1024;
    $md .= "| load average (1 min) | $load_start at the start, $load_end at the end; per round below |\n";
    $md .= "| pinning | each server's processes (Pushpin's origin included) on CPU 0; the client on CPU 1, one thread |\n";
    $md .= "| rounds | $opt{rounds}, the servers in turn within a round; the median is reported |\n";
    $md .= "| subscribers | " . fmt_n($opt{subscribers}) . " for memory and fan-out, " . fmt_n($opt{'rate-subscribers'})
        . " for deliveries per second; all on one channel, each an EventSource request (`Accept: text/event-stream`) |\n";
    $md .= "| message | $opt{'message-size'} bytes of event data, the same for all three |\n";
    $md .= "| opening | at most $opt{batch} subscribe requests in flight at once |\n";
    $md .= "| fan-outs | $opt{fanouts} publishes, one after another, each once the last reached every subscriber |\n";
    $md .= "| deliveries per second | $opt{seconds} s of publishes, at most $opt{window} not yet at every subscriber |\n";
    $md .= "| open-file limit | " . (POSIX::sysconf(POSIX::_SC_OPEN_MAX()) // '?') . " (the client and each server are separate processes) |\n";
    $md .= "| versions | " . join('; ', map { $LEFT_OUT->{$_} ? "$TITLE{$_} not installed" : version($_) } @servers) . " |\n\n";

    $md .= goals();

    $md .= "## Memory: " . fmt_n($opt{subscribers}) . " subscribers held\n\n";
    $md .= "Resident memory (RSS) grown from before the subscribers connected, divided by their number: "
        . "once every subscriber has received a warm-up publish, and after the $opt{fanouts} fan-outs. "
        . "The kernel's socket buffers are not in it (they are the same for all three).\n\n";
    $md .= "| processes | per subscriber, held | after the fan-outs | RSS before |\n|---|---|---|---|\n";
    my $serow_holder = med('serow', sub { $_[0]{mem_held}{holder} });
    for my $server (@servers) {
        if ($LEFT_OUT->{$server}) {
            $md .= "| $TITLE{$server} | not installed | | |\n";
            next;
        }
        for my $part (@{ $PARTS{$server} }) {
            my ($key, $title) = @$part;
            my $held = med($server, sub { $_[0]{mem_held}{$key} });
            my $after = med($server, sub { $_[0]{mem_after}{$key} });
            my $base = med($server, sub { $_[0]{mem_base}{$key} });
            my $cmp = $key eq 'holder' || $key eq 'origin' ? '' : ratio($held, $serow_holder);
            $md .= sprintf "| %s | %s%s | %s | %s |\n", $title, fmt_bytes($held), $cmp, fmt_bytes($after),
                defined $base ? sprintf('%.1f MB', $base * 1024 / 1e6) : '-';
        }
    }
    $md .= "\nIn brackets: the ratio to Serow's connection holder.\n\n";

    $md .= "## One publish to " . fmt_n($opt{subscribers}) . " subscribers\n\n";
    $md .= "From the client writing the publish request to each subscriber reading the event; "
        . "the median over the $opt{fanouts} publishes of each one's p50, p99 and max (the last subscriber). "
        . "Server CPU per delivery: the CPU time (user and system) its delivering processes took over the "
        . "$opt{fanouts} publishes, divided by the deliveries; less moved by the machine's load than the times.\n\n";
    $md .= "| server | p50 | p99 | max | server CPU per delivery | deliveries missing (all publishes) |\n"
        . "|---|---|---|---|---|---|\n";
    my %serow = map { my $k = $_; $k => med('serow', sub { $_[0]{$k} }) } qw(p50_ms p99_ms max_ms fan_cpu_us);
    for my $server (@servers) {
        if ($LEFT_OUT->{$server}) { $md .= "| $TITLE{$server} | not installed | | | | |\n"; next }
        my %v = map { my $k = $_; $k => med($server, sub { $_[0]{$k} }) } qw(p50_ms p99_ms max_ms fan_cpu_us);
        my $missing = 0;
        $missing += $_ for values_of($server, sub { $_[0]{missing} });
        $md .= sprintf "| %s | %s%s | %s%s | %s%s | %s%s | %s |\n", $TITLE{$server},
            map({ (fmt_ms($v{$_}), $server eq 'serow' ? '' : ratio($v{$_}, $serow{$_})) } qw(p50_ms p99_ms max_ms)),
            fmt_us($v{fan_cpu_us}), $server eq 'serow' ? '' : ratio($v{fan_cpu_us}, $serow{fan_cpu_us}),
            fmt_n($missing);
    }
    $md .= "\n## Deliveries per second, " . fmt_n($opt{'rate-subscribers'}) . " subscribers\n\n";
    $md .= "Publishes times subscribers reached, from the first publish to the last delivery; "
        . "publishes stream for $opt{seconds} s over the server's HTTP publish endpoint, "
        . "no more than $opt{window} at a time not yet at every subscriber. Server CPU per delivery as above, "
        . "the publish endpoint's work included.\n\n";
    $md .= "| server | deliveries per second | server CPU per delivery | publishes | deliveries missing |\n"
        . "|---|---|---|---|---|\n";
    my $serow_rate = med('serow', sub { $_[0]{rate}{deliveries_per_sec} });
    my $serow_cpu = med('serow', sub { $_[0]{rate}{cpu_us} });
    for my $server (@servers) {
        if ($LEFT_OUT->{$server}) { $md .= "| $TITLE{$server} | not installed | | | |\n"; next }
        my $rate = med($server, sub { $_[0]{rate}{deliveries_per_sec} });
        my $cpu = med($server, sub { $_[0]{rate}{cpu_us} });
        my $published = med($server, sub { $_[0]{rate}{published} });
        my $missing = 0;
        $missing += $_ for values_of($server, sub { $_[0]{rate}{missing} });
        $md .= sprintf "| %s | %s%s | %s%s | %s | %s |\n", $TITLE{$server},
            fmt_n(defined $rate ? sprintf('%.0f', $rate) : undef), $server eq 'serow' ? '' : ratio($rate, $serow_rate),
            fmt_us($cpu), $server eq 'serow' ? '' : ratio($cpu, $serow_cpu), fmt_n($published), fmt_n($missing);
    }
    $md .= "\n" . rounds_table() . differences() . "\n" . commands();
    return $md;
}

sub goals {
    my $holder = med('serow', sub { $_[0]{mem_held}{holder} });
    my $max = med('serow', sub { $_[0]{max_ms} });
    my $nchan_max = med('nchan', sub { $_[0]{max_ms} });
    my $rate = med('serow', sub { $_[0]{rate}{deliveries_per_sec} });
    my $nchan_rate = med('nchan', sub { $_[0]{rate}{deliveries_per_sec} });
    my $pushpin_rate = med('pushpin', sub { $_[0]{rate}{deliveries_per_sec} });
    my $missing = 0;
    $missing += $_ for values_of('serow', sub { ($_[0]{missing} // 0) + ($_[0]{rate}{missing} // 0) });
    my $errors = grep { $_->{error} || $_->{not_held} || $_->{rate}{not_held} } @{ $R{serow} || [] };
    my $verdict = sub { !defined $_[0] ? 'not measured' : $_[0] ? 'PASS' : 'MISS' };
    my $md = "## Goals (issue 29)\n\n| goal | wanted | measured (Serow, median) | result |\n|---|---|---|---|\n";
    $md .= sprintf "| holder memory per held subscriber | <= 1 KiB | %s | %s |\n", fmt_bytes($holder),
        $verdict->(defined $holder ? $holder <= 1024 : undef);
    $md .= sprintf "| one publish to all: time to the last subscriber | <= Nchan's | %s vs %s | %s |\n",
        fmt_ms($max), fmt_ms($nchan_max), $verdict->(defined $max && defined $nchan_max ? $max <= $nchan_max : undef);
    $md .= sprintf "| deliveries per second vs Nchan | >= 1.0x | %s | %s |\n",
        defined $rate && $nchan_rate ? sprintf('%.2fx', $rate / $nchan_rate) : '-',
        $verdict->(defined $rate && $nchan_rate ? $rate >= $nchan_rate : undef);
    $md .= sprintf "| deliveries per second vs Pushpin | >= 5x | %s | %s |\n",
        defined $rate && $pushpin_rate ? sprintf('%.2fx', $rate / $pushpin_rate) : '-',
        $verdict->(defined $rate && $pushpin_rate ? $rate >= 5 * $pushpin_rate : undef);
    $md .= sprintf "| every subscriber received every message | 0 missing, every round | %s missing%s | %s |\n\n",
        fmt_n($missing), $errors ? ", $errors round(s) failed or did not hold every subscriber" : '', $verdict->(@{ $R{serow} || [] } ? !$missing && !$errors : undef);
    return $md;
}

sub rounds_table {
    my $md = "## Every round\n\n| server | round | load | held | p50 / p99 / max (ms) | per subscriber, held (after fan-outs) "
        . "| deliveries/s | server CPU per delivery (fan-out; rate) | missing (fan-out; rate) | other |\n"
        . "|---|---|---|---|---|---|---|---|---|---|\n";
    for my $server (@servers) {
        my $i = 0;
        for my $r (@{ $R{$server} || [] }) {
            $i++;
            my $mem = join '; ', map {
                my ($key, $title) = @$_;
                defined $r->{mem_held}{$key} ? "$key " . fmt_bytes($r->{mem_held}{$key}) . ' (' . fmt_bytes($r->{mem_after}{$key}) . ')' : ();
            } @{ $PARTS{$server} };
            my @other;
            push @other, "error: $r->{error}" if $r->{error};
            push @other, $r->{not_held} if $r->{not_held};
            push @other, "rate: $r->{rate}{not_held}" if $r->{rate} && $r->{rate}{not_held};
            my %what = (lost => 'closed by the server in all', disordered => 'out of order or twice',
                publish_errors => 'publishes failed');
            for my $k (qw(lost disordered publish_errors)) {
                push @other, "fan-out: $r->{$k} $what{$k}" if $r->{$k};
                push @other, "rate: $r->{rate}{$k} $what{$k}" if $r->{rate} && $r->{rate}{$k};
            }
            $md .= sprintf "| %s | %d | %s | %s | %s | %s | %s | %s; %s | %s; %s | %s |\n", $TITLE{$server}, $i, $r->{load},
                fmt_n($r->{subscribers}), join(' / ', map { defined $r->{$_} ? sprintf('%.1f', $r->{$_}) : '-' } qw(p50_ms p99_ms max_ms)),
                $mem || '-', fmt_n($r->{rate}{deliveries_per_sec}), fmt_us($r->{fan_cpu_us}), fmt_us($r->{rate}{cpu_us}),
                fmt_n($r->{missing}), fmt_n($r->{rate}{missing}),
                join(', ', @other) =~ s/\|/\\|/gr;
        }
    }
    return "$md\n";
}

sub differences {
    return <<"EOF";
## What is the same and what differs

The same for all three: the client and its machine, the subscriber count, one channel, the
event data ($opt{'message-size'} bytes), publishing over each server's own HTTP publish endpoint
on a listener of its own (one connection, one request at a time), the CPU each side runs on.

What differs, by design of each server:

- **Serow** holds the streams in its connection holder, one C process; its $opt{workers} workers
  answer each subscribe request and are free at once. The app is `bench/apps/sse.psgi`
  (`Grip-Hold: stream`). Publishes go to `--publish-listen` (Pushpin's JSON); the event is
  written as `data: ...` in HTTP/1.1 chunks.
- **nginx + Nchan** runs one worker (as bench/run's nginx) with an `eventsource` subscriber
  location; the publish body is the event data, which Nchan frames as `id: ...` and `data: ...`
  lines (about 20 bytes more on the wire per event). Nchan answers each subscribe request
  itself: no app runs.
- **Pushpin** (condure in front, pushpin-proxy, pushpin-handler, and zurl to reach the origin)
  proxies each subscribe request to an origin: Serow with the same app and $opt{workers}
  workers, without `--grip`, so that its `Grip-*` headers reach Pushpin, which holds the
  stream. The origin's memory is reported apart. Pushpin's `message_rate` and `message_hwm` are
  raised (from 2,500 and 25,000) so that they do not cap the measure; its endpoint answers
  every publish with `Connection: close`, so each publish opens a new connection. Its info
  logging is off.
EOF
}

sub commands {
    my $md = "## How each server ran\n\n";
    for my $server (@servers) {
        if ($LEFT_OUT->{$server}) { $md .= "- $TITLE{$server}: not installed: $LEFT_OUT->{$server}.\n"; next }
        $md .= "- $TITLE{$server}:\n";
        for my $line (sort keys %{ $COMMANDS{$server} || {} }) {
            $md .= "  - `$line`\n";
        }
    }
    $md .= "\nThe configurations of nginx and Pushpin are generated by `bench/lib/Serow/Bench/Holding.pm`.\n";
    return $md;
}
