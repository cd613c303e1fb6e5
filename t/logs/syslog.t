use strict;
use warnings;
use Test::More;
use File::Temp ();
use IO::Select ();
use IO::Socket::UNIX ();
use Socket qw(SOCK_DGRAM);
use Time::HiRes ();
use lib 't/lib';
use Serow::Test qw(start_server http_get run_serow wait_until);
use Serow::Test::Common qw(READ_TIMEOUT);

# --error-log syslog[:FACILITY]: every line, Perl's and C's, is a datagram
# on the syslog socket (--syslog-socket; here one the test binds, as a
# syslog daemon's /dev/log), "<PRI>Mmm dd hh:mm:ss serow[PID]: [level] message",
# PRI being facility * 8 + the level's priority.  Nothing goes to standard
# error; with no daemon at the socket, lines go there rather than nowhere.

my $ROOT = Serow::Test::root();
my $dir = File::Temp->newdir;
my %FACILITY = (daemon => 3, local3 => 19);
my %PRIORITY = (error => 3, warn => 4, info => 6, debug => 7);

my $app = sub {
    my ($env) = @_;
    die "the app failed\n" if $env->{PATH_INFO} eq '/die';
    return [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
};

sub receiver {
    my ($path) = @_;
    my $sock = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $path) or die "cannot bind $path: $!";
    return $sock;
}

# The datagrams that came until one matches $re (or the time is up).
sub receive_until {
    my ($sock, $re, $got) = @_;
    my $deadline = Time::HiRes::time + READ_TIMEOUT;
    my $sel = IO::Select->new($sock);
    until (grep { $_ =~ $re } @$got) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !$sel->can_read($left);
        defined $sock->recv(my $packet, 65536) or return 0;
        push @$got, $packet;
    }
    return 1;
}

my $HEAD = qr/[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d serow\[(\d+)\]: /;

subtest 'syslog:local3, at debug' => sub {
    my $path = "$dir/log.sock";
    my $sock = receiver($path);
    my $server = start_server(app => $app, options => ['--workers', 1, '--log-level', 'debug',
        '--error-log', 'syslog:local3', '--syslog-socket', $path]);
    my @got;
    ok receive_until($sock, qr/worker \d+ started/, \@got), "the worker's line came" or diag explain \@got;
    is http_get($server, '/die')->{status}, 500, 'the app dies';
    ok receive_until($sock, qr{GET /die}, \@got), 'the error came';
    # The holder starts beside the worker: its line may come after both.
    ok receive_until($sock, qr/connection holder \d+ started/, \@got), "the holder's line came"
        or diag explain \@got;
    my $pri = sub { $FACILITY{local3} * 8 + $PRIORITY{ $_[0] } };
    my $master = $server->pid;
    ok((grep { /\A<${\ $pri->('info')}>$HEAD\[info\] Serow .* listening on/ && $1 == $master } @got),
        "the master's start-up line: local3.info, its pid in the tag") or diag explain \@got;
    ok((grep { /\A<${\ $pri->('debug')}>$HEAD\[debug\] connection holder (\d+) started/ && $1 == $2 } @got),
        "the connection holder's (C): local3.debug") or diag explain \@got;
    ok((grep { /\A<${\ $pri->('error')}>$HEAD\[error\] GET \/die: the app died: the app failed\z/ } @got),
        "the worker's error: local3.err, no newline at its end") or diag explain \@got;
    is $server->stop, 0, 'stops cleanly';
    ok receive_until($sock, qr/\[info\] stopped\z/, \@got), 'the last line came too';
    $server->log_mark; # (all of it read)
    unlike $server->log, qr/\[(?:info|error|debug)\]/, 'nothing on standard error';
};

subtest 'syslog: the daemon facility, at info' => sub {
    my $path = "$dir/daemon.sock";
    my $sock = receiver($path);
    my $server = start_server(app => $app, options => ['--workers', 1, '--error-log', 'syslog',
        '--syslog-socket', $path]);
    my @got;
    my $info = $FACILITY{daemon} * 8 + $PRIORITY{info};
    ok receive_until($sock, qr/\A<$info>$HEAD\[info\] worker \d+ started\z/, \@got), 'daemon.info'
        or diag explain \@got;
    is $server->stop, 0;
    ok receive_until($sock, qr/\[info\] stopped\z/, \@got), 'the last line came too';
    is scalar(grep { /\[debug\]/ } @got), 0, 'no debug line' or diag explain \@got;
};

subtest 'no syslog daemon at the socket: standard error' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--error-log', 'syslog',
        '--syslog-socket', "$dir/nobody.sock"]);
    ok $server->wait_for_log(qr/^\[[^]]+\] \[info\] \[pid \d+\] worker \d+ started$/m), 'the lines are not lost'
        or diag $server->log;
    is $server->stop, 0;
};

subtest 'bad values' => sub {
    my ($status, $out) = run_serow('--error-log', 'syslog:mail', "$ROOT/t/apps/pid.psgi");
    is $status, 2, 'a facility Serow does not log to: exits 2';
    like $out, qr/--error-log: 'syslog:mail': 'mail' is not a syslog facility/, 'naming the option';
    ($status, $out) = run_serow('--error-log', 'syslog', '--syslog-socket', '/' . ('x' x 200),
        '--listen', '127.0.0.1:0', "$ROOT/t/apps/pid.psgi");
    is $status, 2, 'a socket path too long: exits 2';
    like $out, qr/--syslog-socket: .* is too long/, 'naming the option';
};

done_testing;
