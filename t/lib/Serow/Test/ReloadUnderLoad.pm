package Serow::Test::ReloadUnderLoad;
use strict;
use warnings;

# Reloads under load: wrk keeps N connections busy on a
# hello app while the server is reloaded a few times; every request must get
# a 2xx answer and no socket may fail.  Shared by t/hardening/reload_under_load.t
# (short form) and bench/reload-under-load (30 s form).
#
# Kinds of reload:
#   starter   start_server (Server::Starter) gets HUP: it starts a new Serow
#             on the same sockets and sends TERM to the old one
#   hup       Serow's master gets HUP: new workers, the old ones finish
#   ttin-ttou TTIN (a worker more), then TTOU (one less)
#   deploy    the app file is rewritten, then Serow's master gets HUP: a new
#             generation loads the new code; every body
#             must be one version's, whole (count-statuses.lua's "versions")

use Exporter 'import';
use File::Temp ();
use Net::EmptyPort ();
use Time::HiRes ();
use Serow::Test::Common qw(root);
use Serow::Test::Components qw(find_command);
use Serow::Test::Server qw(start_server serow_command);

our @EXPORT_OK = qw(reload_under_load);

my $ROOT = root();
my $APP = "$ROOT/bench/apps/hello.psgi";
my $LUA = "$ROOT/bench/apps/count-statuses.lua";

# wrk's own default (2 s) is a latency, not a failure, on a shared 2-core
# machine; a request unanswered this long counts as failed.
use constant REQUEST_TIMEOUT => '10s';
# Bound of each wait for a reload's effect in the log (never a pace).
use constant RELOAD_WAIT => 60;

my %KINDS = (starter => \&_start_under_starter, hup => \&_start_serow, 'ttin-ttou' => \&_start_serow,
             deploy => \&_start_deploying);
my %RELOAD = (starter => \&_reload_starter, hup => \&_reload_hup, 'ttin-ttou' => \&_reload_ttin_ttou,
              deploy => \&_reload_deploy);

# deploy: each version's body, "vN;" this many times, in this many parts.
use constant VERSION_MARKERS => 512;
use constant VERSION_PARTS => 8;

sub kinds { sort keys %KINDS }

# reload_under_load(kind => K, seconds => S, reloads => R, connections => C, workers => W)
# Returns { requests, responses, non2xx, connect, read, write, timeout, p99_ms,
#           mixed and versions ('1,2,3': the versions served; deploy only),
#           reloads (done while wrk ran), reload_failures => [...], server_errors => [...],
#           wrk_output, log }.
sub reload_under_load {
    my (%args) = @_;
    my $kind = $args{kind};
    die "unknown kind of reload '$kind' (one of: @{[ kinds() ]})\n" unless $KINDS{$kind};
    my $seconds = $args{seconds} // 30;
    my $reloads = $args{reloads} // 5;
    my $state = $KINDS{$kind}->($args{workers} // 4) or return { error => 'the server did not start' };
    my $server = $state->{server};

    my $wrk_pid = open(my $wrk, '-|') // die "fork: $!";
    if (!$wrk_pid) {
        open(STDERR, '>&', \*STDOUT);
        exec 'wrk', '-t2', '-c' . ($args{connections} // 64), "-d${seconds}s", '--timeout', REQUEST_TIMEOUT,
            '-s', $LUA, "http://127.0.0.1:$state->{port}/", $kind eq 'deploy' ? ('--', 'versions') : ();
        die "cannot run wrk: $!\n";
    }
    # The reloads are spread over the run (pacing, not synchronisation: each
    # one is waited for in the log before the next).
    my $start = Time::HiRes::time;
    my (@failures, $done);
    for my $i (1 .. $reloads) {
        my $at = $start + $seconds * $i / ($reloads + 1);
        my $left = $at - Time::HiRes::time;
        Time::HiRes::sleep($left) if $left > 0;
        my $failure = $RELOAD{$kind}->($state);
        push @failures, "reload $i: $failure" if $failure;
        $done++ if !$failure && Time::HiRes::time < $start + $seconds;
    }
    my $wrk_output = do { local $/; <$wrk> };
    close $wrk;
    my %result = (wrk_output => $wrk_output, reloads => $done // 0, reload_failures => \@failures);
    if ($wrk_output =~ /^wrk-result (.*)$/m) {
        %result = (%result, map { split /=/, $_, 2 } split ' ', $1);
    } else {
        $result{error} = 'wrk printed no result';
    }
    ($result{req_per_sec}) = $wrk_output =~ /Requests\/sec:\s+([\d.]+)/;
    $server->stop;
    $result{log} = $server->log;
    $result{server_errors} = [ $result{log} =~ /^(.*\[error\].*)$/mg ];
    return \%result;
}

# The socket and status failures of a result, added up (and the bodies of
# no single version, for deploy).
sub failed_requests {
    my ($result) = @_;
    my $n = 0;
    $n += $result->{$_} // 0 for qw(non2xx connect read write timeout mixed);
    return $n;
}

# deploy: the versions of the app (1 and one per reload) that no response
# came from.
sub unserved_versions {
    my ($result, $reloads) = @_;
    my %served = map { $_ => 1 } split /,/, $result->{versions} // '';
    return grep { !$served{$_} } 1 .. $reloads + 1;
}

sub _start_serow {
    my ($workers, $app) = @_;
    my $server = start_server(app_file => $app // $APP, options => ['--workers', $workers]);
    my @pids = $server->wait_for_log_all(qr/worker (\d+) started/, $workers, RELOAD_WAIT);
    return undef unless @pids == $workers;
    return { server => $server, port => $server->port, workers => \@pids, count => $workers };
}

sub _start_under_starter {
    my ($workers) = @_;
    my $start_server = find_command('start_server') or die "no start_server (libserver-starter-perl)\n";
    my $port = Net::EmptyPort::empty_port();
    my $server = start_server(listen => 'none', command => [$start_server, '--port', "127.0.0.1:$port",
        '--', serow_command('--workers', $workers, $APP)]);
    my ($master) = $server->wait_for_log_all(qr/\(master pid (\d+)\)/, 1, RELOAD_WAIT);
    return undef unless $master && Net::EmptyPort::wait_port({ port => $port, max_wait => RELOAD_WAIT });
    return { server => $server, port => $port, master => $master };
}

# Sends $sig to the server; returns it and a mark of its log from before.
sub _signal {
    my ($state, $sig) = @_;
    my $server = $state->{server};
    my $mark = $server->log_mark;
    $server->signal($sig);
    return ($server, $mark);
}

# Each returns undef when the reload happened, or what went wrong.
sub _reload_starter {
    my ($state) = @_;
    my ($server, $mark) = _signal($state, 'HUP');
    my ($new) = $server->wait_for_log_all(qr/\(master pid (\d+)\)/, 1, RELOAD_WAIT, $mark);
    return 'no new Serow started' unless $new && $new != $state->{master};
    $server->wait_for_log(qr/old worker $state->{master} died, status:0\b/, RELOAD_WAIT, $mark)
        or return "the old Serow $state->{master} did not exit 0";
    $state->{master} = $new;
    return undef;
}

sub _reload_hup {
    my ($state) = @_;
    my ($server, $mark) = _signal($state, 'HUP');
    my @new = $server->wait_for_log_all(qr/worker (\d+) started/, $state->{count}, RELOAD_WAIT, $mark);
    return 'not every new worker started' unless @new == $state->{count};
    my $old = join '|', @{ $state->{workers} };
    my @left = $server->wait_for_log_all(qr/worker (?:$old) exited with status 0/, $state->{count},
        RELOAD_WAIT, $mark);
    return 'not every old worker exited 0' unless @left == $state->{count};
    $state->{workers} = \@new;
    return undef;
}

sub _start_deploying {
    my ($workers) = @_;
    my $dir = File::Temp->newdir;
    my $file = "$dir/app.psgi";
    _write_version($file, 1);
    my $state = _start_serow($workers, $file) or return undef;
    @$state{qw(dir file version)} = ($dir, $file, 1);
    return $state;
}

# The app of version $n: its body is "v$n;" repeated, sent in parts.
sub _write_version {
    my ($file, $n) = @_;
    open(my $fh, '>', "$file.new") or die "$file.new: $!";
    printf $fh <<'APP', $n, VERSION_MARKERS / VERSION_PARTS, VERSION_PARTS;
my ($part, $parts) = ('v%d;' x %d, %d);
my $length = length($part) * $parts;
sub { [200, ['Content-Type' => 'text/plain', 'Content-Length' => $length], [($part) x $parts]] };
APP
    close $fh;
    rename "$file.new", $file or die "rename $file: $!"; # whole, never half written
}

sub _reload_deploy {
    my ($state) = @_;
    _write_version($state->{file}, ++$state->{version});
    my $mark = $state->{server}->log_mark;
    my $failure = _reload_hup($state);
    return $failure if $failure;
    return $state->{server}->wait_for_log(qr/generation \d+ loaded the app/, RELOAD_WAIT, $mark)
        ? undef : 'no new generation loaded the app';
}

sub _reload_ttin_ttou {
    my ($state) = @_;
    my ($server, $mark) = _signal($state, 'TTIN');
    my ($added) = $server->wait_for_log_all(qr/worker (\d+) started/, 1, RELOAD_WAIT, $mark)
        or return 'TTIN started no worker';
    (undef, $mark) = _signal($state, 'TTOU');
    $server->wait_for_log(qr/worker $added exited with status 0/, RELOAD_WAIT, $mark)
        or return "TTOU: worker $added did not exit 0";
    return undef;
}

1;
