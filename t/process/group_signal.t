use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server);

# ^C in a terminal sends INT to the whole process group, and some
# supervisors send TERM to every process of a service: the master, the
# holder and the workers all get it at once.  The master must read the
# exits that follow as part of the stop: no error, nothing restarted.

for my $signal (qw(INT TERM)) {
    subtest "$signal to the process group" => sub {
        my $server = start_server(app_file => 't/apps/pid.psgi', options => ['--workers', 2]);
        $server->wait_for_log(qr/worker \d+ started/) for 1 .. 2;
        kill $signal, -$server->pid;
        is $server->wait_exit, 0, 'the master exits 0';
        my $log = $server->log;
        like $log, qr/received SIG$signal: finishing in-flight requests/, 'it stopped on the signal';
        unlike $log, qr/\[error\]/, 'no error' or diag $log;
        unlike $log, qr/starting a new one/, 'nothing restarted';
    };
}

done_testing;
