use strict;
use warnings;
use Test::More;
use POSIX ();
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until run_serow);

# --pid-file: the master's pid, written once the sockets are open, removed
# when it stops cleanly; a second Serow on the same file is refused, a
# stale file replaced, and a file somebody else rewrote left alone.

my $ROOT = Serow::Test::root();
my $dir = File::Temp->newdir;

sub read_pid {
    my ($path) = @_;
    open(my $fh, '<', $path) or return undef;
    my $line = <$fh>;
    return $line;
}

sub write_file {
    my ($path, $text) = @_;
    open(my $fh, '>', $path) or die "$path: $!";
    print {$fh} $text;
    close $fh;
}

sub serow_with_pid_file {
    my ($path, @options) = @_;
    my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--pid-file', $path, @options]);
    $server->wait_for_log(qr/listening on .*pid file \Q$path\E/) or diag $server->log;
    return $server;
}

subtest 'written with the master pid, removed on a clean stop' => sub {
    my $path = "$dir/a.pid";
    my $server = serow_with_pid_file($path, '--workers', 1);
    is read_pid($path), $server->pid . "\n", 'the file holds the master pid and a newline';
    is_deeply [grep { !/a\.pid$/ } glob "$dir/*"], [], 'no temp file is left beside it';
    is http_get($server, '/')->{status}, 200, 'the server serves';
    is $server->stop, 0;
    ok !-e $path, 'the file is gone after TERM';
};

subtest 'workers that exit leave the file alone' => sub {
    my $path = "$dir/b.pid";
    my $server = serow_with_pid_file($path, '--workers', 1, '--max-requests', 1);
    $server->wait_for_log(qr/worker (\d+) started/);
    http_get($server, '/') for 1 .. 2;
    ok $server->wait_for_log(qr/worker \d+ exited with status 0; starting a new one/), 'a worker reached its limit';
    is read_pid($path), $server->pid . "\n", 'the file is still there';
    is $server->stop, 0;
    ok !-e $path;
};

subtest 'a second Serow on the same pid file is refused' => sub {
    my $path = "$dir/c.pid";
    my $first = serow_with_pid_file($path, '--workers', 1);
    my ($status, $text) = run_serow('--pid-file', $path, '--listen', '127.0.0.1:0', "$ROOT/t/apps/pid.psgi");
    is $status, 2, 'exit status 2';
    like $text, qr/--pid-file: \Q$path\E belongs to a running Serow \(pid ${\ $first->pid }\): stop it first/,
        'saying which Serow holds it';
    is read_pid($path), $first->pid . "\n", "the first one's file is untouched";
    is http_get($first, '/')->{status}, 200, 'the first one still serves';
    is $first->stop, 0;
    ok !-e $path;
};

subtest 'a stale pid file is replaced' => sub {
    my $path = "$dir/d.pid";
    # A pid that is no longer running: a child that has exited and been reaped.
    my $pid = fork // die;
    POSIX::_exit(0) if !$pid;
    waitpid $pid, 0;
    write_file($path, "$pid\n");
    my $server = serow_with_pid_file($path, '--workers', 1);
    is read_pid($path), $server->pid . "\n", 'our pid replaced the dead one';
    is $server->stop, 0;
    ok !-e $path;
};

subtest 'a pid file naming a live process that is not Serow is replaced' => sub {
    # The number of a dead Serow, reused by another program (after a reboot).
    pipe(my $r, my $w) or die;
    my $other = fork // die;
    if (!$other) {
        close $w;
        open(STDIN, '<&', $r) or POSIX::_exit(1);
        exec 'cat' or POSIX::_exit(1);
    }
    close $r;
    ok wait_until(sub { open(my $fh, '<', "/proc/$other/cmdline") or return; (<$fh> // '') =~ /\Acat\0/ }),
        "a process running 'cat'";
    my $path = "$dir/f.pid";
    write_file($path, "$other\n");
    my $server = serow_with_pid_file($path, '--workers', 1);
    is read_pid($path), $server->pid . "\n", "our pid replaced the one of 'cat'";
    is $server->stop, 0;
    close $w; # cat ends
    waitpid $other, 0;
};

subtest 'a pid file rewritten by someone else is not removed' => sub {
    my $path = "$dir/e.pid";
    my $server = serow_with_pid_file($path, '--workers', 1);
    write_file($path, "$$\n");
    is $server->stop, 0;
    is read_pid($path), "$$\n", 'left as the other writer wrote it';
};

subtest 'a pid file that cannot be written is an error naming the option' => sub {
    my ($status, $text) = run_serow('--pid-file', "$dir/no/such/dir/x.pid", '--listen', '127.0.0.1:0',
        "$ROOT/t/apps/pid.psgi");
    is $status, 2;
    like $text, qr{--pid-file: cannot write \Q$dir\E/no/such/dir/x\.pid: No such file or directory};
};

done_testing;
