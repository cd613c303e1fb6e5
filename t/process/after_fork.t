use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response gate);

# push @Serow::AFTER_FORK, sub { ... }: code a preloaded app runs once in
# each worker after the fork (reconnect, reseed), before its first request.
# t/apps/after_fork.psgi records the pid each hook ran in.

my $lib = Serow::Test::root() . '/t/lib';
my %env = (PERL5LIB => join(':', $lib, grep { defined && length } $ENV{PERL5LIB}));

sub get {
    my ($sock, $path) = @_;
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
}

subtest 'each worker runs the hook once, in its own process' => sub {
    my $gate = gate();
    my $server = start_server(app_file => 't/apps/after_fork.psgi', options => ['--workers', 2],
        env => { %env, SEROW_TEST_GATE => $gate->fd });
    my @started = $server->wait_for_log_all(qr/worker (\d+) started/, 2);
    is scalar(@started), 2, 'two workers started';
    # One worker held in /slow: the other request goes to the other worker.
    my ($slow, $fast) = (raw_connect($server), raw_connect($server));
    get($slow, '/slow');
    ok $server->wait_for_log(qr/slow request in worker \d+/), 'one worker is in /slow';
    my $master = $server->pid;
    get($fast, '/');
    my $second = read_response($fast);
    $gate->open;
    my $first = read_response($slow);
    my %ran;
    for my $res ($first, $second) {
        my ($pid, $hooks) = ($res->{body} // '') =~ /\Apid (\d+) hook ran in ([\d ]*)\z/
            or fail("no answer: " . ($res->{body} // 'none')), next;
        is $hooks, $pid, "worker $pid ran the hook once, with its own pid";
        $ran{$pid} = 1;
    }
    is scalar(keys %ran), 2, 'two workers answered';
    ok !$ran{$master}, 'not the master';
    is $server->stop, 0;
};

subtest 'a hook that dies fails its worker, logged' => sub {
    my $server = start_server(app_file => 't/apps/after_fork.psgi', options => ['--workers', 1],
        env => { %env, SEROW_TEST_GATE => gate()->fd, SEROW_TEST_HOOK_DIES => 1 });
    ok $server->wait_for_log(qr/worker failed: worker (\d+): a hook of \@Serow::AFTER_FORK died: cannot reconnect to the database/),
        'the error is logged with the hook\'s message';
    ok $server->wait_for_log(qr/worker \d+ exited with status 1; starting a new one/), 'the worker exits; another is started';
    is $server->stop, 0;
};

done_testing;
