package Serow::Generation;
use strict;
use warnings;

use Time::HiRes ();

use Serow ();
use Serow::Log ();
use Serow::Master::Signals ();

# How long the master waits for a generation process to say which worker it
# forked.  It answers at once (two forks); past this it is taken for hung.
use constant SPAWN_REPLY_SECONDS => 10;

# A generation of `serow FILE` (the app preloaded): a process, forked by the
# master, that loads the app file and then forks that generation's workers,
# which share its compiled app copy-on-write.  The master never loads the
# app, so that a HUP can load it afresh from disk in a new generation while
# the old one serves.
#
# The master keeps managing every worker itself (Serow::Master::Workers: slots,
# reaping, stopping, killing): the generation process forks each worker
# through an intermediate process that exits at once, so that the worker is
# re-parented to the master (a child subreaper), and says the worker's pid.
# The master asks for one worker at a time and waits for the answer before
# it reaps again, so no worker can exit before the master knows it.
#
# Messages on the channel (SOCK_SEQPACKET, Serow::send_message):
#   master -> generation: "spawn SLOT LIMIT ERR ACC" with the worker's
#                         doorbell (eventfd), then the master's standard
#                         error if ERR is 1 and the access log if ACC is 1
#                         (the files as they are now: USR1 may have opened
#                         them again since the generation was forked); "exit"
#   generation -> master: "loaded" once the app is; "slot SLOT pid PID" or
#                         "slot SLOT error WHY" for each spawn (SLOT "-"
#                         for a request it could not read): the master
#                         tells a late answer to a request it gave up on
#                         from the answer to its current one.
# A generation that cannot load the app logs why and exits: the master reads
# the end of the stream.

# Master side: forks the generation process (through $args{fork}, a
# Serow::Master::Fork: privileges dropped, parent-death signal KILL).  In
# the process, $args{logs} (Serow::Master::Logs) is the access log's, and
# each worker it forks runs $args{run_worker} (Serow::Master::Workers,
# run_worker).  Returns the object, or undef when the fork failed.
sub start {
    my ($class, %args) = @_;
    my ($master_end, $generation_end) = Serow::make_message_channel();
    my $self = bless {
        number     => $args{number},
        channel    => $master_end,
        state      => 'loading',
        master_pid => $args{fork}->master_pid,
        logs       => $args{logs},
        run_worker => $args{run_worker},
    }, $class;
    # It ignores the master's signals (below): the master's death kills it.
    my $pid = $args{fork}->fork_child(sub {
        my ($signal_mask) = @_;
        Serow::close_fd($master_end);
        $self->{channel} = $generation_end;
        $self->run_process($args{load_app}, $signal_mask);
    }, 'KILL');
    Serow::close_fd($generation_end);
    if (!$pid) {
        Serow::close_fd($master_end);
        return undef;
    }
    $self->{pid} = $pid;
    return $self;
}

sub pid     { $_[0]{pid} }
sub number  { $_[0]{number} }
sub channel { $_[0]{channel} }
sub loading { $_[0]{state} eq 'loading' }

# Master side, once the channel is readable while loading: 'loaded', or
# 'failed' (the process ended the stream: it logged why), or '' when there
# was nothing to read after all.
sub read_load_result {
    my ($self) = @_;
    my ($message) = Serow::receive_message($self->{channel});
    return '' if !defined $message && $!{EAGAIN};
    $self->{state} = defined $message && $message eq 'loaded' ? 'serving' : 'failed';
    return $self->{state} eq 'serving' ? 'loaded' : 'failed';
}

# Master side: asks for a worker, with its doorbell and the master's error
# and access logs (each undef when there is none).  Returns its pid, or
# undef (logged).
sub spawn_worker {
    my ($self, $slot, $limit, $wake_fd, $error_log, $access_log) = @_;
    my @fds = ($wake_fd, grep { defined } $error_log, $access_log);
    my $message = join ' ', 'spawn', $slot, $limit, map { defined $_ ? 1 : 0 } $error_log, $access_log;
    if (!defined $self->{channel} || !Serow::send_message($self->{channel}, $message, @fds)) {
        Serow::Log->error("cannot ask generation $self->{number} (pid $self->{pid}) for a worker: "
            . ($! || 'it has exited'));
        return undef;
    }
    my $deadline = Time::HiRes::time + SPAWN_REPLY_SECONDS;
    for (;;) {
        my $reply = $self->wait_for_reply($deadline - Time::HiRes::time) // '';
        my ($for, $answer) = $reply =~ /\Aslot (\d+|-) (.*)\z/s;
        if (defined $for && $for ne '-' && $for != $slot) {
            $self->late_answer($for, $answer);
            next;
        }
        return $1 if defined $answer && $answer =~ /\Apid (\d+)\z/;
        Serow::Log->error("generation $self->{number} (pid $self->{pid}) could not fork a worker: "
            . (defined $answer && $answer =~ /\Aerror (.*)/s ? $1 : $reply eq '' ? 'no answer' : "it said '$reply'"));
        return undef;
    }
}

# The answer to a spawn the master gave up waiting for (its slot was given
# to another since): a worker the master does not know, with a slot that is
# not its own, must not serve.  It is the master's child (re-parented), so
# the master reaps it.
sub late_answer {
    my ($self, $slot, $answer) = @_;
    my ($pid) = $answer =~ /\Apid (\d+)\z/ or return;
    Serow::Log->error("generation $self->{number} forked worker $pid for slot $slot after the master "
        . "had given up waiting: killed");
    kill 'KILL', $pid;
}

# Master side: the next message, waiting up to $seconds; undef when none came
# (or the stream ended).
sub wait_for_reply {
    my ($self, $seconds) = @_;
    return undef if $seconds <= 0;
    my $deadline = Time::HiRes::time + $seconds;
    while ((my $left = $deadline - Time::HiRes::time) > 0) {
        my $rin = '';
        vec($rin, $self->{channel}, 1) = 1;
        select(my $rout = $rin, undef, undef, $left); # (a signal cuts it short: again)
        my ($message) = Serow::receive_message($self->{channel});
        return $message if defined $message && length $message;
        return undef if defined $message || !$!{EAGAIN};
    }
    return undef;
}

# Master side: the generation has no more workers to fork: its process
# exits (its workers, the master's children, go on until they are stopped).
sub retire {
    my ($self) = @_;
    my $channel = delete $self->{channel} // return;
    Serow::send_message($channel, 'exit');
    Serow::close_fd($channel);
}

# In a child of the master (any): the generation's channel is not its own.
sub close_in_child {
    my ($self) = @_;
    Serow::close_fd($self->{channel}) if defined $self->{channel};
}

# ---- In the generation process ----

# Loads the app, says so, then forks workers when asked until the master
# says exit (or is gone).  Never returns.
sub run_process {
    my ($self, $load_app, $signal_mask) = @_;
    $0 = "serow generation $self->{number}";
    # Like a worker, it ignores the master's signals, so that one sent to
    # the whole process group (^C, systemd's stop) acts once, through the
    # master, which ends this process by closing the channel (or, while it
    # loads the app, with SIGKILL).
    my @ignored = grep { $_ ne 'CHLD' } Serow::Master::Signals->names, 'USR2';
    $SIG{$_} = 'IGNORE' for @ignored;
    # Ignored here, not in what the app starts as it loads (a helper it
    # runs, a daemon it launches): they get the default actions back, as
    # from a worker (Serow::Worker, install_signal_handlers), and so does
    # PIPE, which the master ignores.  (A worker forked from here ignores
    # them again as it starts.)
    Serow::default_signals_in_children(@ignored, 'PIPE');
    # The access log it inherited is not its own: each worker it forks
    # gets the master's current one with the request to fork it.
    $self->{logs}->close_access_log;
    Serow::set_signal_mask($signal_mask);
    my $app = eval { $load_app->() } // do {
        Serow::Log->error("generation $self->{number}: $@");
        Serow::exit_now(1);
    };
    $self->{app} = $app;
    Serow::send_message($self->{channel}, 'loaded') or Serow::exit_now(1);
    Serow::Log->info("generation $self->{number} loaded the app");
    while (defined(my $request = $self->next_request)) {
        my ($message, @fds) = @$request;
        last if $message eq 'exit';
        my $reply = $message =~ /\Aspawn (\d+) (\d+) ([01]) ([01])\z/
            ? "slot $1 " . $self->spawn_request($1, $2, $3, $4, @fds)
            : "slot - error unknown request '$message'";
        Serow::close_fd($_) for @fds;
        Serow::send_message($self->{channel}, $reply) or last;
    }
    Serow::exit_now(0);
}

# The master's next request ([message, descriptors...]), or undef at the
# end of the stream.
sub next_request {
    my ($self) = @_;
    for (;;) {
        my $rin = '';
        vec($rin, $self->{channel}, 1) = 1;
        select(my $rout = $rin, undef, undef, undef);
        my ($message, @fds) = Serow::receive_message($self->{channel});
        return undef if defined $message && $message eq '';
        return [$message, @fds] if defined $message;
        return undef unless $!{EAGAIN} || $!{EINTR};
    }
}

# A spawn request: the master's error log becomes this process's standard
# error (after a USR1 the master's is the file opened again: this process's
# lines and the worker's go there), then the worker is forked.
sub spawn_request {
    my ($self, $slot, $limit, $with_error_log, $with_access_log, @fds) = @_;
    my $wake_fd = shift @fds;
    my $error_log = $with_error_log ? shift @fds : undef;
    my $access_log = $with_access_log ? shift @fds : undef;
    return "error spawn: descriptors missing" unless defined $wake_fd
        && (!$with_error_log || defined $error_log) && (!$with_access_log || defined $access_log);
    if (defined $error_log) {
        open(STDERR, '>&', $error_log) or return "error standard error: $!";
        select((select(STDERR), $| = 1)[0]); # (as Serow::Log->open_file leaves it)
    }
    return $self->fork_worker($slot, $limit, $wake_fd, $access_log);
}

# Forks a worker through an intermediate process, so that the worker's
# parent is the master (a subreaper) once the intermediate has exited.
# Returns "pid PID" or "error WHY".
sub fork_worker {
    my ($self, $slot, $limit, $wake_fd, $log_fd) = @_;
    pipe(my $pid_from, my $pid_to) or return "error pipe: $!";
    # As in Serow::Master::Fork's fork_child: the worker unblocks them once its
    # own handlers are set.
    my $old = Serow::block_signals(Serow::Master::Signals->names);
    my $middle = fork;
    if (!defined $middle) {
        Serow::set_signal_mask($old);
        return "error cannot fork: $!";
    }
    if ($middle == 0) {
        close $pid_from;
        pipe(my $gone_from, my $gone_to) or Serow::exit_now(1);
        my $middle = $$;
        my $pid = fork;
        if (defined $pid && $pid == 0) {
            # Named at once: by the time the master is its parent, nobody
            # can take it for a generation process.
            $0 = "serow worker";
            close $gone_to;
            close $pid_to;
            wait_for_new_parent($gone_from, $middle);
            $self->become_worker($slot, $limit, $wake_fd, $log_fd, $old);
        }
        syswrite($pid_to, defined $pid ? "$pid\n" : "0 $!\n");
        Serow::exit_now(0);
    }
    Serow::set_signal_mask($old);
    close $pid_to;
    my $answer = <$pid_from> // '';
    close $pid_from;
    waitpid($middle, 0);
    return $answer =~ /\A([1-9]\d*)\n/ ? "pid $1" : "error cannot fork: " . ($answer =~ s/\A0 //r || 'no answer');
}

# In the worker: returns once the intermediate process, its parent, has
# exited and the worker has been re-parented (to the master, or, if the
# master is gone, to another process).  The end of the pipe comes first:
# the kernel closes an exiting process's files before it re-parents its
# children, so the last microseconds are waited for by looking.
sub wait_for_new_parent {
    my ($gone, $middle) = @_;
    sysread($gone, my $byte, 1);
    close $gone;
    select(undef, undef, undef, 0.001) while getppid() == $middle;
}

# In the worker, once the master is its parent: never returns.
sub become_worker {
    my ($self, $slot, $limit, $wake_fd, $log_fd, $signal_mask) = @_;
    $SIG{$_} = 'DEFAULT' for Serow::Master::Signals->names, 'USR2';
    Serow::close_fd($self->{channel});
    # As for every child of the master (fork_child): a worker whose master is
    # gone finishes and leaves.  Set only now: it fires when the parent
    # exits, and until a moment ago the parent was the intermediate.
    Serow::set_parent_death_signal(Serow::signal_number('USR2'));
    Serow::exit_now(0) if getppid() != $self->{master_pid};
    $self->{logs}->use_access_log_fd($log_fd) or do {
        Serow::Log->error("worker $$: cannot use the access log descriptor: $!");
        Serow::exit_now(1);
    };
    $self->{run_worker}->($limit, $slot, $wake_fd, $signal_mask, $self->{app});
}

1;
__END__

=head1 NAME

Serow::Generation - the process that loads the app and forks its workers

=head1 DESCRIPTION

With C<serow FILE> (the app preloaded, no C<--lazy-app>) the master never
loads the app. It forks a generation process (after dropping privileges,
like every child), which loads the file and forks that generation's
workers, so that they share the compiled app copy-on-write. On HUP the
master starts a new generation, which loads the file afresh; only once all
its workers have started do the old workers finish and leave and the old
generation process exit. A file that cannot be loaded leaves the old
generation serving (the error is logged with its file and line); the first
generation failing stops serow with status 2.

Each worker is forked through an intermediate process that exits at once:
the master is a child subreaper (C<PR_SET_CHILD_SUBREAPER>), so the worker
becomes the master's child, and the master reaps, counts, stops and kills
it as any other worker (L<Serow::Master>). The worker sets its parent-death
signal once its parent is the master. The generation process ignores the
master's signals (as workers do) and gets SIGKILL when the master dies.

=cut
