package Serow::Test::Soak;
use strict;
use warnings;

# The soak: mixed load against a Serow with 4 workers, then
# the facts that must hold after it: no worker crashed or was replaced, no
# worker grew by a MiB, no process holds more descriptors than before, no
# temp file is left.  Shared by t/hardening/soak.t (short form) and bench/soak.
#
# Each client process runs the scenarios in turn (%SCENARIOS below): kept-alive
# GETs, Connection: close, uploads (Content-Length above --body-memory-limit,
# so through a temp file, and chunked), streamed responses, pipelined
# requests, and clients that leave mid-request and mid-response.

use Exporter 'import';
use Digest::MD5 ();
use File::Temp ();
use IO::Handle ();
use POSIX ();
use Time::HiRes ();
use Serow::Test::Client qw(raw_connect raw_request read_response parse_response send_all);
use Serow::Test::Common qw(root);
use Serow::Test::Process qw(wait_until child_pids all_child_pids is_connection_holder);
use Serow::Test::Server qw(start_server);

our @EXPORT_OK = qw(soak);

my $ROOT = root();

# A worker may grow by less than this over the soak (after a warm-up).
use constant MAX_RSS_GROWTH_KB => 1024;
# Bound of the wait for the server to close every connection after the load.
use constant SETTLE_TIMEOUT => 60;

use constant UPLOAD_BYTES => 1536 * 1024; # above the default --body-memory-limit (1 MiB)
use constant KEEPALIVE_REQUESTS => 10;
use constant PIPELINED_REQUESTS => 8;

my $UPLOAD = join '', map { chr(($_ * 7) % 251) } 0 .. 65535;
$UPLOAD = substr($UPLOAD x (UPLOAD_BYTES / length($UPLOAD) + 1), 0, UPLOAD_BYTES);
my $UPLOAD_ANSWER = 'length ' . UPLOAD_BYTES . ' md5 ' . Digest::MD5::md5_hex($UPLOAD);
my $CHUNKED = join '', map { substr($UPLOAD, 0, 100_000) } 1 .. 3;
my $CHUNKED_ANSWER = 'length ' . length($CHUNKED) . ' md5 ' . Digest::MD5::md5_hex($CHUNKED);

sub _get { "GET $_[0] HTTP/1.1\r\nHost: soak\r\n" . ($_[1] // '') . "\r\n" }

# Each returns undef when all went as it should, or what went wrong.
my %SCENARIOS = (
    keepalive => sub {
        my ($server) = @_;
        my $sock = raw_connect($server);
        my $buf = '';
        for my $i (1 .. KEEPALIVE_REQUESTS) {
            syswrite($sock, _get('/hello')) or return "request $i: write: $!";
            my $res = read_response($sock, buffer => \$buf);
            return "request $i: " . _describe($res) unless _is($res, 'hello');
        }
        return undef;
    },
    close => sub {
        my ($server) = @_;
        my ($res) = parse_response(raw_request($server, _get('/hello', "Connection: close\r\n")));
        return _is($res, 'hello') ? undef : _describe($res);
    },
    upload => sub {
        my ($server) = @_;
        my $sock = raw_connect($server);
        my $buf = '';
        my $head = "POST /upload HTTP/1.1\r\nHost: soak\r\nContent-Length: " . UPLOAD_BYTES . "\r\n\r\n";
        send_all($sock, $head . $UPLOAD, buffer => \$buf) == length($head) + UPLOAD_BYTES
            or return 'the upload was cut short';
        my $res = read_response($sock, buffer => \$buf);
        return _is($res, $UPLOAD_ANSWER) ? undef : _describe($res);
    },
    upload_chunked => sub {
        my ($server) = @_;
        my $body = join '', map { sprintf("%x\r\n%s\r\n", 100_000, substr($CHUNKED, $_ * 100_000, 100_000)) } 0 .. 2;
        my $sock = raw_connect($server);
        my $buf = '';
        my $req = "POST /upload HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\n${body}0\r\n\r\n";
        send_all($sock, $req, buffer => \$buf) == length $req or return 'the upload was cut short';
        my $res = read_response($sock, buffer => \$buf);
        return _is($res, $CHUNKED_ANSWER) ? undef : _describe($res);
    },
    stream => sub {
        my ($server) = @_;
        my $sock = raw_connect($server);
        syswrite($sock, _get('/stream?n=16&size=1000')) or return "write: $!";
        my $res = read_response($sock);
        return _is($res, 'x' x 16_000) ? undef : _describe($res);
    },
    pipelined => sub {
        my ($server) = @_;
        my $sock = raw_connect($server);
        syswrite($sock, _get('/hello') x PIPELINED_REQUESTS) or return "write: $!";
        my $buf = '';
        for my $i (1 .. PIPELINED_REQUESTS) {
            my $res = read_response($sock, buffer => \$buf);
            return "response $i: " . _describe($res) unless _is($res, 'hello');
        }
        return undef;
    },
    abort_mid_request => sub {
        my ($server) = @_;
        my $sock = raw_connect($server);
        # half of a body that goes to a temp file, then gone
        syswrite($sock, "POST /upload HTTP/1.1\r\nHost: soak\r\nContent-Length: " . UPLOAD_BYTES . "\r\n\r\n"
            . substr($UPLOAD, 0, UPLOAD_BYTES / 2));
        return undef;
    },
    abort_mid_response => sub {
        my ($server) = @_;
        my $sock = raw_connect($server);
        # 16 MiB streamed: far more than the socket buffers hold
        syswrite($sock, _get('/stream?n=256&size=65536')) or return "write: $!";
        sysread($sock, my $some, 16384) or return 'no response began';
        return undef;
    },
);

sub scenarios { sort keys %SCENARIOS }

sub _is {
    my ($res, $body) = @_;
    return $res && $res->{status} == 200 && $res->{body} eq $body;
}

sub _describe {
    my ($res) = @_;
    return 'no response' unless $res;
    return "status $res->{status}, body of " . length($res->{body}) . ' bytes';
}

# ---- the server's processes -----------------------------------------------

# { pid => { role, rss_kb, fds } } for the master, the holder and each worker.
sub snapshot {
    my ($server) = @_;
    my %snap;
    my $master = $server->pid;
    my %workers = map { $_ => 1 } child_pids($master);
    for my $pid ($master, all_child_pids($master)) {
        my $role = $pid == $master ? 'master' : $workers{$pid} ? 'worker'
                 : is_connection_holder($pid) ? 'holder' : next;
        my $rss = _status_field($pid, 'VmRSS') // next;
        my %kinds;
        for my $fd (glob "/proc/$pid/fd/*") {
            my $link = readlink($fd) // next;
            $kinds{ $link =~ /\A(socket|pipe)\b/ ? $1 : $link =~ /\Aanon_inode:\[?(\w+)/ ? $1 : 'file' }++;
        }
        my $fds = 0;
        $fds += $_ for values %kinds;
        $snap{$pid} = { role => $role, rss_kb => $rss, fds => $fds, fd_kinds => \%kinds };
    }
    return \%snap;
}

sub _status_field {
    my ($pid, $field) = @_;
    open(my $fh, '<', "/proc/$pid/status") or return undef;
    while (<$fh>) { return $1 if /^$field:\s+(\d+)/ }
    return undef;
}

# Whether any process of the server still holds a connection on $port.
sub _holds_connections {
    my ($server) = @_;
    my %inodes;
    open(my $fh, '<', '/proc/net/tcp') or return 0;
    my $port = sprintf '%04X', $server->port;
    while (<$fh>) {
        my @f = split;
        # local address:port, state (0A: listening), inode
        $inodes{ $f[9] } = 1 if ($f[1] // '') =~ /:$port\z/ && $f[3] ne '0A';
    }
    my $master = $server->pid;
    for my $pid ($master, all_child_pids($master)) {
        for my $fd (glob "/proc/$pid/fd/*") {
            my $link = readlink($fd) // next;
            return 1 if $link =~ /\Asocket:\[(\d+)\]\z/ && $inodes{$1};
        }
    }
    return 0;
}

# ---- load --------------------------------------------------------------------

# Runs $clients client processes for $seconds; returns { scenario => { ok, failed } }
# and the first failures.
sub run_load {
    my ($server, %args) = @_;
    my @names = scenarios();
    pipe(my $report_r, my $report_w) or die "pipe: $!";
    my @pids;
    for my $client (1 .. $args{clients}) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $report_r;
            $report_w->autoflush(1);
            my $end = Time::HiRes::time + $args{seconds};
            my $i = $client;
            while (Time::HiRes::time < $end) {
                my $name = $names[$i++ % @names];
                my $error = eval { $SCENARIOS{$name}->($server) };
                $error = "died: $@" if !defined $error && $@;
                $error =~ s/\n/ /g if defined $error;
                print {$report_w} defined $error ? "$name failed $error\n" : "$name ok\n";
            }
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    close $report_w;
    my (%counts, @failures);
    while (my $line = <$report_r>) {
        my ($name, $outcome, $why) = $line =~ /^(\S+) (ok|failed) ?(.*)$/ or next;
        $counts{$name}{$outcome}++;
        push @failures, "$name: $why" if $outcome eq 'failed' && @failures < 20;
    }
    waitpid($_, 0) for @pids;
    return (\%counts, \@failures);
}

# soak(seconds => S, warmup => W, clients => C, workers => 4, check_rss => 1)
# check_rss => 0 leaves the RSS growth out of the problems (under
# AddressSanitizer, whose quarantine keeps freed memory, it says nothing).
sub soak {
    my (%args) = @_;
    my $workers = $args{workers} // 4;
    my $tmpdir = File::Temp->newdir;
    my $server = start_server(app_file => "$ROOT/t/apps/soak.psgi", options => ['--workers', $workers],
        env => { TMPDIR => "$tmpdir" });
    my @started = $server->wait_for_log_all(qr/worker (\d+) started/, $workers);
    return { error => 'the workers did not start: ' . $server->log } unless @started == $workers;
    my $clients = $args{clients} // 4;

    # The warm-up lets every worker meet every scenario (Perl keeps the
    # memory it once needed); the measure starts when it has settled.
    my ($warm_counts, $warm_failures) = run_load($server, clients => $clients, seconds => $args{warmup} // 5);
    my $settled_before = wait_until(sub { !_holds_connections($server) }, SETTLE_TIMEOUT);
    my $before = snapshot($server);
    my $mark = $server->log_mark;
    my $started = Time::HiRes::time;
    my ($counts, $failures) = run_load($server, clients => $clients, seconds => $args{seconds});
    my $elapsed = Time::HiRes::time - $started;
    my $settled_after = wait_until(sub { !_holds_connections($server) }, SETTLE_TIMEOUT);
    my $after = snapshot($server);
    opendir(my $dh, "$tmpdir") or die "$tmpdir: $!";
    my @temp_files = grep { !/\A\.\.?\z/ } readdir $dh;
    my $log_during = substr($server->log, $mark);
    my $status = $server->stop;

    my %result = (workers => $workers, check_rss => $args{check_rss} // 1, before => $before, after => $after, counts => $counts, failures => [@$warm_failures, @$failures],
        seconds => $elapsed, settled => $settled_before && $settled_after, temp_files => \@temp_files,
        stop_status => $status, log => $server->log,
        worker_exits => [ $log_during =~ /^(.*(?:worker \d+ (?:exited|was killed)|connection holder \d+ exited).*)$/mg ],
        errors_logged => [ $log_during =~ /^(.*\[error\].*)$/mg ]);
    $result{requests} = 0;
    $result{requests} += ($_->{ok} // 0) + ($_->{failed} // 0) for values %$counts;
    $result{problems} = [ problems(\%result) ];
    return \%result;
}

# What breaks the soak's promises: a list of sentences (empty: it passed).
sub problems {
    my ($r) = @_;
    my @problems;
    push @problems, "requests failed: @{ $r->{failures} }" if @{ $r->{failures} };
    push @problems, "a worker or the holder exited: @{ $r->{worker_exits} }" if @{ $r->{worker_exits} };
    my @before = sort { $a <=> $b } keys %{ $r->{before} };
    my @after = sort { $a <=> $b } keys %{ $r->{after} };
    push @problems, "processes changed: @before -> @after" if "@before" ne "@after";
    for my $pid (@before) {
        my $then = $r->{before}{$pid};
        my $now = $r->{after}{$pid} or next;
        for my $kind (sort keys %{ $now->{fd_kinds} }) {
            my $was = $then->{fd_kinds}{$kind} // 0;
            my $is = $now->{fd_kinds}{$kind};
            # The holder, and a worker that gathers parked connections, open
            # a pidfd and a copy of the wake eventfd of another worker the
            # first time they take a connection from it: one each per worker
            # at most, so not a leak.  Besides those copies the holder has
            # its own eventfd; a worker has its own and the holder's.
            my %takers = (holder => { others => $r->{workers}, own_eventfds => 1 },
                          worker => { others => $r->{workers} - 1, own_eventfds => 2 });
            my $bound = $was;
            if (my $taker = $takers{ $then->{role} }) {
                my $most = $kind =~ /pidfd/ ? $taker->{others}
                    : $kind =~ /eventfd/ ? $taker->{others} + $taker->{own_eventfds} : 0;
                $bound = $most if $most > $bound;
            }
            push @problems, "$then->{role} $pid holds $is descriptors of kind $kind, $was before"
                if $is > $bound;
        }
        push @problems, "worker $pid grew from $then->{rss_kb} to $now->{rss_kb} kB"
            if $r->{check_rss} && $then->{role} eq 'worker' && $now->{rss_kb} - $then->{rss_kb} >= MAX_RSS_GROWTH_KB;
    }
    push @problems, 'connections were still open after the load' unless $r->{settled};
    push @problems, "temp files left: @{ $r->{temp_files} }" if @{ $r->{temp_files} };
    push @problems, "errors logged: @{ $r->{errors_logged} }" if @{ $r->{errors_logged} };
    push @problems, "the server stopped with status $r->{stop_status}" if ($r->{stop_status} // -1) != 0;
    return @problems;
}

1;
