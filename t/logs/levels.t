use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get run_serow);

# --log-level: what the error log gets, from Perl (the master, the workers)
# and from C (the connection holder) alike.  info, the default, is what
# Serow always wrote; debug adds lines; warn leaves out the info lines and
# keeps the warnings and errors; error keeps the errors alone.

my $ROOT = Serow::Test::root();
my $app = sub {
    my ($env) = @_;
    die "the app failed\non two lines\n" if $env->{PATH_INFO} eq '/die';
    die 'long: ' . ('x' x 5000) . "\n" if $env->{PATH_INFO} eq '/long';
    return [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
};

# Runs a server with @options, asks /die (an error line), then makes the
# master warn: the directory of --access-log is gone when USR1 asks it to
# open the file again.  Returns everything logged, once the server stopped.
sub run_with {
    my (@options) = @_;
    my $dir = File::Temp->newdir;
    mkdir "$dir/logs" or die;
    my $server = start_server(app => $app, options => ['--workers', 1, '--access-log', "$dir/logs/access.log",
        @options]);
    is http_get($server, '/die')->{status}, 500, 'the app dies: 500';
    is http_get($server, '/long')->{status}, 500, 'and with a long message';
    unlink "$dir/logs/access.log";
    rmdir "$dir/logs" or die "rmdir: $!";
    $server->signal('USR1');
    # The master handles its signals in the order they came (USR1 before
    # the stop's TERM): at --log-level error too, it has tried to reopen the
    # file before it stops.  Where the warning is written, it is waited for.
    my ($level) = (join(' ', @options) =~ /--log-level (\w+)/, 'info');
    ok $server->wait_for_log(qr/cannot reopen the access log/), 'the master warns' if $level ne 'error';
    is $server->stop, 0, 'the server stops cleanly';
    $server->log_mark;
    return $server->log;
}

sub levels_in {
    my ($log) = @_;
    my %n;
    $n{$1}++ while $log =~ /^\[[^]]+\] \[(\w+)\] /mg;
    return \%n;
}

subtest 'info, the default: what Serow always wrote' => sub {
    my $log = run_with();
    like $log, qr/\[info\] .*listening on/, 'the start-up line';
    like $log, qr/\[info\] .*worker \d+ started/, "the worker's line";
    like $log, qr{\[error\] .*GET /die: the app died: the app failed\non two lines}, 'the error, whole';
    like $log, qr{\[error\] .*GET /long: the app died: long: x{5000}\n}, 'a long one too, not cut';
    like $log, qr/\[warn\] .*cannot reopen the access log/, 'the warning';
    is levels_in($log)->{debug}, undef, 'no debug line' or diag $log;
};

subtest 'debug: lines from Perl and from C' => sub {
    my $log = run_with('--log-level', 'debug');
    like $log, qr/\[debug\] \[pid \d+\] forked worker \d+ in slot 0/, "the master's (Perl)";
    like $log, qr/\[debug\] \[pid (\d+)\] connection holder \1 started/, "the connection holder's (C)";
    like $log, qr/\[info\] .*listening on/, 'and the info lines';
};

subtest 'warn: no info line' => sub {
    my $log = run_with('--log-level', 'warn');
    is_deeply [sort keys %{ levels_in($log) }], [qw(error warn)], 'warnings and errors only' or diag $log;
    like $log, qr/\[warn\] .*cannot reopen the access log/, 'the warning';
    like $log, qr{\[error\] .*GET /die}, 'the error';
};

subtest 'error: errors only' => sub {
    my $log = run_with('--log-level', 'error');
    is_deeply [sort keys %{ levels_in($log) }], ['error'], 'errors only' or diag $log;
    like $log, qr{\[error\] .*GET /die}, 'the error';
};

subtest 'a bad level' => sub {
    my ($status, $out) = run_serow('--log-level', 'verbose', "$ROOT/t/apps/pid.psgi");
    is $status, 2, 'exits 2';
    like $out, qr/--log-level: 'verbose' is not one of error, warn, info, debug/, 'naming the option and the levels';
};

done_testing;
