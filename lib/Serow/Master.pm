package Serow::Master;
use strict;
use warnings;

use Time::HiRes ();

use Serow ();
use Serow::ConnectionHolder ();
use Serow::Generation ();
use Serow::Worker ();
use Serow::Log ();

# How long the master sleeps between looks at its workers when no signal
# wakes it: signals and child exits interrupt the sleep at once.
use constant IDLE_WAKE_SECONDS => 1;
# How often the master looks whether its new workers have all started while
# systemd waits for READY=1 (only then, and only under Type=notify).
use constant READY_POLL_SECONDS => 0.05;
# A worker that dies this soon after it started is probably failing at start:
# replacements are then spawned no faster than one per this many seconds.
use constant FAST_DEATH_SECONDS => 1;
# --lazy-app: a worker that cannot load the app exits with this status, so
# that the master tells it from a worker that failed later.
use constant APP_LOAD_FAILED => 3;
# Each worker draws its own --max-requests limit, up to this share below the
# option, so that workers started together do not all restart together.
use constant MAX_REQUESTS_SPREAD => 0.25;

# --max-worker-rss: how often the master reads its workers' resident memory.
# The master does it, on its own clock, so that a worker spends nothing on it;
# a worker over the limit may answer requests for up to this long more.
use constant RSS_CHECK_SECONDS => 1;

# Worker slots in the shared memory: room for TTIN and for old workers that
# finish while their replacements run.
use constant MIN_WORKER_SLOTS => 64;

my @SIGNALS = qw(TERM INT QUIT HUP TTIN TTOU USR1 CHLD);

# What each signal asks of the master (CHLD only wakes it up to reap).
my %ON_SIGNAL = (
    TERM => 'stop',
    INT  => 'stop',
    QUIT => 'stop',
    HUP  => 'restart_workers',
    TTIN => 'add_worker',
    TTOU => 'remove_worker',
    USR1 => 'reopen_logs',
);

# Signals that came before run set the master's handlers (while the app
# loads, the sockets open, the pid file is written): without a handler, TERM,
# INT, QUIT, HUP and USR1 would kill the process (leaving the pid file
# behind) and TTIN, TTOU stop it.  The handlers early_signal_handlers
# returns (name => handler), set from the start, queue them instead, and run
# handles them before anything else: a stop that came early stops the master
# before it has started any process.  USR2 (the workers' parent-death
# signal, which is nothing to the master) is ignored from the start.
my @EARLY_SIGNALS;

sub early_signal_handlers {
    my ($class) = @_;
    return (USR2 => 'IGNORE', map { $_ => \&_early_signal } grep { $_ ne 'CHLD' } @SIGNALS);
}

sub _early_signal { push @EARLY_SIGNALS, $_[0] }

# The signals the master handles (and blocks across its forks).
sub signal_names { @SIGNALS }

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

# --access-log FILE is opened here, in the master, and each worker writes on
# a copy of the descriptor: a worker never fails to start for want of the
# right to open the file (as it may after dropping privileges).  The master
# opens it again on USR1, so that workers started after a rotation write to
# the new file; the workers reopen it themselves.  Returns false (with $!)
# when it cannot be opened.
sub open_access_log {
    my ($self) = @_;
    my $file = $self->{options}{access_log};
    return 1 if !defined $file || $file eq '-' || $file eq 'stderr';
    open(my $fh, '>>', $file) or return 0;
    $self->{access_log_fh} = $fh;
    return 1;
}

# (path, handle) for a worker, or (undef, undef) for standard error.
sub access_log_for_worker {
    my ($self) = @_;
    my $file = $self->{options}{access_log} // return;
    return (undef, undef) unless $self->{access_log_fh};
    return ($file, $self->{access_log_fh});
}

sub run {
    my ($self) = @_;
    local $0 = "serow master";
    local @SIG{@SIGNALS} = map { my $sig = $_; sub { push @{ $self->{pending} }, $sig } } @SIGNALS;
    local $SIG{PIPE} = 'IGNORE';
    # USR2 is what the kernel sends a worker when its master dies
    # (set_parent_death_signal): one sent to the whole process group must not
    # kill the master by its default action.
    local $SIG{USR2} = 'IGNORE';
    unshift @{ $self->{pending} }, splice(@EARLY_SIGNALS);
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
        $self->reap_workers;
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
    my $timeout = IDLE_WAKE_SECONDS;
    if (my $notify = $self->{notify}) {
        $timeout = READY_POLL_SECONDS if $self->{awaiting_ready} && !$self->{stopping};
        my $watchdog = $notify->watchdog;
        $timeout = $watchdog if defined $watchdog && $watchdog < $timeout;
    }
    # (A generation loading the app says when it is done.)
    my $rin;
    vec($rin, $self->{loading}->channel, 1) = 1 if $self->{loading};
    select($rin, undef, undef, $timeout);
}

# Under systemd's Type=notify: READY=1 once the workers are up (after the
# start, after a HUP), STATUS= when it changes, and the watchdog's ping.
sub notify_systemd {
    my ($self) = @_;
    my $notify = $self->{notify} or return;
    my $status = $self->{shared}->status;
    if ($self->{awaiting_ready} && $self->generation_ready($status)) {
        $self->{awaiting_ready} = 0;
        $self->{ready_once} = 1;
        $notify->ready;
    }
    # READY=1 first: the workers of serow FILE start only once the
    # generation has loaded the app.
    return $notify->watchdog unless $self->{ready_once};
    my $workers = @{ $status->{workers} };
    $notify->status("$workers workers: $status->{processing} busy, "
        . ($workers - $status->{processing}) . " idle; $status->{queued} connections queued, "
        . "$status->{waiting} idle");
    $notify->watchdog;
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

sub handle_signals {
    my ($self) = @_;
    while (defined(my $sig = shift @{ $self->{pending} })) {
        my $method = $ON_SIGNAL{$sig} or next;
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

# New workers first, then the old ones finish what they have: the listen
# sockets never go unserved.
sub restart_workers {
    my ($self, $sig) = @_;
    # serow FILE, the first generation still loading: it reads the file as
    # it is now, and there is nothing to replace.
    if ($self->{preload_app} && !$self->{serving} && $self->{loading}) {
        return Serow::Log->info("received SIG$sig while the app loads: nothing to replace yet");
    }
    Serow::Log->info("received SIG$sig: replacing workers gracefully");
    if ($self->{notify}) {
        $self->{notify}->reloading;
        $self->{awaiting_ready} = 1;
    }
    # serow FILE: a new generation loads the app; its workers start once it
    # has (check_loading_generation).
    return $self->start_generation if $self->{preload_app};
    my @old = keys %{ $self->{workers} };
    $self->{generation}++;
    $self->spawn_missing_workers;
    # --lazy-app: the new workers load the app file afresh, which may have
    # been broken by the deploy the HUP is for: the old ones serve until
    # every new one has started (retire_old_generation).
    return $self->{retire_old_when_ready} = 1 if $self->{load_app};
    $self->stop_worker($_) for @old;
}

# --lazy-app and serow FILE, after a HUP: once the new generation has
# started, the workers of the older ones finish and leave, and so do the
# older generation processes.
sub retire_old_generation {
    my ($self) = @_;
    return unless $self->{retire_old_when_ready} && $self->generation_ready($self->{shared}->status);
    $self->{retire_old_when_ready} = 0;
    my $w = $self->{workers};
    $self->stop_worker($_) for grep { $w->{$_}{generation} != $self->{generation} } keys %$w;
    my $serving = $self->{serving};
    $_->retire for grep { !$serving || $_ != $serving } values %{ $self->{generations} };
}

# serow FILE: forks a generation process to load the app (at the start, on
# HUP, or when the serving one died).  A HUP that comes while one is
# loading starts over with the file as it is now.
sub start_generation {
    my ($self) = @_;
    if (my $loading = delete $self->{loading}) {
        Serow::Log->info("generation " . $loading->number . " has not loaded the app yet: "
            . "a new one loads it afresh");
        $loading->retire;
        kill 'KILL', $loading->pid; # (it ignores the master's signals)
    }
    my $generation = Serow::Generation->start(master => $self, number => ++$self->{generations_started},
        load_app => $self->{preload_app}) or return;
    $self->{generations}{ $generation->pid } = $generation;
    $self->{loading} = $generation;
}

# serow FILE: the generation loading the app has loaded it (its workers
# become the current ones, and replace the old ones once they have all
# started) or could not (it logged why; the old generation keeps serving,
# or, at the start, serow exits 2).
sub check_loading_generation {
    my ($self) = @_;
    my $loading = $self->{loading} or return;
    my $result = $loading->read_load_result or return;
    $self->{loading} = undef;
    if ($result eq 'loaded') {
        $self->{serving} = $loading;
        $self->{generation}++;
        $self->{retire_old_when_ready} = 1;
        $self->announce;
        return;
    }
    $loading->retire;
    if (!$self->{serving}) {
        Serow::Log->error("could not load the app $self->{app_file}: exiting");
        $self->{exit_status} = 2;
        return $self->begin_stop;
    }
    # (READY=1 again: notify_systemd, the old generation being ready.)
    Serow::Log->error("generation " . $loading->number . " could not load the app $self->{app_file}: "
        . "the workers of generation " . $self->{serving}->number . " keep serving");
}

# The stop: generation processes fork no more workers.
sub stop_generations {
    my ($self) = @_;
    for my $generation (values %{ $self->{generations} }) {
        $generation->retire;
        # (One still loading the app would finish loading first; it
        # ignores the master's signals.)
        kill 'KILL', $generation->pid if $generation->loading;
    }
    $self->{loading} = $self->{serving} = undef;
}

# In a generation process: what the master keeps for its own children is
# not this process's (their descriptors were closed by fork_child), nor are
# systemd's socket, the ids to drop (dropped) or the access log it had (each
# worker gets the master's current one with the request to fork it).
sub forget_in_generation {
    my ($self) = @_;
    $self->{workers} = {};
    $self->{generations} = {};
    $self->{notify} = $self->{privileges} = undef;
    close $self->{access_log_fh} if $self->{access_log_fh};
    $self->{access_log_fh} = undef;
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

# logrotate has moved the logs away: the master opens them again (for the
# workers it starts from now on), and so does every worker, and the
# connection holder.
sub reopen_logs {
    my ($self, $sig) = @_;
    my $options = $self->{options};
    my $error_log = Serow::Log->file($options->{error_log}); # (syslog has no file)
    return unless defined $options->{access_log} || defined $error_log;
    if (defined $error_log) {
        Serow::Log->open_file($error_log) or Serow::Log->warn("cannot reopen the "
            . "error log $error_log: $!; still writing to the old file");
    }
    Serow::Log->info("received SIG$sig: the master and the workers reopen their logs");
    if (defined $options->{access_log}) {
        $self->open_access_log or Serow::Log->warn("cannot reopen the access log "
            . "$options->{access_log}: $!; new workers write to the old file");
    }
    $self->ask_worker($_, 'reopen_logs') for keys %{ $self->{workers} };
    kill 'USR1', $self->{holder_pid} if $self->{holder_pid};
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

# This worker's --max-requests: drawn between --min-requests (by default
# MAX_REQUESTS_SPREAD below the maximum) and --max-requests.
sub request_limit {
    my ($self) = @_;
    my $max = $self->{options}{max_requests} or return 0;
    my $min = $self->{options}{min_requests} // $max - int($max * MAX_REQUESTS_SPREAD);
    return $max - int(rand($max - $min + 1));
}

# Forks a child that runs $child_main (which never returns); returns the pid,
# or undef when fork failed.  The kernel sends the child $death_signal when
# the master dies.
sub fork_child {
    my ($self, $child_main, $death_signal) = @_;
    # Signals stay blocked across fork so that the child never runs the
    # master's handlers; the child unblocks them once its own are set.
    my $old = Serow::block_signals(@SIGNALS);
    my $pid = fork;
    if (!defined $pid) {
        Serow::set_signal_mask($old);
        Serow::Log->error("cannot fork: $!");
        $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS;
        return undef;
    }
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for @SIGNALS;
        # The other workers' doorbells are the master's, not this child's,
        # and so are its channels to the generation processes.
        Serow::close_fd($_->{wake_fd}) for values %{ $self->{workers} };
        $_->close_in_child for values %{ $self->{generations} };
        $self->{notify}->close_in_child if $self->{notify};
        if ($self->{privileges} && !eval { $self->{privileges}->drop }) {
            Serow::Log->error("cannot drop privileges: $@");
            Serow::exit_now(1);
        }
        # A child whose master is gone finishes its work and leaves; the
        # master may have died before this line, leaving nobody to signal it.
        # (After dropping privileges: a change of uid clears this setting.)
        Serow::set_parent_death_signal(Serow::signal_number($death_signal));
        Serow::exit_now(0) if getppid() != $self->{pid};
        $child_main->($old);
    }
    Serow::set_signal_mask($old);
    return $pid;
}

# The connection holder (Serow::ConnectionHolder): keeps idle connections.
sub spawn_holder {
    my ($self) = @_;
    $self->{holder_pid} = $self->fork_child(sub {
        close $_->{socket} for @{ $self->{listeners} }; # it accepts nothing
        # The master's signals stay blocked until the holder's C loop has
        # its own handlers, and unblocks them: a TERM or USR1 that comes
        # meanwhile waits for them instead of killing it.
        # (it logs the requests it sheds: --max-queue-wait)
        Serow::exit_now($self->{holder}->run($self->{access_log_fh}) == 0 ? 0 : 1);
    }, 'TERM');
}

sub stop_holder {
    my ($self) = @_;
    return if !$self->{holder_pid} || $self->{holder_stopping}++;
    kill 'TERM', $self->{holder_pid};
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
        $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS;
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
        $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS unless $pid;
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

# --max-worker-rss: a worker whose resident memory passed the limit is asked
# to stop, as on HUP: its replacement starts at once (it is no longer a
# current worker), it finishes its request and hands its idle connections
# to the holder.  Read from /proc by the master, at most every
# RSS_CHECK_SECONDS (the loop also wakes for signals and exits).
sub recycle_large_workers {
    my ($self) = @_;
    my $limit = $self->{options}{max_worker_rss} or return;
    my $now = Time::HiRes::time;
    return if $self->{rss_checked} && $now - $self->{rss_checked} < RSS_CHECK_SECONDS;
    $self->{rss_checked} = $now;
    for my $pid ($self->current_workers) {
        my $mib = worker_rss_mib($pid) // next;
        next if $mib <= $limit;
        Serow::Log->info("worker $pid uses $mib MiB, over --max-worker-rss $limit: replaced");
        $self->{workers}{$pid}{recycled} = 1;
        $self->{shared}->count_worker_recycled('rss');
        $self->stop_worker($pid);
    }
}

# A process's resident memory in whole MiB (VmRSS, which counts the pages it
# still shares with the master), or undef when it is gone.
sub worker_rss_mib {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/status") or return undef;
    while (my $line = <$fh>) {
        return int($1 / 1024) if $line =~ /\AVmRSS:\s*(\d+)\s*kB/;
    }
    return undef;
}

# TTOU lowered the target: the newest surplus workers finish and leave.
sub retire_surplus_workers {
    my ($self) = @_;
    my @current = sort { $self->{workers}{$b}{started} <=> $self->{workers}{$a}{started} }
        $self->current_workers;
    my $surplus = @current - $self->{target};
    $self->stop_worker($_) for @current[0 .. $surplus - 1];
}

sub kill_overdue_workers {
    my ($self) = @_;
    my $limit = $self->{options}{graceful_timeout};
    my $now = Time::HiRes::time;
    for my $pid (keys %{ $self->{workers} }) {
        my $w = $self->{workers}{$pid};
        next if $w->{killed};
        if ($w->{stopping_since} && $now - $w->{stopping_since} > $limit) {
            $self->kill_worker($pid, "did not finish within --graceful-timeout ${limit}s");
        } elsif (my $stuck = $self->stuck_request($w)) {
            # The die of --request-timeout did not end the app (a blocking C
            # call, SIGALRM ignored, an eval that swallowed it): nothing in
            # the worker can, so the master does.
            $self->{shared}->count_request_timeout;
            $self->take_from_stuck_worker($w);
            $self->kill_worker($pid, $stuck);
        }
    }
}

# Before a stuck worker is killed: the connection of the stuck request, to
# answer once it is dead (answer_stuck_client).  Its parked connections are
# with the holder already: it takes those idle in a worker for
# IDLE_HANDOFF_MS (Serow::ConnectionHolder), less than any --request-timeout.
# Connections it was reading (a partial head, pipelined requests) close
# with it.
sub take_from_stuck_worker {
    my ($self, $w) = @_;
    my $fd = $self->{shared}->take_app_connection($w->{slot});
    $w->{stuck_client} = $fd if $fd >= 0;
}

# A killed worker is dead (its slot not reset yet): the client of its stuck
# request gets 503 unless bytes of the response had gone out.
sub answer_stuck_client {
    my ($self, $pid, $w) = @_;
    my $fd = delete $w->{stuck_client} // return;
    return if $self->{shared}->answer_app_connection($w->{slot}, $fd,
        $self->{options}{request_id_header} // '');
    Serow::Log->error("worker $pid: its stuck request had begun its response: the client's "
        . "connection is closed, the response cut");
}

# Why the worker's app has outlived --request-timeout and its grace, or ''.
sub stuck_request {
    my ($self, $w) = @_;
    my $timeout = $self->{options}{request_timeout} or return '';
    my $grace = $self->{options}{request_timeout_grace};
    my ($ms, $request, $id) = $self->{shared}->app_running($w->{slot}) or return '';
    return '' if $ms <= ($timeout + $grace) * 1000;
    return sprintf "ran %s%s for %.1fs, past --request-timeout ${timeout}s and "
        . "--request-timeout-grace ${grace}s; its client gets 503 unless its response had begun",
        $request, defined $id ? " (request id $id)" : '', $ms / 1000;
}

sub kill_worker {
    my ($self, $pid, $why) = @_;
    Serow::Log->error("worker $pid $why: killed");
    kill 'KILL', $pid;
    $self->{workers}{$pid}{killed} = 1;
}

sub reap_workers {
    my ($self) = @_;
    while ((my $pid = waitpid(-1, Serow::WNOHANG())) > 0) {
        my $status = $?;
        if ($self->{holder_pid} && $pid == $self->{holder_pid}) {
            $self->{holder_pid} = undef;
            Serow::Log->error("the connection holder $pid exited with status $status; starting a new one")
                unless $self->{stopping};
            next;
        }
        if (my $generation = delete $self->{generations}{$pid}) {
            $self->generation_exited($generation, $status);
            next;
        }
        my $w = delete $self->{workers}{$pid} or next;
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
            $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS;
        }
    }
}

# A generation process has exited: it was told to (retired, or stopping),
# or could not load the app (check_loading_generation says so), or died
# while serving: then a new generation loads the app, and replaces its
# workers once ready.
sub generation_exited {
    my ($self, $generation, $status) = @_;
    my $number = $generation->number;
    # (One loading the app: check_loading_generation reads its end.)
    return if $self->{loading} && $generation == $self->{loading};
    $generation->retire;
    if (!$self->{serving} || $generation != $self->{serving}) {
        Serow::Log->info("generation $number (pid " . $generation->pid . ") exited") if $status == 0;
        return;
    }
    $self->{serving} = undef;
    Serow::Log->error("generation $number (pid " . $generation->pid . ") exited with status $status: "
        . "a new generation loads the app");
    $self->start_generation unless $self->{loading};
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
