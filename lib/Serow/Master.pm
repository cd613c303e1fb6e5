package Serow::Master;
use strict;
use warnings;

use Time::HiRes ();

use Serow ();
use Serow::ConnectionHolder ();
use Serow::Worker ();
use Serow::Log ();

# The master is one object; each of its other concerns is a module of its
# methods, which says which of the object's fields it owns.
use parent qw(
    Serow::Master::Signals
    Serow::Master::Logs
    Serow::Master::Fork
    Serow::Master::Holder
    Serow::Master::Systemd
    Serow::Master::Generations
    Serow::Master::Limits
);

# How long the master sleeps between looks at its workers when no signal
# wakes it: signals and child exits interrupt the sleep at once.
use constant IDLE_WAKE_SECONDS => 1;
# A worker that dies this soon after it started is probably failing at start:
# replacements are then spawned no faster than one per this many seconds.
use constant FAST_DEATH_SECONDS => 1;
# --lazy-app: a worker that cannot load the app exits with this status, so
# that the master tells it from a worker that failed later.
use constant APP_LOAD_FAILED => 3;
# Each worker draws its own --max-requests limit, up to this share below the
# option, so that workers started together do not all restart together.
use constant MAX_REQUESTS_SPREAD => 0.25;

# Worker slots in the shared memory: room for TTIN and for old workers that
# finish while their replacements run.
use constant MIN_WORKER_SLOTS => 64;

sub new {
    my ($class, %args) = @_;
    my $workers = $args{options}{workers};
    my $slots = $workers * 4 > MIN_WORKER_SLOTS ? $workers * 4 : MIN_WORKER_SLOTS;
    my $shared = Serow::Shared->new($slots);
    my $self = bless {
        shared     => $shared, # what workers and the holder publish (src/shared_state.h)
        holder     => Serow::ConnectionHolder->new(shared => $shared, options => $args{options}),
        holder_pid => undef,
        app        => $args{app},
        # --lazy-app: no app; each worker calls load_app after the fork.
        load_app   => $args{load_app},
        # serow FILE: no app either; a generation process (Serow::Generation)
        # calls preload_app and forks the workers.
        preload_app => $args{preload_app},
        generations => {}, # pid => Serow::Generation, every one still running
        serving    => undef, # the generation whose workers are current
        loading    => undef, # the one loading the app after a HUP (or at the start)
        app_file   => $args{app_file},
        # --lazy-app: no worker has loaded the app yet.  Until one has, the
        # master starts no replacement, and if every worker of the first
        # generation fails to load it, the master exits 2 (as serow does for
        # a bad app file without --lazy-app) instead of starting worker after
        # worker that fail the same way.
        first_load => $args{load_app} ? { failed => 0 } : undef,
        exit_status => 0,
        options    => $args{options},
        listeners  => $args{listeners},
        privileges => $args{privileges}, # Serow::Privileges: dropped in every child, or undef
        on_ready   => $args{on_ready}, # called once the signal handlers are in place
        notify     => $args{notify}, # Serow::Notify (systemd's NOTIFY_SOCKET), or undef
        awaiting_ready => 1, # READY=1 is owed once the current generation has started
        announced  => 0,     # on_ready has run
        target     => $args{options}{workers},
        # pid => { generation, started, stopping_since, killed, slot, wake_fd,
        #          recycled (over --max-worker-rss) }
        workers    => {},
        generation => 1,
        pending    => [],   # signals received, handled in order by the loop
    }, $class;
    $self->open_access_log or die "--access-log: cannot open '$args{options}{access_log}' for appending: $!\n";
    return $self;
}

sub run {
    my ($self) = @_;
    local $0 = "serow master";
    local @SIG{ $self->signal_names } = $self->queueing_signal_handlers;
    local $SIG{PIPE} = 'IGNORE';
    # USR2 is what the kernel sends a worker when its master dies
    # (set_parent_death_signal): one sent to the whole process group must not
    # kill the master by its default action.
    local $SIG{USR2} = 'IGNORE';
    $self->take_early_signals;
    $self->{pid} = $$;
    # serow FILE: the workers a generation process forks (through a process
    # that exits at once) become the master's children.
    Serow::set_child_subreaper() if $self->{preload_app};
    # (serow FILE: once the first generation has loaded the app.)
    $self->announce unless $self->{preload_app};

    $self->handle_signals; # those that came early: after a stop, nothing starts
    if (!$self->{stopping}) {
        $self->spawn_holder;
        # (An early HUP may have started it.)
        $self->start_generation if $self->{preload_app} && !$self->{loading};
        $self->spawn_missing_workers;
    }
    until ($self->{stopping} && !%{ $self->{workers} } && !$self->{holder_pid}
            && !%{ $self->{generations} }) {
        $self->wait_for_event;
        # Signals first: a TERM or INT sent to the whole process group (^C in
        # a terminal) also stops the holder and the workers, and their exits
        # must be read as part of the stop, not as crashes to recover from.
        $self->handle_signals;
        $self->reap_children;
        $self->check_loading_generation;
        $self->kill_overdue_workers;
        if ($self->{stopping}) {
            # The workers have handed their idle connections over: now the
            # holder closes them and goes too.
            $self->stop_holder unless %{ $self->{workers} };
            next;
        }
        $self->spawn_holder unless $self->{holder_pid};
        if (!$self->awaiting_first_load) {
            $self->recycle_large_workers;
            $self->retire_surplus_workers;
            $self->spawn_missing_workers;
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

# --lazy-app, until a worker has loaded the app: true while the master
# waits for the first generation (it starts no worker meanwhile).  A worker
# has loaded it once one has started (its pid is in its slot) or exited for
# any reason but APP_LOAD_FAILED; when all have failed to load it, the
# master stops, to exit 2.
sub awaiting_first_load {
    my ($self) = @_;
    return !$self->{serving} if $self->{preload_app};
    my $first = $self->{first_load} or return 0;
    if ($first->{loaded} || @{ $self->{shared}->status->{workers} }) {
        $self->{first_load} = undef;
        return 0;
    }
    return 1 if %{ $self->{workers} } || !$first->{failed};
    Serow::Log->error("no worker could load the app $self->{app_file} (--lazy-app): exiting");
    $self->{exit_status} = 2;
    $self->begin_stop;
    return 1;
}

sub wait_for_event {
    my ($self) = @_;
    return if @{ $self->{pending} };
    my $timeout = $self->systemd_timeout(IDLE_WAKE_SECONDS);
    # (A generation loading the app says when it is done.)
    my $rin;
    vec($rin, $self->{loading}->channel, 1) = 1 if $self->{loading};
    select($rin, undef, undef, $timeout);
}

# Ready: the connection holder runs, and every worker of the current
# generation has started (published its pid in its slot, which it does
# before it logs "started"; a connection that comes before its loop waits
# in the listen backlog).
sub generation_ready {
    my ($self, $status) = @_;
    return 0 if !$status->{holder_pid} || $self->{loading};
    my @current = $self->current_workers;
    return 0 if @current < $self->{target};
    my %started = map { $_->{pid} => 1 } @{ $status->{workers} };
    return !grep { !$started{$_} } @current;
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

sub begin_stop {
    my ($self) = @_;
    $self->{stopping} = 1;
    $self->{notify}->stopping if $self->{notify};
    $self->{shared}->set_server_stopping;
    $self->stop_worker($_) for keys %{ $self->{workers} };
    $self->stop_generations;
    # After the stop requests: an idle worker woken by its listener closing
    # finds its request already, and stops instead of accepting on it again.
    $_->stop_accepting for @{ $self->{listeners} };
}

sub add_worker {
    my ($self, $sig) = @_;
    $self->{target}++;
    Serow::Log->info("received SIG$sig: $self->{target} workers");
}

sub remove_worker {
    my ($self, $sig) = @_;
    $self->{target}-- if $self->{target} > 1;
    Serow::Log->info("received SIG$sig: $self->{target} workers");
}

sub current_workers {
    my ($self) = @_;
    my $w = $self->{workers};
    return grep { $w->{$_}{generation} == $self->{generation} && !$w->{$_}{stopping_since} } keys %$w;
}

sub spawn_missing_workers {
    my ($self) = @_;
    return if $self->{preload_app} && !$self->{serving}; # (no app loaded yet)
    my $missing = $self->{target} - $self->current_workers;
    for (1 .. $missing) {
        return if $self->{throttled_until} && Time::HiRes::time < $self->{throttled_until};
        $self->spawn_worker;
    }
}

# A worker, or the fork of one, failed: spawn_missing_workers starts none
# for FAST_DEATH_SECONDS.
sub throttle_spawning {
    my ($self) = @_;
    $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS;
}

# This worker's --max-requests: drawn between --min-requests (by default
# MAX_REQUESTS_SPREAD below the maximum) and --max-requests.
sub request_limit {
    my ($self) = @_;
    my $max = $self->{options}{max_requests} or return 0;
    my $min = $self->{options}{min_requests} // $max - int($max * MAX_REQUESTS_SPREAD);
    return $max - int(rand($max - $min + 1));
}

sub free_worker_slot {
    my ($self) = @_;
    my %used = map { $_->{slot} => 1 } values %{ $self->{workers} };
    for my $slot (0 .. $self->{shared}->max_workers - 1) {
        return $slot unless $used{$slot};
    }
    return undef;
}

sub spawn_worker {
    my ($self) = @_;
    my $limit = $self->request_limit;
    my $slot = $self->free_worker_slot;
    if (!defined $slot) {
        Serow::Log->error("no free worker slot: more than " . $self->{shared}->max_workers . " workers");
        return;
    }
    $self->{shared}->reset_worker($slot);
    # The worker's doorbell: the master rings it when it asks the worker
    # something (ask_worker).  Made here and inherited, rather than taken
    # from the worker with pidfd_getfd as the holder does: a stop must
    # reach a worker that has not started its loop yet, on any kernel, under
    # any ptrace policy.
    my $wake_fd = Serow::make_eventfd();
    if ($wake_fd < 0) {
        Serow::Log->error("cannot make an eventfd for a worker: $!");
        $self->throttle_spawning;
        return;
    }
    my $pid = $self->fork_worker($limit, $slot, $wake_fd);
    if (!$pid) {
        Serow::close_fd($wake_fd);
        return;
    }
    $self->{workers}{$pid} = { generation => $self->{generation}, started => Time::HiRes::time,
                               slot => $slot, wake_fd => $wake_fd };
    Serow::Log->debug("forked worker $pid in slot $slot (generation $self->{generation}"
        . ($limit ? ", max requests $limit" : '') . ')');
}

# Forks a worker (serow FILE: has the serving generation fork it); its pid,
# or undef.
sub fork_worker {
    my ($self, $limit, $slot, $wake_fd) = @_;
    if (my $serving = $self->{serving}) {
        my @access_log = $self->{access_log_fh} ? fileno $self->{access_log_fh} : ();
        my $pid = $serving->spawn_worker($slot, $limit, $wake_fd, @access_log);
        $self->throttle_spawning unless $pid;
        return $pid;
    }
    # A worker takes USR2 for its master's death: it ignores TERM
    # (Serow::Worker, install_signal_handlers).
    return $self->fork_child(sub { $self->run_worker($limit, $slot, $wake_fd, @_) }, 'USR2');
}

# In the child: becomes a worker and never returns.
sub run_worker {
    my ($self, $limit, $slot, $wake_fd, $signal_mask) = @_;
    $0 = "serow worker";
    # Else every worker would draw the same rand() sequence as its siblings.
    srand();
    # --lazy-app: here, after the fork and the switch to --user, before the
    # worker touches its slot or the holder: one that fails leaves nothing
    # behind.
    my $app = $self->{app} // eval { $self->{load_app}->() } // do {
        Serow::Log->error("worker $$: $@");
        exit APP_LOAD_FAILED;
    };
    # Under Yama's ptrace_scope 1 the holder could not take this worker's
    # connections otherwise (docs/keepalive.md).
    Serow::set_ptracer($self->{pid});
    my $worker = Serow::Worker->new(
        app           => $app,
        options       => $self->{options},
        listeners     => $self->{listeners},
        request_limit => $limit,
        signal_mask   => $signal_mask,
        shared        => $self->{shared},
        slot          => $slot,
        wake_fd       => $wake_fd,
        master_pid    => $self->{pid},
        channels      => [ $self->{holder}->worker_channels ],
        access_log    => [ $self->access_log_for_worker ],
    );
    my $status = eval { $worker->run; 1 } ? 0 : do { Serow::Log->error("worker failed: $@"); 1 };
    exit $status;
}

sub stop_worker {
    my ($self, $pid) = @_;
    my $w = $self->{workers}{$pid} or return;
    return if $w->{stopping_since};
    $w->{stopping_since} = Time::HiRes::time;
    $self->ask_worker($pid, 'stop');
}

# Asks a worker to 'stop' or to 'reopen_logs' through the shared memory (no
# signal: it would cut short what the app is doing, and a worker ignores
# them); the worker sees it once it is between requests.
sub ask_worker {
    my ($self, $pid, $what) = @_;
    my $w = $self->{workers}{$pid} or return;
    eval { $self->{shared}->ask_worker($w->{slot}, $w->{wake_fd}, $what); 1 }
        or Serow::Log->error("cannot ask worker $pid to $what: $@");
}

# TTOU lowered the target: the newest surplus workers finish and leave.
sub retire_surplus_workers {
    my ($self) = @_;
    my @current = sort { $self->{workers}{$b}{started} <=> $self->{workers}{$a}{started} }
        $self->current_workers;
    my $surplus = @current - $self->{target};
    $self->stop_worker($_) for @current[0 .. $surplus - 1];
}

# The children that have exited: the holder, generation processes, workers.
sub reap_children {
    my ($self) = @_;
    while ((my $pid = waitpid(-1, Serow::WNOHANG())) > 0) {
        my $status = $?;
        if ($self->is_holder($pid)) {
            $self->holder_exited($pid, $status);
        } elsif (my $generation = delete $self->{generations}{$pid}) {
            $self->generation_exited($generation, $status);
        } else {
            $self->worker_exited($pid, $status);
        }
    }
}

# A worker has exited (reaped): its slot and doorbell are freed, its exit
# counted and logged, and replacements held off if it failed at once.
sub worker_exited {
    my ($self, $pid, $status) = @_;
    my $w = delete $self->{workers}{$pid} or return;
    Serow::close_fd($w->{wake_fd});
    $self->answer_stuck_client($pid, $w);
    $self->{shared}->reset_worker($w->{slot}); # (its counts stay: src/request_metrics.h)
    # Replaced: it left on its own (--max-requests, harakiri, a crash), a
    # HUP or --max-worker-rss replaced it; not one that TTOU or the
    # server's stop retired.
    $self->{shared}->count_worker_restart
        if !$self->{stopping} && (!$w->{stopping_since} || $w->{recycled}
            || $w->{generation} != $self->{generation});
    $self->log_worker_exit($pid, $w, $status);
    my $load_failed = $self->{load_app} && $status == APP_LOAD_FAILED << 8;
    if (my $first = $self->{first_load}) {
        $first->{$load_failed ? 'failed' : 'loaded'}++;
    }
    # One that fails right after it started would fail again at once, and
    # one that could not load the app (it may take more than that to
    # compile) will fail again until the file is mended.
    if (!$w->{stopping_since} && $status != 0
            && ($load_failed || Time::HiRes::time - $w->{started} < FAST_DEATH_SECONDS)) {
        $self->throttle_spawning;
    }
}

sub log_worker_exit {
    my ($self, $pid, $w, $status) = @_;
    my $how = $status & 127 ? "was killed by signal " . ($status & 127)
            : "exited with status " . ($status >> 8);
    if ($self->{load_app} && $status == APP_LOAD_FAILED << 8) {
        # Until a worker has loaded the app, none is started in its place.
        Serow::Log->error("worker $pid $how: it could not load the app"
            . ($self->{first_load} ? '' : '; starting a new one in a second'));
        return;
    }
    if ($w->{stopping_since}) {
        Serow::Log->info("worker $pid $how");
    } elsif ($status == 0) {
        # It left on its own: --max-requests or psgix.harakiri.
        Serow::Log->info("worker $pid $how; starting a new one");
    } else {
        Serow::Log->error("worker $pid $how; starting a new one");
    }
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
started; with C<--lazy-app> too, the new workers loading the file. See
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
