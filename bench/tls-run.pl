#!/usr/bin/perl
# bench/tls-run.pl - Serow's TLS beside nginx's, Starman's (--enable-ssl) and
# uWSGI's (--https-socket), the same clients for all.  Run it through
# bench/tls-run, which installs the peers, builds Serow and the client and
# raises the open-file limit first.  See docs/benchmarks.md, "TLS".
#
# Each round runs every server in turn, every process of the server on CPU 0
# and the clients on CPU 1, as bench/run does; TLS 1.3 with
# TLS_AES_128_GCM_SHA256 only (the clients offer nothing else) and an ECDSA
# P-256 certificate made for the run:
#   hello: wrk over TLS, keep-alive, 16 connections, the 11-byte hello;
#   full: full handshakes per second, a new connection per request
#     (bench/tls/load.c handshakes, several processes);
#   resumed: the same, each connection offering the session ticket of the
#     one before; how many the server resumed is counted;
#   file: a large file (100 MiB) over TLS, 4 connections, wrk's bytes/s;
#   idle: 10,000 TLS connections held idle after one request each, the
#     server's memory growth per connection (Serow and nginx: the others keep
#     a connection in a worker that serves nothing else meanwhile).
# Writes OUT/tls.md: the medians over the rounds, the goals, every round.
use strict;
use warnings;
use 5.020;

use Cwd ();
use File::Basename ();
use File::Temp ();
use Getopt::Long ();
use IO::Socket::SSL ();
use IPC::Open2 ();
use POSIX ();
use Time::HiRes ();

my $ROOT;
BEGIN { $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/..') }
use lib "$ROOT/t/lib", "$ROOT/bench/lib";
use Serow::Bench::Peers qw(installed start_pinned nginx_command write_report);
use Serow::Bench::Process qw(free_port stop alive group_processes);
use Serow::Bench::Util qw(logf median loadavg load_average slurp write_file capture serow_version);
chdir $ROOT or die "$ROOT: $!\n";

# uwsgi is uWSGI's HTTPS router (--https, with --http-keepalive), which
# keeps connections alive; uwsgi_socket its workers' own --https-socket,
# which answers one request per connection (not run unless asked for).
my @SERVERS = qw(serow nginx starman uwsgi uwsgi_socket);
my @DEFAULT_SERVERS = qw(serow nginx starman uwsgi);
my %TITLE = (serow => 'Serow', nginx => 'nginx', starman => 'Starman', uwsgi => 'uWSGI (--https router)',
    uwsgi_socket => 'uWSGI (--https-socket)');
my @SCENARIOS = qw(hello full resumed file idle);

my %opt = (rounds => 3, seconds => 5, 'file-seconds' => 8, 'file-mib' => 100, idle => 10_000,
    'idle-procs' => 8, procs => 8, conns => 16, workers => 4, servers => join(',', @DEFAULT_SERVERS),
    scenarios => join(',', @SCENARIOS), out => "$ROOT/bench/results", client => "$ROOT/bench/.build/tls/load");
my @ARGS = @ARGV;
Getopt::Long::GetOptions(\%opt, 'rounds=i', 'seconds=f', 'file-seconds=f', 'file-mib=i', 'idle=i',
    'idle-procs=i', 'procs=i', 'conns=i', 'workers=i', 'servers=s', 'scenarios=s', 'out=s', 'client=s',
    'help|h') or usage(2);
usage(0) if $opt{help};
sub usage {
    print <<'EOF';
Usage: bench/tls-run [--rounds 3] [--seconds 5] [--servers serow,nginx,starman,uwsgi,uwsgi_socket]
                     [--scenarios hello,full,resumed,file,idle] [--idle 10000] ...

  --rounds N        rounds; the median is reported
  --seconds S       each hello and handshake measurement
  --file-seconds S  each large-file measurement
  --file-mib N      the large file's size
  --conns N         wrk's connections for hello (the file: 4)
  --procs N         the handshake client's processes (connections at once)
  --idle N          connections held idle
  --idle-procs N    processes opening them (handshakes at once)
  --workers N       the prefork servers' workers (nginx: 1)
  --servers LIST    which of serow, nginx, starman, uwsgi (uWSGI's --https
                    router), uwsgi_socket (its --https-socket); default all but
                    uwsgi_socket
  --scenarios LIST  which of hello, full, resumed, file, idle
  --out DIR         where tls.md goes (default bench/results)
  --client PATH     bench/tls/load.c built (bench/tls-run builds it)
EOF
    exit $_[0];
}
my @servers = split /,/, $opt{servers};
my @scenarios = split /,/, $opt{scenarios};
for (@servers) { die "bench/tls-run: unknown server '$_' (one of: @SERVERS)\n" unless $TITLE{$_} }
for my $s (@scenarios) { die "bench/tls-run: unknown scenario '$s' (one of: @SCENARIOS)\n" unless grep { $_ eq $s } @SCENARIOS }
-x $opt{client} or die "bench/tls-run: no client at $opt{client} (bench/tls-run builds it)\n";
-d "$ROOT/blib" or die "bench/tls-run: build Serow first (tools/setup)\n";
my %RUN = map { $_ => 1 } @scenarios;

my $DIR = File::Temp->newdir('serow-tls-XXXXXX', TMPDIR => 1);
chmod 0755, "$DIR";
my ($CERT, $KEY) = ("$DIR/cert.pem", "$DIR/key.pem");
make_certificate($CERT, $KEY);
chmod 0644, $KEY;    # the servers run as this user; some drop to nobody first
my $FILE = "$DIR/big.bin";
make_file($FILE, $opt{'file-mib'} << 20);
$ENV{SEROW_BENCH_FILE} = $FILE;
# wrk's OpenSSL reads this (OPENSSL_CONF, only wrk's environment): TLS 1.3,
# AES-128-GCM, as bench/tls/load.c asks for itself.
my $OPENSSL_CONF = "$DIR/openssl-client.cnf";
write_file($OPENSSL_CONF, <<'EOF');
openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
MinProtocol = TLSv1.3
Ciphersuites = TLS_AES_128_GCM_SHA256
EOF

my (%R, %COMMANDS, %NEGOTIATED, @FAILURES);
$SIG{INT} = $SIG{TERM} = sub { logf("bench/tls-run: interrupted"); exit 130 };
$SIG{PIPE} = 'IGNORE';
my $started = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_start = load_average();
my ($LEFT_OUT, @run) = installed('bench/tls-run', \%TITLE, \&missing, @servers);
my %LOAD;    # scenario => [load averages at its measurements]
for my $round (1 .. $opt{rounds}) {
    for my $server (@run) {
        my @throughput = grep { $RUN{$_} } qw(hello full resumed file);
        if (@throughput) {
            logf("== round %d: %s: %s", $round, $TITLE{$server}, "@throughput");
            attempt($server, $round, 'throughput', sub {
                my ($s) = @_;
                hello($s, $round) if $RUN{hello};
                handshakes($s, $round, 'full') if $RUN{full};
                handshakes($s, $round, 'resumed') if $RUN{resumed};
                file($s, $round) if $RUN{file};
            });
        }
        if ($RUN{idle} && $server =~ /^(serow|nginx)$/) {
            logf("== round %d: %s: idle", $round, $TITLE{$server});
            attempt($server, $round, 'idle', sub { idle($_[0], $round) });
        }
    }
}
my $finished = POSIX::strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my $load_end = load_average();

write_report('bench/tls-run', $opt{out}, 'tls.md', report());
exit(@FAILURES ? 1 : 0);

# ---- servers -----------------------------------------------------------------

sub missing {
    my ($server) = @_;
    my %cmd = (serow => undef, nginx => 'nginx', starman => 'starman', uwsgi => 'uwsgi', uwsgi_socket => 'uwsgi');
    my $cmd = $cmd{$server} // return undef;
    return "no $cmd command" unless grep { -x "$_/$cmd" } split /:/, $ENV{PATH} // '';
    return 'no psgi plugin (apt-get install uwsgi-plugin-psgi)'
        if $server =~ /^uwsgi/ && !-e '/usr/lib/uwsgi/plugins/psgi_plugin.so';
    return 'no IO::Socket::SSL (apt-get install libio-socket-ssl-perl)'
        if $server eq 'starman' && system("$^X -MIO::Socket::SSL -e1 2>/dev/null") != 0;
    return undef;
}

# The command that starts $server on 127.0.0.1:$port with TLS.
sub command {
    my ($server, $port) = @_;
    my $app = "$ROOT/bench/apps/tls.psgi";
    if ($server eq 'serow') {
        return ($^X, '-Mblib', 'script/serow', '--listen', "127.0.0.1:$port", '--enable-ssl',
            '--ssl-cert', $CERT, '--ssl-key', $KEY, '--workers', $opt{workers}, '--keepalive-timeout', 120, $app);
    }
    if ($server eq 'starman') {
        return ('starman', '--preload-app', '--workers', $opt{workers}, '--listen', "127.0.0.1:$port:ssl",
            '--ssl-cert', $CERT, '--ssl-key', $KEY, $app);
    }
    if ($server eq 'uwsgi') {
        return ('uwsgi', '--plugins', 'http,psgi', '--https', "127.0.0.1:$port,$CERT,$KEY", '--http-keepalive',
            '--psgi', $app, '--processes', $opt{workers}, '--master', '--disable-logging', '--die-on-term',
            '--listen', 1024);
    }
    if ($server eq 'uwsgi_socket') {
        return ('uwsgi', '--plugins', 'psgi', '--https-socket', "127.0.0.1:$port,$CERT,$KEY", '--psgi', $app,
            '--processes', $opt{workers}, '--master', '--disable-logging', '--die-on-term', '--listen', 1024);
    }
    return nginx_command('bench/tls-run', "$DIR/nginx-$port", http => nginx_http($port));
}

# nginx as bench/run runs it (keep-alive for the run), with TLS: the hello
# returned by nginx itself, the file from disk.
sub nginx_http {
    my ($port) = @_;
    my $root = File::Basename::dirname($FILE);
    return <<"EOF";
    sendfile on;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        ssl_protocols TLSv1.2 TLSv1.3;
        location = /big.bin { root $root; }
        location / { default_type text/plain; return 200 "Hello World"; }
    }
EOF
}

# Starts $server (every process on CPU 0) and waits until it answers over
# TLS; runs $body->($s), stops the server; a failure is recorded, the run
# goes on.
sub attempt {
    my ($server, $round, $what, $body) = @_;
    my $port = free_port();
    my ($p, $shown) = start_pinned($server, "$DIR", command($server, $port));
    $COMMANDS{$server}{$shown} = 1;
    my $s = { server => $server, p => $p, port => $port };
    my $ok = eval {
        ready($s) or die "did not answer over TLS on 127.0.0.1:$port\n";
        $body->($s);
        die "exited during the measurement\n" unless alive($p);
        1;
    };
    if (!$ok) {
        chomp(my $e = $@);
        my $log = slurp($p->{log}) // '';
        $log = substr($log, -400) if length $log > 400;
        push @FAILURES, "round $round, $TITLE{$server}, $what: $e" . ($log =~ /\S/ ? " (log: " . ($log =~ s/\s+/ /gr) . ")" : '');
        logf("bench/tls-run: %s", $FAILURES[-1]);
    }
    stop($p);
}

# Waits (up to 60 s) for an answer over TLS.
sub ready {
    my ($s) = @_;
    my $deadline = Time::HiRes::time + 60;
    while (Time::HiRes::time < $deadline) {
        return 0 unless alive($s->{p});
        my $c = IO::Socket::SSL->new(PeerAddr => "127.0.0.1:$s->{port}", SSL_verify_mode => 0, Timeout => 5);
        if ($c) {
            print {$c} "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
            my $line = <$c>;
            close $c;
            return 1 if defined $line && $line =~ m{^HTTP/1\.1 200};
        }
        Time::HiRes::sleep(0.1);
    }
    return 0;
}

# ---- measurements ----------------------------------------------------------

# The CPU time, in seconds, of the server's processes (the group), children
# that were waited for included; this process's waited-for children's (the
# client's).
sub server_cpu {
    my ($s) = @_;
    my $t = 0;
    for my $stat_file (glob '/proc/[0-9]*/stat') {
        my $stat = slurp($stat_file) // next;
        $stat =~ /\) (.*)$/s or next;
        my @f = split ' ', $1;
        $t += $f[11] + $f[12] + $f[13] + $f[14] if $f[2] == $s->{p}{pid};
    }
    return $t / (POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100);
}
sub client_cpu { my (undef, undef, $u, $s) = times; $u + $s }

# Runs $code (the client, on CPU 1) and measures around it: adds wall, the
# server's and the client's CPU seconds, and the load average.
sub measured {
    my ($s, $scenario, $code) = @_;
    my ($t0, $s0, $c0) = (Time::HiRes::time, server_cpu($s), client_cpu());
    my $r = $code->();
    $r->{wall} = Time::HiRes::time - $t0;
    $r->{server_cpu} = server_cpu($s) - $s0;
    $r->{client_cpu} //= client_cpu() - $c0;
    $r->{load} = loadavg();
    push @{ $LOAD{$scenario} }, $r->{load};
    return $r;
}

sub wrk {
    my ($s, %o) = @_;
    local $ENV{OPENSSL_CONF} = $OPENSSL_CONF;
    my @cmd = ('taskset', '-c', 1, 'wrk', '-t1', "-c$o{conns}", "-d$o{seconds}s", '--timeout', '5s',
        "https://127.0.0.1:$s->{port}$o{path}");
    my $out = capture(@cmd);
    my %r = (output => $out);
    ($r{rps}) = $out =~ /Requests\/sec:\s+([\d.]+)/;
    ($r{requests}) = $out =~ /(\d+) requests in/;
    if ($out =~ /Transfer\/sec:\s+([\d.]+)([KMG]?)B/) {
        $r{bytes_per_sec} = $1 * { '' => 1, K => 1024, M => 1024**2, G => 1024**3 }->{$2};
    }
    my ($c, $rd, $w, $t) = $out =~ /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/;
    my ($non2xx) = $out =~ /Non-2xx or 3xx responses: (\d+)/;
    $r{errors} = 0;
    $r{errors} += $_ // 0 for $c, $rd, $w, $t, $non2xx;
    $r{rps} //= 0;
    $r{requests} //= 0;
    return \%r;
}

sub hello {
    my ($s, $round) = @_;
    wrk($s, conns => $opt{conns}, seconds => 1, path => '/');    # warm-up
    my $r = measured($s, 'hello', sub { wrk($s, conns => $opt{conns}, seconds => $opt{seconds}, path => '/') });
    die "no request was answered over TLS: " . ($r->{output} =~ s/\s+/ /gr) . "\n" unless $r->{requests};
    $r->{round} = $round;
    push @{ $R{hello}{ $s->{server} } }, $r;
    logf("   hello: %.0f req/s, errors %d, server CPU %.2f s, wrk CPU %.2f s", @$r{qw(rps errors server_cpu client_cpu)});
}

sub handshakes {
    my ($s, $round, $kind) = @_;
    my $r = measured($s, $kind, sub {
        my $line = capture('taskset', '-c', 1, $opt{client}, 'handshakes', $s->{port}, $opt{procs}, $opt{seconds},
            ($kind eq 'resumed' ? 'resume' : ()));
        my %r = (line => $line);
        die "the handshake client failed: $line\n" unless $line =~ /^handshakes /;
        %r = (%r, split ' ', $line);
        \%r;
    });
    $NEGOTIATED{ $s->{server} } = "$r->{protocol} $r->{cipher}";
    $r->{round} = $round;
    push @{ $R{$kind}{ $s->{server} } }, $r;
    logf("   %s: %s", $kind, $r->{line} =~ s/\s+\z//r);
}

sub file {
    my ($s, $round) = @_;
    my $r = measured($s, 'file', sub { wrk($s, conns => 4, seconds => $opt{'file-seconds'}, path => '/big.bin') });
    die "no byte of the file came: " . ($r->{output} =~ s/\s+/ /gr) . "\n" unless $r->{bytes_per_sec};
    $r->{round} = $round;
    push @{ $R{file}{ $s->{server} } }, $r;
    logf("   file: %.1f MiB/s, %d answered, errors %d", $r->{bytes_per_sec} / 2**20, $r->{requests}, $r->{errors});
}

# The memory (KiB) and descriptors of the server's processes by part: Serow's
# holder and workers, nginx's worker; and the whole server.
sub parts {
    my ($s) = @_;
    my %m;
    for my $proc (group_processes($s->{p})) {
        my $part = $proc->{cmd} eq 'serow connection holder' ? 'holder'
            : $proc->{cmd} eq 'serow worker' || $proc->{cmd} =~ /worker process/ ? 'workers' : 'other';
        $m{$part}{$_} += $proc->{$_} for qw(rss pss fds);
        $m{all}{$_} += $proc->{$_} for qw(rss pss fds);
    }
    return \%m;
}

sub idle {
    my ($s, $round) = @_;
    my $before = parts($s);
    my $t0 = Time::HiRes::time;
    my $pid = IPC::Open2::open2(my $from, my $to, 'taskset', '-c', 1, $opt{client}, 'hold', $s->{port},
        $opt{idle}, $opt{'idle-procs'});
    my $line = readline($from) // '';
    my %r = (round => $round, load => loadavg(), split ' ', $line);
    $r{open_seconds} = Time::HiRes::time - $t0;
    push @{ $LOAD{idle} }, $r{load};
    my $ok = eval {
        die "the hold client said: $line\n" unless defined $r{held};
        # Serow's holder takes a connection once it has been idle for a
        # moment (docs/keepalive.md): wait until it has them all, or 60 s.
        my $where = $s->{server} eq 'serow' ? 'holder' : 'workers';
        my $deadline = Time::HiRes::time + 60;
        my $after;
        while (1) {
            $after = parts($s);
            last if ($after->{$where}{fds} // 0) - ($before->{$where}{fds} // 0) >= $r{held}
                || Time::HiRes::time > $deadline;
            Time::HiRes::sleep(0.5);
        }
        for my $part (qw(holder workers all)) {
            next unless $after->{$part};
            $r{"${part}_$_"} = ($after->{$part}{$_} - ($before->{$part}{$_} // 0)) for qw(rss pss fds);
        }
        print {$to} "again\n";
        $to->flush;
        my $again = readline($from) // '';
        %r = (%r, split ' ', $again);
        1;
    };
    my $e = $@;
    close $to;
    close $from;
    waitpid $pid, 0;
    die $e unless $ok;
    push @{ $R{idle}{ $s->{server} } }, \%r;
    logf("   idle: held %d failed %d in %.0f s; again ok %s failed %s; %s grew %s KiB RSS, %s KiB PSS",
        $r{held}, $r{failed}, $r{open_seconds}, $r{again_ok} // '?', $r{again_failed} // '?',
        $s->{server} eq 'serow' ? 'holder' : 'worker', $r{holder_rss} // $r{workers_rss}, $r{holder_pss} // $r{workers_pss});
}

# ---- the report ----------------------------------------------------------------

sub med { my ($scenario, $server, $key) = @_; median(map { $_->{$key} } @{ $R{$scenario}{$server} || [] }) }

# Serow's ratio to nginx per round (the same round: the machine's speed
# moves less within one).  $value: a key of the results, or a sub that
# computes the figure from a result.
sub round_ratios {
    my ($scenario, $value) = @_;
    my $v = ref $value ? $value : sub { $_[0]{$value} };
    my %n = map { $_->{round} => $v->($_) } @{ $R{$scenario}{nginx} || [] };
    return map { my $s = $v->($_); $n{ $_->{round} } && defined $s ? $s / $n{ $_->{round} } : () }
        @{ $R{$scenario}{serow} || [] };
}

# Work done per second of the server's own CPU time.
sub per_cpu { my ($key) = @_; sub { $_[0]{server_cpu} ? $_[0]{$key} / $_[0]{server_cpu} : undef } }

sub ratio_text {
    my @r = sort { $a <=> $b } @_;
    return '' unless @r;
    return sprintf('%.2f', $r[0]) if @r == 1;
    return sprintf('%.2f (%.2f to %.2f)', median(@r), $r[0], $r[-1]);
}

# PASS when the median ratio of the rounds meets the goal; "within the
# noise" when it does not but some round's does; MISS otherwise.
sub verdict {
    my ($goal, $higher_is_better, @r) = @_;
    return 'not measured' unless @r;
    my $m = median(@r);
    my $meets = sub { $higher_is_better ? $_[0] >= $goal : $_[0] <= $goal };
    return 'PASS' if $meets->($m);
    return 'within the noise (not met in the median, met in a round)' if grep { $meets->($_) } @r;
    return 'MISS';
}

sub fmt { my ($f, $v) = @_; defined $v ? sprintf($f, $v) : '-' }

sub report {
    my $md = "# TLS: Serow beside nginx, Starman and uWSGI\n\n";
    $md .= "Written by `bench/tls-run` (docs/benchmarks.md, \"TLS\").\n\n";
    my ($cpu) = (slurp('/proc/cpuinfo') // '') =~ /^model name\s*:\s*(.*)$/m;
    my $ncpu = () = (slurp('/proc/cpuinfo') // '') =~ /^processor\s*:/mg;
    my $kernel = (POSIX::uname())[2];
    my $args = join ' ', map { /[^\w,.\/=-]/ ? "'$_'" : $_ } @ARGS;
    $md .= "- run: $started to $finished, `bench/tls-run" . ($args ? " $args" : '') . "`\n";
    $md .= "- machine: " . ($cpu // '?') . ", $ncpu CPUs, Linux $kernel; every server process on CPU 0, "
        . "the clients on CPU 1\n";
    $md .= "- load average (1, 5, 15 min): $load_start at the start, $load_end at the end; "
        . "per scenario, the 1-minute average at its measurements: "
        . join(', ', map { my @l = sort { $a <=> $b } @{ $LOAD{$_} }; "$_ $l[0] to $l[-1]" } grep { $LOAD{$_} } @SCENARIOS) . "\n";
    $md .= "- rounds: $opt{rounds} (medians below); $opt{seconds} s per hello and handshake measurement, "
        . "$opt{'file-seconds'} s per file measurement\n";
    $md .= "- versions: " . join('; ', versions()) . "\n";
    $md .= "- TLS: an ECDSA P-256 certificate made for the run; the clients offer TLS 1.3 and "
        . "TLS_AES_128_GCM_SHA256 only (OpenSSL's default key share, X25519). Negotiated: "
        . join(', ', map { "$TITLE{$_} $NEGOTIATED{$_}" } grep { $NEGOTIATED{$_} } @servers) . "\n";
    $md .= "- workers: $opt{workers} for Serow, Starman and uWSGI, one for nginx (as bench/run)\n\n";

    $md .= "## Goals\n\n| goal | wanted | Serow / nginx, median of the rounds (their range) | result |\n| --- | --- | --- | --- |\n";
    my @hello = round_ratios('hello', 'rps');
    $md .= "| keep-alive hello over TLS | >= 0.9x nginx | " . ratio_text(@hello) . " | " . verdict(0.9, 1, @hello) . " |\n" if $RUN{hello};
    my @full = round_ratios('full', 'per_sec');
    $md .= "| full handshakes per second | >= 0.9x nginx | " . ratio_text(@full) . " | " . verdict(0.9, 1, @full) . " |\n" if $RUN{full};
    # The same by the server's own CPU time, which a busy machine moves less.
    my @hello_cpu = round_ratios('hello', per_cpu('requests'));
    $md .= "| the same, requests per second of server CPU | >= 0.9x nginx | " . ratio_text(@hello_cpu) . " | "
        . verdict(0.9, 1, @hello_cpu) . " |\n" if $RUN{hello};
    my @full_cpu = round_ratios('full', per_cpu('handshakes'));
    $md .= "| the same, full handshakes per second of server CPU | >= 0.9x nginx | " . ratio_text(@full_cpu) . " | "
        . verdict(0.9, 1, @full_cpu) . " |\n" if $RUN{full};
    if ($RUN{idle}) {
        my @per = map { $_->{held} ? $_->{holder_rss} * 1024 / $_->{held} : () } @{ $R{idle}{serow} || [] };
        $md .= "| idle TLS connection in Serow's holder | <= 1 KiB (RSS growth per connection) | "
            . (@per ? sprintf('%.0f bytes', median(@per)) : '-') . " | " . verdict(1024, 0, @per) . " |\n";
    }
    $md .= "\nA result within the noise: on this shared machine one run's speed moves by a third; the range\n"
        . "is of the ratios within each round, where both servers met the same machine. Work per second of\n"
        . "the server's own CPU time moves less with the machine's other load than work per second.\n";

    if ($RUN{hello}) {
        $md .= "\n## Keep-alive hello over TLS\n\nwrk, one thread, $opt{conns} connections, the 11-byte hello.\n\n";
        $md .= "| server | req/s | / nginx | server CPU per request | server CPU used | wrk CPU used | errors |\n"
            . "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
        my $n = med('hello', 'nginx', 'rps');
        for my $server (@run) {
            next unless $R{hello}{$server};
            my $rps = med('hello', $server, 'rps');
            my $per = median(map { $_->{requests} ? $_->{server_cpu} / $_->{requests} * 1e6 : () } @{ $R{hello}{$server} });
            $md .= sprintf("| %s | %.0f | %s | %s us | %s | %s | %d |\n", $TITLE{$server}, $rps,
                $n ? sprintf('%.2f', $rps / $n) : '-', fmt('%.1f', $per),
                share('hello', $server, 'server_cpu'), share('hello', $server, 'client_cpu'),
                med('hello', $server, 'errors'));
        }
    }
    for my $kind (grep { $RUN{$_} } qw(full resumed)) {
        $md .= $kind eq 'full'
            ? "\n## Full handshakes\n\nA new connection per request, no session offered: ECDHE and the server's ECDSA "
                . "signature every time. `bench/tls/load.c`, $opt{procs} processes on CPU 1, each opening one connection "
                . "after another (a handshake, GET / with Connection: close, the answer to its end).\n\n"
            : "\n## Resumed handshakes\n\nThe same, each connection offering the session ticket its process got on the "
                . "connection before; \"resumed\" is the share the server resumed (TLS 1.3 resumption still makes an "
                . "ECDHE exchange, but no signature).\n\n";
        $md .= "| server | handshakes/s | / nginx | per server CPU-second | / nginx | resumed | server CPU used | client CPU used | errors |\n"
            . "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
        my $n = med($kind, 'nginx', 'per_sec');
        my $ncpu = median(map { $_->{server_cpu} ? $_->{handshakes} / $_->{server_cpu} : () } @{ $R{$kind}{nginx} || [] });
        for my $server (@run) {
            next unless $R{$kind}{$server};
            my $rate = med($kind, $server, 'per_sec');
            my $per_cpu = median(map { $_->{server_cpu} ? $_->{handshakes} / $_->{server_cpu} : () } @{ $R{$kind}{$server} });
            my $resumed = median(map { $_->{handshakes} ? $_->{resumed} / $_->{handshakes} : 0 } @{ $R{$kind}{$server} });
            $md .= sprintf("| %s | %.0f | %s | %s | %s | %.0f%% | %s | %s | %d |\n", $TITLE{$server}, $rate,
                $n ? sprintf('%.2f', $rate / $n) : '-', fmt('%.0f', $per_cpu),
                $ncpu && $per_cpu ? sprintf('%.2f', $per_cpu / $ncpu) : '-', 100 * $resumed,
                share($kind, $server, 'server_cpu'), share($kind, $server, 'client_cpu'),
                med($kind, $server, 'errors'));
        }
    }
    if ($RUN{file}) {
        my $mib = $opt{'file-mib'};
        $md .= "\n## A large file over TLS\n\n$mib MiB, wrk with 4 connections (its bytes per second, answers still "
            . "arriving included). nginx reads it from disk (`sendfile on`, which TLS without kTLS turns into reads); "
            . "the PSGI servers get it as a file handle from the app.\n\n";
        $md .= "| server | MiB/s | / nginx | server CPU per MiB | server CPU used | wrk CPU used | errors |\n"
            . "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
        my $n = med('file', 'nginx', 'bytes_per_sec');
        for my $server (@run) {
            next unless $R{file}{$server};
            my $b = med('file', $server, 'bytes_per_sec');
            my $per = median(map { $_->{bytes_per_sec} ? $_->{server_cpu} / ($_->{bytes_per_sec} * $_->{wall} / 2**20) * 1e3 : () }
                @{ $R{file}{$server} });
            $md .= sprintf("| %s | %.0f | %s | %s ms | %s | %s | %d |\n", $TITLE{$server}, $b / 2**20,
                $n ? sprintf('%.2f', $b / $n) : '-', fmt('%.2f', $per), share('file', $server, 'server_cpu'),
                share('file', $server, 'client_cpu'), med('file', $server, 'errors'));
        }
    }
    if ($RUN{idle}) {
        $md .= "\n## $opt{idle} idle TLS connections\n\nEach opened by `bench/tls/load.c hold` ($opt{'idle-procs'} "
            . "processes on CPU 1, so at most $opt{'idle-procs'} handshakes at once), answered once, then kept "
            . "open; once Serow's holder has them all (it takes a connection idle for 500 ms), the growth of resident "
            . "memory since before they came, per connection; then each is asked again. The kernel's socket "
            . "buffers are in none of it. Starman and uWSGI are not in it: each of their workers serves one "
            . "connection at a time, so they hold no idle connection apart from a worker.\n\n";
        $md .= "| server | held | answered again | opened in | the holder, RSS / PSS per connection | workers, RSS / PSS | "
            . "whole server, RSS / PSS |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
        for my $server (grep { $R{idle}{$_} } @run) {
            my @r = @{ $R{idle}{$server} };
            my $per = sub {
                my ($key) = @_;
                my $v = median(map { $_->{held} && defined $_->{$key} ? $_->{$key} * 1024 / $_->{held} : () } @r);
                defined $v ? sprintf('%.0f B', $v) : '-';
            };
            $md .= sprintf("| %s | %s | %s | %.0f s | %s | %s | %s |\n", $TITLE{$server}, median(map { $_->{held} } @r),
                median(map { $_->{again_ok} // 0 } @r), median(map { $_->{open_seconds} } @r),
                $server eq 'serow' ? $per->('holder_rss') . ' / ' . $per->('holder_pss') : '-',
                $per->('workers_rss') . ' / ' . $per->('workers_pss'), $per->('all_rss') . ' / ' . $per->('all_pss'));
        }
        $md .= "\nnginx's \"workers\" is its one worker process.\n";
    }

    $md .= "\n## Every round\n\n| round | server | scenario | figures | load |\n| ---: | --- | --- | --- | ---: |\n";
    for my $kind (grep { $R{$_} } @SCENARIOS) {
        for my $server (@run) {
            for my $r (@{ $R{$kind}{$server} || [] }) {
                my $fig = $kind eq 'hello' ? sprintf('%.0f req/s, %d errors, server CPU %.2f s, wrk CPU %.2f s', @$r{qw(rps errors server_cpu client_cpu)})
                    : $kind eq 'file' ? sprintf('%.1f MiB/s, %d answered, %d errors, server CPU %.2f s', $r->{bytes_per_sec} / 2**20, @$r{qw(requests errors server_cpu)})
                    : $kind eq 'idle' ? sprintf('held %d, failed %d, again %d ok %d failed; holder %s KiB RSS %s KiB PSS, workers %s KiB RSS, all %s KiB RSS',
                        $r->{held}, $r->{failed}, $r->{again_ok} // 0, $r->{again_failed} // 0, map { $_ // '-' } @$r{qw(holder_rss holder_pss workers_rss all_rss)})
                    : sprintf('%d handshakes, %s/s, %d resumed, %d errors, server CPU %.2f s, client CPU %.2f s',
                        @$r{qw(handshakes per_sec resumed errors server_cpu client_cpu)});
                $md .= "| $r->{round} | $TITLE{$server} | $kind | $fig | $r->{load} |\n";
            }
        }
    }
    if (%$LEFT_OUT || @FAILURES) {
        $md .= "\n## Left out and failures\n\n";
        $md .= "- $TITLE{$_}: not installed: $LEFT_OUT->{$_}\n" for grep { $LEFT_OUT->{$_} } @servers;
        $md .= "- $_\n" for @FAILURES;
    }
    $md .= "\n## Command lines\n\n";
    for my $server (@run) {
        $md .= "- $TITLE{$server}: `$_`\n" for sort keys %{ $COMMANDS{$server} || {} };
    }
    $md .= "- nginx's configuration: one worker, `worker_connections 16384`, `access_log off`, `sendfile on`, "
        . "`keepalive_requests 1000000`, `keepalive_timeout 120s`, `listen ... ssl` with the certificate, `ssl_protocols TLSv1.2 TLSv1.3` "
        . "(1.22 has no TLS 1.3 by default) and its defaults otherwise (session tickets on, no session cache); `return 200 \"Hello World\"`, the file from "
        . "`root`.\n" if grep { $_ eq 'nginx' } @run;
    $md .= "- the clients: `wrk -t1 -c$opt{conns} -d$opt{seconds}s --timeout 5s https://...` (OPENSSL_CONF limiting it "
        . "to TLS 1.3 and AES-128-GCM), `bench/tls/load handshakes PORT $opt{procs} $opt{seconds} [resume]`, "
        . "`bench/tls/load hold PORT $opt{idle} $opt{'idle-procs'}`, all under `taskset -c 1`.\n";
    return $md;
}

# The median share of one CPU a side used during a measurement.
sub share {
    my ($scenario, $server, $key) = @_;
    my $v = median(map { $_->{wall} ? $_->{$key} / $_->{wall} : () } @{ $R{$scenario}{$server} || [] });
    return defined $v ? sprintf('%.0f%%', 100 * $v) : '-';
}

sub versions {
    my @v = (serow_version());
    my $deb = sub { `dpkg-query -W -f '\${Version}' $_[0] 2>/dev/null` || '?' };
    push @v, 'GnuTLS ' . $deb->('libgnutls30');
    if (grep { $_ eq 'nginx' } @run) { (my $n = `nginx -v 2>&1` // '?') =~ s/^nginx version: //; chomp $n; push @v, $n }
    push @v, 'Starman ' . (`$^X -MStarman -e 'print \$Starman::VERSION' 2>/dev/null` || '?')
        . ' (IO::Socket::SSL ' . $IO::Socket::SSL::VERSION . ')' if grep { $_ eq 'starman' } @run;
    if (grep { /^uwsgi/ } @run) { (my $u = `uwsgi --version 2>/dev/null` // '?') =~ s/\s+\z//; push @v, "uWSGI $u" }
    (my $o = `openssl version 2>/dev/null` // '?') =~ s/\s+\z//;
    push @v, "$o (nginx's, Starman's, uWSGI's and the clients')";
    (my $w = (`wrk -v 2>&1` // '') =~ /^(wrk \S+)/m ? $1 : 'wrk ?');
    push @v, $w;
    return @v;
}

# ---- small things ------------------------------------------------------------

# An ECDSA P-256 certificate for localhost and its key (openssl's progress
# on stderr is not wanted).
sub make_certificate {
    my ($cert, $key) = @_;
    my $pid = fork // die "bench/tls-run: fork: $!\n";
    if (!$pid) {
        open STDERR, '>', '/dev/null';
        { exec 'openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
            '-days', 2, '-subj', '/CN=localhost', '-keyout', $key, '-out', $cert }
        POSIX::_exit(127);
    }
    waitpid $pid, 0;
    die "bench/tls-run: openssl could not make a certificate\n" if $? || !-s $cert;
}

sub make_file {
    my ($file, $size) = @_;
    open my $fh, '>', $file or die "$file: $!\n";
    binmode $fh;
    my $block = join '', map { chr(($_ * 7 + 3) % 256) } 0 .. 65535;
    for (my $left = $size; $left > 0; $left -= length $block) {
        print {$fh} $left >= length $block ? $block : substr($block, 0, $left);
    }
    close $fh or die "$file: $!\n";
    chmod 0644, $file;
}
