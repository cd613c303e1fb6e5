use strict;
use warnings;
use Test::More;
use File::Temp ();
use IO::Socket::IP ();
use Net::EmptyPort qw(wait_port);
use POSIX ();
use lib 't/lib';
use Serow::Test qw(start_server http_get wait_until all_child_pids is_connection_holder
                   process_alive run_serow);

# --user and --group: the sockets are opened first (so a port below 1024
# works), then every worker and the connection holder switch to the user;
# the master keeps its ids.  (That the holder can still take a busy
# worker's connections is t/keepalive/steal_from_busy_worker.t.)

plan skip_all => 'switching users needs root' if $> != 0;
my @nobody = getpwnam('nobody') or plan skip_all => 'no user nobody';
my @nogroup = getgrnam('nogroup') or plan skip_all => 'no group nogroup';
my ($uid, $gid) = ($nobody[2], $nogroup[2]);

my $ROOT = Serow::Test::root();
my $dir = File::Temp->newdir;
chmod 0777, "$dir"; # the app writes here as nobody

# The app writes a file where it is told, and says who it is.
my $app = sub {
    my ($env) = @_;
    my $path = "$dir/" . substr($env->{PATH_INFO}, 1);
    open(my $fh, '>', $path) or return [500, [], ["cannot write $path: $!"]];
    close $fh;
    return [200, ['Content-Type' => 'text/plain'], ["$< $> $( $)"]];
};

# "real effective saved filesystem" uid and gid of a process.
sub ids {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/status") or return {};
    my %ids;
    while (my $line = <$fh>) { $ids{$1} = join " ", split " ", $2 if $line =~ /\A(Uid|Gid):\s*(.*)/ }
    return \%ids;
}

# A free port below 1024, or undef.
sub low_port {
    for my $port (reverse 900 .. 1023) {
        my $probe = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => $port, Listen => 1,
            ReuseAddr => 1) or next;
        return $port;
    }
    return undef;
}

subtest '--user nobody --group nogroup: workers and holder switch, the master does not' => sub {
    my $port = low_port() or plan skip_all => 'no free port below 1024';
    my $path = "$dir/serow.sock";
    my $server = start_server(listen => 'none', app => $app, options => ['--workers', 2,
        '--listen', "127.0.0.1:$port", '--listen', $path, '--user', 'nobody', '--group', 'nogroup']);
    ok wait_port({ port => $port, max_wait => 30 }), "it listens on port $port, below 1024"
        or return diag $server->log;
    ok $server->wait_for_log(qr/workers run as nobody:nogroup/), 'the banner says who the workers are';
    my $res = http_get({ port => $port }, '/from-tcp');
    is $res->{status}, 200, 'a request is answered' or diag $res->{body};
    # $( and $) are the gid followed by the supplementary groups: only nogroup.
    is $res->{body}, "$uid $uid $gid $gid $gid $gid", 'the app runs as nobody:nogroup, real and effective, in no other group';
    my @st = stat "$dir/from-tcp";
    is_deeply [@st[4, 5]], [$uid, $gid], 'a file the app writes belongs to nobody:nogroup';
    is_deeply [(stat $path)[4, 5]], [$uid, $gid], 'so does the UNIX socket Serow made';
    is http_get({ path => $path }, '/from-unix')->{status}, 200, 'which is served';

    # (the second worker may still be starting when the first has answered,
    # and a child forked by the master drops its privileges just after the
    # fork: wait until each has, or the time is up)
    my $nobody = { Uid => "$uid $uid $uid $uid", Gid => "$gid $gid $gid $gid" };
    my @children;
    wait_until(sub {
        @children = all_child_pids($server->pid);
        return 0 unless @children == 3;
        for my $pid (@children) {
            my $ids = ids($pid);
            return 0 if ($ids->{Uid} // '') ne $nobody->{Uid} || ($ids->{Gid} // '') ne $nobody->{Gid};
        }
        return 1;
    });
    is scalar(@children), 3, 'two workers and the holder';
    for my $pid (@children) {
        my $what = is_connection_holder($pid) ? 'holder' : 'worker';
        is_deeply ids($pid), $nobody,
            "$what $pid: real, effective, saved and filesystem ids are nobody:nogroup";
    }
    is ids($server->pid)->{Uid}, '0 0 0 0', 'the master stays root (it removes what it made when it stops)';

    # The kernel's parent-death signal is cleared by a change of uid: it is
    # set again after the switch, so the workers still leave with the master.
    kill 'KILL', $server->pid;
    ok wait_until(sub { !grep { process_alive($_) } @children }), 'workers and holder leave when the master is killed';
};

subtest '--user alone takes the user\'s group' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--user', 'nobody']);
    my $res = http_get($server, '/user-alone');
    is $res->{status}, 200;
    my ($real, $effective) = split ' ', $res->{body};
    is "$real $effective", "$uid $uid", 'uid of nobody';
    is((stat "$dir/user-alone")[5], $nobody[3], "group of nobody's passwd entry");
    is $server->stop, 0, 'clean stop';
};

# The worker that answers /metrics reads its siblings' /proc: as nobody, the
# root master's descriptors cannot be listed (/proc/PID/fd is its owner's),
# and its open_fds sample is left out rather than the page failing.
subtest '--metrics-path with --user: the process metrics, less the master\'s descriptors' => sub {
    require Serow::Test::Prometheus;
    my $server = start_server(app => $app, options => ['--workers', 1, '--user', 'nobody', '--group', 'nogroup',
        '--metrics-path', '/metrics']);
    my $m;
    ok wait_until(sub {
        my $res = http_get($server, '/metrics') or return 0;
        $m = eval { Serow::Test::Prometheus::parse($res->{body}) } or return 0;
        # The holder starts beside the worker (and drops its privileges
        # itself): a first scrape may come before it has.
        my %roles = map { $_->{labels}{role} => 1 } @{ $m->{families}{serow_process_open_fds}{samples} || [] };
        return $roles{worker} && $roles{holder};
    }), 'the metrics parse, with the worker\'s and the holder\'s descriptors' or return;
    my %fds = map { $_->{labels}{role} => $_->{value} } @{ $m->{families}{serow_process_open_fds}{samples} };
    ok !exists $fds{master}, 'no master sample of open_fds';
    cmp_ok $fds{holder}, '>', 0, "the holder's, a sibling of the same user";
    my %rss = map { $_->{labels}{role} => $_->{value} }
        @{ $m->{families}{serow_process_resident_memory_bytes}{samples} };
    cmp_ok $rss{master}, '>', 0, "the master's memory (/proc/PID/stat is anyone's to read)";
    is $server->stop, 0;
};

subtest 'workers that can no longer read a directory of @INC still serve' => sub {
    # An app started from a directory only root may enter (a home, a
    # build tree): what the server needs must be loaded before the switch.
    my $private = File::Temp->newdir;
    chmod 0700, "$private";
    local @INC = ("$private", @INC);
    my $server = start_server(app => $app, options => ['--workers', 1, '--user', 'nobody']);
    my $res = http_get($server, '/private-inc');
    is $res && $res->{status}, 200, 'a request is answered' or diag $server->log;
    unlike $server->log, qr/worker failed/, 'no worker failed';
    is $server->stop, 0;
};

subtest 'through plackup, with Starman\'s names' => sub {
    my $plackup = Serow::Test::find_command('plackup') or plan skip_all => 'no plackup (libplack-perl)';
    my $port = Net::EmptyPort::empty_port();
    my $pid_file = "$dir/plackup.pid";
    my $server = start_server(listen => 'none', command => [$^X, '-Mblib', $plackup, '-s', 'Serow',
        '-E', 'deployment', '--port', $port, '--workers', 1, '--user', 'nobody', '--group', 'nogroup',
        '--pid', $pid_file, "$ROOT/t/apps/pid.psgi"]);
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    ok $server->wait_for_log(qr/workers run as nobody:nogroup; pid file \Q$pid_file\E/), 'user and pid file taken'
        or diag $server->log;
    my ($worker) = $server->wait_for_log(qr/worker (\d+) started/) =~ /(\d+)/;
    is ids($worker)->{Uid}, "$uid $uid $uid $uid", 'the worker runs as nobody';
    is $server->stop, 0;
    ok !-e $pid_file, 'the pid file is removed';
};

subtest 'wrong names are errors naming the option, before anything is bound' => sub {
    my ($status, $text) = run_serow('--user', 'no-such-user-serow', '--listen', '127.0.0.1:0', "$ROOT/eg/hello.psgi");
    is $status, 2;
    like $text, qr/--user: no such user 'no-such-user-serow'/;
    ($status, $text) = run_serow('--user', 'nobody', '--group', 'no-such-group-serow', '--listen', '127.0.0.1:0',
        "$ROOT/eg/hello.psgi");
    is $status, 2;
    like $text, qr/--group: no such group 'no-such-group-serow'/;
    ($status, $text) = run_serow('--user', 4242424, '--listen', '127.0.0.1:0', "$ROOT/eg/hello.psgi");
    is $status, 2;
    like $text, qr/--user: uid 4242424 has no entry in the user database: give --group too/;
};

# serow FILE --user: the app is loaded as the user, never as root (Starman's
# --preload-app --user loads it as root).  A file it needs that only root
# may read (Debian's RT_SiteConfig.pm is 0600 root) fails the load; the
# error names the file and the user.
subtest 'an app that needs a file only root may read: the error says which, and as whom' => sub {
    my $app_dir = File::Temp->newdir;
    chmod 0755, "$app_dir";
    mkdir "$app_dir/lib" or die;
    Serow::Test::write_file_whole("$app_dir/lib/SiteConfig.pm", "package SiteConfig; our \$secret = 'root only'; 1;\n");
    chmod 0600, "$app_dir/lib/SiteConfig.pm";
    Serow::Test::write_file_whole("$app_dir/app.psgi",
        "use lib '$app_dir/lib'; use SiteConfig; sub { [200, [], ['ok']] };\n");
    my $server = start_server(app_file => "$app_dir/app.psgi", options => ['--workers', 1, '--user', 'nobody']);
    ok $server->wait_for_log(qr/cannot load \Q$app_dir\E\/app\.psgi: .*Permission denied/), 'the load fails'
        or return diag $server->log;
    ok $server->wait_for_log(qr{serow loads the app as the --user it switched to, never as root: }
        . qr{\Q$app_dir\E/lib/SiteConfig\.pm is not readable by nobody}), 'naming the file and the user'
        or diag $server->log;
    $server->stop;
};

subtest 'without root, switching is an error' => sub {
    my $pid = open(my $out, '-|') // die;
    if (!$pid) {
        open(STDERR, '>&', \*STDOUT);
        POSIX::setgid($gid);
        POSIX::setuid($uid) or die "setuid: $!";
        # A tree in a directory only root may enter (tools/test-sanitized's)
        # cannot be run as nobody.
        print("unreadable\n"), POSIX::_exit(3) unless -r "$ROOT/script/serow" && -r "$ROOT/blib/lib/Serow.pm";
        exec $^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch", "$ROOT/script/serow", '--user', 'root',
            '--listen', '127.0.0.1:0', "$ROOT/eg/hello.psgi";
        die "exec: $!";
    }
    my $text = do { local $/; <$out> };
    close $out;
    plan skip_all => "nobody cannot read $ROOT" if $? >> 8 == 3 && $text eq "unreadable\n";
    is $? >> 8, 2;
    like $text, qr/--user: switching to 'root' needs root \(serow runs as uid $uid\)/;
};

done_testing;
