package Serow::Master::Generations;
use strict;
use warnings;

use Serow::Generation ();
use Serow::Log ();

# Generations of workers: HUP's new set replacing the old once it runs, and
# with serow FILE the generation processes (Serow::Generation) that load the
# app and fork each generation's workers: started, promoted once loaded,
# retired, stopped.  Methods of the master object (Serow::Master); the
# fields they own are 'generation' (the number of the current workers),
# 'generations' (pid => Serow::Generation, every one still running),
# 'serving', 'loading', 'generations_started', 'retire_old_when_ready',
# 'generation_retry_at' and 'generation_retry_delay'.

use Time::HiRes ();


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
    $self->{systemd}->reloading;
    $self->end_failure_streak;
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
    delete $self->{generation_retry_at};
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
    $self->publish_generations;
}

# The generation processes running, for the process metrics (each holds a
# compiled copy of the app: memory an operator wants to see).
sub publish_generations {
    my ($self) = @_;
    $self->{shared}->set_generation_pids(sort { $a <=> $b } keys %{ $self->{generations} });
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
    my $number = $loading->number;
    if ($result eq 'loaded' && !$self->{generations}{ $loading->pid }) {
        # It said so, then died before the master read it: reaped first.
        $loading->retire;
        Serow::Log->error("generation $number (pid " . $loading->pid . ") exited once it had loaded "
            . "the app: a new generation loads it in " . $self->retry_generation_later . " s");
        return;
    }
    if ($result eq 'loaded') {
        delete $self->{generation_retry_delay};
        $self->{serving} = $loading;
        $self->{generation}++;
        $self->{retire_old_when_ready} = 1;
        $self->announce;
        return;
    }
    $loading->retire;
    if (!$self->{announced}) {
        Serow::Log->error("could not load the app $self->{app_file}: exiting");
        $self->{exit_status} = 2;
        return $self->begin_stop;
    }
    if ($self->{serving}) {
        Serow::Log->error("generation $number could not load the app $self->{app_file}: "
            . "the workers of generation " . $self->{serving}->number . " keep serving");
    } else {
        # The serving generation died, and the file does not load now: the
        # workers that run serve on, but none can be forked in place of one
        # that leaves until a generation holds the app again.
        Serow::Log->error("generation $number could not load the app $self->{app_file}, and no "
            . "generation holds it: the running workers keep serving, none is started in place "
            . "of one that leaves; trying again in " . $self->retry_generation_later . " s (or on HUP)");
    }
    # (Once said: READY=1 again, the old workers serving on.)
    $self->{systemd}->reload_failed;
}

# serow FILE, no generation holding the app (the serving one died and the
# file does not load now): another is started after a while
# (start_generation_when_due), longer each time (next_retry_delay: 1, 2,
# 4... seconds), until one loads it or a HUP tries at once.  The delay, in
# seconds.
sub retry_generation_later {
    my ($self) = @_;
    my $delay = $self->{generation_retry_delay} = $self->next_retry_delay($self->{generation_retry_delay});
    $self->{generation_retry_at} = Time::HiRes::time + $delay;
    return $delay;
}

sub start_generation_when_due {
    my ($self) = @_;
    my $at = $self->{generation_retry_at} or return;
    return if $self->{loading} || $self->{stopping} || Time::HiRes::time < $at;
    $self->start_generation;
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
    $self->{logs}->close_access_log;
}

1;
__END__

=head1 NAME

Serow::Master::Generations - HUP's new workers and the generation processes (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: on HUP a new generation of workers starts, and the old
one finishes and leaves (at once, or with C<--lazy-app> and C<serow FILE>
once every new worker has started). With C<serow FILE> each generation is
a process (L<Serow::Generation>) that loads the app and forks its workers;
one that cannot load it leaves the old generation serving.

=cut
