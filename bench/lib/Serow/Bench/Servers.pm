package Serow::Bench::Servers;
use strict;
use warnings;

# The servers the benchmark compares, in one table: what each needs installed,
# how it is started, which of its processes are workers, its version, the
# scenarios it cannot take part in and why, and the report's note on it.  And
# starting one for a scenario (alone, or behind nginx) and stopping it, with
# the command lines used, for the report.

use File::Path ();
use Serow::Test::NginxConfig ();
use Serow::Bench::Config qw($ROOT $BENCH $FD_LIMIT tmpdir);
use Serow::Bench::Process qw(free_port unix_path spawn stop wait_ready);
use Serow::Bench::Util qw(slurp ensure serow_version);

use Exporter 'import';
our @EXPORT_OK = qw(@SERVERS %TITLE workers_of start start_behind_nginx with_server nginx_config
    server_version how_it_runs missing not_applicable command_lines);

sub app_file { "$BENCH/apps/$_[0].psgi" }

# Each server's command on $o{listen} (HOST:PORT or a UNIX socket), given
#   app: the app in bench/apps/
#   workers: prefork servers' worker count
#   keepalive: keep-alive timeout for the idle scenario (servers that have one)
#   close_mode: the scenario sends Connection: close or streams without a length
# nginx has a generated configuration instead (nginx_config).
# needs: [command => name] or [module => Perl module, CPAN distribution]: what
# must be installed (missing()); not_in: scenario => why it does not apply;
# note: the report's words on how it runs (its command lines come from the run).
my %SERVER = (
    serow => {
        title => 'Serow',
        needs => [],
        command => sub {
            my (%o) = @_;
            return ($^X, '-Mblib', 'script/serow', '--listen', $o{listen}, '--workers', $o{workers},
                ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()), app_file($o{app}));
        },
        workers => sub { my ($p, @procs) = @_; grep { $_->{cmd} eq 'serow worker' } @procs },
        version => \&serow_version,
        note => 'in (a) its default cap on connections (the open-file limit less a tenth) is above 10,032.',
    },
    starman => {
        title => 'Starman',
        needs => [command => 'starman'],
        command => sub {
            my (%o) = @_;
            return ('starman', '--preload-app', '--workers', $o{workers}, '--listen', $o{listen},
                ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()), app_file($o{app}));
        },
        workers => sub { my ($p, @procs) = @_; grep { $_->{cmd} =~ /^starman worker/ } @procs },
        version => sub { "Starman " . module_version('Starman') },
        note => 'its default `--max-requests 1000` stays.',
    },
    uwsgi => {
        title => 'uWSGI',
        needs => [command => 'uwsgi'],
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
        workers => \&children,
        version => sub { (my $v = "uWSGI " . (`uwsgi --version 2>/dev/null` || '?') . " (psgi plugin)") =~ s/\n//g; $v },
        note => '`--http-socket` (one request per connection) for Connection: close and streaming, because '
            . '`--http11-socket` ignores `Connection: close` and sends a streamed body without chunked framing.',
    },
    hsp => {
        title => 'HTTP::Server::PSGI',
        needs => [module => 'HTTP::Server::PSGI', 'Plack'],
        command => sub {
            my (%o) = @_;
            return ('plackup', '-E', 'deployment', '-s', 'HTTP::Server::PSGI', '--listen', $o{listen},
                app_file($o{app}));
        },
        # one process does everything
        workers => sub { my ($p, @procs) = @_; @procs },
        version => sub { "HTTP::Server::PSGI (Plack " . module_version('Plack') . ")" },
        not_in => {
            idle_10k => 'no keep-alive (HTTP/1.0, one request per connection): no connection stays idle',
            behind_nginx_unix => 'listens on TCP only',
            blocking_10ms => 'one process, which the scenario\'s 8 workers exclude',
            slow_2pct => 'one process, which the scenario\'s 8 workers exclude',
            nginx_front => 'one process serving one connection at a time, which the scenario\'s 4 workers exclude',
        },
        note => 'one process, one request per connection.',
    },
    nginx => {
        title => 'nginx',
        needs => [command => 'nginx'],
        command => sub {
            my (%o) = @_;
            return nginx_config(listen => $o{listen}, %{ $o{nginx} }, connections => $o{connections});
        },
        workers => sub { my ($p, @procs) = @_; grep { $_->{cmd} =~ /worker process/ } @procs },
        version => sub { (my $v = `nginx -v 2>&1` // '?') =~ s/^nginx version: //; chomp $v; $v },
        not_in => {
            streaming => 'runs no PSGI app',
            blocking_10ms => 'runs no PSGI app',
            slow_2pct => 'runs no PSGI app',
        },
        note => <<'EOF' =~ s/\n\z//r,
one worker, `access_log off`, `keepalive_requests 1000000`, `keepalive_timeout 120s`; `return 200 "same body"`
  for the hello and POST scenarios (for POST it discards the body: a ceiling, not a peer); the 8 KiB body and the
  2.4 MB file from disk with `sendfile on` (its configuration takes no 8 KiB string).  In front: `upstream { keepalive 32; }`, `proxy_http_version 1.1`,
  `proxy_set_header Connection ""`: the configuration of docs/deployment.md (Serow::Test::NginxConfig), with upstream `keepalive_requests 1000000`.
EOF
    },
    # The peers on CPAN only (docs/benchmarks.md says how to install them),
    # each under plackup with its keep-alive on where it has one.
    feersum => {
        title => 'Feersum (pre-fork)',
        needs => [module => 'Plack::Handler::Feersum', 'Feersum'],
        command => sub {
            my (%o) = @_;
            return plackup('Feersum', \%o, '--pre-fork', $o{workers}, feersum_keepalive(%o));
        },
        workers => \&children,
        version => sub { "Feersum " . module_version('Feersum') },
        note => 'one EV event loop per process; `--keepalive 1` turns its keep-alive on (off by default), '
            . '`--read-timeout` is also its keep-alive timeout (5 s by default, 120 in (a)).',
    },
    feersum1 => {
        title => 'Feersum (one process)',
        needs => [module => 'Plack::Handler::Feersum', 'Feersum'],
        command => sub { my (%o) = @_; return plackup('Feersum', \%o, feersum_keepalive(%o)) },
        workers => sub { my ($p, @procs) = @_; @procs },
        version => sub { "Feersum " . module_version('Feersum') },
        not_in => {
            blocking_10ms => 'one process, which the scenario\'s 8 workers exclude',
            slow_2pct => 'one process, which the scenario\'s 8 workers exclude',
        },
        note => 'the same in one process, as Feersum is usually run.',
    },
    gazelle => {
        title => 'Gazelle',
        needs => [module => 'Plack::Handler::Gazelle', 'Gazelle'],
        command => sub { my (%o) = @_; return plackup('Gazelle', \%o, '--max-workers', $o{workers}) },
        workers => \&children,
        version => sub { "Gazelle " . module_version('Gazelle') },
        not_in => {
            idle_10k => 'no keep-alive (it closes every connection after one answer): no connection stays idle',
            behind_nginx_unix => 'listens on TCP only',
        },
        note => 'no keep-alive: in the keep-alive scenarios wrk reconnects for every request; '
            . 'its default `--max-reqs-per-child 1000` stays.',
    },
    starlet => {
        title => 'Starlet',
        needs => [module => 'Plack::Handler::Starlet', 'Starlet'],
        command => sub {
            my (%o) = @_;
            return plackup('Starlet', \%o, '--max-workers', $o{workers}, '--max-keepalive-reqs', 1_000_000,
                ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()));
        },
        workers => \&children,
        version => sub { "Starlet " . module_version('Starlet') },
        note => 'keep-alive is off unless `--max-keepalive-reqs` is above 1; its default `--max-reqs-per-child 100` '
            . 'stays (a worker, and its connection, ends after 100 requests).',
    },
    monoceros => {
        title => 'Monoceros',
        needs => [module => 'Plack::Handler::Monoceros', 'Monoceros'],
        command => sub {
            my (%o) = @_;
            # its handler takes a UNIX socket as --socket-path, not --listen
            my @listen = $o{listen} =~ m{^/} ? ('--socket-path', $o{listen}) : ('--listen', $o{listen});
            return ('plackup', '-E', 'deployment', '-s', 'Monoceros', @listen, '--max-workers', $o{workers},
                ($o{keepalive} ? ('--keepalive-timeout', $o{keepalive}) : ()), app_file($o{app}));
        },
        # the master manages the connections; its child forks the workers
        workers => sub { my ($p, @procs) = @_; grep { $_->{pid} != $p->{pid} && $_->{ppid} != $p->{pid} } @procs },
        version => sub { "Monoceros " . module_version('Monoceros') },
        note => 'keep-alive on by default: a manager process holds the idle connections and passes each ready '
            . 'one to a worker; `--keepalive-timeout` 10 s by default, 120 in (a).',
    },
);

# Names and titles of the servers, in the order of every table.
our @SERVERS = qw(serow starman uwsgi hsp nginx feersum feersum1 gazelle starlet monoceros);
our %TITLE = map { $_ => $SERVER{$_}{title} } @SERVERS;

# A PSGI server under plackup, given its handler's name and options.
sub plackup {
    my ($handler, $o, @options) = @_;
    return ('plackup', '-E', 'deployment', '-s', $handler, '--listen', $o->{listen}, @options,
        app_file($o->{app}));
}

sub feersum_keepalive {
    my (%o) = @_;
    return ('--keepalive', 1, ($o{keepalive} ? ('--read-timeout', $o{keepalive}) : ()));
}

# A prefork server's workers: the master's children.
sub children { my ($p, @procs) = @_; grep { $_->{ppid} == $p->{pid} } @procs }

# A module's version as the servers will load it (PERL5LIB included).
sub module_version {
    my ($module) = @_;
    return `perl -M$module -e 'print \$${module}::VERSION' 2>/dev/null` || '?';
}

# What is missing for a server to run here, or undef: it is not installed.
# Asked once per server and run.
my %MISSING;
sub missing {
    my ($server) = @_;
    return $MISSING{$server} if exists $MISSING{$server};
    my ($kind, $what, $dist) = @{ $SERVER{$server}{needs} };
    my $why;
    if (($kind // '') eq 'command') {
        $why = "no $what command" unless grep { -x "$_/$what" } split /:/, $ENV{PATH} // '';
    } elsif (($kind // '') eq 'module') {
        $why = "perl finds no $what (cpanm $dist, or bench/run --peers-lib DIR)"
            if system("perl -M$what -e1 >/dev/null 2>&1") != 0;
    }
    return $MISSING{$server} = $why;
}

# Why a server does not take part in a scenario, or undef.
sub not_applicable { $SERVER{ $_[0] }{not_in} && $SERVER{ $_[0] }{not_in}{ $_[1] } }

# Which of a server's processes are its workers.
sub workers_of {
    my ($server, $p, @procs) = @_;
    return $SERVER{$server}{workers}->($p, @procs);
}

sub server_version { $SERVER{ $_[0] }{version}->() }

# The command lines each server was started with: server => line => {
# scenario => 1}, the line with the address as ADDR, the run's temporary
# directory as TMP and paths relative to the repository.  $SCENARIO: the
# scenario whose rounds are running (Serow::Bench::Results::rounds sets it).
our $SCENARIO;
my %COMMANDS;
sub command_lines { $COMMANDS{ $_[0] } ? sort keys %{ $COMMANDS{ $_[0] } } : () }

sub record_command {
    my ($server, $listen, @cmd) = @_;
    my $tmp = tmpdir();
    my $line = join ' ', map {
        my $a = $_;
        $a = 'ADDR' if $a eq $listen;
        $a = 'perl' if $a eq $^X;
        $a =~ s{^\Q$ROOT\E/}{};
        $a =~ s{\Q$tmp\E}{TMP}g;
        $a =~ s{/nginx\d+}{/nginxN}g;
        $a =~ m{[^\w/.,:=+-]} ? "'$a'" : $a;
    } @cmd;
    $COMMANDS{$server}{$line}{ $SCENARIO // '?' } = 1;
}

# The report's lines on how each server runs: its note and the command lines
# of this run, or why it did not run.
sub how_it_runs {
    my (@servers) = @_;
    my $md = '';
    for my $server (@servers) {
        my $s = $SERVER{$server};
        if (my $why = missing($server)) {
            $md .= "- $s->{title}: not installed: $why.\n";
            next;
        }
        $md .= "- $s->{title}" . ($s->{note} ? ": $s->{note}" : '') . "\n";
        for my $line (command_lines($server)) {
            my @in = sort keys %{ $COMMANDS{$server}{$line} };
            $md .= "  - `$line` (" . join(', ', @in) . ")\n";
        }
    }
    return $md;
}

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
    record_command($server, $listen, @cmd);
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
