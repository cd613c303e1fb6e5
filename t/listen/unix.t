use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until);

# serow opens a UNIX socket itself (--listen /path), with the mode asked for,
# serves on it and removes it when it stops.

my $dir = File::Temp->newdir;
my $path = "$dir/app.sock";

sub serve {
    my (@options) = @_;
    return start_server(listen => 'none', app_file => 't/apps/pid.psgi',
        options => ['--listen', $path, '--workers', 2, @options]);
}

subtest '--listen /path --socket-mode 0660' => sub {
    my $server = serve('--socket-mode', '0660');
    ok $server->wait_for_log(qr/listening on \Q$path\E/), 'the server says where it listens'
        or diag $server->log;
    ok -S $path, 'the socket exists';
    is sprintf('%04o', (stat $path)[2] & 07777), '0660', 'with mode 0660';
    my $res = http_get({ path => $path }, '/');
    is $res && $res->{status}, 200, 'a request on it is answered';
    like $res && $res->{body}, qr/^pid \d+ /;
    is $server->stop, 0, 'the server stops cleanly';
    ok !-e $path, 'and removes its socket';
};

subtest 'other modes are applied as given' => sub {
    for my $mode (qw(0600 0666 700)) {
        my $server = serve('--socket-mode', $mode);
        ok $server->wait_for_log(qr/listening on/), "started with --socket-mode $mode" or diag $server->log;
        is sprintf('%o', (stat $path)[2] & 07777), sprintf('%o', oct $mode), "mode $mode";
        is $server->stop, 0;
    }
};

subtest 'a socket file left over by a crash is replaced' => sub {
    require IO::Socket::UNIX;
    my $stale = IO::Socket::UNIX->new(Local => $path, Listen => 1) or die "$path: $!";
    close $stale; # the file stays, nobody listens
    ok -S $path, 'a stale socket file is there';
    my $server = serve();
    ok $server->wait_for_log(qr/listening on \Q$path\E/) or diag $server->log;
    is http_get({ path => $path }, '/')->{status}, 200, 'served on the new socket';
    is $server->stop, 0;
};

subtest 'a socket another server answers on is not taken over' => sub {
    my $first = serve();
    ok $first->wait_for_log(qr/listening on \Q$path\E/) or diag $first->log;
    my $second = serve();
    my $status = $second->wait_exit;
    ok defined $status && $status >> 8 == 2, 'the second server exits with status 2';
    like $second->log, qr/\Q$path\E is in use by another server/, 'and says why';
    is http_get({ path => $path }, '/')->{status}, 200, 'the first one still serves';
    is $first->stop, 0;
};

done_testing;
