package Serow::Master;
use strict;
use warnings;

use Serow ();
use Serow::Log ();
use Serow::Master::Fork ();
use Serow::Master::Generations ();
use Serow::Master::Holder ();
use Serow::Master::Limits ();
use Serow::Master::Logs ();
use Serow::Master::Signals ();
use Serow::Master::Systemd ();
use Serow::Master::Workers ();

# The master: new (which makes its components and wires them), the main
# loop, what each signal asks, the stop.  Each concern is a component, an
# object of its own that owns its fields and is used through its methods:
#   fork         Fork         how every child is forked
#   logs         Logs         --access-log opened for the children; USR1's reopening
#   holder       Holder       the connection holder process: started, stopped, replaced
#   generations  Generations  serow FILE's generation processes
#   workers      Workers      how many, which are current; spawned, asked, reaped
#   limits       Limits       --max-worker-rss, --graceful-timeout, --request-timeout's kill
#   systemd      Systemd      what systemd is told under Type=notify
#   signals      Signals      which signals it handles, what each asks, their queue
# new makes them in this order, and gives each the ones it uses, made before
# it; none reaches back.  Where the work of one follows from another's (a
# HUP, a generation loaded, a worker reaped), the master does both.  The
# master alone owns the stop (stopping, exit_status) and the start-up line
# (announced).

# How long the master sleeps between looks at its workers when no signal
# wakes it: signals and child exits interrupt the sleep at once.
use constant IDLE_WAKE_SECONDS => 1;
# Worker slots in the shared memory: room for TTIN and for old workers that
# finish while their replacements run.
use constant MIN_WORKER_SLOTS => 64;

# The handlers to set before the master runs (Serow::Master::Signals).
sub early_signal_handlers { Serow::Master::Signals->early_signal_handlers }

# How it gets the app: app (loaded: plackup -s Serow, Serow::Server->run),
# load_app (--lazy-app: each worker calls it after the fork) or preload_app
# (serow FILE: a generation process calls it and forks the workers), with
# app_file for the messages.
sub new {
    my ($class, %args) = @_;
    my $options = $args{options};
    my $slots = $options->{workers} * 4 > MIN_WORKER_SLOTS ? $options->{workers} * 4 : MIN_WORKER_SLOTS;
    my $shared = Serow::Shared->new($slots); # what workers and the holder publish (src/shared/shared_state.h)
    my %common = (options => $options, shared => $shared);

    my $fork = Serow::Master::Fork->new(privileges => $args{privileges});
    my $logs = Serow::Master::Logs->new(options => $options);
    $logs->open_access_log or die "--access-log: cannot open '$options->{access_log}' for appending: $!\n";
    my $holder = Serow::Master::Holder->new(%common, fork => $fork, logs => $logs,
        listeners => $args{listeners});
    # (A worker a generation process forks runs what any worker runs.)
    my $workers;
    my $generations = Serow::Master::Generations->new(shared => $shared, fork => $fork, logs => $logs,
        load_app => $args{preload_app}, app_file => $args{app_file},
        run_worker => sub { $workers->run_worker(@_) });
    $workers = Serow::Master::Workers->new(%common, fork => $fork, logs => $logs,
        generations => $generations, listeners => $args{listeners},
        worker_channels => [ $holder->worker_channels ],
        app => $args{app}, load_app => $args{load_app}, app_file => $args{app_file});
    my $limits = Serow::Master::Limits->new(%common, workers => $workers, logs => $logs);
    my $systemd = Serow::Master::Systemd->new(notify => $args{notify});
    # Every child closes the descriptors that are the master's; a failed
    # fork holds off new workers as a worker failing at start does.
    $fork->in_child(sub { $_->close_in_child for $workers, $generations, $systemd });
    $fork->on_failure(sub { $workers->throttle_spawning });

    return bless {
        shared      => $shared,
        listeners   => $args{listeners},
        on_ready    => $args{on_ready}, # called once the signal handlers are in place
        on_hup      => $args{on_hup}, # called on HUP before new workers start (TLS's files read again)
        logs        => $logs,
        holder      => $holder,
        generations => $generations,
        workers     => $workers,
        limits      => $limits,
        systemd     => $systemd,
        signals     => Serow::Master::Signals->new,
        announced   => 0, # on_ready has run
        stopping    => 0, # the stop has begun
        exit_status => 0,
        # --lazy-app and serow FILE, after a HUP: the old workers go once
        # every new one has started (retire_old_generation).
        retire_old_when_ready => 0,
    }, $class;
}

# Whether the stop has begun.
sub stopping { $_[0]{stopping} }

sub run {
    my ($self) = @_;
    local $0 = "serow master";
    local @SIG{ Serow::Master::Signals->names } = $self->{signals}->handlers;
    local $SIG{PIPE} = 'IGNORE';
    # USR2 is what the kernel sends a worker when its master dies
    # (set_parent_death_signal): one sent to the whole process group must not
    # kill the master by its default action.
    local $SIG{USR2} = 'IGNORE';
    $self->{signals}->take_early;
    my ($workers, $generations, $holder) = @$self{qw(workers generations holder)};
    # serow FILE: the workers a generation process forks (through a process
    # that exits at once) become the master's children.
    # (Without it every such worker would find another parent than the
    # master and leave at once: better not to start.)
    if ($generations->preloading && !Serow::set_child_subreaper()) {
        die "cannot become a child subreaper (prctl PR_SET_CHILD_SUBREAPER): $!\n";
    }
    # (serow FILE: once the first generation has loaded the app.)
    $self->announce unless $generations->preloading;

    $self->handle_signals; # those that came early: after a stop, nothing starts
    if (!$self->{stopping}) {
        $holder->spawn;
        # (An early HUP may have started it.)
        $generations->start if $generations->preloading && !$generations->loading;
        $workers->spawn_missing;
    }
    until ($self->{stopping} && !$workers->count && !$holder->pid && !$generations->running) {
        $self->wait_for_event;
        # Signals first: a TERM or INT sent to the whole process group (^C in
        # a terminal) also stops the holder and the workers, and their exits
        # must be read as part of the stop, not as crashes to recover from.
        $self->handle_signals;
        $self->reap_children;
        $self->check_loading_generation;
        $generations->start_when_due unless $self->{stopping};
        $self->{limits}->kill_overdue_workers;
        if ($self->{stopping}) {
            # The workers have handed their idle connections over: now the
            # holder closes them and goes too.
            $holder->stop unless $workers->count;
            next;
        }
        $holder->spawn unless $holder->pid;
        if (!$self->awaiting_first_load) {
            $self->{limits}->recycle_large_workers;
            $workers->retire_surplus;
            $workers->spawn_missing;
            $self->retire_old_generation;
        }
        $self->notify_systemd;
    }
    Serow::Log->info("stopped");
    return $self->{exit_status};
}

# Says the server is up (the start-up line): once, when the master's
# signal handlers are in place, and with serow FILE once the app has loaded.
sub announce {
    my ($self) = @_;
    return if $self->{announced}++;
    $self->{on_ready}->() if $self->{on_ready};
}

sub wait_for_event {
    my ($self) = @_;
    return if $self->{signals}->pending;
    my $timeout = $self->{systemd}->timeout(IDLE_WAKE_SECONDS, $self->stopping);
    # (A generation loading the app says when it is done.)
    my $rin;
    my $loading = $self->{generations}->loading;
    vec($rin, $loading->channel, 1) = 1 if $loading;
    select($rin, undef, undef, $timeout);
}

# Ready: the connection holder runs, no generation is loading the app, and
# every worker of the current generation has started.  $status: the shared
# memory's (Serow::Shared->status).
sub generation_ready {
    my ($self, $status) = @_;
    return 0 if !$status->{holder_pid} || $self->{generations}->loading;
    return $self->{workers}->all_current_started($status);
}

# Under systemd's Type=notify: READY=1 once the workers are up, STATUS=, the
# watchdog's ping (Serow::Master::Systemd).
sub notify_systemd {
    my ($self) = @_;
    return unless $self->{systemd}->active;
    my $status = $self->{shared}->status;
    $self->{systemd}->update($status, $self->generation_ready($status));
}

# --lazy-app and serow FILE, until the app has loaded once: true while the
# master waits for it (it starts no worker meanwhile).  --lazy-app, every
# worker of the first generation failed to load it: the master stops.
sub awaiting_first_load {
    my ($self) = @_;
    my $generations = $self->{generations};
    return !$generations->serving if $generations->preloading;
    my $state = $self->{workers}->first_load or return 0;
    $self->give_up if $state eq 'failed';
    return 1;
}

# ---- Signals ----

# What the signals received ask (Serow::Master::Signals): each a method
# below.
sub handle_signals {
    my ($self) = @_;
    while (my ($method, $sig) = $self->{signals}->next_request) {
        # Once stopping, only the exit is left: a HUP or TTIN must not start
        # workers that nobody would stop.
        next if $self->{stopping};
        $self->$method($sig);
    }
}

sub stop {
    my ($self, $sig) = @_;
    $self->begin_stop;
    # serow FILE, the app still loading: as serow says when a stop comes
    # before the master runs (script/serow).
    return Serow::Log->info("received SIG$sig before the server started: exiting")
        unless $self->{announced};
    # Said once it is so: whoever reads the line may count on it (a response
    # from now on closes its connection, even from a worker that takes its
    # stop request only after the request it is busy with).
    Serow::Log->info("received SIG$sig: finishing in-flight requests, then exiting");
}

# HUP: new workers first, then the old ones finish what they have: the
# listen sockets never go unserved.
sub restart_workers {
    my ($self, $sig) = @_;
    my ($workers, $generations) = @$self{qw(workers generations)};
    # serow FILE, the first generation still loading: it reads the file as
    # it is now, and there is nothing to replace.
    if ($generations->preloading && !$generations->serving && $generations->loading) {
        return Serow::Log->info("received SIG$sig while the app loads: nothing to replace yet");
    }
    Serow::Log->info("received SIG$sig: replacing workers gracefully");
    $self->{on_hup}->() if $self->{on_hup};
    $self->{systemd}->reloading;
    $workers->end_failure_streak;
    # serow FILE: a new generation loads the app; its workers start once it
    # has (check_loading_generation).
    return $generations->start if $generations->preloading;
    my @old = $workers->pids;
    $workers->begin_generation;
    $workers->spawn_missing;
    # --lazy-app: the new workers load the app file afresh, which may have
    # been broken by the deploy the HUP is for: the old ones serve until
    # every new one has started (retire_old_generation).
    return $self->{retire_old_when_ready} = 1 if $workers->loads_app;
    $workers->stop($_) for @old;
}

sub add_worker {
    my ($self, $sig) = @_;
    $self->{workers}->add($sig);
}

sub remove_worker {
    my ($self, $sig) = @_;
    $self->{workers}->remove($sig);
}

# USR1: logrotate has moved the logs away; the master opens its own again,
# and every worker and the holder reopen theirs.
sub reopen_logs {
    my ($self, $sig) = @_;
    $self->{logs}->reopen($sig) or return;
    $self->{workers}->reopen_logs;
    $self->{holder}->reopen_logs;
}

# ---- Generations ----

# serow FILE: the generation loading the app has loaded it (its workers
# become the current ones, and replace the old ones once they have all
# started) or could not (the old generation keeps serving, or, at the start,
# serow exits 2).
sub check_loading_generation {
    my ($self) = @_;
    my $result = $self->{generations}->check_loading(!$self->{announced}) or return;
    if ($result eq 'loaded') {
        $self->{workers}->begin_generation;
        $self->{retire_old_when_ready} = 1;
        return $self->announce;
    }
    return $self->give_up unless $self->{announced};
    # (Once said: READY=1 again, the old workers serving on.)
    $self->{systemd}->reload_failed;
}

# --lazy-app and serow FILE, after a HUP: once the new generation has
# started, the workers of the older ones finish and leave, and so do the
# older generation processes.
sub retire_old_generation {
    my ($self) = @_;
    return unless $self->{retire_old_when_ready} && $self->generation_ready($self->{shared}->status);
    $self->{retire_old_when_ready} = 0;
    $self->{workers}->stop_older_generations;
    $self->{generations}->retire_all_but_serving;
}

# ---- Exits and the stop ----

# The children that have exited: the holder, generation processes, workers.
sub reap_children {
    my ($self) = @_;
    while ((my $pid = waitpid(-1, Serow::WNOHANG())) > 0) {
        my $status = $?;
        if ($self->{holder}->is_holder($pid)) {
            $self->{holder}->exited($pid, $status, $self->stopping);
        } elsif ($self->{generations}->is_generation($pid)) {
            $self->{generations}->exited($pid, $status);
        } else {
            $self->worker_exited($pid, $status);
        }
    }
}

# The limits first: the client of a request that got its worker killed is
# answered from what the worker left in its slot, which the workers' books
# then reset.  A HUP's worker that could not load the app (--lazy-app)
# ends the reload: the old workers serve on.
sub worker_exited {
    my ($self, $pid, $status) = @_;
    $self->{limits}->worker_exited($pid);
    $self->{workers}->exited($pid, $status, $self->stopping)
        and $self->{systemd}->reload_failed;
}

sub begin_stop {
    my ($self) = @_;
    $self->{stopping} = 1;
    $self->{systemd}->stopping;
    $self->{shared}->set_server_stopping;
    $self->{workers}->stop_all;
    $self->{generations}->stop;
    # After the stop requests: an idle worker woken by its listener closing
    # finds its request already, and stops instead of accepting on it again.
    $_->stop_accepting for @{ $self->{listeners} };
}

# The app cannot be loaded at the start (said): serow exits 2, as for a bad
# app file without --lazy-app.
sub give_up {
    my ($self) = @_;
    $self->{exit_status} = 2;
    $self->begin_stop;
}

1;
__END__

=head1 NAME

Serow::Master - the master process: forks workers, replaces them, handles signals

=head1 DESCRIPTION

The master holds the listen sockets, forks the connection holder
(L<Serow::ConnectionHolder>, see F<docs/keepalive.md>) and C<--workers>
workers, and replaces any that exits (C<--max-requests>, C<psgix.harakiri>,
an app that calls C<exit>, a crash; see F<docs/hardening.md>), and the holder if it dies.
With C<--max-worker-rss>, it reads each worker's resident memory once a second
and replaces one over the limit as on HUP (C<worker PID uses N MiB, over
--max-worker-rss M: replaced>). It logs a line when a worker exits (C<worker PID exited with
status N> or C<was killed by signal N>); the worker itself logs when it is
ready (C<worker PID started>, with its own request limit under
C<--max-requests>) and when it stops accepting (C<worker PID stopping>; a
busy worker, once its request is answered).

How a worker gets the app depends on how the master got it:

=over

=item serow FILE (C<preload_app>)

The master never loads the app. A generation process (L<Serow::Generation>)
loads it and forks the workers, each through an intermediate process, so
that they are the master's children (it is a child subreaper) and the
master manages them as any other. HUP starts a new generation; a file that
cannot be loaded leaves the old one serving.

=item --lazy-app (C<load_app>)

Each worker loads the file after the fork; after a HUP, the old workers
serve until the new ones have started.

=item a loaded app (C<app>: C<plackup -s Serow>, C<< Serow::Server->run($app) >>)

The workers are forked from the master; HUP replaces them with the same code.

=back

The master tells a worker to stop, or to reopen its logs, through the
shared memory (a flag in the worker's slot, then a ring of an eventfd the
master made before forking it and the worker's loop polls), not with a
signal: the worker takes it between requests, so that what the app is doing
is not cut short. Workers ignore the master's signals (below); send them to
the master.

A worker whose master dies (even by SIGKILL) gets SIGUSR2 from the kernel
(it ignores SIGTERM) and finishes its requests, so no worker outlives its
master for long.

With C<--user> or C<--group>, every child (workers, holder, generation
processes) switches ids right after the fork (L<Serow::Privileges>), before it sets that
parent-death signal: a change of uid clears it. The master keeps its ids.

=head2 Signals

=over

=item TERM, INT, QUIT

Stop accepting, let the workers finish the requests they have (up to
C<--graceful-timeout>), then exit 0. The sockets the master opened
(C<--listen>) are shut down at once, so new connections are refused in every
process; sockets handed over (Server::Starter, systemd) stay open. The
master asks each worker to stop; a worker takes the request between requests
(L<Serow::Worker>): the app is not interrupted.
Idle kept-alive connections get one second more for the request their
client may be sending at that moment (answered with C<Connection: close>;
see F<docs/keepalive.md>), so that a Server::Starter reload under load
fails no request. Signals other than these
are ignored from then on.

=item HUP

Start a new set of workers, then ask the old ones to finish and exit (each
within C<--graceful-timeout>). With serow FILE, a new generation process
loads the app afresh first, and the old workers go once every new one has
started; with C<--lazy-app> too, the new workers loading the file. With
TLS, the certificates and keys are read again first (C<on_hup>,
L<Serow::Server>), for the new workers. See
F<docs/operations.md>, "Deploying new code: HUP".

=item TTIN, TTOU

One worker more, one worker less (never fewer than one).

=item USR1

With C<--access-log FILE> or C<--error-log FILE>: the master and every
worker open the file again (after logrotate renamed it), and so does the
connection holder (it logs the requests C<--max-queue-wait> sheds; with
neither option it ignores USR1).

=back

=head2 systemd

Under C<Type=notify> (C<$NOTIFY_SOCKET> set; L<Serow::Notify>) the master
tells systemd C<READY=1> once the holder and every worker run,
C<RELOADING=1> and C<READY=1> again around a HUP (also when the new
generation could not load the app), C<STOPPING=1> on stop,
C<STATUS=> when the counts of busy and idle workers and of queued and idle
connections change, and C<WATCHDOG=1> every half C<WATCHDOG_USEC>. See
F<docs/operations.md>.

=cut
