use strict;
use warnings;
use Test::More;
use File::Temp ();
use POSIX ();
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until write_file_whole);

# A worker ignores the master's signals (the master tells it to stop or to
# reopen its logs through shared memory), but what the app starts must not
# inherit that: a program started with system, backticks, a piped open or
# fork has the default action for each of them, none blocked, and a plain
# TERM stops it (systemd's stop, timeout(1), a supervisor).  Nor PIPE, which
# the worker ignores for its clients' sake: in a shell pipeline the app
# runs, `yes | head -1` ends yes by SIGPIPE, quietly, as anywhere else.

my @SIGNALS = qw(TERM INT QUIT HUP TTIN TTOU USR1 PIPE);
my %NUMBER = map { $_ => POSIX->can("SIG$_")->() } @SIGNALS;

my $dir = File::Temp->newdir;
my $status_lines = 'grep ^Sig /proc/self/status';

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my $out;
    if ($path eq '/backticks') {
        $out = `$status_lines`;
    } elsif ($path eq '/system') {
        system("$status_lines > $dir/system.out") == 0 or die "system: $?";
        open(my $fh, '<', "$dir/system.out") or die "$dir/system.out: $!";
        $out = do { local $/; <$fh> };
    } elsif ($path eq '/piped-open') {
        open(my $fh, '-|', 'grep', '^Sig', '/proc/self/status') or die "open: $!";
        $out = do { local $/; <$fh> };
    } elsif ($path eq '/fork') {
        # A Perl child that does not exec: its own /proc entry.
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            close $r;
            open(my $fh, '<', '/proc/self/status') or POSIX::_exit(1);
            print {$w} grep { /^Sig/ } <$fh>;
            close $w;
            POSIX::_exit(0);
        }
        close $w;
        $out = do { local $/; <$r> };
        waitpid($pid, 0);
    } elsif ($path eq '/pipeline') {
        $out = `bash -c 'yes | head -1; echo "yes: \${PIPESTATUS[0]}"' 2>&1`;
    } elsif ($path eq '/spawn') {
        # A program left running, as a job the app starts would be.
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            { exec 'sleep', '100' }
            POSIX::_exit(127);
        }
        $out = $pid;
    } elsif ($path =~ m{\A/reap/(\d+)\z}) {
        my $pid = waitpid($1, POSIX::WNOHANG());
        $out = $pid == 0 ? 'running' : $pid < 0 ? "no child: $!" : 'status ' . $?;
    } else {
        return [404, [], []];
    }
    return [200, ['Content-Type' => 'text/plain'], [$out]];
};

# The signals of a hex mask from /proc/PID/status.
sub signals_in {
    my ($hex, @names) = @_;
    @names = @SIGNALS unless @names;
    my $mask = 0;
    $mask = $mask * 16 + hex($_) for split //, $hex;
    return grep { $mask & (1 << (($NUMBER{$_} // POSIX->can("SIG$_")->()) - 1)) } @names;
}

my $server = start_server(app => $app, options => ['--workers', 1]);

for my $how (qw(backticks system piped-open fork)) {
    subtest "a process started with $how" => sub {
        my $res = http_get($server, "/$how");
        is $res && $res->{status}, 200, 'the app reports its /proc/self/status' or return diag $server->log;
        my ($blocked) = $res->{body} =~ /^SigBlk:\s*([0-9a-f]+)$/m;
        my ($ignored) = $res->{body} =~ /^SigIgn:\s*([0-9a-f]+)$/m;
        ok defined $blocked && defined $ignored, 'with its signal masks' or return diag $res->{body};
        is_deeply [signals_in($blocked)], [], 'none of the master\'s signals (nor PIPE) is blocked';
        is_deeply [signals_in($ignored)], [], 'none is ignored';
    };
}

subtest 'yes | head -1: yes ends by SIGPIPE, with no "Broken pipe"' => sub {
    my $res = http_get($server, '/pipeline');
    is $res && $res->{body}, "y\nyes: 141\n", 'yes killed by SIGPIPE (128 + 13), nothing on its stderr'
        or diag $server->log;
};

subtest 'a program the app starts is stopped by a plain TERM' => sub {
    my $res = http_get($server, '/spawn');
    my ($pid) = ($res && $res->{body} // '') =~ /\A(\d+)\z/;
    ok $pid, 'the app started sleep 100' or return diag $server->log;
    ok kill('TERM', $pid), 'TERM sent to it';
    my $reaped = wait_until(sub {
        my $r = http_get($server, "/reap/$pid");
        return $r && $r->{body} =~ /^status (\d+)/ ? $1 : 0;
    });
    ok $reaped, 'it ended' or kill 'KILL', $pid;
    is $reaped & 127, $NUMBER{TERM}, 'killed by the TERM';
    http_get($server, "/reap/$pid") unless $reaped;
};

is $server->stop, 0, 'the server stops';

# serow FILE: the app is loaded by a generation process, which ignores the
# master's signals (and USR2) as a worker does; what the app starts as it
# loads gets their default actions back too.
subtest 'a process the app starts while it loads (serow FILE)' => sub {
    my $out = "$dir/load.out";
    my $file = "$dir/load.psgi";
    write_file_whole($file, <<"APP");
system("grep ^Sig /proc/self/status > $out") == 0 or die "system: \$?";
sub { [200, ['Content-Type' => 'text/plain'], ['ok']] };
APP
    my $server = start_server(app_file => $file, options => ['--workers', 1]);
    is http_get($server, '/')->{status}, 200, 'the app loaded and answers';
    open(my $fh, '<', $out) or return fail("$out: $!");
    my $lines = do { local $/; <$fh> };
    my ($blocked) = $lines =~ /^SigBlk:\s*([0-9a-f]+)$/m;
    my ($ignored) = $lines =~ /^SigIgn:\s*([0-9a-f]+)$/m;
    ok defined $blocked && defined $ignored, 'with its signal masks' or return diag $lines;
    is_deeply [signals_in($blocked, @SIGNALS, 'USR2')], [], 'none of the master\'s signals (nor PIPE) is blocked';
    is_deeply [signals_in($ignored, @SIGNALS, 'USR2')], [], 'none is ignored';
    is $server->stop, 0;
};

done_testing;
