use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get gate);

# Signals that come before the master has set its handlers (the app still
# loading, the sockets opening) neither kill nor stop the server: a stop
# exits 0, the others are handled once the master runs.

my $lib = Serow::Test::root() . '/t/lib';

# serow with t/apps/gated_load.psgi, and the gate its loading waits on.
sub loading_server {
    my (@options) = @_;
    my $gate = gate();
    my $server = start_server(app_file => 't/apps/gated_load.psgi', options => \@options,
        env => { SEROW_TEST_GATE => $gate->fd,
                 PERL5LIB => join(':', $lib, grep { defined && length } $ENV{PERL5LIB}) });
    return ($server, $gate);
}

for my $sig (qw(TERM INT QUIT)) {
    subtest "SIG$sig while the app loads: exit 0 at once, nothing started" => sub {
        my ($server, $gate) = loading_server('--workers', 1);
        ok $server->wait_for_log(qr/app loading in pid \d+/), 'the app is loading' or return diag $server->log;
        $server->signal($sig);
        # The gate stays shut: the server does not wait for the app to load.
        is $server->wait_exit, 0, 'the server exits 0, not killed by the signal' or diag $server->log;
        like $server->log, qr/received SIG$sig before the server started: exiting/, 'saying why';
        unlike $server->log, qr/listening on|worker \d+ started/, 'having started nothing';
    };
}

subtest 'HUP and TTIN while the app loads: the server starts all the same, with one worker more' => sub {
    my ($server, $gate) = loading_server('--workers', 1);
    ok $server->wait_for_log(qr/app loading in pid \d+/), 'the app is loading' or return diag $server->log;
    $server->signal('HUP');  # its default action would end the process,
    $server->signal('TTIN'); # and this one's would stop it
    my $mark = $server->log_mark;
    $gate->open;
    ok $server->wait_for_log(qr/received SIGTTIN: 2 workers/), 'the master handles them once it runs'
        or return diag $server->log;
    # (The HUP, handled first, may have started one before the TTIN line.)
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, 2, undef, $mark)), 2, 'two workers start';
    is http_get($server, '/')->{status}, 200, 'and serve';
    is $server->stop, 0, 'a TERM now stops it as usual';
};

# From the master's start to its own handlers, Serow::Server::run queues the
# stop signals: they stop the master before it starts any process, and what
# it set up (the pid file) is undone.  A TERM queued just before run stands
# for one that lands in that window.
subtest 'a stop queued before the master runs: exit 0 before any child, the pid file removed' => sub {
    my $dir = File::Temp->newdir;
    my $pid_file = "$dir/serow.pid";
    my $root = Serow::Test::root();
    my $server = start_server(command => [$^X, "-I$root/blib/lib", "-I$root/blib/arch", '-e', <<'PERL', $pid_file]);
use Serow::Server; use Serow::Master;
my %early = Serow::Master->early_signal_handlers;
@SIG{keys %early} = values %early;
kill 'TERM', $$; # queued: its handler runs at the next statement
exit Serow::Server->new(workers => 1, pid_file => $ARGV[0])->run(sub { [200, [], ['x']] });
PERL
    is $server->wait_exit, 0, 'the server exits 0' or diag $server->log;
    like $server->log, qr/received SIGTERM: finishing in-flight requests.*\] stopped\n/s, 'as a stop';
    unlike $server->log, qr/worker \d+ started/, 'without starting a worker';
    ok !-e $pid_file, 'its pid file is gone';
};

done_testing;
