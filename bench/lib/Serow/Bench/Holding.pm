package Serow::Bench::Holding;
use strict;
use warnings;
use 5.020;

# bench/holding's servers and client: Serow holding server-sent-event streams
# itself (--publish-listen), nginx with Nchan, and Pushpin in front of an
# origin (Serow without --grip, the same app, whose Grip-* headers pass to
# Pushpin).  Each server is started with its subscribe address, its publish
# address and the HTTP request that publishes one message there; the client
# (bench/holding-client.c) is the same for all three.  What is measured and
# reported is in bench/holding.pl.

use Cwd ();
use File::Basename ();
use File::Path ();
use IPC::Open2 ();
use JSON::PP ();
use POSIX ();
use Serow::Bench::Peers qw(start_pinned nginx_command);
use Serow::Bench::Process qw(free_port stop wait_ready);
use Serow::Bench::Util qw(slurp write_file serow_version);

use Exporter 'import';
our @EXPORT_OK = qw(@SERVERS %TITLE start_server stop_server memory cpu missing version client
    spawn tree pushpin_config write_file);

our @SERVERS = qw(serow nchan pushpin);
our %TITLE = (serow => 'Serow', nchan => 'nginx + Nchan', pushpin => 'Pushpin');

my $ROOT = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../../../..');
my $NCHAN_MODULE = '/usr/lib/nginx/modules/ngx_nchan_module.so';
my $CHANNEL = 'bench';

# What is missing for a server to run here, or undef.
sub missing {
    my ($server) = @_;
    return undef if $server eq 'serow';
    if ($server eq 'nchan') {
        return 'no nginx command (apt-get install nginx)' unless on_path('nginx');
        return "no $NCHAN_MODULE (apt-get install libnginx-mod-nchan)" unless -e $NCHAN_MODULE;
        return undef;
    }
    for my $cmd (qw(pushpin condure zurl pushpin-proxy pushpin-handler)) {
        return "no $cmd command (apt-get install pushpin)" unless on_path($cmd);
    }
    return undef;
}

sub on_path { my ($cmd) = @_; grep { -x "$_/$cmd" } split /:/, $ENV{PATH} // '' }

sub version {
    my ($server) = @_;
    return serow_version() if $server eq 'serow';
    if ($server eq 'nchan') {
        (my $nginx = `nginx -v 2>&1` // '?') =~ s/^nginx version: //;
        chomp $nginx;
        my $nchan = `dpkg-query -W -f '\${Version}' libnginx-mod-nchan 2>/dev/null` || '?';
        return "$nginx, Nchan $nchan (libnginx-mod-nchan)";
    }
    my $v = `pushpin --version 2>/dev/null` || 'pushpin ?';
    chomp $v;
    my $condure = `dpkg-query -W -f '\${Version}' condure 2>/dev/null` || '?';
    return "$v (condure $condure, zurl)";
}

# The message published: an SSE event's data, $size bytes after "data: ",
# beginning with the publish's number (the client puts it in for "@@SEQ@@@").
sub payload {
    my ($size) = @_;
    my $head = '@@SEQ@@@ ';
    return $head . ('x' x ($size > length $head ? $size - length $head : 0));
}

# GRIP's publish request (Serow's --publish-listen and Pushpin's endpoint):
# the item's http-stream content is the whole SSE event.
sub grip_publish_request {
    my ($size) = @_;
    my $body = JSON::PP->new->canonical->encode({ items => [{ channel => $CHANNEL,
        formats => { 'http-stream' => { content => 'data: ' . payload($size) . "\n\n" } } }] });
    return http_post('/publish/', 'application/json', $body);
}

# Nchan's: the body is the message, which its eventsource subscriber frames
# as "id: ...\ndata: BODY\n\n".
sub nchan_publish_request {
    my ($size) = @_;
    return http_post("/publish?channel=$CHANNEL", 'text/plain', payload($size));
}

sub http_post {
    my ($path, $type, $body) = @_;
    return "POST $path HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: $type\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
}

# Starts $server; returns { server, procs => [handles], port, publish_port,
# path, publish_request, commands => [command lines] }, or dies.
#   workers: Serow's (and the origin's) worker count
#   message_size: bytes of each event's data
#   dir: where configurations and logs go
sub start_server {
    my ($server, %o) = @_;
    my $s = { server => $server, procs => [], commands => [], path => "/sub?channel=$CHANNEL",
        port => free_port(), publish_port => free_port(), dir => $o{dir} };
    my $ok = eval {
        if ($server eq 'serow') {
            spawn($s, 'serow', serow_command(%o, listen => "127.0.0.1:$s->{port}",
                publish_listen => "127.0.0.1:$s->{publish_port}"));
            $s->{publish_request} = grip_publish_request($o{message_size});
        } elsif ($server eq 'nchan') {
            spawn($s, 'nginx', nginx_command('bench/holding', "$o{dir}/nchan-$s->{port}",
                top => "load_module $NCHAN_MODULE;\n", http => nchan_http($s)));
            $s->{publish_request} = nchan_publish_request($o{message_size});
        } else {
            my $origin_port = free_port();
            spawn($s, 'origin', serow_command(%o, listen => "127.0.0.1:$origin_port"));
            wait_ready($s->{procs}[0], "127.0.0.1:$origin_port", '/') or die "the origin did not answer\n";
            my $dir = "$o{dir}/pushpin-$s->{port}";
            File::Path::make_path("$dir/run", "$dir/log");
            write_file("$dir/routes", "* 127.0.0.1:$origin_port\n");
            write_file("$dir/pushpin.conf", pushpin_config($dir, $s));
            spawn($s, 'pushpin', 'pushpin', '--config', "$dir/pushpin.conf");
            $s->{publish_request} = grip_publish_request($o{message_size});
        }
        # Ready when a subscribe request is answered (for Pushpin: through
        # condure, the proxy, zurl and the origin; Nchan answers this
        # request, which has no Accept: text/event-stream, with 403).
        my $status = wait_ready($s->{procs}[-1], "127.0.0.1:$s->{port}", $s->{path});
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
        ($o{publish_listen} ? ('--grip', '--publish-listen', $o{publish_listen}) : ()),
        "$ROOT/bench/apps/sse.psgi");
}

# One of the server's processes, and its command line for the report.
sub spawn {
    my ($s, $name, @cmd) = @_;
    my ($p, $shown) = start_pinned($name, $s->{dir}, @cmd);
    push @{ $s->{procs} }, $p;
    push @{ $s->{commands} }, $shown;
}

# Stops the server's processes, the last started first, and any of their
# descendants that outlived them (Pushpin's runner starts its services in
# process groups of their own).
sub stop_server {
    my ($s) = @_;
    for my $p (reverse @{ $s->{procs} }) {
        my @pids = map { $_->{pid} } tree($p->{pid});
        stop($p);
        for my $pid (@pids) {
            next unless kill 0, $pid;
            kill 'TERM', $pid;
            for (1 .. 100) { last unless kill 0, $pid; select undef, undef, undef, 0.05 }
            kill 'KILL', $pid if kill 0, $pid;
        }
    }
    $s->{procs} = [];
}

# A process and its descendants: pid, ppid, name, RSS in KiB, CPU time
# (user and system) in seconds.
my $TICKS = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
sub tree {
    my ($root) = @_;
    my (%kids, %proc);
    for my $stat_file (glob '/proc/[0-9]*/stat') {
        my $stat = slurp($stat_file) // next;
        $stat =~ /^(\d+) \((.*)\) (.*)$/s or next;
        my ($pid, $comm, @f) = ($1, $2, split ' ', $3);
        my $ppid = $f[1];
        my $cpu = ($f[11] + $f[12]) / $TICKS;
        my $status = slurp("/proc/$pid/status") // next;
        my ($rss) = $status =~ /^VmRSS:\s+(\d+)/m;
        my $cmdline = slurp("/proc/$pid/cmdline") // '';
        $cmdline =~ tr/\0/ /;
        $cmdline =~ s/\s+\z//;
        $proc{$pid} = { pid => $pid, ppid => $ppid, cmd => $cmdline || $comm, rss => $rss // 0, cpu => $cpu };
        push @{ $kids{$ppid} }, $pid;
    }
    my @todo = ($root);
    my @found;
    while (defined(my $pid = shift @todo)) {
        push @found, $proc{$pid} if $proc{$pid};
        push @todo, @{ $kids{$pid} || [] };
    }
    return @found;
}

# The server side's resident memory, in KiB, by the parts reported:
#   Serow: holder (the connection holder), server (all its processes);
#   Nchan: workers (nginx's worker processes);
#   Pushpin: pushpin (the runner, condure, zurl, pushpin-proxy,
#            pushpin-handler), origin (the Serow behind it).
sub memory {
    my ($s) = @_;
    my %m;
    my $sum = sub { my $t = 0; $t += $_->{rss} for @_; $t };
    if ($s->{server} eq 'serow') {
        my @all = tree($s->{procs}[0]{pid});
        $m{holder} = $sum->(grep { $_->{cmd} eq 'serow connection holder' } @all);
        $m{server} = $sum->(@all);
    } elsif ($s->{server} eq 'nchan') {
        $m{workers} = $sum->(grep { $_->{cmd} =~ /worker process/ } tree($s->{procs}[0]{pid}));
    } else {
        $m{origin} = $sum->(tree($s->{procs}[0]{pid}));
        $m{pushpin} = $sum->(tree($s->{procs}[1]{pid}));
    }
    return \%m;
}

# The CPU time, in seconds, of the processes that deliver publishes: all of
# Serow's and of nginx's; Pushpin's own, not its origin's.
sub cpu {
    my ($s) = @_;
    my $root = $s->{server} eq 'pushpin' ? $s->{procs}[1] : $s->{procs}[0];
    my $t = 0;
    $t += $_->{cpu} for tree($root->{pid});
    return $t;
}

# The client, on CPU 1, for a started server: returns an object whose
# command($line) sends one command and returns its answer as a hash (the
# lines "key value"; fanout_round lines in an array under rounds).
sub client {
    my ($binary, $s, %o) = @_;
    my $req = "$o{dir}/publish-$s->{port}.http";
    write_file($req, $s->{publish_request});
    my @cmd = ('taskset', '-c', 1, $binary, '--port', $s->{port}, '--path', $s->{path},
        '--conns', $o{conns}, '--publish-port', $s->{publish_port}, '--publish-request', $req,
        '--timeout', $o{timeout}, ($o{open_timeout} ? ('--open-timeout', $o{open_timeout}) : ()),
        ($o{batch} ? ('--batch', $o{batch}) : ()));
    my $pid = IPC::Open2::open2(my $from, my $to, @cmd);
    return bless { pid => $pid, from => $from, to => $to }, 'Serow::Bench::Holding::Client';
}

# nginx with Nchan: one worker (as bench/run's nginx), subscribers as
# EventSource, publishers on a listener of their own (as Serow's and
# Pushpin's publish endpoints), 16 messages kept per channel (Serow's
# default), new subscribers getting only what is published after them.
sub nchan_http {
    my ($s) = @_;
    return <<"EOF";
    server {
        listen 127.0.0.1:$s->{port};
        location = /sub {
            nchan_subscriber eventsource;
            nchan_channel_id \$arg_channel;
            nchan_subscriber_first_message newest;
        }
    }
    server {
        listen 127.0.0.1:$s->{publish_port};
        location = /publish {
            nchan_publisher;
            nchan_channel_id \$arg_channel;
            nchan_message_buffer_length 16;
        }
    }
EOF
}

# Pushpin as Debian configures it (condure in front), with its own ports
# (its routes file, "routes" beside the configuration, is the caller's)
# and directories, zurl started by the runner (Debian's configuration
# expects a zurl service of its own), info logging off, and message_rate
# and message_hwm raised from 2,500 and 25,000 so that they do not cap the
# measurement.
sub pushpin_config {
    my ($dir, $s) = @_;
    my ($push_in, $push_sub, $command) = (free_port(), free_port(), free_port());
    return <<"EOF";
# generated by bench/holding (bench/websocket's, with over_http routes)
[global]
include={libdir}/internal.conf
rundir=$dir/run
ipc_prefix=pushpin-
port_offset=0
stats_connection_ttl=120

[runner]
services=condure,zurl,pushpin-proxy,pushpin-handler
http_port=127.0.0.1:$s->{port}
logdir=$dir/log
log_level=1
client_buffer_size=8192
client_maxconn=50000
condure_bin=condure
zurl_bin=zurl

[proxy]
zurl_out_specs=ipc://{rundir}/{ipc_prefix}zurl-in
zurl_out_stream_specs=ipc://{rundir}/{ipc_prefix}zurl-in-stream
zurl_in_specs=ipc://{rundir}/{ipc_prefix}zurl-out
routesfile=routes
debug=false
auto_cross_origin=false
accept_x_forwarded_protocol=false
set_x_forwarded_protocol=proto-only
x_forwarded_for=
x_forwarded_for_trusted=
orig_headers_need_mark=
accept_pushpin_route=false
log_from=false
log_user_agent=false
sig_iss=pushpin
sig_key=changeme
upstream_key=
updates_check=off
organization_name=

[handler]
push_in_spec=tcp://127.0.0.1:$push_in
push_in_sub_specs=tcp://127.0.0.1:$push_sub
push_in_sub_connect=false
push_in_http_addr=127.0.0.1
push_in_http_port=$s->{publish_port}
push_in_http_max_headers_size=10000
push_in_http_max_body_size=1000000
stats_spec=ipc://{rundir}/{ipc_prefix}stats
command_spec=tcp://127.0.0.1:$command
message_rate=10000000
message_hwm=10000000
message_wait=5000
id_cache_ttl=60
connection_subscription_max=20
subscription_linger=60
stats_subscription_ttl=60
stats_report_interval=10
stats_format=tnetstring
EOF
}

package Serow::Bench::Holding::Client;

sub command {
    my ($self, $line) = @_;
    print { $self->{to} } "$line\n";
    $self->{to}->flush;
    my %r;
    while (defined(my $l = readline $self->{from})) {
        chomp $l;
        last if $l eq 'done';
        if ($l =~ /^fanout_round /) {
            push @{ $r{rounds} }, { split ' ', $l };
            next;
        }
        my ($k, $v) = split ' ', $l, 2;
        $r{$k} = $v;
    }
    return \%r;
}

sub quit {
    my ($self) = @_;
    print { $self->{to} } "quit\n";
    close $self->{to};
    close $self->{from};
    waitpid $self->{pid}, 0;
    return $?;
}

1;
