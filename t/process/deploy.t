use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server run_serow http_get raw_connect get_on wait_until generation_pids
                   child_pids process_alive write_file_whole file_lines);

# serow FILE (the app preloaded): a generation process loads the app and
# forks the workers; the master never loads it.  HUP deploys: a new
# generation loads the file afresh, its workers replace the old ones once
# they have all started, and the old generation process exits.  A file that
# cannot be loaded leaves the old generation serving.  The app, written by
# the test, appends the pid of the process that loads it to a marker file
# and answers its version.

my $dir = File::Temp->newdir;
my $marker = "$dir/loaded-in";
my $app_file = "$dir/app.psgi";
my %env = (SEROW_TEST_MARKER => $marker);

sub write_app {
    my ($version) = @_;
    write_file_whole($app_file, <<"APP");
open(my \$marker, '>>', \$ENV{SEROW_TEST_MARKER}) or die "marker: \$!";
print \$marker "\$\$\\n";
close \$marker;
sub { [200, ['Content-Type' => 'text/plain'], ["$version"]] };
APP
}

sub loaded_in { file_lines($marker) }

sub body { (http_get($_[0]) // {})->{body} // '' }

subtest 'the generation process loads the app, the master never' => sub {
    unlink $marker;
    write_app('v1');
    my $server = start_server(app_file => $app_file, options => ['--workers', 2], env => \%env);
    my @workers = $server->wait_for_log_all(qr/worker (\d+) started/, 2);
    is scalar(@workers), 2, 'two workers started' or return diag $server->log;
    my @generations = generation_pids($server->pid);
    is scalar(@generations), 1, 'the master has one generation process';
    is_deeply [loaded_in()], \@generations, 'which loaded the app, once';
    ok !grep({ $_ == $server->pid } loaded_in()), 'the master did not';
    is_deeply [child_pids($server->pid)], [sort { $a <=> $b } @workers],
        'the workers are the master\'s children (re-parented from the generation)';
    is body($server), 'v1', 'they serve';
    is $server->stop, 0;
    ok !process_alive($generations[0]), 'the generation process is gone after the stop';
};

subtest 'HUP deploys the rewritten file; idle keep-alive connections go on' => sub {
    unlink $marker;
    write_app('v1');
    my $server = start_server(app_file => $app_file, options => ['--workers', 2], env => \%env);
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, 2)), 2, 'two workers started'
        or return diag $server->log;
    my ($old_generation) = generation_pids($server->pid);
    my $idle = raw_connect($server);
    my $res = get_on($idle, '/');
    is $res && $res->{body}, 'v1', 'v1 answers on a connection kept alive';

    write_app('v2');
    my $mark = $server->log_mark;
    $server->signal('HUP');
    ok $server->wait_for_log(qr/generation 2 loaded the app/, undef, $mark), 'a new generation loads it';
    ok wait_until(sub { body($server) eq 'v2' }), 'v2 answers new connections';
    ok $server->wait_for_log(qr/generation 1 \(pid $old_generation\) exited/, undef, $mark),
        'the old generation process exits';
    is scalar($server->wait_for_log_all(qr/worker \d+ exited with status 0/, 2, undef, $mark)), 2,
        'and its workers leave';
    $res = get_on($idle, '/');
    is $res && $res->{status}, 200, 'the connection kept alive from before the deploy still works';
    is $res && $res->{body}, 'v2', 'and meets the new code';
    is scalar(loaded_in()), 2, 'the app was loaded twice: once per generation';
    ok !grep({ $_ == $server->pid } loaded_in()), 'never by the master';
    is $server->stop, 0;
    unlike $server->log, qr/\[error\]/, 'nothing went wrong on the way';
};

subtest 'a broken file on HUP: the old generation keeps serving; once mended, HUP deploys' => sub {
    write_app('v1');
    my $server = start_server(app_file => $app_file, options => ['--workers', 2], env => \%env);
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, 2)), 2, 'two workers started'
        or return diag $server->log;
    my @workers = child_pids($server->pid);

    write_file_whole($app_file, "my \$app = sub { [200, [], ['broken']] };\nmy \$x = ;\n\$app;\n");
    my $mark = $server->log_mark;
    $server->signal('HUP');
    ok $server->wait_for_log(qr/\[error\] .*generation 2: cannot load \Q$app_file\E: .*syntax error at \Q$app_file\E line 2\b/,
        undef, $mark), 'the error is logged with the file and line';
    ok $server->wait_for_log(qr/\[error\] .*generation 2 could not load the app \Q$app_file\E: the workers of generation 1 keep serving/,
        undef, $mark), 'the master says the old generation keeps serving';
    is body($server), 'v1', 'v1 still answers';
    # (the failed generation process may not have finished exiting yet)
    ok wait_until(sub { join(' ', child_pids($server->pid)) eq "@workers" }), 'from the same workers'
        or diag "children: @{[ child_pids($server->pid) ]}, workers: @workers";

    write_file_whole($app_file, "sub { [200, [], ['not a code ref']] };\n42;\n");
    $mark = $server->log_mark;
    $server->signal('HUP');
    ok $server->wait_for_log(qr/generation 3: cannot load \Q$app_file\E: it returned '42', not a PSGI app/,
        undef, $mark), 'a file that returns no app is refused too';
    ok $server->wait_for_log(qr/generation 3 could not load the app/, undef, $mark), 'and the old one serves';
    is body($server), 'v1', 'v1 still answers';

    write_app('v4');
    $mark = $server->log_mark;
    $server->signal('HUP');
    ok wait_until(sub { body($server) eq 'v4' }), 'the mended file is deployed by the next HUP';
    ok $server->wait_for_log(qr/generation 1 \(pid \d+\) exited/, undef, $mark), 'the old generation exits';
    my @generations = generation_pids($server->pid);
    is scalar(@generations), 1, 'one generation is left';
    is $server->stop, 0;
};

subtest 'a HUP while a generation loads: a new one loads the file as it is now' => sub {
    unlink $marker;
    write_app('v1');
    my $server = start_server(app_file => $app_file, options => ['--workers', 1], env => \%env);
    ok $server->wait_for_log(qr/worker \d+ started/), 'started' or return diag $server->log;
    # v2 says it is loading, then waits for a writer on a FIFO: none comes.
    my $fifo = "$dir/fifo";
    system('mkfifo', $fifo) == 0 or die "mkfifo: $?";
    write_file_whole($app_file, <<"APP");
open(my \$marker, '>>', \$ENV{SEROW_TEST_MARKER}) or die;
print \$marker "\$\$\\n";
close \$marker;
open(my \$f, '<', '$fifo') or die;
sub { [200, [], ['v2']] };
APP
    my $mark = $server->log_mark;
    $server->signal('HUP');
    ok wait_until(sub { loaded_in() == 2 }), 'generation 2 is loading';
    write_app('v3');
    $server->signal('HUP');
    ok $server->wait_for_log(qr/generation 2 has not loaded the app yet: a new one loads it afresh/, undef, $mark),
        'the master says so';
    ok wait_until(sub { body($server) eq 'v3' }), 'and v3 is deployed';
    my ($loading) = (loaded_in())[1];
    ok wait_until(sub { !process_alive($loading) }), 'generation 2 is gone';
    is $server->stop, 0;
};

subtest 'a generation process that dies: a new one loads the app and replaces the workers' => sub {
    write_app('v1');
    my $server = start_server(app_file => $app_file, options => ['--workers', 2], env => \%env);
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, 2)), 2, 'two workers started'
        or return diag $server->log;
    my ($generation) = generation_pids($server->pid);
    ok $generation, "the generation process ($generation)" or return;
    write_app('v2');
    my $mark = $server->log_mark;
    kill 'KILL', $generation;
    ok $server->wait_for_log(qr/\[error\] .*generation 1 \(pid $generation\) exited with status 9: a new generation loads the app/,
        undef, $mark), 'the master says so';
    ok wait_until(sub { body($server) eq 'v2' }), 'the new generation serves';
    is scalar($server->wait_for_log_all(qr/worker \d+ exited with status 0/, 2, undef, $mark)), 2,
        'the old workers leave';
    is $server->stop, 0;
};

subtest 'a generation that dies while the file is broken: the workers serve on, the load is retried' => sub {
    write_app('v1');
    my $server = start_server(app_file => $app_file, options => ['--workers', 2], env => \%env);
    my @workers = $server->wait_for_log_all(qr/worker (\d+) started/, 2);
    is scalar(@workers), 2, 'two workers started' or return diag $server->log;
    my ($generation) = generation_pids($server->pid);
    ok $generation, "the generation process ($generation)" or return;
    write_file_whole($app_file, "my \$x = ;\n");
    my $mark = $server->log_mark;
    kill 'KILL', $generation;
    my $retries = qr/generation \d+ could not load the app \Q$app_file\E, and no generation holds it: .*trying again in (\d+) s/;
    is_deeply [$server->wait_for_log_all($retries, 2, undef, $mark)], [1, 2],
        'the load fails, and is tried again after 1 s, then 2 s';
    ok process_alive($server->pid), 'serow goes on';
    is body($server), 'v1', 'the running workers serve';
    ok !grep({ !process_alive($_) } @workers), 'both of them';
    write_app('v2');
    ok wait_until(sub { body($server) eq 'v2' }), 'once mended, a retry loads it and its workers serve';
    ok wait_until(sub { !grep { process_alive($_) } @workers }), 'the old workers leave';
    is $server->stop, 0, 'and serow stops with status 0';
};

subtest '--access-log: the workers a generation forks write to the master\'s log, the reopened one after USR1' => sub {
    write_app('v1');
    my $log = "$dir/access.log";
    my $server = start_server(app_file => $app_file, options => ['--workers', 1, '--access-log', $log], env => \%env);
    ok $server->wait_for_log(qr/worker \d+ started/), 'started' or return diag $server->log;
    my ($old) = $server->log =~ /worker (\d+) started/;
    is body($server), 'v1', 'a request';
    ok wait_until(sub { -s $log }), 'is logged';
    rename $log, "$log.1" or die "rename: $!";
    my $mark = $server->log_mark;
    $server->signal('USR1');
    ok $server->wait_for_log(qr/reopen their logs/, undef, $mark), 'USR1: the logs are reopened';
    write_app('v2');
    $server->signal('HUP');
    ok wait_until(sub { body($server) eq 'v2' }), 'HUP: the new generation serves';
    # (until it has left, the old worker may still take a request)
    ok wait_until(sub { !process_alive($old) }), 'the old worker has left';
    my $size = -s "$log.1";
    is body($server), 'v2', 'another request';
    ok wait_until(sub { open(my $fh, '<', $log) or return 0; grep { m{"GET / HTTP/1\.1" 200} } <$fh> }),
        'is logged in the new file, by a worker of the new generation';
    is -s "$log.1", $size, 'not in the old one';
    is $server->stop, 0;
};

subtest 'the first generation cannot load the app: serow exits 2, naming the file and line' => sub {
    my $broken = "$dir/broken.psgi";
    write_file_whole($broken, "my \$app = sub { [200, [], ['ok']] };\nmy \$x = ;\n\$app;\n");
    my ($status, $text) = run_serow('--workers', 2, '--listen', "$dir/broken.sock", $broken);
    is $status, 2, 'exit status 2';
    like $text, qr/cannot load \Q$broken\E: .*syntax error at \Q$broken\E line 2\b/, 'perl\'s error, with file and line';
    like $text, qr/could not load the app \Q$broken\E: exiting/, 'the master says why it exits';
    unlike $text, qr/listening on|worker \d+ started/, 'nothing was started';
};

done_testing;
