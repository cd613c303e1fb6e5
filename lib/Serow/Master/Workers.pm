package Serow::Master::Workers;
use strict;
use warnings;

use Time::HiRes ();

use Serow ();
use Serow::Worker ();
use Serow::Log ();
use Serow::Master::Retry ();

# The master's workers: how many (TTIN, TTOU), which are current, each one
# spawned in a free slot, asked to stop or reopen its logs, reaped and
# logged; spawning held off while they fail at once.  Methods of the master
# object (Serow::Master); the fields they own are 'workers' (pid => {
# generation, started, stopping_since, slot, wake_fd }; Serow::Master::Limits
# adds its own), 'target', 'throttled_until', 'spawn_delay', 'failed_at'
# and 'first_load'.

# A worker that dies this soon after it started is probably failing at start:
# replacements are then held off (Serow::Master::Retry: 1 second at first,
# then longer each round while they keep failing: a file broken for
# --lazy-app, an @Serow::AFTER_FORK hook that dies).  A worker that starts,
# or a HUP, ends the streak.
use constant FAST_DEATH_SECONDS => 1;

# --lazy-app: a worker that cannot load the app exits with this status, so
# that the master tells it from a worker that failed later.
use constant APP_LOAD_FAILED => 3;

# Each worker draws its own --max-requests limit, up to this share below the
# option, so that workers started together do not all restart together.
use constant MAX_REQUESTS_SPREAD => 0.25;

sub add_worker {
    my ($self, $sig) = @_;
    # Half the slots: a HUP's new workers need theirs while the old finish.
    my $most = int($self->{shared}->max_workers / 2);
    return Serow::Log->warn("received SIG$sig: already $self->{target} workers, the most there is "
        . "room for (half the shared memory's slots: 4 times --workers, at least 64, at most 256)")
        if $self->{target} >= $most;
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

# Ready: the connection holder runs, and every worker of the current
# generation has started (published its pid in its slot, which it does
# before it logs "started"; a connection that comes before its loop waits
# in the listen backlog).
sub generation_ready {
    my ($self, $status) = @_;
    return 0 if !$status->{holder_pid} || $self->{generations}->loading;
    my @current = $self->current_workers;
    return 0 if @current < $self->{target};
    my %started = map { $_->{pid} => 1 } @{ $status->{workers} };
    return !grep { !$started{$_} } @current;
}

# --lazy-app, until a worker has loaded the app: true while the master
# waits for the first generation (it starts no worker meanwhile).  A worker
# has loaded it once one has started (its pid is in its slot) or exited for
# any reason but APP_LOAD_FAILED; when all have failed to load it, the
# master stops, to exit 2.
sub awaiting_first_load {
    my ($self) = @_;
    return !$self->{generations}->serving if $self->{generations}->preloading;
    my $first = $self->{first_load} or return 0;
    if ($first->{loaded} || @{ $self->{shared}->status->{workers} }) {
        $self->{first_load} = undef;
        return 0;
    }
    return 1 if %{ $self->{workers} } || !$first->{failed};
    Serow::Log->error("no worker could load the app $self->{app_file} (--lazy-app): exiting");
    $self->give_up;
    return 1;
}

sub spawn_missing_workers {
    my ($self) = @_;
    my $generations = $self->{generations};
    return if $generations->preloading && !$generations->serving; # (no app loaded yet)
    $self->end_failure_streak_once_started if $self->{spawn_delay};
    my $missing = $self->{target} - $self->current_workers;
    for (1 .. $missing) {
        return if $self->{throttled_until} && Time::HiRes::time < $self->{throttled_until};
        $self->spawn_worker;
    }
}

# A worker, or the fork of one, failed: spawn_missing_workers starts none
# for a while (Serow::Master::Retry: longer each round the failures go on).  Failures while the hold
# lasts are of the same round (the workers spawned together).  The delay,
# in seconds.
sub throttle_spawning {
    my ($self) = @_;
    my $now = Time::HiRes::time;
    $self->{failed_at} = $now;
    return $self->{spawn_delay} if $self->{throttled_until} && $now < $self->{throttled_until};
    my $delay = $self->{spawn_delay} = Serow::Master::Retry->next_delay($self->{spawn_delay});
    $self->{throttled_until} = $now + $delay;
    return $delay;
}

# The failures are over once a worker forked after the last of them has
# started (its pid is in its slot): the next failure waits the first delay
# again.
sub end_failure_streak_once_started {
    my ($self) = @_;
    my $w = $self->{workers};
    for my $pid (map { $_->{pid} } @{ $self->{shared}->status->{workers} }) {
        next unless $w->{$pid} && $w->{$pid}{started} > $self->{failed_at};
        return $self->end_failure_streak;
    }
}

# Also on HUP: the operator has deployed, so a new file is tried at once.
sub end_failure_streak {
    my ($self) = @_;
    delete @$self{qw(spawn_delay throttled_until failed_at)};
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
    if (my $serving = $self->{generations}->serving) {
        my $pid = $serving->spawn_worker($slot, $limit, $wake_fd, fileno(STDERR),
            $self->{logs}->access_log_fh ? fileno $self->{logs}->access_log_fh : undef);
        $self->throttle_spawning unless $pid;
        return $pid;
    }
    # A worker takes USR2 for its master's death: it ignores TERM
    # (Serow::Worker, install_signal_handlers).
    return $self->{fork}->fork_child(sub { $self->run_worker($limit, $slot, $wake_fd, @_) }, 'USR2');
}

# In the child: becomes a worker and never returns.
sub run_worker {
    my ($self, $limit, $slot, $wake_fd, $signal_mask, $preloaded) = @_;
    $0 = "serow worker";
    # Else every worker would draw the same rand() sequence as its siblings.
    srand();
    # --lazy-app: here, after the fork and the switch to --user, before the
    # worker touches its slot or the holder: one that fails leaves nothing
    # behind.
    my $app = $preloaded // $self->{app} // eval { $self->{load_app}->() } // do {
        Serow::Log->error("worker $$: $@");
        exit APP_LOAD_FAILED;
    };
    # Under Yama's ptrace_scope 1 the holder could not take this worker's
    # connections otherwise (docs/keepalive.md).
    Serow::set_ptracer($self->{fork}->master_pid);
    my $worker = Serow::Worker->new(
        app           => $app,
        options       => $self->{options},
        listeners     => $self->{listeners},
        request_limit => $limit,
        signal_mask   => $signal_mask,
        shared        => $self->{shared},
        slot          => $slot,
        wake_fd       => $wake_fd,
        master_pid    => $self->{fork}->master_pid,
        channels      => [ $self->{holder}->worker_channels ],
        access_log    => [ $self->{logs}->access_log_for_worker ],
    );
    my $status = eval { $worker->run; 1 } ? 0 : do { Serow::Log->error("worker failed: $@"); 1 };
    exit $status;
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

sub stop_worker {
    my ($self, $pid) = @_;
    my $w = $self->{workers}{$pid} or return;
    return if $w->{stopping_since};
    $w->{stopping_since} = Time::HiRes::time;
    $self->ask_worker($pid, 'stop');
}

# TTOU lowered the target: the newest surplus workers finish and leave.
sub retire_surplus_workers {
    my ($self) = @_;
    my @current = sort { $self->{workers}{$b}{started} <=> $self->{workers}{$a}{started} }
        $self->current_workers;
    my $surplus = @current - $self->{target};
    $self->stop_worker($_) for @current[0 .. $surplus - 1];
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
    my $load_failed = $self->app_load_failed($status);
    if (my $first = $self->{first_load}) {
        $first->{$load_failed ? 'failed' : 'loaded'}++;
    }
    # One that fails right after it started would fail again at once, and
    # one that could not load the app (it may take more than that to
    # compile) will fail again until the file is mended.
    my $delay;
    if (!$w->{stopping_since} && $status != 0
            && ($load_failed || Time::HiRes::time - $w->{started} < FAST_DEATH_SECONDS)) {
        $delay = $self->throttle_spawning;
    }
    $self->log_worker_exit($pid, $w, $status, $delay);
    # (--lazy-app after a HUP: the old workers serve on; said once logged.)
    $self->{systemd}->reload_failed if $load_failed && !$self->{first_load};
}

# --lazy-app: whether a worker's exit $status says it could not load the app.
sub app_load_failed {
    my ($self, $status) = @_;
    return $self->{load_app} && $status == APP_LOAD_FAILED << 8;
}

# $delay: how long replacements are held off (throttle_spawning), if they are.
sub log_worker_exit {
    my ($self, $pid, $w, $status, $delay) = @_;
    my $how = $status & 127 ? "was killed by signal " . ($status & 127)
            : "exited with status " . ($status >> 8);
    my $when = !$delay ? '' : $delay == 1 ? ' in a second' : " in $delay seconds";
    if ($self->app_load_failed($status)) {
        # Until a worker has loaded the app, none is started in its place.
        Serow::Log->error("worker $pid $how: it could not load the app"
            . ($self->{first_load} ? '' : "; starting a new one$when"));
        return;
    }
    if ($w->{stopping_since}) {
        Serow::Log->info("worker $pid $how");
    } elsif ($w->{generation} != $self->{generation}) {
        # A HUP's workers take its place: with --lazy-app once they can load
        # the file (no process holds the old code to start one of the old).
        my $log = $status == 0 ? 'info' : 'error';
        Serow::Log->$log("worker $pid $how; not replaced: it was of generation $w->{generation}, "
            . "which a HUP's workers replace");
    } elsif ($status == 0) {
        # It left on its own: --max-requests or psgix.harakiri.
        Serow::Log->info("worker $pid $how; starting a new one");
    } else {
        Serow::Log->error("worker $pid $how; starting a new one$when");
    }
}

1;
__END__

=head1 NAME

Serow::Master::Workers - the master's workers: spawned, asked, reaped (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: the workers it forks (or has the serving generation
fork), each in its slot of the shared memory with its doorbell; what it
asks of them (stop, reopen the logs); their exits, logged and counted, and
replacements held off while workers fail at once. See L<Serow::Master>.

=cut
