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

our @EXPORT_OK = qw(start_server raw_request raw_connect read_response parse_response
                    wait_until);

# Generous: the machine is shared and slow; these bound a wait, never pace it.
use constant READ_TIMEOUT => 30;
use constant STOP_TIMEOUT => 60;

# A server closing a connection must fail a test, not kill it with SIGPIPE
# before it can stop the servers it started.
$SIG{PIPE} = 'IGNORE';

my $ROOT = Cwd::abs_path(File::Spec->catdir(__FILE__, (File::Spec->updir) x 4));

sub root { $ROOT }

# start_server(app => CODE | app_file => PATH, options => [...], listen => 'unix' | 'tcp')
sub start_server {
    my (%args) = @_;
    my $self = bless { log => '' }, __PACKAGE__;
    my @fds;
    if (($args{listen} // 'tcp') eq 'unix') {
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
    # The child must inherit the listen socket.
    my $flags = fcntl($self->{socket}, Fcntl::F_GETFD(), 0);
    fcntl($self->{socket}, Fcntl::F_SETFD(), $flags & ~Fcntl::FD_CLOEXEC());

    pipe(my $log_read, my $log_write) or die "pipe: $!";
    my @options = @{ $args{options} || [] };
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        close $log_read;
        POSIX::dup2(fileno($log_write), 2) or POSIX::_exit(111);
        # Not the test's stdout: a server left running must not keep prove waiting.
        open(STDOUT, '>', '/dev/null');
        $ENV{SERVER_STARTER_PORT} = join ';', @fds;
        %ENV = (%ENV, %{ $args{env} || {} });
        POSIX::setpgid(0, 0);
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
    $self->{pid} = $pid;
    $self->{log_fh} = $log_read;
    return $self;
}

sub port { $_[0]{port} }
sub path { $_[0]{path} }
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
# there), up to READ_TIMEOUT seconds.  Returns the match or undef.
sub wait_for_log {
    my ($self, $re, $timeout) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    my $from = $self->{log_seen} // 0;
    for (;;) {
        if (substr($self->{log}, $from) =~ $re) {
            $self->{log_seen} = $from + $+[0];
            return $&;
        }
        my $left = $deadline - Time::HiRes::time;
        return undef if $left <= 0 || !$self->{log_fh};
        $self->_read_log($left);
    }
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
    return unless $self->{pid} && !defined $self->{exit_status};
    local ($?, $@, $!);
    kill 'KILL', -$self->{pid};
    waitpid($self->{pid}, 0);
}

# A connected socket to the server.
sub raw_connect {
    my ($server) = @_;
    if ($server->{path}) {
        require IO::Socket::UNIX;
        return IO::Socket::UNIX->new(Peer => $server->{path}) || die "connect: $!";
    }
    return IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $server->{port})
        || die "connect: $@";
}

# Sends $bytes on a new connection and returns everything the server sends
# until it closes the connection (or READ_TIMEOUT passes).
sub raw_request {
    my ($server, $bytes, %opts) = @_;
    my $sock = raw_connect($server);
    syswrite($sock, $bytes) if length $bytes;
    shutdown($sock, 1) if $opts{half_close};
    my $out = '';
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + ($opts{timeout} // READ_TIMEOUT);
    while ((my $left = $deadline - Time::HiRes::time) > 0) {
        last unless $sel->can_read($left);
        my $n = sysread($sock, $out, 65536, length $out);
        last unless $n;
    }
    return $out;
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

1;
