package Serow::Worker;
use strict;
use warnings;

use Serow ();
use Serow::Writer ();
use Serow::Log ();

# Bytes asked of the C reader per call when buffering a request body.
use constant BODY_READ_SIZE => 65536;
# Bytes read from a body handle that is not a plain file, per write.
use constant BODY_HANDLE_READ_SIZE => 65536;

# The keys of every env that do not change between requests; the C side
# copies this hash and adds the request's own keys.
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

sub new {
    my ($class, %args) = @_;
    my $self = bless {
        app       => $args{app},
        options   => $args{options},
        listeners => $args{listeners},
        shared    => $args{shared},
        slot      => $args{slot},
        channels  => $args{channels},
        served    => 0,
    }, $class;
    my $max = $self->{options}{max_requests};
    # Each worker draws its own limit so that workers do not all restart together.
    $self->{request_limit} = $max ? $max - int(rand($max / 4)) : 0;
    return $self;
}

sub run {
    my ($self) = @_;
    my $options = $self->{options};
    my $loop = $self->{loop} = Serow::Loop->new({ map { $_ => $options->{$_} } qw(
        max_request_line max_header_size max_headers max_body_size header_timeout
        read_timeout write_timeout keepalive_timeout max_keepalive_requests
        max_keepalive_connections) });
    for my $l (@{ $self->{listeners} }) {
        $loop->add_listener($l->{fd}, $l->{is_unix} ? 1 : 0, $l->{server_name}, $l->{server_port});
    }
    $loop->join_holder($self->{shared}, $self->{slot}, @{ $self->{channels} }) if $self->{shared};

    $SIG{PIPE} = 'IGNORE';
    $SIG{$_} = sub { $loop->stop } for qw(TERM INT QUIT);
    $SIG{HUP} = 'IGNORE';
    $SIG{$_} = 'DEFAULT' for qw(TTIN TTOU CHLD USR1);

    my $template = _env_template();
    $template->{'psgix.informational'} = sub { $loop->send_informational(@_) };
    if (my $shared = $self->{shared}) {
        # For Plack::Middleware::SerowStatus: a snapshot of every process.
        $template->{'serow.status'} = sub { $shared->status };
    }

    for (;;) {
        my $env = $loop->next_request($template);
        if (!$env) {
            last if $loop->is_stopping && $loop->is_drained;
            next; # a signal: its handler has run
        }
        my $keep_going = $self->handle_request($env);
        $self->{served}++;
        if (!$keep_going || ($self->{request_limit} && $self->{served} >= $self->{request_limit})) {
            $loop->stop;
        }
    }
    return 0;
}

# Answers one request.  Returns false when the worker should stop after it
# (psgix.harakiri.commit).
sub handle_request {
    my ($self, $env) = @_;
    my $loop = $self->{loop};

    $env->{'psgi.input'} = $self->buffer_request_body($env) // return 1;
    open(my $io, '+<&', $loop->current_fd) or do {
        $loop->fail_request(503);
        return 1;
    };
    $env->{'psgix.io'} = $io;
    $env->{'psgix.cleanup.handlers'} = [];

    my $res = eval { $self->{app}->($env) };
    if (my $error = $@) {
        $self->app_failed($env, "the app died: $error");
    } elsif (ref $res eq 'ARRAY') {
        $self->send_array_response($env, $res);
    } elsif (ref $res eq 'CODE') {
        $self->run_streaming_response($env, $res);
    } else {
        $self->app_failed($env, "the app returned " . (defined $res ? "'$res'" : 'undef')
            . " instead of an array or a code reference");
    }
    delete $env->{'psgix.io'};
    # A psgix.io handle the app kept (a WebSocket, say) now owns the
    # connection: the server lets go of it without closing it.
    if (Serow::referent_refcount($io) > 1) {
        $loop->release_current;
    } else {
        $loop->finish_request if $loop->current_fd >= 0;
        close $io;
    }

    for my $handler (@{ $env->{'psgix.cleanup.handlers'} }) {
        eval { $handler->($env); 1 } or Serow::Log->error("a psgix.cleanup handler died: $@");
    }
    return !$env->{'psgix.harakiri.commit'};
}

sub app_failed {
    my ($self, $env, $message) = @_;
    Serow::Log->error("$env->{REQUEST_METHOD} $env->{REQUEST_URI}: $message");
    my $loop = $self->{loop};
    return unless $loop->current_fd >= 0;
    # Nothing sent yet: a clean 500.  Else the response is cut: close.
    $loop->fail_request(500);
}

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
    $self->app_failed($env, "bad response: $@") unless $sent;
}

# A body that is a file handle or an object with getline/close.
sub send_handle_body {
    my ($self, $env, $status, $headers, $body) = @_;
    my $loop = $self->{loop};
    my $fd = ref $body eq 'GLOB' || (Scalar::Util::blessed($body) && $body->isa('IO::Handle'))
        ? fileno($body) : undef;
    if (defined $fd && $fd >= 0 && -f $body) {
        # A real file: sendfile(2) from its current position.
        my $offset = sysseek($body, 0, 1) || 0;
        my $length = (-s _) - $offset;
        $length = 0 if $length < 0;
        $loop->start_response($status, $headers, $length)
            and $loop->sendfile_body($fd, $offset, $length)
            and $loop->finish_body;
    } else {
        $loop->start_response($status, $headers, undef) or return;
        local $/ = \BODY_HANDLE_READ_SIZE;
        while (defined(my $part = $body->getline)) {
            next unless length $part;
            $loop->write_body($part) or last;
        }
        $loop->finish_body;
    }
    $body->close;
}

sub run_streaming_response {
    my ($self, $env, $callback) = @_;
    my $loop = $self->{loop};
    my $writer;
    my $responder = sub {
        my ($res) = @_;
        my ($status, $headers, $body) = @$res;
        if (@$res >= 3) {
            $self->send_array_response($env, $res);
            return;
        }
        $loop->start_response($status, $headers, undef);
        return $writer = Serow::Writer->new($loop);
    };
    my $ok = eval { $callback->($responder); 1 };
    my $error = $@;
    if (!$ok) {
        $self->app_failed($env, "the app died while streaming: $error");
    } elsif ($writer && !$writer->closed) {
        $writer->close; # the app forgot: end the body so the client is not left waiting
    } elsif (!$writer && !$loop->response_started && $loop->current_fd >= 0) {
        $self->app_failed($env, "the streaming app never called the responder");
    }
}

# Reads the whole request body before the app runs (psgix.input.buffered):
# in memory up to --body-memory-limit, in an unlinked temp file beyond.
# Returns the psgi.input handle, or undef when the request was answered with
# an error (or the client left).
sub buffer_request_body {
    my ($self, $env) = @_;
    my $loop = $self->{loop};
    my $framing = $loop->request_body_framing;
    if (!$framing) {
        open(my $empty, '<', \'') or die;
        return $empty;
    }
    my $limit = $self->{options}{body_memory_limit};
    my $expected = $loop->request_content_length;
    my $buffer = '';
    my $spool;
    my $total = 0;
    $spool = _temp_file() if $expected > $limit;
    for (;;) {
        my $n = $loop->read_body($buffer, BODY_READ_SIZE);
        if ($n < 0) {
            $loop->fail_request($n == -1 ? 400 : -$n);
            return undef;
        }
        $total += $n;
        if (!$spool && length($buffer) > $limit) {
            $spool = _temp_file();
        }
        if ($spool && (length($buffer) >= BODY_READ_SIZE * 4 || $n == 0)) {
            print {$spool} $buffer or die "cannot write the request body to a temp file: $!";
            $buffer = '';
        }
        last if $n == 0;
    }
    if ($framing == 2) {
        $env->{CONTENT_LENGTH} = $total;
        delete $env->{HTTP_TRANSFER_ENCODING};
    }
    if ($spool) {
        $spool->flush;
        seek($spool, 0, 0);
        return $spool;
    }
    open(my $in, '<', \$buffer) or die;
    return $in;
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

A worker waits in its C event loop (L<Serow::Loop>, F<src/worker_loop.c>)
for the next complete request head on any of its connections, buffers the
body, calls the PSGI app and sends what it returned: an array body in one
writev, a file with sendfile(2), other handles 64 KiB at a time, and
C<psgi.streaming> writers chunk by chunk.

It supports C<psgix.io>, C<psgix.informational>, C<psgix.harakiri> and
C<psgix.cleanup>.

=cut
