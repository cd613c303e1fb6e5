package Serow::Bench::WebSocket;
use strict;
use warnings;
use 5.020;

# bench/websocket's servers and client: Serow holding the WebSockets itself
# (--grip, --publish-listen), Pushpin in front of an origin (Serow without
# --grip: the same WebSocket-over-HTTP app, its events carried by Pushpin),
# and Mojolicious's own servers with a WebSocket echo app written for it:
# prefork with 4 workers, and one process (daemon), whose in-process list of
# connections is the only publish to all that Mojolicious offers by itself.
# Each server is started with its upgrade path and, where a publish reaches
# every connection, its publish address and request; the client
# (bench/websocket-client.c) is the same for all.  What is measured and
# reported is in bench/websocket.pl.

use Cwd ();
use File::Basename ();
use File::Path ();
use IPC::Open2 ();
use JSON::PP ();
use Serow::Bench::Holding qw(stop_server spawn tree pushpin_config write_file);
use Serow::Bench::Process qw(free_port wait_ready);
use Serow::Bench::Util qw(slurp);

use Exporter 'import';
our @EXPORT_OK = qw(@SERVERS %TITLE %NO_PUBLISH start_server stop_server memory cpu missing version client);

our @SERVERS = qw(serow pushpin mojo mojo1);
our %TITLE = (serow => 'Serow', pushpin => 'Pushpin', mojo => 'Mojolicious prefork',
    mojo1 => 'Mojolicious, one process');
# Why a publish to every connection is not measured, by server.
our %NO_PUBLISH = (mojo => 'Mojolicious has no publish between its workers: a publish reaches only the '
    . 'connections of the worker that took it (its users add Redis or PostgreSQL for this); measured in one '
    . 'process instead');

my $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../../../..');
my $CHANNEL = 'bench';
my $PSGI_APP = "$ROOT/bench/apps/websocket.psgi";
my $MOJO_APP = "$ROOT/bench/apps/websocket-mojo.pl";

# What is missing for a server to run here, or undef.
sub missing {
    my ($server) = @_;
    return undef if $server eq 'serow';
    if ($server eq 'pushpin') {
        for my $cmd (qw(pushpin condure zurl pushpin-proxy pushpin-handler)) {
            return "no $cmd command (apt-get install pushpin)" unless on_path($cmd);
        }
        return undef;
    }
    return 'no Mojolicious (apt-get install libmojolicious-perl)'
        unless system($^X, '-MMojolicious', '-e1') == 0;
    return undef;
}

sub on_path { my ($cmd) = @_; grep { -x "$_/$cmd" } split /:/, $ENV{PATH} // '' }

sub version {
    my ($server) = @_;
    return Serow::Bench::Holding::version($server) if $server ne 'mojo' && $server ne 'mojo1';
    my $v = `$^X -MMojolicious -e 'print \$Mojolicious::VERSION' 2>/dev/null` || '?';
    my $ev = `$^X -MEV -e 'print \$EV::VERSION' 2>/dev/null`;
    return "Mojolicious $v" . ($ev ? " (EV $ev)" : ' (no EV: its own poll loop)');
}

# The message published: "p NNNNNNNN" (the client puts the publish's number
# in for "@@SEQ@@@") and padding, $size bytes.
sub payload {
    my ($size) = @_;
    my $head = 'p @@SEQ@@@ ';
    return $head . ('x' x ($size > length $head ? $size - length $head : 0));
}

# GRIP's publish request (Serow's --publish-listen and Pushpin's endpoint),
# its item a ws-message.
sub grip_publish_request {
    my ($size) = @_;
    my $body = JSON::PP->new->canonical->encode({ items => [{ channel => $CHANNEL,
        formats => { 'ws-message' => { content => payload($size) } } }] });
    return http_post('/publish/', 'application/json', $body);
}

sub http_post {
    my ($path, $type, $body) = @_;
    return "POST $path HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: $type\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
}

# Starts $server; returns { server, procs => [handles], port, path,
# publish_port and publish_request (none where %NO_PUBLISH says why),
# commands => [command lines] }, or dies.
#   workers: Serow's, its origin's and Mojolicious prefork's worker count
#   message_size: bytes of each message
#   dir: where configurations and logs go
sub start_server {
    my ($server, %o) = @_;
    my $s = { server => $server, procs => [], commands => [], path => '/ws', port => free_port(), dir => $o{dir} };
    my $ok = eval {
        if ($server eq 'serow') {
            $s->{publish_port} = free_port();
            spawn($s, 'serow', serow_command(%o, listen => "127.0.0.1:$s->{port}",
                publish_listen => "127.0.0.1:$s->{publish_port}"));
            $s->{publish_request} = grip_publish_request($o{message_size});
        } elsif ($server eq 'pushpin') {
            $s->{publish_port} = free_port();
            my $origin_port = free_port();
            spawn($s, 'origin', serow_command(%o, listen => "127.0.0.1:$origin_port"));
            wait_ready($s->{procs}[0], "127.0.0.1:$origin_port", '/') or die "the origin did not answer\n";
            my $dir = "$o{dir}/pushpin-$s->{port}";
            File::Path::make_path("$dir/run", "$dir/log");
            # over_http: Pushpin speaks WebSocket-over-HTTP to the origin
            write_file("$dir/routes", "* 127.0.0.1:$origin_port,over_http\n");
            write_file("$dir/pushpin.conf", pushpin_config($dir, $s));
            spawn($s, 'pushpin', 'pushpin', '--config', "$dir/pushpin.conf");
            $s->{publish_request} = grip_publish_request($o{message_size});
        } else {
            # production mode (no development reloading or logging);
            # connections: no inactivity timeout, no cap below the count
            # held, no worker replaced after its 10,000th
            my @common = ('-m', 'production', '-l', "http://127.0.0.1:$s->{port}", '-c', 100_000, '-i', 0);
            if ($server eq 'mojo') {
                spawn($s, 'mojo', $^X, $MOJO_APP, 'prefork', @common, '-w', $o{workers}, '-a', 0);
            } else {
                spawn($s, 'mojo', $^X, $MOJO_APP, 'daemon', @common);
                $s->{publish_port} = $s->{port};
                $s->{publish_request} = http_post('/publish', 'text/plain', payload($o{message_size}));
            }
        }
        my $status = wait_ready($s->{procs}[-1], "127.0.0.1:$s->{port}", '/');
        die "$TITLE{$server} did not answer on 127.0.0.1:$s->{port}\n" unless defined $status;
        1;
    };
    if (!$ok) {
        my $err = $@;
        my $log = join '', map { slurp($_->{log}) // '' } @{ $s->{procs} };
        stop_server($s);
        die $err . ($log ? substr($log, -600) . "\n" : '');
    }
    return $s;
}

sub serow_command {
    my (%o) = @_;
    return ($^X, '-Mblib', 'script/serow', '--listen', $o{listen}, '--workers', $o{workers},
        ($o{publish_listen} ? ('--grip', '--publish-listen', $o{publish_listen}) : ()), $PSGI_APP);
}

# The server side's resident memory, in KiB, by part: all (every process of
# the server: for Pushpin its own and its origin's), and for Serow holder
# (its connection holder), for Pushpin pushpin and origin.
sub memory {
    my ($s) = @_;
    my $sum = sub { my $t = 0; $t += $_->{rss} for @_; $t };
    my %m;
    if ($s->{server} eq 'serow') {
        my @all = tree($s->{procs}[0]{pid});
        $m{holder} = $sum->(grep { $_->{cmd} eq 'serow connection holder' } @all);
        $m{all} = $sum->(@all);
    } elsif ($s->{server} eq 'pushpin') {
        $m{origin} = $sum->(tree($s->{procs}[0]{pid}));
        $m{pushpin} = $sum->(tree($s->{procs}[1]{pid}));
        $m{all} = $m{origin} + $m{pushpin};
    } else {
        $m{all} = $sum->(tree($s->{procs}[0]{pid}));
    }
    return \%m;
}

# The CPU time, in seconds, of all the server's processes (Pushpin's origin
# included: it answers every message).
sub cpu {
    my ($s) = @_;
    my $t = 0;
    $t += $_->{cpu} for map { tree($_->{pid}) } @{ $s->{procs} };
    return $t;
}

# The client, on CPU 1, for a started server: an object whose command($line)
# sends one command and returns its answer as a hash ("key value" lines;
# fanout_round lines in an array under rounds), and pid.
sub client {
    my ($binary, $s, %o) = @_;
    my @publish;
    if ($s->{publish_request}) {
        my $req = "$o{dir}/publish-$s->{port}.http";
        write_file($req, $s->{publish_request});
        @publish = ('--publish-port', $s->{publish_port}, '--publish-request', $req);
    }
    my @cmd = ('taskset', '-c', 1, $binary, '--port', $s->{port}, '--path', $s->{path}, '--conns', $o{conns},
        '--message-size', $o{message_size}, @publish, '--timeout', $o{timeout},
        '--open-timeout', $o{open_timeout}, '--batch', $o{batch}, '--open-rate', $o{open_rate} // 0);
    my $pid = IPC::Open2::open2(my $from, my $to, @cmd);
    return bless { pid => $pid, from => $from, to => $to }, 'Serow::Bench::Holding::Client';
}

1;
