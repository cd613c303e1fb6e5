package Serow::Test;
use strict;
use warnings;

# Helpers for Serow's own tests: start a real server on a socket the test
# has already bound (so there is no port to guess and nothing to wait for:
# connections queue in the backlog until a worker takes them), talk raw HTTP
# to it, and read its log as it is written.

use Exporter 'import';
use Cwd ();
use File::Spec ();
use File::Temp ();
use IO::Select ();
use IO::Socket::IP ();
use POSIX ();
use Time::HiRes ();
use Fcntl ();
use Test::More ();

our @EXPORT_OK = qw(start_server raw_request raw_connect read_response parse_response
                    wait_until read_until_close read_until_match echo_app rejects answered_and_closed
                    send_all parse_response_head
                    need_debian_packages run_serow);

# Generous: the machine is shared and slow; these bound a wait, never pace it.
use constant READ_TIMEOUT => 30;
use constant STOP_TIMEOUT => 60;

my $ROOT = Cwd::abs_path(File::Spec->catdir(__FILE__, (File::Spec->updir) x 4));

# A write to a connection the server closed (or to a pipe whose reader left)
# must fail, not kill the test before it has stopped what it started.
$SIG{PIPE} = 'IGNORE';

sub root { $ROOT }

# start_server(app => CODE | app_file => PATH | command => [ARGV], options => [...],
#              listen => 'tcp' | 'unix' | 'none', env => {...})
# listen 'none' hands no socket over: the server opens the ones its --listen
# options name (find a port with Net::EmptyPort and wait for it).  command runs
# that command line instead (plackup, start_server, a perl -e), with the same
# log pipe, environment and process group.
sub start_server {
    my (%args) = @_;
    # owner: only the test process that started the server stops it when the
    # object goes away, not a process forked from it that holds a copy (the
    # master of a second server, its workers, a canned server in a test).
    my $self = bless { log => '', owner => $$ }, __PACKAGE__;
    my @fds;
    my $listen = $args{listen} // 'tcp';
    if ($listen eq 'none') {
        # nothing to hand over
    } elsif ($listen eq 'unix') {
        require IO::Socket::UNIX;
        $self->{dir} = File::Temp->newdir;
        $self->{path} = "$self->{dir}/serow.sock";
        $self->{socket} = IO::Socket::UNIX->new(Local => $self->{path}, Listen => 1024)
            or die "cannot listen on $self->{path}: $!";
        push @fds, "$self->{path}=" . fileno($self->{socket});
    } else {
        $self->{socket} = IO::Socket::IP->new(LocalHost => '127.0.0.1', LocalPort => 0,
            Listen => 1024, ReuseAddr => 1) or die "cannot listen: $@";
        $self->{port} = $self->{socket}->sockport;
        push @fds, "127.0.0.1:$self->{port}=" . fileno($self->{socket});
    }
    if ($self->{socket}) {
        # The child must inherit the listen socket.
        my $flags = fcntl($self->{socket}, Fcntl::F_GETFD(), 0);
        fcntl($self->{socket}, Fcntl::F_SETFD(), $flags & ~Fcntl::FD_CLOEXEC());
    }

    pipe(my $log_read, my $log_write) or die "pipe: $!";
    my @options = @{ $args{options} || [] };
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        close $log_read;
        POSIX::dup2(fileno($log_write), 2) or POSIX::_exit(111);
        # Not the test's stdout: a server left running must not keep prove waiting.
        open(STDOUT, '>', '/dev/null');
        if (@fds) {
            $ENV{SERVER_STARTER_PORT} = join ';', @fds;
        } else {
            delete @ENV{qw(SERVER_STARTER_PORT LISTEN_FDS LISTEN_PID)};
        }
        %ENV = (%ENV, %{ $args{env} || {} });
        POSIX::setpgid(0, 0);
        # Should the test die without stopping it (a signal, a crash), the
        # server gets a TERM from the kernel instead of running on.
        eval { require Serow; Serow::set_parent_death_signal(POSIX::SIGTERM()) };
        $SIG{PIPE} = 'DEFAULT'; # an ignored signal would stay ignored across exec
        if ($args{command}) {
            my @command = @{ $args{command} };
            { exec { $command[0] } @command }
            POSIX::_exit(112);
        }
        if ($args{app_file}) {
            { exec $^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch", "$ROOT/script/serow", @options,
                $args{app_file} }
            POSIX::_exit(112);
        }
        require Serow::Server;
        require Serow::Options;
        my ($opts) = Serow::Options->from_argv(@options);
        delete @$opts{qw(help version)};
        my $status = eval { Serow::Server->new(%$opts)->run($args{app}) };
        print STDERR "server died: $@" unless defined $status;
        POSIX::_exit($status // 113);
    }
    close $log_write;
    # The child does this too; whichever runs first, the group exists before
    # anything here may signal it.
    POSIX::setpgid($pid, $pid);
    $self->{pid} = $pid;
    $self->{log_fh} = $log_read;
    return $self;
}

sub port { $_[0]{port} }
sub path { $_[0]{path} }

# The test keeps its copy of the listen socket it handed over, so after stop
# the kernel still accepts connections on the port (and leaves them
# unanswered).  A test that needs the port to refuse connections, as it
# would once a real server is gone (a balancer's health check), closes it.
sub close_listen_socket {
    my ($self) = @_;
    close(delete $self->{socket}) if $self->{socket};
}
sub pid { $_[0]{pid} }
sub url { "http://127.0.0.1:$_[0]{port}" }

# Reads what the server has logged so far, without blocking.
sub log {
    my ($self) = @_;
    $self->_read_log(0);
    return $self->{log};
}

sub _read_log {
    my ($self, $timeout) = @_;
    my $fh = $self->{log_fh} or return 0;
    my $sel = IO::Select->new($fh);
    return 0 unless $sel->can_read($timeout);
    my $n = sysread($fh, my $chunk, 65536);
    if (!$n) {
        delete $self->{log_fh};
        return 0;
    }
    $self->{log} .= $chunk;
    return 1;
}

# Waits until the log matches $re (a line the server writes when it gets
# there), up to $timeout (READ_TIMEOUT) seconds.  Returns the match or undef.
# Each wait looks past the line the one before it matched, so that waiting
# twice for the same line waits for two of them.  Lines that different
# processes write in no fixed order are waited for from a mark instead
# (wait_for_log($re, $timeout, $mark) looks past the mark and moves nothing).
sub wait_for_log {
    my ($self, $re, $timeout, $mark) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    my $from = $mark // $self->{log_seen} // 0;
    for (;;) {
        if (substr($self->{log}, $from) =~ $re) {
            $self->{log_seen} = $from + $+[0] unless defined $mark;
            return $&;
        }
        my $left = $deadline - Time::HiRes::time;
        return undef if $left <= 0 || !$self->{log_fh};
        $self->_read_log($left);
    }
}

# Waits until $re has matched $n times; returns what its first group (or
# the whole pattern) matched each time, or as many as came in time.  With a
# $mark, as wait_for_log: from the mark, moving nothing.
sub wait_for_log_all {
    my ($self, $re, $n, $timeout, $mark) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    my $from = $mark // $self->{log_seen} // 0;
    for (;;) {
        my (@found, $end);
        my $text = substr($self->{log}, $from);
        while (@found < $n && $text =~ /$re/g) {
            push @found, defined $1 ? $1 : $&;
            $end = pos $text;
        }
        if (@found == $n || !$self->{log_fh} || Time::HiRes::time >= $deadline) {
            $self->{log_seen} = $from + $end if defined $end && !defined $mark;
            return @found;
        }
        $self->_read_log($deadline - Time::HiRes::time);
    }
}

# A mark for wait_for_log: the end of what the server has logged so far.
sub log_mark {
    my ($self) = @_;
    1 while $self->_read_log(0);
    return length $self->{log};
}

# Waits for the master to exit; returns its wait status or undef on timeout.
sub wait_exit {
    my ($self, $timeout) = @_;
    return $self->{exit_status} if defined $self->{exit_status};
    my $status;
    eval {
        local $SIG{ALRM} = sub { die "timeout\n" };
        alarm($timeout // STOP_TIMEOUT);
        my $r = waitpid($self->{pid}, 0);
        alarm 0;
        $status = $? if $r == $self->{pid};
    };
    alarm 0;
    $self->{exit_status} = $status;
    $self->log if defined $status; # collect the last lines
    return $status;
}

sub signal {
    my ($self, $sig) = @_;
    kill $sig, $self->{pid};
}

sub stop {
    my ($self) = @_;
    return $self->{exit_status} if defined $self->{exit_status} || !$self->{pid};
    kill 'TERM', $self->{pid};
    my $status = $self->wait_exit;
    if (!defined $status) {
        kill 'KILL', -$self->{pid};
        waitpid($self->{pid}, 0);
        $status = $self->{exit_status} = $?;
    }
    return $status;
}

sub DESTROY {
    my ($self) = @_;
    return unless $self->{pid} && !defined $self->{exit_status} && $self->{owner} == $$;
    local ($?, $@, $!);
    kill 'KILL', -$self->{pid};
    waitpid($self->{pid}, 0);
}

# A connected socket to the server, or to any { host, port } or { path }
# (host defaults to 127.0.0.1).
sub raw_connect {
    my ($server) = @_;
    if ($server->{path}) {
        require IO::Socket::UNIX;
        return IO::Socket::UNIX->new(Peer => $server->{path}) || die "connect: $!";
    }
    return IO::Socket::IP->new(PeerHost => $server->{host} // '127.0.0.1', PeerPort => $server->{port})
        || die "connect: $@";
}

# Sends $bytes on a new connection and returns everything the server sends
# until it closes the connection (or READ_TIMEOUT passes).  Options:
#   half_close => 1     shut down our sending side after the bytes
#   timeout => SECONDS  bound of the wait (default READ_TIMEOUT)
#   eof => \$closed     set to 1 when the server ended the connection (EOF or
#                       reset), 0 when the wait ran out with it still open
sub raw_request {
    my ($server, $bytes, %opts) = @_;
    my $sock = raw_connect($server);
    syswrite($sock, $bytes) if length $bytes;
    shutdown($sock, 1) if $opts{half_close};
    my ($out, $closed) = read_until_close($sock, timeout => $opts{timeout});
    ${ $opts{eof} } = $closed if ref $opts{eof};
    return $out;
}

# Reads from $sock until the server ends the connection or timeout seconds
# (default READ_TIMEOUT) pass.  Returns the bytes, and in list context also
# whether the connection ended (1: EOF or reset; 0: still open at the timeout).
# buffer => \$bytes: bytes already read, put first.
sub read_until_close {
    my ($sock, %opts) = @_;
    my $out = ref $opts{buffer} ? ${ $opts{buffer} } : '';
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + ($opts{timeout} // READ_TIMEOUT);
    my $closed = 0;
    while ((my $left = $deadline - Time::HiRes::time) > 0) {
        last unless $sel->can_read($left);
        my $n = sysread($sock, $out, 65536, length $out);
        if (!$n) {
            $closed = 1;
            last;
        }
    }
    return wantarray ? ($out, $closed) : $out;
}

# Reads from $sock until what came matches $re (the first part of a
# streamed response), the connection ends, or READ_TIMEOUT passes.  Returns
# the bytes read, to hand on to read_response as its buffer.
sub read_until_match {
    my ($sock, $re) = @_;
    my $buffer = '';
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + READ_TIMEOUT;
    while ($buffer !~ $re) {
        my $left = $deadline - Time::HiRes::time;
        last if $left <= 0 || !$sel->can_read($left);
        sysread($sock, $buffer, 65536, length $buffer) or last;
    }
    return $buffer;
}

# Writes all of $bytes to $sock, reading what the server sends meanwhile into
# ${ $opts{buffer} } (for read_response's buffer option): a server answering
# while the client still writes can then never block both sides.  Returns the
# number of bytes written (less when the server closed or READ_TIMEOUT passed
# without progress).
sub send_all {
    my ($sock, $bytes, %opts) = @_;
    my $own = '';
    my $buf = ref $opts{buffer} ? $opts{buffer} : \$own;
    my $written = 0;
    local $SIG{PIPE} = 'IGNORE';
    while ($written < length $bytes) {
        my ($r, $w) = ('', '');
        vec($r, fileno $sock, 1) = 1;
        vec($w, fileno $sock, 1) = 1;
        my $n = select(my $readable = $r, my $writable = $w, undef, READ_TIMEOUT);
        last if $n <= 0;
        if (vec($readable, fileno $sock, 1)) {
            sysread($sock, $$buf, 65536, length $$buf) or last;
        }
        if (vec($writable, fileno $sock, 1)) {
            my $chunk = length($bytes) - $written;
            $chunk = 65536 if $chunk > 65536;
            my $n = syswrite($sock, $bytes, $chunk, $written);
            last unless $n;
            $written += $n;
        }
    }
    return $written;
}

# Reads one response from a socket (Content-Length, chunked, or until EOF).
# Returns { status, headers => { lc name => value }, body, raw } or undef.
sub read_response {
    my ($sock, %opts) = @_;
    my $own = '';
    # buffer => \$bytes carries what was read past this response (pipelining)
    my $buf = ref $opts{buffer} ? $opts{buffer} : \$own;
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + ($opts{timeout} // READ_TIMEOUT);
    my $fill = sub {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !$sel->can_read($left);
        return sysread($sock, $$buf, 65536, length $$buf) || 0;
    };
    while ($$buf !~ /\r\n\r\n/) { $fill->() or return undef }
    my $res = parse_response_head($$buf) or return undef;
    substr($$buf, 0, $res->{head_length}, '');
    if ($opts{head_request} || $res->{status} =~ /^(?:1\d\d|204|304)$/) {
        $res->{body} = '';
    } elsif (($res->{headers}{'transfer-encoding'} // '') =~ /chunked/i) {
        my $body = '';
        for (;;) {
            while ($$buf !~ /\r\n/) { $fill->() or return undef }
            $$buf =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n// or return undef;
            my $size = hex $1;
            push @{ $res->{chunks} }, $size;
            if ($size == 0) {
                while ($$buf !~ /\A(?:[^\r\n]+\r\n)*\r\n/) { $fill->() or return undef }
                $$buf =~ s/\A(?:[^\r\n]+\r\n)*\r\n//;
                last;
            }
            while (length $$buf < $size + 2) { $fill->() or return undef }
            $body .= substr($$buf, 0, $size);
            substr($$buf, 0, $size + 2, '');
        }
        $res->{body} = $body;
    } elsif (defined $res->{headers}{'content-length'}) {
        my $len = $res->{headers}{'content-length'};
        while (length $$buf < $len) { $fill->() or return undef }
        $res->{body} = substr($$buf, 0, $len, '');
    } else {
        1 while $fill->();
        $res->{body} = $$buf;
        $$buf = '';
    }
    return $res;
}

sub parse_response_head {
    my ($text) = @_;
    my $end = index($text, "\r\n\r\n");
    return undef if $end < 0;
    my ($status_line, @lines) = split /\r\n/, substr($text, 0, $end);
    my ($version, $status, $reason) = $status_line =~ m{\A(HTTP/\d\.\d) (\d{3}) ?(.*)\z} or return undef;
    my (%headers, @header_list);
    for (@lines) {
        my ($name, $value) = /\A([^:]+):\s*(.*?)\s*\z/ or return undef;
        push @header_list, [$name, $value];
        $headers{ lc $name } = exists $headers{ lc $name } ? "$headers{lc $name}, $value" : $value;
    }
    return { version => $version, status => $status, reason => $reason, headers => \%headers,
             header_list => \@header_list, head_length => $end + 4 };
}

# All responses in a byte string (as raw_request returns): a list of
# { status, headers, body }.
sub parse_response {
    my ($text, %opts) = @_;
    my @responses;
    while (length $text) {
        my $res = parse_response_head($text) or last;
        substr($text, 0, $res->{head_length}, '');
        my $len = $res->{headers}{'content-length'};
        if ($res->{status} =~ /^(?:1\d\d|204|304)$/ || $opts{head_request}) {
            $res->{body} = '';
        } elsif (($res->{headers}{'transfer-encoding'} // '') =~ /chunked/i) {
            my $body = '';
            while ($text =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n//) {
                my $size = hex $1;
                if ($size == 0) { $text =~ s/\A(?:[^\r\n]+\r\n)*\r\n//; last }
                $body .= substr($text, 0, $size);
                substr($text, 0, $size + 2, '');
            }
            $res->{body} = $body;
        } elsif (defined $len) {
            $res->{body} = substr($text, 0, $len, '');
        } else {
            $res->{body} = $text;
            $text = '';
        }
        push @responses, $res;
    }
    return wantarray ? @responses : $responses[0];
}

# An app that answers with what it saw, as JSON: method, path, query, uri,
# host, protocol, content_length, transfer_encoding and the body it read.
sub echo_app {
    require JSON::PP;
    return sub {
        my ($env) = @_;
        my $body = '';
        my $in = $env->{'psgi.input'};
        while ($in->read(my $part, 65536)) { $body .= $part }
        my %seen = (
            method => $env->{REQUEST_METHOD}, path => $env->{PATH_INFO},
            query => $env->{QUERY_STRING}, uri => $env->{REQUEST_URI},
            host => $env->{HTTP_HOST}, protocol => $env->{SERVER_PROTOCOL},
            content_length => $env->{CONTENT_LENGTH},
            transfer_encoding => $env->{HTTP_TRANSFER_ENCODING}, body => $body,
        );
        return [200, ['Content-Type' => 'application/json'],
                [JSON::PP->new->canonical->encode(\%seen)]];
    };
}

# The request a rejection test appends to its bytes: a server that answered
# it would have been fooled into reading it as a request of its own.
use constant SMUGGLED => "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";

# Sends $bytes (and, unless smuggle => 0, SMUGGLED right behind them in the
# same write) and checks that the server answers with exactly one response,
# with $status and "Connection: close", then closes the connection.  Returns
# the response.  A Test::More subtest named $name.
sub rejects {
    my ($server, $bytes, $status, $name, %opts) = @_;
    my $res;
    Test::More::subtest($name => sub {
        my $smuggle = $opts{smuggle} // 1;
        my $sock = raw_connect($server);
        syswrite($sock, $bytes . ($smuggle ? SMUGGLED : ''));
        shutdown($sock, 1) if $opts{half_close};
        ($res, my $raw) = answered_and_closed($sock, $status);
        Test::More::unlike($raw, qr/smuggled/, 'the bytes after it were not answered')
            if $smuggle;
    });
    return $res;
}

# Reads $sock until the server closes it (or READ_TIMEOUT passes) and checks
# that it sent exactly one response, with $status and "Connection: close".
# Returns that response and the bytes read.
sub answered_and_closed {
    my ($sock, $status) = @_;
    my ($raw, $closed) = read_until_close($sock);
    my @responses = parse_response($raw);
    Test::More::is(scalar @responses, 1, 'exactly one response')
        or Test::More::diag("got: $raw");
    my $res = $responses[0];
    Test::More::is($res && $res->{status}, $status, "status $status");
    Test::More::is(lc(($res && $res->{headers}{connection}) // ''), 'close',
        'it says Connection: close');
    Test::More::ok($closed, 'the server closed the connection');
    return ($res, $raw);
}

# Polls $cond until it is true or $timeout seconds pass.  For conditions no
# event announces (a process count in /proc); returns the last value.
sub wait_until {
    my ($cond, $timeout) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    my $interval = 0.01;
    for (;;) {
        my $v = $cond->();
        return $v if $v || Time::HiRes::time > $deadline;
        Time::HiRes::usleep($interval * 1e6);
        $interval *= 2 if $interval < 0.2;
    }
}

# ---- processes ---------------------------------------------------------------

# Helpers for t/process and t/listen.
push @EXPORT_OK, qw(child_pids process_alive gate gated_app hammer http_get find_command
                    is_connection_holder all_child_pids answer_to_unfinished_head);

# Every child of $pid, the connection holder included.
sub all_child_pids {
    my ($pid) = @_;
    my @children;
    for my $file (glob "/proc/$pid/task/*/children") {
        open(my $fh, '<', $file) or next;
        push @children, split ' ', scalar(<$fh>) // '';
    }
    return @children;
}

# The fields of /proc/PID/stat from the state on (state, ppid, ...; utime and
# stime are the 12th and 13th), or () when the process is gone.  The line is
# "pid (comm) state ppid ...", and comm may hold spaces and parentheses.
sub proc_stat_fields {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/stat") or return ();
    my $line = <$fh> // return ();
    return split ' ', substr($line, rindex($line, ')') + 2);
}

sub _parent_pid { (proc_stat_fields($_[0]))[1] // 0 }

sub _cmdline {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/cmdline") or return '';
    return scalar(<$fh>) // '';
}

# Whether $pid is a server's connection holder.  A child of the master names
# itself in $0 ("serow worker", "serow connection holder") just after fork;
# until then it shows the master's name, so this waits (bounded) for a child
# that still does.
sub is_connection_holder {
    my ($pid) = @_;
    my $cmdline = _cmdline($pid);
    if ($cmdline =~ /\Aserow master/ && _cmdline(_parent_pid($pid)) =~ /\Aserow master/) {
        wait_until(sub { $cmdline = _cmdline($pid); $cmdline !~ /\Aserow master/ });
    }
    return $cmdline =~ /\Aserow connection holder/;
}

# The pids whose parent is $pid (from /proc), zombies and the connection
# holder left out (for a Serow master: its workers); in scalar context, how
# many.
sub child_pids {
    my ($pid) = @_;
    my @children;
    for my $dir (glob '/proc/[0-9]*') {
        my ($child) = $dir =~ /(\d+)\z/;
        my ($state, $ppid) = proc_stat_fields($child) or next; # the process may be gone already
        push @children, $child if $ppid == $pid && $state ne 'Z' && !is_connection_holder($child);
    }
    @children = sort { $a <=> $b } @children;
    return wantarray ? @children : scalar @children;
}

# Whether $pid runs (a zombie does not).
sub process_alive {
    my ($state) = proc_stat_fields($_[0]);
    return defined $state && $state ne 'Z';
}

sub worker_pids { child_pids($_[0]{pid}) }

# Runs script/serow with @argv to its end (for command lines that fail at
# once, or --help); returns (exit status, standard output and error).
sub run_serow {
    my (@argv) = @_;
    my $pid = open(my $out, '-|') // die "fork: $!";
    if ($pid == 0) {
        open(STDERR, '>&', \*STDOUT) or die;
        exec $^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch", "$ROOT/script/serow", @argv;
        die "exec: $!";
    }
    local $/;
    my $text = <$out> // '';
    close $out;
    return ($? >> 8, $text);
}

# The path of a command in PATH (plackup, start_server), or undef.
sub find_command {
    my ($name) = @_;
    return (grep { -f && -x } map { "$_/$name" } split /:/, $ENV{PATH} // '')[0];
}

# need_debian_packages('nginx', 'libmojolicious-perl', ...): a test that needs a
# real component installs it itself (the README's setup installs only what
# the server needs).  Missing packages are installed with apt-get when the test
# runs as root (as CI does); tests running side by side queue on dpkg's lock.
# Without root, and with packages missing, the test is skipped with their names.
sub need_debian_packages {
    my @packages = @_;
    my @missing = grep { !_debian_package_installed($_) } @packages;
    return 1 unless @missing;
    Test::More::plan(skip_all => "needs Debian packages @missing (run as root to install them)")
        if $> != 0;
    # One test at a time installs (tests run side by side): apt's own locks
    # make a second apt-get fail rather than wait, for the package lists.
    open(my $lock, '>>', File::Spec->catfile(File::Spec->tmpdir, 'serow-tests-apt.lock'))
        or die "cannot open the apt lock file: $!";
    flock($lock, Fcntl::LOCK_EX()) or die "cannot lock the apt lock file: $!";
    @missing = grep { !_debian_package_installed($_) } @missing; # another test may have
    return 1 unless @missing;
    my @apt = ('apt-get', '-o', 'DPkg::Lock::Timeout=900', '-y', '-qq', '--no-install-recommends');
    my $log = File::Temp->new;
    local $ENV{DEBIAN_FRONTEND} = 'noninteractive';
    # The package lists are fetched only when an install fails without them
    # (a fresh machine has none).
    for my $attempt (1, 2) {
        system("@apt install @missing >$log 2>&1") == 0 and last;
        system("apt-get -o DPkg::Lock::Timeout=900 -qq update >>$log 2>&1") if $attempt == 1;
    }
    @missing = grep { !_debian_package_installed($_) } @missing;
    return 1 unless @missing;
    open my $fh, '<', $log->filename;
    Test::More::BAIL_OUT("could not install Debian packages @missing:\n" . join('', <$fh>));
}

sub _debian_package_installed {
    my ($package) = @_;
    my $status = `dpkg-query -W -f='\${Status}' $package 2>/dev/null` // '';
    return $status =~ /install ok installed/;
}

# headless_chromium($url, '--dump-dom', '--virtual-time-budget=5000'): runs
# Debian's chromium headless (--no-sandbox --disable-gpu, a profile of its own
# so that runs side by side do not share one) on $url with the given
# switches, bounded by CHROMIUM_TIMEOUT.  Returns what it printed (the DOM
# for --dump-dom), or undef after a diagnostic with the end of its stderr.
use constant CHROMIUM_TIMEOUT => 180; # a cold start takes 25 s on a loaded machine
push @EXPORT_OK, 'headless_chromium';

sub headless_chromium {
    my ($url, @switches) = @_;
    my $profile = File::Temp->newdir;
    my $errors = File::Temp->new;
    my @command = ('timeout', '-k', 10, CHROMIUM_TIMEOUT, 'chromium', '--headless', '--no-sandbox',
        '--disable-gpu', '--no-first-run', "--user-data-dir=$profile", @switches, $url);
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open(STDERR, '>&', $errors) or POSIX::_exit(111);
        # tools/test-sanitized preloads ASan into every process it starts;
        # Chromium (a browser, not Serow) does not run under it.
        delete $ENV{LD_PRELOAD};
        { exec { $command[0] } @command }
        POSIX::_exit(112);
    }
    my $output = do { local $/; <$out> } // '';
    return $output if close($out);
    seek($errors, 0, 0);
    my @lines = grep { !/dbus|Fontconfig/ } <$errors>;
    splice(@lines, 0, -10) if @lines > 10;
    Test::More::diag("chromium exited with status $?: " . join('', @lines));
    return undef;
}

# ---- requests ------------------------------------------------------------------

# One GET on a new connection; returns the parsed response (or undef).
sub http_get {
    my ($target, $path, %opts) = @_;
    my $raw = raw_request($target, "GET " . ($path // '/') . " HTTP/1.1\r\nHost: localhost\r\n"
        . "Connection: close\r\n\r\n", %opts);
    return scalar parse_response($raw);
}

# answer_to_unfinished_head($target, $start, $rest): sends a first request with
# $start of a second one behind it, waits for the first response (so the
# server has read $start), then sends $rest without ending the head.  Returns
# the response to the unfinished head; tests that the first was answered and
# that the server closed the connection after the second.
sub answer_to_unfinished_head {
    my ($target, $start, $rest) = @_;
    my $sock = raw_connect($target);
    my $buf = '';
    syswrite $sock, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n$start";
    my $first = read_response($sock, buffer => \$buf);
    Test::More::is($first && $first->{status}, 200, 'the first request is answered');
    syswrite $sock, $rest;
    my $res = read_response($sock, buffer => \$buf);
    my (undef, $closed) = read_until_close($sock, buffer => \$buf);
    Test::More::ok($closed, 'the server closed the connection');
    return $res;
}

# gated_app($gate): an app whose /slow requests log "slow request in worker
# PID" and stay in the app until the gate lets them through; any other path
# answers "pid PID" at once.
sub gated_app {
    my ($gate) = @_;
    return sub {
        my ($env) = @_;
        if ($env->{PATH_INFO} eq '/slow') {
            print STDERR "slow request in worker $$\n";
            $gate->wait;
            return [200, ['Content-Type' => 'text/plain'], ["slow request done by $$"]];
        }
        return [200, ['Content-Type' => 'text/plain'], ["pid $$"]];
    };
}

# gate(): a pipe an app can wait on until the test lets it through, for a
# request that is in flight for as long as the test wants.
#   app:  $gate->wait           (or, in an app file: Serow::Test::Gate->from_fd($ENV{...})->wait)
#   test: $gate->open($n)       (lets $n waiting requests through)
# The read end stays open across exec: pass $gate->fd to an app file.
sub gate { Serow::Test::Gate->new }

# hammer($target, clients => 2, path => '/', expect => qr/.../): processes
# that send GET requests, each on a new connection, until stopped (or
# max_seconds / max_requests pass).  ->wait_running waits for every client's
# first answer; ->stop returns { ok, failed, errors => [first few] }.
sub hammer { Serow::Test::Hammer->new(@_) }

package Serow::Test::Gate;

sub new {
    my ($class) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    my $flags = fcntl($r, Fcntl::F_GETFD(), 0);
    fcntl($r, Fcntl::F_SETFD(), $flags & ~Fcntl::FD_CLOEXEC());
    # wait reads only after select: a read that finds the byte taken by
    # another waiter must not block (see wait).  (The flag is on the pipe,
    # shared with every process that has the descriptor, from_fd's too.)
    $flags = fcntl($r, Fcntl::F_GETFL(), 0);
    fcntl($r, Fcntl::F_SETFL(), $flags | Fcntl::O_NONBLOCK()) or die "fcntl: $!";
    return bless { r => $r, w => $w }, $class;
}

sub from_fd {
    my ($class, $fd) = @_;
    open(my $r, '<&=', $fd) or die "gate fd $fd: $!";
    return bless { r => $r }, $class;
}

sub fd { fileno $_[0]{r} }

# In the app: blocks until the test opens the gate.  A signal does not end
# the wait: a worker's stop signals wait for the request to be answered,
# and the handler of any other signal runs and the wait goes on.  Perl runs a signal's handler only between statements,
# and a blocking call that a signal interrupts gives it that chance; but a
# signal that lands after the last statement boundary and before the call
# blocks has already been caught, so nothing interrupts the call and the
# handler waits until the gate opens (a test waiting for the handler's log
# line before opening the gate would wait in vain).  So the wait wakes up
# every WAKE_SECONDS: a handler runs at most that late.
use constant WAKE_SECONDS => 0.1;

sub wait {
    my ($self) = @_;
    my $fd = fileno $self->{r};
    for (;;) {
        my $n = sysread($self->{r}, my $byte, 1);
        return 1 if $n;
        return 0 if defined $n; # the write end is closed: the test is gone
        return 0 unless $!{EAGAIN} || $!{EINTR};
        my $readable = '';
        vec($readable, $fd, 1) = 1;
        select($readable, undef, undef, WAKE_SECONDS); # a byte, a signal or the time
    }
}

sub open {
    my ($self, $n) = @_;
    syswrite($self->{w}, 'x' x ($n // 1)) or die "gate: $!";
}

package Serow::Test::Hammer;

sub new {
    my ($class, $target, %opts) = @_;
    my $self = bless { clients => [], reports => {} }, $class;
    pipe(my $stop_r, my $stop_w) or die "pipe: $!";
    pipe(my $report_r, my $report_w) or die "pipe: $!";
    $report_w->autoflush(1);
    for (1 .. $opts{clients} // 2) {
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            close $stop_w;
            close $report_r;
            my $status = eval { _client($target, $stop_r, $report_w, %opts); 1 } ? 0 : 1;
            print {$report_w} "result 0 1 client died: $@\n" if $status;
            POSIX::_exit($status);
        }
        push @{ $self->{clients} }, $pid;
    }
    close $stop_r;
    close $report_w;
    @$self{qw(stop_w report_r)} = ($stop_w, $report_r);
    return $self;
}

sub _client {
    my ($target, $stop, $report, %opts) = @_;
    my $deadline = Time::HiRes::time + ($opts{max_seconds} // 120);
    my $max = $opts{max_requests} // 100_000;
    my $expect = $opts{expect} // qr/\A/;
    my $stopped = IO::Select->new($stop);
    my ($ok, $failed, @errors) = (0, 0);
    while ($ok + $failed < $max && Time::HiRes::time < $deadline && !$stopped->can_read(0)) {
        my $res = eval { Serow::Test::http_get($target, $opts{path} // '/') };
        if ($res && $res->{status} == 200 && $res->{body} =~ $expect) {
            print {$report} "running\n" if !$ok++;
        } else {
            $failed++;
            push @errors, $@ ? "no connection: $@" : $res ? "status $res->{status}: $res->{body}"
                : 'no response' if @errors < 5;
        }
    }
    s/\s+/ /g for @errors;
    print {$report} join(' ', 'result', $ok, $failed, join(' | ', @errors)), "\n";
}

sub _read_reports {
    my ($self, $timeout) = @_;
    my $sel = IO::Select->new($self->{report_r});
    return 0 unless $sel->can_read($timeout);
    my $n = sysread($self->{report_r}, my $chunk, 65536);
    return 0 unless $n;
    $self->{buffer} .= $chunk;
    while ($self->{buffer} =~ s/\A([^\n]*)\n//) {
        my $line = $1;
        if ($line eq 'running') { $self->{running}++ }
        elsif ($line =~ /\Aresult (\d+) (\d+) ?(.*)\z/) { push @{ $self->{results} }, [$1, $2, $3] }
    }
    return 1;
}

# Waits until every client has had one answer; returns whether they have.
sub wait_running {
    my ($self, $timeout) = @_;
    my $deadline = Time::HiRes::time + ($timeout // Serow::Test::READ_TIMEOUT);
    # A client that finished has said "running" before its result, unless it
    # never had an answer: count those, not every result, or a fast client
    # would be counted twice while another's "running" is still unread.
    while (($self->{running} // 0) + (grep { $_->[0] == 0 } @{ $self->{results} || [] })
            < @{ $self->{clients} }) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0;
        $self->_read_reports($left);
    }
    return ($self->{running} // 0) == @{ $self->{clients} };
}

sub stop {
    my ($self) = @_;
    syswrite($self->{stop_w}, 'x');
    my $deadline = Time::HiRes::time + Serow::Test::STOP_TIMEOUT;
    while (@{ $self->{results} || [] } < @{ $self->{clients} } && Time::HiRes::time < $deadline) {
        $self->_read_reports($deadline - Time::HiRes::time);
    }
    $self->_reap;
    my %total = (ok => 0, failed => 0, errors => []);
    for (@{ $self->{results} || [] }) {
        $total{ok} += $_->[0];
        $total{failed} += $_->[1];
        push @{ $total{errors} }, $_->[2] if length $_->[2];
    }
    $total{failed} += @{ $self->{clients} } - @{ $self->{results} || [] }; # a client that never answered
    return \%total;
}

sub _reap {
    my ($self) = @_;
    for my $pid (@{ $self->{clients} }) {
        kill 'KILL', $pid;
        waitpid($pid, 0);
    }
    $self->{clients_reaped} = 1;
}

sub DESTROY {
    my ($self) = @_;
    local ($?, $@, $!);
    $self->_reap unless $self->{clients_reaped};
}

package Serow::Test;

1;
