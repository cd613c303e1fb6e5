use strict;
use warnings;
use Test::More;
use File::Temp ();
use Net::EmptyPort qw(empty_port wait_port);
use lib 't/lib';
use Serow::Version ();
use Serow::Test qw(start_server http_get wait_until run_serow is_connection_holder);

# The master's first log line says what an operator needs: version, every
# listen address (URL or UNIX path), workers, master pid, keep-alive; every
# line has a time stamp, a level and a pid; --error-log sends them to a file.

my $ROOT = Serow::Test::root();
my $dir = File::Temp->newdir;
my $STAMP = qr/\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[(?:info|error)\] \[pid \d+\] /;

subtest 'the start-up line' => sub {
    my $port = empty_port();
    my $path = "$dir/banner.sock";
    my $server = start_server(listen => 'none', app_file => 't/apps/pid.psgi',
        options => ['--listen', "127.0.0.1:$port", '--listen', $path, '--workers', 2]);
    my $line = $server->wait_for_log(qr/^.*listening on.*$/m) or return diag $server->log;
    my $pid = $server->pid;
    like $line, qr/^$STAMP/, 'a time stamp, the level and the pid';
    like $line, qr/\[pid $pid\] Serow \Q${\ Serow::Version->describe}\E listening on /,
        "Serow's version (and commit, in a checkout), from the master";
    like $line, qr{ listening on http://127\.0\.0\.1:$port, \Q$path\E with 2 workers }, 'URL, UNIX path, workers';
    like $line, qr/\(master pid $pid\)/, 'the master pid';
    like $line, qr/keep-alive on \(idle connections held by the connection holder, closed after 75s\)/, 'keep-alive';
    unlike $line, qr/workers run as|pid file/, 'no user or pid file when none is given';
    is $server->stop, 0;
    like $_, qr/^$STAMP/, "every line is stamped: $_" for grep { !/^test app loaded/ } split /\n/, $server->log;
};

subtest 'keep-alive off' => sub {
    my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--workers', 1,
        '--max-keepalive-requests', 1]);
    ok $server->wait_for_log(qr/with 1 workers \(master pid \d+\); keep-alive off \(--max-keepalive-requests 1\)/)
        or diag $server->log;
    is $server->stop, 0;
};

subtest '--error-log FILE' => sub {
    my $log = "$dir/error.log";
    open(my $fh, '>', $log) or die;
    print {$fh} "an older line\n";
    close $fh;
    my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--workers', 1, '--error-log', $log]);
    my $read = sub { open(my $in, '<', $log) or return ''; local $/; <$in> };
    ok wait_until(sub { $read->() =~ /worker \d+ started/ }), 'the log goes to the file' or diag $server->log;
    is http_get($server, '/')->{status}, 200;
    is $server->stop, 0;
    my $text = $read->();
    like $text, qr/\Aan older line\n/, 'appended to what was there';
    like $text, qr/^$STAMP.*listening on .* with 1 workers/m, 'the start-up line';
    like $text, qr/^$STAMP.*stopped$/m, 'and the last one';
    unlike $server->log, qr/listening on/, 'none of it on standard error';

    my ($status, $out) = run_serow('--error-log', "$dir/no/such/dir/e.log", '--listen', '127.0.0.1:0',
        "$ROOT/t/apps/pid.psgi");
    is $status, 2;
    like $out, qr{--error-log: cannot open \Q$dir\E/no/such/dir/e\.log: No such file or directory};
};

subtest '--error-log is opened again on USR1 (logrotate)' => sub {
    my $log = "$dir/rotated.log";
    my $app = sub { print STDERR "app line $_[0]{PATH_INFO}\n"; [200, [], ['ok']] };
    my $server = start_server(app => $app, options => ['--workers', 2, '--error-log', $log]);
    my $read = sub { open(my $in, '<', $_[0]) or return ''; local $/; <$in> };
    ok wait_until(sub { (() = $read->($log) =~ /worker \d+ started/g) == 2 }),
        'both workers log to the file' or diag $server->log;
    rename $log, "$log.1" or die "rename: $!";
    $server->signal('USR1');
    ok wait_until(sub { $read->($log) =~ /reopen their logs/ }), 'the master writes to a new file';
    # The connection holder says so on its standard error, which is the new
    # file only once it has opened it again.
    my ($holder) = grep { is_connection_holder($_) } Serow::Test::all_child_pids($server->pid);
    ok $holder, 'there is a connection holder';
    ok wait_until(sub { $read->($log) =~ /\[pid $holder\] connection holder $holder reopened the error log/ }),
        'the connection holder writes to the new file' or diag $read->($log);
    is readlink("/proc/$holder/fd/2"), $log, "its standard error is the new file";
    my $n = 0;
    ok wait_until(sub { http_get($server, '/after' . ++$n); $read->($log) =~ m{app line /after} }),
        'the workers too (what the app prints on standard error)';
    # Both workers had the signal before the first line landed there.
    http_get($server, "/final$_") for 1 .. 6;
    my $text = $read->($log);
    is scalar(() = $text =~ m{app line /final}g), 6, 'every later line is in the new file';
    is $server->stop, 0;
    like $read->($log), qr/stopped$/m, 'the last line too';
    unlike $read->("$log.1"), qr{app line /final}, 'none in the old one';
};

# serow FILE: the workers are forked by the generation process, which was
# forked before the rotation; a worker started after it (TTIN, a crash,
# --max-requests) writes to the file the master has now, not the old one.
subtest '--error-log after USR1: workers a generation forks later write to the new file' => sub {
    my $log = "$dir/generation.log";
    my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--workers', 1, '--error-log', $log]);
    my $read = sub { open(my $in, '<', $_[0]) or return ''; local $/; <$in> };
    ok wait_until(sub { $read->($log) =~ /worker \d+ started/ }), 'the first worker logs to the file'
        or diag $server->log;
    rename $log, "$log.1" or die "rename: $!";
    $server->signal('USR1');
    ok wait_until(sub { $read->($log) =~ /reopen their logs/ }), 'the master writes to a new file';
    $server->signal('TTIN');
    my $started;
    ok wait_until(sub { ($started) = $read->($log) =~ /worker (\d+) started/ }),
        'the worker TTIN adds logs its start to the new file' or diag $read->("$log.1");
    is readlink("/proc/$started/fd/2"), $log, 'its standard error is the new file' if $started;
    is scalar(() = $read->("$log.1") =~ /worker \d+ started/g), 1, 'the old file has the first worker\'s start only';
    is $server->stop, 0;
};

done_testing;
