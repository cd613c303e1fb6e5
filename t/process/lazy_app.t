use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server run_serow http_get wait_until generation_pids write_file_whole file_lines);

# --lazy-app: each worker loads the app file after the fork, the master
# never does; a file no worker can load stops serow with status 2; a HUP
# loads the file afresh, and the old workers serve until the new ones have
# started.  The app, written by the test, appends the pid of the process
# that loads it to a marker file and answers its version and its own pid.

my $ROOT = Serow::Test::root();
my $dir = File::Temp->newdir;
my $marker = "$dir/loaded-in";
my $app_file = "$dir/app.psgi";
my %env = (SEROW_TEST_MARKER => $marker);

sub write_app {
    my ($file, $version) = @_;
    write_file_whole($file, <<"APP");
open(my \$marker, '>>', \$ENV{SEROW_TEST_MARKER}) or die "marker: \$!";
print \$marker "\$\$\\n";
close \$marker;
sub { [200, ['Content-Type' => 'text/plain'], ["$version \$\$"]] };
APP
}


sub loaded_in { file_lines($marker) }

sub body { (http_get($_[0]) // {})->{body} // '' }

subtest 'with --lazy-app each worker loads the app, the master never' => sub {
    unlink $marker;
    write_app($app_file, 'v1');
    my $server = start_server(app_file => $app_file, options => ['--lazy-app', '--workers', 2], env => \%env);
    my @started = $server->wait_for_log_all(qr/worker (\d+) started/, 2);
    is scalar(@started), 2, 'two workers started';
    is_deeply [sort { $a <=> $b } loaded_in()], [sort { $a <=> $b } @started],
        'each worker loaded it once, before it started';
    ok !grep({ $_ == $server->pid } loaded_in()), 'not the master';
    my ($pid) = body($server) =~ /\Av1 (\d+)\z/;
    ok $pid && grep({ $_ == $pid } @started), 'a worker answers with the app it loaded';
    like $server->log, qr/each worker loads the app \(--lazy-app\)/, 'the start-up line says so';
    is $server->stop, 0;
};

subtest 'without it the generation process loads the app, once (t/process/deploy.t)' => sub {
    unlink $marker;
    write_app($app_file, 'v1');
    my $server = start_server(app_file => $app_file, options => ['--workers', 2], env => \%env);
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, 2)), 2, 'two workers started';
    is_deeply [loaded_in()], [generation_pids($server->pid)], 'loaded in the generation process alone';
    is $server->stop, 0;
};

subtest 'an app file no worker can load: serow exits 2, naming the file and line' => sub {
    my $broken = "$dir/broken.psgi";
    write_file_whole($broken, "my \$app = sub { [200, [], ['ok']] };\nmy \$x = ;\n\$app;\n");
    my ($status, $text) = run_serow('--lazy-app', '--workers', 2, '--listen', "$dir/broken.sock", $broken);
    is $status, 2, 'exit status 2';
    like $text, qr/cannot load \Q$broken\E: .*syntax error at \Q$broken\E line 2\b/, 'perl\'s error, with file and line';
    like $text, qr/no worker could load the app \Q$broken\E \(--lazy-app\): exiting/, 'the master says why it exits';
    my $failed = () = $text =~ /worker \d+ exited with status 3: it could not load the app\n/g;
    is $failed, 2, 'each worker of the first generation failed once: none was started in its place';

    my $not_an_app = "$dir/forty-two.psgi";
    write_file_whole($not_an_app, "42;\n");
    ($status, $text) = run_serow('--lazy-app', '--workers', 1, '--listen', "$dir/42.sock", $not_an_app);
    is $status, 2, 'a file that returns no app: exit status 2';
    like $text, qr/cannot load \Q$not_an_app\E: it returned '42', not a PSGI app/, 'with what it returned';
};

subtest 'HUP with --lazy-app loads the changed file; a broken one leaves the old workers serving' => sub {
    unlink $marker;
    write_app($app_file, 'v1');
    my $server = start_server(app_file => $app_file, options => ['--lazy-app', '--workers', 2], env => \%env);
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, 2)), 2, 'two workers started';
    like body($server), qr/\Av1 /, 'v1 answers';

    write_app($app_file, 'v2');
    kill 'HUP', $server->pid;
    ok wait_until(sub { body($server) =~ /\Av2 / }), 'after HUP the new workers answer with v2';
    ok $server->wait_for_log(qr/worker \d+ exited with status 0/), 'the old workers leave';

    write_file_whole($app_file, "my \$x = ;\n");
    kill 'HUP', $server->pid;
    # (Two failures a round apart on a slow machine: the second waits 2 seconds.)
    is scalar($server->wait_for_log_all(qr/worker \d+ exited with status 3: it could not load the app; starting a new one in (?:a second|2 seconds)/, 2)),
        2, 'the new workers cannot load the broken file, and are retried';
    like body($server), qr/\Av2 /, 'the old workers still answer with v2';

    write_app($app_file, 'v3');
    ok wait_until(sub { body($server) =~ /\Av3 / }), 'once mended, the new workers answer with v3';
    ok !grep({ $_ == $server->pid } loaded_in()), 'the master never loaded it';
    is $server->stop, 0;
};

subtest 'workers that keep failing are retried after 1, 2, 4... seconds; a HUP or a worker that starts begins again at 1' => sub {
    write_app($app_file, 'v1');
    my $server = start_server(app_file => $app_file, options => ['--lazy-app', '--workers', 1], env => \%env);
    ok $server->wait_for_log(qr/worker \d+ started/), 'the worker started';
    my $retries = qr/worker \d+ exited with status 3: it could not load the app; starting a new one in (a second|\d+ seconds)/;

    write_file_whole($app_file, "my \$x = ;\n");
    kill 'HUP', $server->pid;
    is_deeply [$server->wait_for_log_all($retries, 3)], ['a second', '2 seconds', '4 seconds'],
        'each failure waits twice as long as the one before';
    like body($server), qr/\Av1 /, 'the old worker answers meanwhile';

    kill 'HUP', $server->pid;
    is_deeply [$server->wait_for_log_all($retries, 1)], ['a second'], 'a HUP tries again at once, then waits a second';

    write_app($app_file, 'v2');
    ok wait_until(sub { body($server) =~ /\Av2 / }), 'the mended file is loaded at the next retry';

    # A worker that started ends the streak: the next failure waits a second
    # (whether it is the killed worker's, if it dies within a second of its
    # start, or its replacement's, which finds the file broken again).
    write_file_whole($app_file, "my \$x = ;\n");
    my ($v2) = body($server) =~ /\Av2 (\d+)\z/;
    ok $v2, 'the v2 worker answers';
    kill 'KILL', $v2;
    ok $server->wait_for_log(qr/worker $v2 was killed by signal 9; starting a new one/), 'it is killed';
    my ($first) = $server->wait_for_log_all($retries, 1);
    my ($killed_wait) = $server->log =~ /worker $v2 was killed by signal 9; starting a new one in (a second|\d+ seconds)/;
    is $killed_wait // $first, 'a second', 'the next failure waits a second again';
    is $server->stop, 0;
};

subtest 'the @Serow::AFTER_FORK hooks of a lazily loaded app run after it loads' => sub {
    my $lib = "$ROOT/t/lib";
    my $server = start_server(app_file => 't/apps/after_fork.psgi', options => ['--lazy-app', '--workers', 1],
        env => { PERL5LIB => join(':', $lib, grep { defined && length } $ENV{PERL5LIB}),
                 SEROW_TEST_GATE => Serow::Test::gate()->fd });
    my ($pid, $hooks) = body($server) =~ /\Apid (\d+) hook ran in ([\d ]*)\z/;
    ok $pid, 'the worker answers';
    is $hooks, $pid, 'the hook ran once, in the worker';
    is $server->stop, 0;
};

subtest 'plackup -s Serow refuses --lazy-app: plackup has loaded the app already' => sub {
    require Plack::Handler::Serow;
    for my $key (qw(lazy_app lazy_apps)) {
        ok !eval { Plack::Handler::Serow->new($key => 1, listen => ["$dir/p.sock"]); 1 }, "$key => 1 dies";
        like $@, qr/--lazy-app does not work with plackup -s Serow, which has already loaded the app: run serow --lazy-app/;
    }
    ok eval { Plack::Handler::Serow->new(lazy_app => 0, listen => ["$dir/p.sock"]); 1 }, 'lazy_app => 0 is fine'
        or diag $@;
};

done_testing;
