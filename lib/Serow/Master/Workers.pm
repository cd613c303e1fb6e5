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
# logged; spawning held off while they fail at once; --lazy-app's first
# load.

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

# How a worker gets the app: app (loaded), load_app (--lazy-app: each
# worker loads app_file after the fork), or neither (serow FILE: the
# serving generation forks it, with the app it loaded: $generations, a
# Serow::Master::Generations).  $fork: Serow::Master::Fork; $logs:
# Serow::Master::Logs; worker_channels: the ends of the holder's channels
# a worker takes (Serow::Master::Holder).
sub new {
    my ($class, %args) = @_;
    return bless {
        options         => $args{options},
        shared          => $args{shared},
        listeners       => $args{listeners},
        fork            => $args{fork},
        logs            => $args{logs},
        generations     => $args{generations},
        worker_channels => $args{worker_channels},
        app             => $args{app},
        load_app        => $args{load_app},
        app_file        => $args{app_file},
        target          => $args{options}{workers}, # how many there should be (TTIN, TTOU)
        generation      => 1, # the number of the current ones (a HUP's are the next)
        # pid => { generation, started, stopping_since, slot, wake_fd,
        #          recycled (Serow::Master::Limits asked it to go) }
        by_pid          => {},
        # Spawning held off (throttle_spawning): until when, how long this
        # round, when the last failure was.
        throttled_until => undef,
        spawn_delay     => undef,
        failed_at       => undef,
        # --lazy-app: no worker has loaded the app yet.  Until one has, the
        # master starts no replacement, and if every worker of the first
        # generation fails to load it, the master exits 2 (as serow does for
        # a bad app file without --lazy-app) instead of starting worker after
        # worker that fail the same way.
        first_load      => $args{load_app} ? { failed => 0 } : undef,
    }, $class;
}

# ---- What the master and the other components read ----

# The number of the current workers' generation.
sub generation { $_[0]{generation} }

# --lazy-app: each worker loads the app file after the fork.
sub loads_app { defined $_[0]{load_app} }

# How many workers run (current or stopping).
sub count { scalar keys %{ $_[0]{by_pid} } }

# Every worker's pid.
sub pids { keys %{ $_[0]{by_pid} } }

# The workers of the current generation not asked to stop.
sub current {
    my ($self) = @_;
    my $w = $self->{by_pid};
    return grep { $w->{$_}{generation} == $self->{generation} && !$w->{$_}{stopping_since} } keys %$w;
}

# A worker's slot in the shared memory, or undef for a pid that is no worker.
sub slot {
    my ($self, $pid) = @_;
    my $w = $self->{by_pid}{$pid} or return undef;
    return $w->{slot};
}

# Since when a worker has been asked to stop (Time::HiRes), or undef.
sub stopping_since {
    my ($self, $pid) = @_;
    my $w = $self->{by_pid}{$pid} or return undef;
    return $w->{stopping_since};
}

# Every current worker has started (published its pid in its slot, which it
# does before it logs "started"; a connection that comes before its loop
# waits in the listen backlog), and there are as many as there should be.
# $status: the shared memory's (Serow::Shared->status).
sub all_current_started {
    my ($self, $status) = @_;
    my @current = $self->current;
    return 0 if @current < $self->{target};
    my %started = map { $_->{pid} => 1 } @{ $status->{workers} };
    return !grep { !$started{$_} } @current;
}

# --lazy-app, until a worker has loaded the app: 'waiting' while the master
# waits for the first generation (it starts no worker meanwhile), 'failed'
# once all have failed to load it (said here; the master then stops, to exit
# 2), '' once one has (or without --lazy-app).  A worker has loaded it once
# one has started (its pid is in its slot) or exited for any reason but
# APP_LOAD_FAILED.
sub first_load {
    my ($self) = @_;
    my $first = $self->{first_load} or return '';
    if ($first->{loaded} || @{ $self->{shared}->status->{workers} }) {
        $self->{first_load} = undef;
        return '';
    }
    return 'waiting' if %{ $self->{by_pid} } || !$first->{failed};
    Serow::Log->error("no worker could load the app $self->{app_file} (--lazy-app): exiting");
    return 'failed';
}

# ---- How many ----

# TTIN: one worker more.
sub add {
    my ($self, $sig) = @_;
    # Half the slots: a HUP's new workers need theirs while the old finish.
    my $most = int($self->{shared}->max_workers / 2);
    return Serow::Log->warn("received SIG$sig: already $self->{target} workers, the most there is "
        . "room for (half the shared memory's slots: 4 times --workers, at least 64, at most 256)")
        if $self->{target} >= $most;
    $self->{target}++;
    Serow::Log->info("received SIG$sig: $self->{target} workers");
}

# TTOU: one worker less (never fewer than one).
sub remove {
    my ($self, $sig) = @_;
    $self->{target}-- if $self->{target} > 1;
    Serow::Log->info("received SIG$sig: $self->{target} workers");
}

# A HUP (or serow FILE's new generation loaded): the workers spawned from
# now on are the current ones.
sub begin_generation {
    my ($self) = @_;
    $self->{generation}++;
}

# ---- Spawning ----

sub spawn_missing {
    my ($self) = @_;
    my $generations = $self->{generations};
    return if $generations->preloading && !$generations->serving; # (no app loaded yet)
    $self->end_failure_streak_once_started if $self->{spawn_delay};
    my $missing = $self->{target} - $self->current;
    for (1 .. $missing) {
        return if $self->{throttled_until} && Time::HiRes::time < $self->{throttled_until};
        $self->spawn;
    }
}

# A worker, or the fork of one, failed: spawn_missing starts none for a
# while (Serow::Master::Retry: longer each round the failures go on).
# Failures while the hold lasts are of the same round (the workers spawned
# together).  The delay, in seconds.
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
    my $w = $self->{by_pid};
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

sub free_slot {
    my ($self) = @_;
    my %used = map { $_->{slot} => 1 } values %{ $self->{by_pid} };
    for my $slot (0 .. $self->{shared}->max_workers - 1) {
        return $slot unless $used{$slot};
    }
    return undef;
}

sub spawn {
    my ($self) = @_;
    my $limit = $self->request_limit;
    my $slot = $self->free_slot;
    if (!defined $slot) {
        Serow::Log->error("no free worker slot: more than " . $self->{shared}->max_workers . " workers");
        return;
    }
    $self->{shared}->reset_worker($slot);
    # The worker's doorbell: the master rings it when it asks the worker
    # something (ask).  Made here and inherited, rather than taken from the
    # worker with pidfd_getfd as the holder does: a stop must reach a
    # worker that has not started its loop yet, on any kernel, under any
    # ptrace policy.
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
    $self->{by_pid}{$pid} = { generation => $self->{generation}, started => Time::HiRes::time,
                              slot => $slot, wake_fd => $wake_fd };
    Serow::Log->debug("forked worker $pid in slot $slot (generation $self->{generation}"
        . ($limit ? ", max requests $limit" : '') . ')');
}

# Forks a worker (serow FILE: has the serving generation fork it); its pid,
# or undef.
sub fork_worker {
    my ($self, $limit, $slot, $wake_fd) = @_;
    if (my $serving = $self->{generations}->serving) {
        my $access_log = $self->{logs}->access_log_fh;
        my $pid = $serving->spawn_worker($slot, $limit, $wake_fd, fileno(STDERR),
            $access_log ? fileno $access_log : undef);
        $self->throttle_spawning unless $pid;
        return $pid;
    }
    # A worker takes USR2 for its master's death: it ignores TERM
    # (Serow::Worker, install_signal_handlers).
    return $self->{fork}->fork_child(sub { $self->run_worker($limit, $slot, $wake_fd, @_) }, 'USR2');
}

# In the child: becomes a worker and never returns.  $preloaded: the app a
# generation process loaded (serow FILE), else undef.
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
    my $master_pid = $self->{fork}->master_pid;
    # Under Yama's ptrace_scope 1 the holder could not take this worker's
    # connections otherwise (docs/keepalive.md).
    Serow::set_ptracer($master_pid);
    my $worker = Serow::Worker->new(
        app           => $app,
        options       => $self->{options},
        listeners     => $self->{listeners},
        request_limit => $limit,
        signal_mask   => $signal_mask,
        shared        => $self->{shared},
        slot          => $slot,
        wake_fd       => $wake_fd,
        master_pid    => $master_pid,
        channels      => $self->{worker_channels},
        access_log    => [ $self->{logs}->access_log_for_worker ],
    );
    my $status = eval { $worker->run; 1 } ? 0 : do { Serow::Log->error("worker failed: $@"); 1 };
    exit $status;
}

# In a child of the master: the workers' doorbells are the master's.
sub close_in_child {
    my ($self) = @_;
    Serow::close_fd($_->{wake_fd}) for values %{ $self->{by_pid} };
}

# ---- Asking, stopping ----

# Asks a worker to 'stop' or to 'reopen_logs' through the shared memory (no
# signal: it would cut short what the app is doing, and a worker ignores
# them); the worker sees it once it is between requests.
sub ask {
    my ($self, $pid, $what) = @_;
    my $w = $self->{by_pid}{$pid} or return;
    eval { $self->{shared}->ask_worker($w->{slot}, $w->{wake_fd}, $what); 1 }
        or Serow::Log->error("cannot ask worker $pid to $what: $@");
}

# USR1: every worker reopens its logs.
sub reopen_logs {
    my ($self) = @_;
    $self->ask($_, 'reopen_logs') for $self->pids;
}

sub stop {
    my ($self, $pid) = @_;
    my $w = $self->{by_pid}{$pid} or return;
    return if $w->{stopping_since};
    $w->{stopping_since} = Time::HiRes::time;
    $self->ask($pid, 'stop');
}

# The server's stop.
sub stop_all {
    my ($self) = @_;
    $self->stop($_) for $self->pids;
}

# After a HUP, once the new generation has started: the older ones'
# workers finish and leave.
sub stop_older_generations {
    my ($self) = @_;
    my $w = $self->{by_pid};
    $self->stop($_) for grep { $w->{$_}{generation} != $self->{generation} } keys %$w;
}

# A worker to be replaced as on HUP (Serow::Master::Limits, over
# --max-worker-rss): its replacement starts at once (it is no longer a
# current worker), and its exit counts as a restart.
sub recycle {
    my ($self, $pid) = @_;
    my $w = $self->{by_pid}{$pid} or return;
    $w->{recycled} = 1;
    $self->stop($pid);
}

# TTOU lowered the target: the newest surplus workers finish and leave.
sub retire_surplus {
    my ($self) = @_;
    my $w = $self->{by_pid};
    my @current = sort { $w->{$b}{started} <=> $w->{$a}{started} } $self->current;
    my $surplus = @current - $self->{target};
    $self->stop($_) for @current[0 .. $surplus - 1];
}

# ---- Exits ----

# A worker has exited (reaped): its slot and doorbell are freed, its exit
# counted and logged, and replacements held off if it failed at once.
# $stopping: the server's stop has begun.  True when the worker was a HUP's
# that could not load the app (--lazy-app): the reload has failed, the old
# workers serving on.
sub exited {
    my ($self, $pid, $status, $stopping) = @_;
    my $w = delete $self->{by_pid}{$pid} or return 0;
    Serow::close_fd($w->{wake_fd});
    $self->{shared}->reset_worker($w->{slot}); # (its counts stay: src/shared/request_metrics.h)
    # Replaced: it left on its own (--max-requests, harakiri, a crash), a
    # HUP or --max-worker-rss replaced it; not one that TTOU or the
    # server's stop retired.
    $self->{shared}->count_worker_restart
        if !$stopping && (!$w->{stopping_since} || $w->{recycled}
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
    $self->log_exit($pid, $w, $status, $delay);
    # (--lazy-app after a HUP: the old workers serve on.)
    return $load_failed && !$self->{first_load};
}

# --lazy-app: whether a worker's exit $status says it could not load the app.
sub app_load_failed {
    my ($self, $status) = @_;
    return $self->{load_app} && $status == APP_LOAD_FAILED << 8;
}

# $delay: how long replacements are held off (throttle_spawning), if they are.
sub log_exit {
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
