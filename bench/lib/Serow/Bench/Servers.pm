package Serow::Bench::Servers;
use strict;
use warnings;

# The servers the benchmark compares, in one table: how each is started, which
# of its processes are workers, its version, and how the report describes its
# command line.  And starting one for a scenario (alone, or behind nginx) and
# stopping it.

use File::Path ();
use Serow::Test::NginxConfig ();
use Serow::Bench::Config qw($BENCH $FD_LIMIT tmpdir);
use Serow::Bench::Process qw(free_port unix_path spawn stop wait_ready);
use Serow::Bench::Util qw(slurp commit ensure);

use Exporter 'import';
our @EXPORT_OK = qw(@SERVERS %TITLE workers_of start start_behind_nginx with_server nginx_config
    server_version how_it_runs);

sub app_file { "$BENCH/apps/$_[0].psgi" }

# Each server's command on $o{listen} (HOST:PORT or a UNIX socket), given
#   app: the app in bench/apps/
#   workers: prefork servers' worker count
#   keepalive: keep-alive timeout for the idle scenario (servers that have one)
#   close_mode: the scenario sends Connection: close or streams without a length
# nginx has a generated configuration instead (nginx_config).
my %SERVER = (
    serow => {
        title => 'Serow',
        command => sub {
            my (%o) = @_;
            return ($^X, '-Mblib', 'script/serow', '--listen', $o{listen}, '--workers', $o{workers},
                ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()), app_file($o{app}));
        },
        workers => sub { my ($p, @procs) = @_; grep { $_->{cmd} eq 'serow worker' } @procs },
        version => sub {
            my $git = commit();
            "Serow " . (`$^X -Mblib -MSerow -e 'print \$Serow::VERSION' 2>/dev/null` || '?')
                . ($git ? " ($git)" : '');
        },
        runs => <<'EOF',
- Serow: `perl -Mblib script/serow --listen ADDR --workers 4 APP` (8 in (b) and (c)); in (a) also
  `--keepalive-timeout 120` (its default cap on connections, the open-file limit less a tenth, is above 10,032).
EOF
    },
    starman => {
        title => 'Starman',
        command => sub {
            my (%o) = @_;
            return ('starman', '--preload-app', '--workers', $o{workers}, '--listen', $o{listen},
                ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()), app_file($o{app}));
        },
        workers => sub { my ($p, @procs) = @_; grep { $_->{cmd} =~ /^starman worker/ } @procs },
        version => sub { "Starman " . (`perl -MStarman -e 'print \$Starman::VERSION' 2>/dev/null` || '?') },
        runs => <<'EOF',
- Starman: `starman --preload-app --workers 4 --listen ADDR APP` (8 in (b) and (c)); in (a) `--keepalive-timeout 120`.
EOF
    },
    uwsgi => {
        title => 'uWSGI',
        command => sub {
            my (%o) = @_;
            # --http11-socket keeps connections alive but ignores Connection: close
            # and cannot frame a streamed response: --http-socket (one request per
            # connection) there.
            my $socket = $o{close_mode} ? '--http-socket' : '--http11-socket';
            return ('uwsgi', '--plugins', 'psgi', $socket, $o{listen}, '--psgi', app_file($o{app}),
                '--processes', $o{workers}, '--master', '--disable-logging', '--die-on-term',
                '--listen', 1024, ($o{listen} =~ m{^/} ? ('--chmod-socket=666') : ()),
                ($o{keepalive} ? ('--socket-timeout', $o{keepalive}) : ()));
        },
        workers => sub { my ($p, @procs) = @_; grep { $_->{ppid} == $p->{pid} } @procs },
        version => sub { (my $v = "uWSGI " . (`uwsgi --version 2>/dev/null` || '?') . " (psgi plugin)") =~ s/\n//g; $v },
        runs => <<'EOF',
- uWSGI: `uwsgi --plugins psgi --http11-socket ADDR --psgi APP --processes 4 --master --disable-logging --die-on-term --listen 1024`;
  `--http-socket` (one request per connection) for Connection: close and streaming, because `--http11-socket`
  ignores `Connection: close` and sends a streamed body without chunked framing; in (a) `--socket-timeout 120`.
EOF
    },
    hsp => {
        title => 'HTTP::Server::PSGI',
        command => sub {
            my (%o) = @_;
            return ('plackup', '-E', 'deployment', '-s', 'HTTP::Server::PSGI', '--listen', $o{listen},
                app_file($o{app}));
        },
        # one process does everything
        workers => sub { my ($p, @procs) = @_; @procs },
        version => sub { "HTTP::Server::PSGI (Plack " . (`perl -MPlack -e 'print \$Plack::VERSION' 2>/dev/null` || '?') . ")" },
        runs => <<'EOF',
- HTTP::Server::PSGI: `plackup -E deployment -s HTTP::Server::PSGI --listen ADDR APP` (one process, one request per connection).
EOF
    },
    nginx => {
        title => 'nginx',
        command => sub {
            my (%o) = @_;
            return nginx_config(listen => $o{listen}, %{ $o{nginx} }, connections => $o{connections});
        },
        workers => sub { my ($p, @procs) = @_; grep { $_->{cmd} =~ /worker process/ } @procs },
        version => sub { (my $v = `nginx -v 2>&1` // '?') =~ s/^nginx version: //; chomp $v; $v },
        runs => <<'EOF',
- nginx: one worker, `access_log off`, `keepalive_requests 1000000`, `keepalive_timeout 120s`; `return 200 "same body"`
  for the hello and POST scenarios (for POST it discards the body: a ceiling, not a peer); the 8 KiB body and the
  2.4 MB file from disk with `sendfile on` (its configuration takes no 8 KiB string).  In front: `upstream { keepalive 32; }`, `proxy_http_version 1.1`,
  `proxy_set_header Connection ""`: the configuration of docs/deployment.md (Serow::Test::NginxConfig), with upstream `keepalive_requests 1000000`.
EOF
    },
);

# Names and titles of the servers, in the order of every table.
our @SERVERS = qw(serow starman uwsgi hsp nginx);
our %TITLE = map { $_ => $SERVER{$_}{title} } @SERVERS;

# Which of a server's processes are its workers.
sub workers_of {
    my ($server, $p, @procs) = @_;
    return $SERVER{$server}{workers}->($p, @procs);
}

sub server_version { $SERVER{ $_[0] }{version}->() }

# The report's lines on how each server runs.
sub how_it_runs { join '', map { $SERVER{$_}{runs} } @SERVERS }

# nginx with a generated configuration (Serow::Test::NginxConfig, the one
# t/nginx/ and docs/deployment.md use).  %o: listen, and one of
#   body => text (return 200 "text"), root => dir (static files, sendfile),
#   upstream => address (proxy with upstream keep-alive 32);
#   connections => worker_connections.
my $nginx_counter = 0;
sub nginx_config {
    my (%o) = @_;
    my $dir = tmpdir() . "/nginx" . ++$nginx_counter;
    File::Path::make_path("$dir/logs");
    open my $fh, '>', "$dir/nginx.conf" or die "$dir/nginx.conf: $!\n";
    # Upstream connections are not recycled during a run (keepalive_requests).
    print {$fh} Serow::Test::NginxConfig::main(keepalive_requests => 1_000_000, %o,
        dir => "$dir/logs", access_log => 0,
        connections => $o{connections} // 4096, rlimit_nofile => $FD_LIMIT,
        comment => 'generated by bench/bench.pl');
    close $fh;
    return ('nginx', '-p', $dir, '-c', "$dir/nginx.conf", '-e', "$dir/logs/error.log");
}

# Starts one server for a scenario and waits until it answers.  Returns the
# process handle and the address, or (undef, error).
sub start {
    my ($server, %o) = @_;
    my $listen = $o{listen} // '127.0.0.1:' . free_port();
    my @cmd = $SERVER{$server}{command}->(%o, workers => $o{workers} // 4, listen => $listen);
    my $p = spawn($server, @cmd);
    my $status = wait_ready($p, $listen, $o{path});
    if (!defined $status || $status !~ /^2/) {
        my $log = slurp($p->{log}) // '';
        $log =~ s/\s+\z//;
        stop($p);
        return (undef, "$TITLE{$server} did not answer on $listen"
            . (defined $status ? " (status $status)" : '') . ($log ? ": " . substr($log, -400) : ''));
    }
    $p->{listen} = $listen;
    return ($p);
}

# Starts $server with %$start, runs $body->($p) and stops the server, also
# when the body dies (the error is passed on).  Returns what the body returned.
sub with_server {
    my ($server, $start, $body) = @_;
    my ($p, $err) = start($server, %$start);
    die "$err\n" unless $p;
    return ensure(sub { $body->($p) }, sub { stop($p) });
}

# The server behind one nginx worker that keeps 32 upstream connections alive.
sub start_behind_nginx {
    my ($server, %o) = @_;
    my $backend = $o{unix} ? unix_path() : '127.0.0.1:' . free_port();
    my ($b, $err) = start($server, app => $o{app}, workers => $o{workers}, listen => $backend,
        nginx => { body => 'Hello World' });
    die "$err\n" unless $b;
    my $front_addr = '127.0.0.1:' . free_port();
    my $front = spawn('nginx-front', nginx_config(listen => $front_addr, upstream => $backend));
    my $status = wait_ready($front, $front_addr);
    if (!defined $status || $status ne '200') {
        stop($front);
        stop($b);
        die "nginx in front of $TITLE{$server} did not answer 200" . (defined $status ? " ($status)" : '') . "\n";
    }
    $front->{listen} = $front_addr;
    return ($front, $b);
}

1;
