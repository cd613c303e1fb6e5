package Serow::Worker;
use strict;
use warnings;

use Carp (); # the stack trace of a request that times out (app_alarm)
use Scalar::Util ();

use Serow ();
use Serow::Writer ();
use Serow::TLSSocket ();
use Serow::Log ();
use Serow::Metrics ();
# Loaded here, in the master: a worker that switched to --user may no longer
# read every directory of @INC, and perl's require fails on an unreadable
# one (the in-memory handles of psgi.input need this layer).
use PerlIO::scalar ();

# Bytes asked of the C reader per call when buffering a request body.
use constant BODY_READ_SIZE => 65536;
# Bytes read from a body handle that is not a plain file, per write.
use constant BODY_HANDLE_READ_SIZE => 65536;

# The keys of every env that do not change between requests; the C side
# reads this hash once (set_env_template), and gives every env a copy of each
# value besides the request's own keys.
sub _env_template {
    return {
        SCRIPT_NAME            => '',
        'psgi.version'         => [1, 1],
        'psgi.url_scheme'      => 'http',
        'psgi.errors'          => *STDERR{IO},
        'psgi.multithread'     => '',
        'psgi.multiprocess'    => 1,
        'psgi.run_once'        => '',
        'psgi.nonblocking'     => '',
        'psgi.streaming'       => 1,
        'psgix.input.buffered' => 1,
        'psgix.harakiri'       => 1,
        'psgix.cleanup'        => 1,
    };
}

# psgix.io is made when the app first reads it (src/psgi/psgi_env.c): a handle on
# a duplicate of the connection's socket, opened here (and made blocking
# there, for the time the app has it).
Serow::Loop->set_socket_opener(sub {
    my ($fd) = @_;
    open(my $io, '+<&', $fd) or return undef;
    return $io;
});

# On a TLS connection psgix.io is a Serow::TLSSocket: a handle on a
# duplicate of the socket too (for fileno, select and event loops), tied to
# the transport, which reads and writes the plaintext.
Serow::Loop->set_tls_socket_opener(sub {
    my ($fd, $tie) = @_;
    open(my $io, '+<&', $fd) or return undef;
    tie *$io, 'Serow::TLSSocket::Tie', $tie;
    return bless $io, 'Serow::TLSSocket';
});

# psgi.input of every request without a body: one empty in-memory handle,
# rewound for each request (an app may have read, seeked or closed it).  The
# env comes with it (src/psgi/psgi_env.c) while it is open; when an app has
# closed it, a new one is made here and handed to the loop.
sub _new_empty_input {
    my $input = _in_memory_input(\'');
    Serow::Loop->set_empty_input($input);
    return $input;
}

# psgi.input of a request whose body (up to --body-memory-limit and 64 KiB)
# came whole with its head: one in-memory handle, filled with the body and
# rewound for each such request (src/psgi/psgi_env.c), so that a small POST is
# answered without a handle opened or a step in Perl.  Made when the first
# body comes, and again when an app closed that handle, opened it again or
# pushed a layer on it.
sub _new_body_input {
    my ($max) = @_;
    Serow::Loop->set_body_input(_in_memory_input(\(my $body = '')), $max);
}

# A handle reading the scalar $$scalar_ref, as psgi.input.
sub _in_memory_input {
    my ($scalar_ref) = @_;
    open(my $input, '<', $scalar_ref) or die "cannot open an in-memory handle: $!";
    return $input;
}

sub new {
    my ($class, %args) = @_;
    return bless {
        app           => $args{app},
        options       => $args{options},
        listeners     => $args{listeners},
        # Requests before this worker leaves (0: no limit); the master draws
        # it per worker from --max-requests.
        request_limit => $args{request_limit} // 0,
        # The signal mask to restore once the handlers are set (the master
        # forks with its signals blocked).
        signal_mask   => $args{signal_mask},
        # The connection holder's shared memory, this worker's slot in it, and
        # its ends of the ready and hand-back channels.
        shared        => $args{shared},
        slot          => $args{slot},
        channels      => $args{channels},
        # The eventfd the master rings when it asks something of this
        # worker (stop, reopen the logs: Serow::Master::Workers, ask), and
        # the master's pid.
        wake_fd       => $args{wake_fd} // -1,
        master_pid    => $args{master_pid},
        # --access-log: [path, the master's handle on it] or [undef, undef]
        # for standard error; empty without one.
        access_log_to => $args{access_log} // [],
        served        => 0,
    }, $class;
}

# The worker of this process, for the END block below (a process the app
# forks is no worker: its pid differs).
my ($RUNNING, $RUNNING_PID);

# An app that calls exit ends its worker, as it asked (the master starts a
# new one), but its client gets an answer instead of a closed connection: a
# 500 when no response was started, like an app that dies.  exit is not
# turned into die (CORE::GLOBAL::exit): code that calls it means to leave,
# and an eval in the app must not be able to catch that.
END {
    if ($RUNNING && $RUNNING_PID == $$ && (my $loop = $RUNNING->{loop})) {
        if ($loop->current_fd >= 0) {
            Serow::Log->error("worker $$: the app called exit during a request: "
                . ($loop->response_started ? 'the response is cut' : 'answered 500'));
            $loop->end_request(undef, 500);
        }
    }
}

# The options the C event loop takes (Serow::Loop->new, which has no default
# of its own: a missing one is an error).
sub loop_settings {
    my ($class, $options) = @_;
    return { (map { $_ => $options->{$_} } qw(
        max_request_line max_header_size max_headers max_body_size max_chunk_extensions header_timeout
        read_timeout min_body_rate write_timeout keepalive_timeout max_keepalive_requests
        max_keepalive_connections request_timeout max_queue_wait slow_request_log)),
        request_id_header => $options->{request_id_header} // '' }; # '': none
}

sub run {
    my ($self) = @_;
    ($RUNNING, $RUNNING_PID) = ($self, $$);
    my $options = $self->{options};
    my $loop = $self->{loop} = Serow::Loop->new($self->loop_settings($options));
    for my $l (@{ $self->{listeners} }) {
        $loop->add_listener($l->{fd}, $l->{is_unix} ? 1 : 0, $l->{server_name}, $l->{server_port},
                            $l->{tls} ? 1 : 0);
    }
    if ($self->{shared}) {
        $loop->join_holder($self->{shared}, $self->{slot}, $self->{wake_fd}, @{ $self->{channels} });
        # --grip: held responses and publishes go to the holder on the
        # hand-back channel (docs/holding.md)
        Serow::Holding::_setup($options->{grip} ? 1 : 0, $self->{channels}[1], $options->{hold_max_channels},
            $options->{publish_max_item});
        Serow::Holding::_websocket_psgix_io(@{ $options->{websocket_psgix_io} || [] });
    }
    $self->open_access_log;
    $self->wrap_metrics;
    $self->route_publish;
    $self->install_signal_handlers;
    $self->run_after_fork_hooks;
    my $limit = $self->{request_limit};
    # From the worker itself, so that it comes before anything it logs about
    # its requests.
    Serow::Log->info("worker $$ started" . ($limit ? " (max requests $limit)" : ''));

    my $template = _env_template();
    $template->{'psgix.informational'} = sub { $loop->send_informational(@_) };
    if (my $shared = $self->{shared}) {
        # For Plack::Middleware::SerowStatus: a snapshot of every process.
        $template->{'serow.status'} = sub { $shared->status };
    }

    Serow::Loop->set_env_template($template);
    # A request is served in C (src/psgi/psgi_request.c), from head to end; it
    # calls here for the steps that are Perl's: a request's body read into
    # psgi.input, and a whole response it does not send itself (a handle as
    # the body, a malformed one).
    Serow::Loop->set_input_giver(sub { $self->give_input(@_) });
    Serow::Loop->set_triple_responder(sub { $self->send_array_response(@_) });

    # The calls made for every request name their sub (Serow::Loop::next_request($loop))
    # rather than call a method ($loop->next_request): a method call looks
    # its name up in the class's stash each time.
    my ($app, $note_remote_user) = ($self->{app}, $self->{access_log} ? 1 : 0);
    for (;;) {
        my $env = Serow::Loop::next_request($loop);
        if (!$env) {
            # The master asks through the shared memory, not with signals.
            $self->do_as_the_master_asks($_) for $loop->take_master_requests;
            last if $loop->is_stopping && $loop->is_drained;
            next; # a signal: its handler has run
        }
        # Before the last request, so that its response closes the connection
        # instead of leaving the client a kept-alive socket about to close.
        if ($limit && ++$self->{served} >= $limit) {
            $self->stop("served its $limit requests (--max-requests)");
        }
        # The request, from head to end, in C (src/psgi/psgi_request.c).
        Serow::Loop::serve_request($loop, $app, $env, $note_remote_user)
            or $self->stop('psgix.harakiri');
    }
    return 0;
}

# The code an app registered to run in each worker after the fork
# (reconnect to a database, reseed): push @Serow::AFTER_FORK, sub { ... }.
# A package array rather than a function, so that an app file that registers
# one needs no Serow loaded and runs unchanged under another server.  Run
# once, before the first request, after --user (a hook reconnects as the
# worker's user).  One that dies fails the worker: an app that cannot
# reconnect must not take requests (the master starts another, no faster
# than one a second).
# (Read where it is, never aliased: with plackup the app may fill it before
# this module is loaded.)
sub run_after_fork_hooks {
    my ($self) = @_;
    for my $hook (@Serow::AFTER_FORK) {
        eval { $hook->(); 1 } or die "worker $$: a hook of \@Serow::AFTER_FORK died: $@";
    }
}

# --access-log: each worker appends to the file (O_APPEND, one write per
# line) on a copy of the master's descriptor, and opens it again on USR1.
sub open_access_log {
    my ($self) = @_;
    my ($path, $fh) = @{ $self->{access_log_to} } or return;
    $self->{access_log} = 1;
    $self->{loop}->open_access_log($path, $fh ? fileno $fh : -1, $self->{options}{access_log_format});
    close $fh if $fh; # the loop has its own copy
}

# What the master asked (Serow::Master::Workers, ask): between requests.
sub do_as_the_master_asks {
    my ($self, $what) = @_;
    if ($what eq 'stop') {
        $self->stop('asked by the master');
    } elsif ($what eq 'reopen_logs') {
        $self->reopen_logs;
    }
}

# The master got USR1: the logs logrotate moved away are opened again.
sub reopen_logs {
    my ($self) = @_;
    my $error_log = Serow::Log->file($self->{options}{error_log});
    if (defined $error_log && !Serow::Log->open_file($error_log)) {
        Serow::Log->warn("worker $$ cannot reopen the error log $error_log: $!; still writing to the old file");
    }
    $self->reopen_access_log;
}

sub reopen_access_log {
    my ($self) = @_;
    return unless $self->{access_log};
    if ($self->{loop}->reopen_access_log) {
        Serow::Log->info("worker $$ reopened the access log");
    } else {
        Serow::Log->warn("worker $$ cannot reopen the access log $self->{options}{access_log}: $!; "
            . "still writing to the old file");
    }
}

# --metrics-path: answered before the app (Serow::Metrics).
sub wrap_metrics {
    my ($self) = @_;
    my $options = $self->{options};
    return unless defined $options->{metrics_path} && $self->{shared};
    $self->{app} = Serow::Metrics->wrap($self->{app}, shared => $self->{shared},
        master_pid => $self->{master_pid}, path => $options->{metrics_path}, allow => Serow::Metrics->allow_list($options),
        trusted_proxies => Serow::Metrics->trusted_proxies($options));
}

# --publish-listen: the requests that come on its listener (the last,
# Serow::Server) are answered by the publish endpoint, never the app (nor
# --metrics-path).  Without the option the app is not wrapped: the ordinary
# path pays nothing; with it, one call to ask the listener's index.
sub route_publish {
    my ($self) = @_;
    my $options = $self->{options};
    my ($index) = grep { $self->{listeners}[$_]{publish} } 0 .. $#{ $self->{listeners} };
    return unless defined $index;
    require Serow::Publish::Endpoint;
    my $endpoint = Serow::Publish::Endpoint->new(publish => $self->publish_function,
        allow => [@{ $options->{publish_allow} || [] }], max_body => $options->{publish_max_body},
        max_item => $options->{publish_max_item})->to_app;
    my ($app, $loop) = ($self->{app}, $self->{loop});
    $self->{app} = sub { $loop->request_listener == $index ? $endpoint->($_[0]) : $app->($_[0]) };
}

# What delivers a published item: the holder's (Serow::Holding::publish, C).
sub publish_function { \&Serow::Holding::publish }

# The master's signals (stop, HUP, TTIN, TTOU, USR1) are ignored by a
# worker: the master tells it what to do through the shared memory
# (do_as_the_master_asks), between requests.  Caught, a signal would cut
# short the app's sleep, select or wait, SA_RESTART or not; blocked, it
# would stay blocked in every process the app starts.  Sent to the whole
# process group (^C, systemd's stop), they reach the master too, which tells
# the workers.
use constant MASTERS_SIGNALS => qw(TERM INT QUIT HUP TTIN TTOU USR1);

sub install_signal_handlers {
    my ($self) = @_;
    $SIG{PIPE} = 'IGNORE'; # a client gone is a failed write (EPIPE), not the worker's end
    $SIG{$_} = 'IGNORE' for MASTERS_SIGNALS;
    # Ignored here, not in what the app starts: system, backticks, fork and
    # a piped open give their child these signals' default actions back (an
    # ignored signal stays ignored across exec).  PIPE too: `yes | head -1`
    # would print "Broken pipe", and a pipeline under pipefail fail.
    Serow::default_signals_in_children(MASTERS_SIGNALS, 'PIPE');
    # The kernel's word that the master died (Serow::Master::Fork, fork_child):
    # nobody is left to ask for the stop.  (A USR2 from anyone else, while
    # the master lives, changes nothing.)
    my ($pid, $master) = ($$, $self->{master_pid});
    $SIG{USR2} = sub {
        $self->stop('its master is gone') if $$ == $pid && defined $master && getppid() != $master;
    };
    $SIG{CHLD} = 'DEFAULT';
    if ($self->{options}{request_timeout}) {
        $SIG{ALRM} = sub { $self->app_alarm };
    }
    Serow::set_signal_mask($self->{signal_mask}) if $self->{signal_mask};
}

# Stops accepting; the requests in flight are finished, then run returns.
sub stop {
    my ($self, $why) = @_;
    my $loop = $self->{loop};
    return if $loop->is_stopping;
    $loop->stop;
    Serow::Log->info("worker $$ stopping ($why): finishing in-flight requests");
}

# psgi.input of a request that has none (src/psgi/psgi_request.c calls it before
# the app runs): the empty handle when the request has no body (and the app
# closed the last one), else its body, read whole.  True once
# $env->{'psgi.input'} is there; false when the request was answered instead.
# (psgix.cleanup.handlers is in the env already, and psgi.input when there is
# no body, or a small one that came whole with the head, and its handle is
# free: src/psgi/psgi_env.c)
sub give_input {
    my ($self, $env) = @_;
    my $loop = $self->{loop};
    if (!$loop->request_body_framing) {
        $env->{'psgi.input'} = _new_empty_input();
        return 1;
    }
    _new_body_input($self->{options}{body_memory_limit}) unless Serow::Loop->has_body_input;
    $env->{'psgi.input'} = $self->buffer_request_body($env) // return 0;
    return 1;
}

# An error of the request's, in the log: "GET /path: message".
sub log_error {
    my ($self, $env, $message) = @_;
    Serow::Loop->log_error($env, $message);
}

# --request-timeout: the SIGALRM handler, while the app runs.  The signal
# is the request's timer's (src/worker/request_timeout.c) when the app has run
# longer than the timeout; then where the app was goes to the log at once
# (an app that swallows the die and never returns is killed later, by the
# master, and this line is all there is of it) and a die unwinds the app
# (its evals, its transactions).  Any other SIGALRM (an app's own alarm,
# without a handler of the app's in place) is ignored: by default it would
# kill the worker.
sub app_alarm {
    my ($self) = @_;
    my $loop = $self->{loop};
    my $ran = $loop->app_overdue // return;
    my $line = $loop->request_line // '(no request)';
    Serow::Log->error(sprintf "%s: the app ran %.3fs, longer than --request-timeout %ss, "
        . "in worker %d: interrupted %s", $line, $ran, $self->{options}{request_timeout}, $$,
        _where_the_app_is());
    die "request timed out: the app ran longer than --request-timeout "
        . "$self->{options}{request_timeout}s\n";
}

# Where the app is, from app_alarm: "at FILE line N" and the calls that led
# there, up to the app's own call (the worker's frames below it say nothing
# about the app).  Carp::longmess would show this handler's frame first and
# the worker's after.
sub _where_the_app_is {
    my @lines;
    # caller(2): the handler, called where the signal found the app.
    for (my $i = 2; my @f = caller($i); $i++) {
        my ($file, $line, $sub) = @f[1 .. 3];
        push @lines, @lines ? "\t" . ($sub eq '(eval)' ? 'eval {...}' : $sub) . " called at $file line $line"
                            : "at $file line $line";
        last if $file eq __FILE__; # called by the worker: that was the app's first frame
    }
    return join "\n", @lines;
}

# A whole response whose body the server does not send itself
# (src/psgi/psgi_request.c has checked its shape, and stopped the loop when it is
# the worker's last): a handle or an object with getline, or an array it
# could not take as it is (a tied one).
sub send_array_response {
    my ($self, $env, $res) = @_;
    my ($status, $headers, $body) = @$res;
    my $loop = $self->{loop};
    my $sent = eval {
        if (ref $body eq 'ARRAY') {
            $loop->send_response($status, $headers, $body);
        } else {
            $self->send_handle_body($env, $status, $headers, $body);
        }
        1;
    };
    $loop->fail_request($env, "bad response: $@") unless $sent;
}

# A body that is a file handle or an object with getline/close.  Whatever
# happens, its close is called (PSGI), once.
sub send_handle_body {
    my ($self, $env, $status, $headers, $body) = @_;
    my $loop = $self->{loop};
    my $sent = eval {
        if (my ($fd, $offset, $length) = _plain_file($body)) {
            # A real file: sendfile(2) from its current position.
            $loop->start_response($status, $headers, $length)
                and $loop->sendfile_body($fd, $offset, $length)
                and $loop->finish_body;
        } else {
            $loop->start_response($status, $headers, undef) or return 1;
            my $writer = Serow::Writer->new($loop);
            local $/ = \BODY_HANDLE_READ_SIZE;
            while (defined(my $part = $body->getline)) {
                $writer->send($part) or last;
            }
            $writer->close;
        }
        1;
    };
    my $error = $@;
    eval { $body->close; 1 } or $self->log_error($env, "the body's close died: $@");
    die $error unless $sent;
}

# A body the kernel can send from the file as it is: (fd, offset, length) of
# a plain file handle, else ().  A blessed object that is no IO::Handle may
# filter what its getline returns, and so may a layer such as :crlf,
# :encoding or :via: those are read with getline.
sub _plain_file {
    my ($body) = @_;
    return unless (Scalar::Util::reftype($body) // '') eq 'GLOB';
    return if Scalar::Util::blessed($body) && !$body->isa('IO::Handle');
    my $fd = fileno($body);
    return unless defined $fd && $fd >= 0 && -f $body;
    my $size = -s _;
    return if grep { !/\A(?:unix|perlio|stdio)\z/ } PerlIO::get_layers($body);
    # tell, not sysseek: the position the app left, PerlIO's read-ahead aside.
    my $offset = tell($body);
    return if $offset < 0;
    return ($fd, $offset, $size > $offset ? $size - $offset : 0);
}

# Reads the whole request body before the app runs (psgix.input.buffered):
# in memory up to --body-memory-limit, in an unlinked temp file beyond.
# Returns the psgi.input handle, or undef when the request was answered with
# an error (or the client left).  Only for a request with a body.
sub buffer_request_body {
    my ($self, $env) = @_;
    my $loop = $self->{loop};
    my $framing = $loop->request_body_framing;
    my $limit = $self->{options}{body_memory_limit};
    my $expected = $loop->request_content_length;
    my $buffer = '';
    my $spool;
    my $total = 0;
    my $spool_failed = sub {
        $self->log_error($env, "cannot buffer the request body in a temp file: $_[0]");
        $loop->end_request($env, 500);
        return undef;
    };
    if ($expected > $limit) {
        $spool = eval { _temp_file() } or return $spool_failed->($@);
    }
    # A body that stays in memory is read into a string of its size at once.
    my $read_size = $expected > BODY_READ_SIZE && $expected <= $limit ? $expected : BODY_READ_SIZE;
    for (;;) {
        my $n = $loop->read_body($buffer, $read_size);
        if ($n < 0) {
            $loop->end_request($env, $n == Serow::READ_BODY_CLIENT_GONE ? 400 : -$n);
            return undef;
        }
        $total += $n;
        if (!$spool && length($buffer) > $limit) {
            $spool = eval { _temp_file() } or return $spool_failed->($@);
        }
        if ($spool && (length($buffer) >= BODY_READ_SIZE * 4 || $n == 0)) {
            print {$spool} $buffer or return $spool_failed->("$!");
            $buffer = '';
        }
        last if $n == 0;
    }
    if ($framing == Serow::BODY_CHUNKED) {
        $env->{CONTENT_LENGTH} = $total;
        delete $env->{HTTP_TRANSFER_ENCODING};
    }
    if ($spool) {
        $spool->flush or return $spool_failed->("$!");
        seek($spool, 0, 0);
        return $spool;
    }
    return _in_memory_input(\$buffer);
}

sub _temp_file {
    # Opened with no name: the file is unlinked at once, so nothing is left
    # behind whatever happens to the worker.
    open(my $fh, '+>', undef) or die "cannot create a temp file for a request body: $!";
    binmode $fh;
    return $fh;
}

1;
__END__

=head1 NAME

Serow::Worker - a Serow worker process: takes requests from its event loop and runs the app

=head1 DESCRIPTION

A worker waits in its C event loop (L<Serow::Loop>, F<src/worker/worker_loop.c>)
for the next complete request head on any of its connections, buffers the
body, calls the PSGI app and sends what it returned: an array body in one
writev, a file with sendfile(2), other handles 64 KiB at a time, and
C<psgi.streaming> writers chunk by chunk.

It supports C<psgix.io>, C<psgix.informational>, C<psgix.harakiri> and
C<psgix.cleanup>. F<docs/psgi.md> says what an app gets and what is
checked.

=head2 Signals

A worker ignores TERM, INT, QUIT, HUP, TTIN, TTOU and USR1: they are the
master's (L<Serow::Master>), which tells its workers to stop or to reopen
their logs through the shared memory; the worker does so between requests,
so that the app's C<sleep>, C<select> or wait is not cut short. A signal sent
to a worker directly does nothing. It ignores PIPE too (a write to a client
that has gone fails instead). The processes the app starts (C<system>,
backticks, a piped C<open>, C<fork>) get these signals' default actions
back, PIPE's included (F<src/worker/child_signals.c>), and none of them
blocked. USR2 is the
worker's parent-death signal: once its master is gone, it stops.

=cut
