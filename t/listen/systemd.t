use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get);

# systemd socket activation: LISTEN_FDS sockets from fd 3 on, taken only
# when LISTEN_PID is this process. A small launcher plays systemd: it
# opens the sockets, moves them to fds 3 and 4, sets the variables and
# execs serow (exec keeps the pid, so LISTEN_PID=$$ names serow).

my $ROOT = Serow::Test::root();
my $dir = File::Temp->newdir;

my $launcher = q{
    use strict;
    use IO::Socket::IP;
    use IO::Socket::UNIX;
    use POSIX ();
    my ($pid_ok, $port, $path, @serow) = @ARGV;
    my $tcp = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => $port, Listen => 128,
        ReuseAddr => 1) or die "tcp: $@";
    my $unix = IO::Socket::UNIX->new(Local => $path, Listen => 128) or die "unix: $!";
    # Out of the way first: the sockets may already be fds 3 and 4.
    my ($t, $u) = (POSIX::dup(fileno $tcp), POSIX::dup(fileno $unix));
    POSIX::dup2($t, 3) // die;
    POSIX::dup2($u, 4) // die;
    my @keep; # handles on fds 3 and 4, kept open until the exec
    for my $fd (3, 4) {
        open(my $fh, '+<&=', $fd) or die;
        fcntl($fh, POSIX::F_SETFD(), 0) or die; # open across exec
        push @keep, $fh;
    }
    $ENV{LISTEN_FDS} = 2;
    $ENV{LISTEN_PID} = $pid_ok ? $$ : $$ + 1;
    exec @serow or die "exec: $!";
};

sub launch {
    my ($pid_ok, $port, $path, @options) = @_;
    return start_server(listen => 'none', command => [$^X, '-e', $launcher, $pid_ok, $port, $path,
        $^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch", "$ROOT/script/serow", @options, "$ROOT/t/apps/pid.psgi"]);
}

subtest 'LISTEN_FDS=2 with LISTEN_PID of serow: both sockets are served' => sub {
    my $port = empty_port();
    my $path = "$dir/a.sock";
    my $server = launch(1, $port, $path, '--workers', 2);
    ok $server->wait_for_log(qr/listening on http:\/\/127\.0\.0\.1:$port, \Q$path\E with 2 workers/),
        'serow takes fds 3 and 4' or return diag $server->log;
    like http_get({ port => $port }, '/')->{body}, qr/ server 127\.0\.0\.1:$port$/, 'TCP is served';
    is http_get({ path => $path }, '/')->{status}, 200, 'UNIX is served';
    is $server->stop, 0;
    ok -S $path, "a socket systemd made is not serow's to remove";
};

subtest 'LISTEN_PID of another process: the sockets are not taken, --listen is used' => sub {
    my ($port, $own) = (empty_port(), empty_port());
    $own = empty_port() while $own == $port;
    my $path = "$dir/b.sock";
    my $server = launch(0, $port, $path, '--listen', "127.0.0.1:$own", '--workers', 1);
    ok $server->wait_for_log(qr/listening on http:\/\/127\.0\.0\.1:$own with 1 workers/), 'serow opens its own socket'
        or return diag $server->log;
    ok wait_port({ port => $own, max_wait => 30 });
    is http_get({ port => $own }, '/')->{status}, 200, 'and serves it';
    is $server->stop, 0;
};

done_testing;
