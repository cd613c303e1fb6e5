use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use IO::Select ();
use Socket qw(AF_UNIX SOCK_DGRAM pack_sockaddr_un);
use Serow::Test qw(start_server raw_connect read_response http_get gate all_child_pids wait_until process_alive
                   READ_TIMEOUT);

# Under a Type=notify unit systemd sets NOTIFY_SOCKET: the master sends it
# READY=1 once its workers have started, RELOADING=1 then READY=1 around a
# HUP, STOPPING=1 on a stop, STATUS= lines, and WATCHDOG=1 when
# WATCHDOG_USEC asks for it.  A datagram socket in a temp dir stands in for
# systemd.

# A socket for the server to notify: a path in $dir, or '@name' (abstract).
sub notify_socket {
    my ($address) = @_;
    socket(my $socket, AF_UNIX, SOCK_DGRAM, 0) or die "socket: $!";
    (my $name = $address) =~ s/\A@/\0/;
    bind($socket, pack_sockaddr_un($name)) or die "bind $address: $!";
    return { socket => $socket, select => IO::Select->new($socket), seen => [] };
}

# The next message (one datagram, its lines), or undef after READ_TIMEOUT.
sub next_message {
    my ($listener, $timeout) = @_;
    return undef unless $listener->{select}->can_read($timeout // READ_TIMEOUT);
    defined recv($listener->{socket}, my $message, 4096, 0) or return undef;
    push @{ $listener->{seen} }, $message;
    return $message;
}

# Reads messages until one matches $re; returns it (undef if none came).
# WATCHDOG=1 may come between any two others: the test skips it here.
sub wait_for_message {
    my ($listener, $re, $skip) = @_;
    while (defined(my $message = next_message($listener))) {
        return $message if $message =~ $re;
        next if $message =~ /\AWATCHDOG=1\n\z/;
        next if $skip && $message =~ $skip;
        # Anything else out of order is a failure of the sequence.
        diag "unexpected message: $message";
        return undef;
    }
    return undef;
}

# Whatever runs this test may itself be under systemd.
# An app file rewritten as a deploy does: whole, then renamed over the old.
sub replace_file {
    my ($file, $text) = @_;
    open my $fh, '>', "$file.new" or die $!;
    print {$fh} $text;
    close $fh;
    rename "$file.new", $file or die $!;
}

delete @ENV{qw(NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID)};

my $STATUS = qr/\ASTATUS=\d+ workers: \d+ busy, \d+ idle; \d+ connections queued, \d+ idle\n\z/;

# The app says what it sees of systemd's variables.
my $app = sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/plain'], [join ',', map { $ENV{$_} // 'unset' }
        qw(NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID)]];
};

subtest 'READY=1, STATUS=, RELOADING=1 and READY=1 around a HUP, STOPPING=1' => sub {
    my $dir = File::Temp->newdir;
    my $systemd = notify_socket("$dir/notify");
    my $server = start_server(app => $app, options => ['--workers', 2],
        env => { NOTIFY_SOCKET => "$dir/notify" });

    ok wait_for_message($systemd, qr/\AREADY=1\n\z/), 'READY=1' or return diag $server->log;
    # The master's children: the holder and two workers, all forked before it.
    cmp_ok scalar(my @children = all_child_pids($server->pid)), '>=', 3, 'sent once the workers and the holder run';
    like next_message($systemd), $STATUS, 'then STATUS=';
    is http_get($server, '/')->{body}, 'unset,unset,unset',
        'the app sees no NOTIFY_SOCKET, WATCHDOG_USEC or WATCHDOG_PID';

    my $mark = $server->log_mark;
    $server->signal('HUP');
    my $reloading = wait_for_message($systemd, qr/\ARELOADING=1\n/, $STATUS);
    ok $reloading, 'RELOADING=1 on HUP' or return diag $server->log;
    like $reloading, qr/\ARELOADING=1\nMONOTONIC_USEC=[1-9][0-9]*\n\z/, 'with MONOTONIC_USEC=';
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/, $STATUS), 'READY=1 again';
    my @new = $server->wait_for_log_all(qr/worker (\d+) started/, 2, undef, $mark);
    is scalar(@new), 2, 'the new workers started' or diag $server->log;

    $server->signal('TERM');
    ok wait_for_message($systemd, qr/\ASTOPPING=1\n\z/, $STATUS), 'STOPPING=1 on TERM';
    is $server->wait_exit, 0, 'the server exits 0';
};

subtest 'STATUS= says how many workers are busy' => sub {
    my $dir = File::Temp->newdir;
    my $systemd = notify_socket("$dir/notify");
    my $gate = gate();
    my $server = start_server(app => sub {
        $gate->wait;
        return [200, ['Content-Type' => 'text/plain'], ['done']];
    }, options => ['--workers', 2], env => { NOTIFY_SOCKET => "$dir/notify" });
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/), 'READY=1' or return diag $server->log;
    my $client = raw_connect($server);
    syswrite $client, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ok wait_for_message($systemd, qr/\ASTATUS=2 workers: 1 busy, 1 idle;/, $STATUS),
        'STATUS=2 workers: 1 busy, 1 idle' or diag explain $systemd->{seen};
    $gate->open(1);
    is read_response($client)->{body}, 'done', 'the request is answered';
    ok wait_for_message($systemd, qr/\ASTATUS=2 workers: 0 busy, 2 idle;/, $STATUS), 'and idle again';
    is $server->stop, 0;
};

subtest 'WATCHDOG=1 when WATCHDOG_USEC is set; an abstract socket' => sub {
    my $name = "\@serow-notify-test-$$";
    my $systemd = notify_socket($name);
    # 0.2 s: pings every 0.1 s.
    my $server = start_server(app => $app, options => ['--workers', 1],
        env => { NOTIFY_SOCKET => $name, WATCHDOG_USEC => 200_000 });
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/), 'READY=1 on an abstract socket'
        or return diag $server->log;
    my $pings = 0;
    while (defined(my $message = next_message($systemd))) {
        last if $message eq "WATCHDOG=1\n" && ++$pings == 3;
    }
    is $pings, 3, 'WATCHDOG=1, again and again';
    is http_get($server, '/')->{body}, 'unset,unset,unset', 'the app sees none of the variables';
    is $server->stop, 0;
};

subtest 'no WATCHDOG=1 when WATCHDOG_PID names another process' => sub {
    my $dir = File::Temp->newdir;
    my $systemd = notify_socket("$dir/notify");
    my $server = start_server(app => $app, options => ['--workers', 1],
        env => { NOTIFY_SOCKET => "$dir/notify", WATCHDOG_USEC => 200_000, WATCHDOG_PID => 1 });
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/), 'READY=1' or return diag $server->log;
    $server->signal('TERM');
    ok wait_for_message($systemd, qr/\ASTOPPING=1\n\z/, $STATUS), 'STOPPING=1';
    is $server->wait_exit, 0;
    ok !grep({ /WATCHDOG/ } @{ $systemd->{seen} }), 'and no WATCHDOG=1 in between';
};

subtest 'serow: the app does not see NOTIFY_SOCKET when it loads either' => sub {
    my $dir = File::Temp->newdir;
    my $systemd = notify_socket("$dir/notify");
    open my $fh, '>', "$dir/app.psgi" or die $!;
    print {$fh} 'my $at_load = $ENV{NOTIFY_SOCKET} // "unset";'
        . ' sub { [200, ["Content-Type" => "text/plain"], ["$at_load," . ($ENV{NOTIFY_SOCKET} // "unset")]] }';
    close $fh;
    my $server = start_server(app_file => "$dir/app.psgi", options => ['--workers', 1],
        env => { NOTIFY_SOCKET => "$dir/notify" });
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/), 'READY=1' or return diag $server->log;
    is http_get($server, '/')->{body}, 'unset,unset', 'unset when the app loads and when it runs';
    is $server->stop, 0;
};

subtest 'serow FILE: READY=1 after a HUP once the new generation has started, or failed to load' => sub {
    my $dir = File::Temp->newdir;
    my $systemd = notify_socket("$dir/notify");
    my $file = "$dir/app.psgi";
    my $write = sub { replace_file($file, $_[0]) };
    $write->('sub { [200, [], ["v1"]] }');
    my $server = start_server(app_file => $file, options => ['--workers', 2],
        env => { NOTIFY_SOCKET => "$dir/notify" });
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/), 'READY=1' or return diag $server->log;
    my @old = $server->wait_for_log_all(qr/worker (\d+) started/, 2);

    $write->("my \$x = ;\n");
    my $mark = $server->log_mark;
    $server->signal('HUP');
    ok wait_for_message($systemd, qr/\ARELOADING=1\n/, $STATUS), 'RELOADING=1 on HUP' or return diag $server->log;
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/, $STATUS), 'READY=1 again';
    like $server->log, qr/generation 2 could not load the app/, 'sent once the new code had failed to load';
    is http_get($server, '/')->{body}, 'v1', 'the old code serves';

    $write->('sub { [200, [], ["v3"]] }');
    $mark = $server->log_mark;
    $server->signal('HUP');
    ok wait_for_message($systemd, qr/\ARELOADING=1\n/, $STATUS), 'RELOADING=1 on the next HUP';
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/, $STATUS), 'READY=1 again';
    # (Each worker publishes its pid before it logs "started".)
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, 2, undef, $mark)), 2,
        'sent once both new workers had started';
    # The old workers are asked to leave once the new ones are ready: until
    # they have, one of them may still take a request.
    ok wait_until(sub { !grep { process_alive($_) } @old }), 'the old workers have left';
    is http_get($server, '/')->{body}, 'v3', 'the new code serves';
    is $server->stop, 0;
};

subtest '--lazy-app: READY=1 after a HUP whose new workers cannot load the file' => sub {
    my $dir = File::Temp->newdir;
    my $systemd = notify_socket("$dir/notify");
    my $file = "$dir/app.psgi";
    my $write = sub { replace_file($file, $_[0]) };
    $write->('sub { [200, [], ["v1"]] }');
    my $server = start_server(app_file => $file, options => ['--workers', 1, '--lazy-app'],
        env => { NOTIFY_SOCKET => "$dir/notify" });
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/), 'READY=1' or return diag $server->log;
    $write->("my \$x = ;\n");
    my $mark = $server->log_mark;
    $server->signal('HUP');
    ok wait_for_message($systemd, qr/\ARELOADING=1\n/, $STATUS), 'RELOADING=1 on HUP' or return diag $server->log;
    ok wait_for_message($systemd, qr/\AREADY=1\n\z/, $STATUS), 'READY=1 again';
    like $server->log, qr/cannot load \Q$file\E/, 'sent once a new worker had failed to load it';
    is http_get($server, '/')->{body}, 'v1', 'the old worker serves';
    is $server->stop, 0;
};

subtest 'without NOTIFY_SOCKET, nothing is sent' => sub {
    my $dir = File::Temp->newdir;
    my $systemd = notify_socket("$dir/notify");
    # The socket exists, but the server is not told about it.
    my $server = start_server(app => $app, options => ['--workers', 1], env => { WATCHDOG_USEC => 200_000 });
    is http_get($server, '/')->{body}, 'unset,unset,unset', 'the server answers';
    is $server->stop, 0;
    is next_message($systemd, 0), undef, 'and sent nothing';
};

done_testing;
