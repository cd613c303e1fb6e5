package Serow::Master::Generations;
use strict;
use warnings;

use Time::HiRes ();

use Serow::Generation ();
use Serow::Log ();
use Serow::Master::Retry ();

# serow FILE's generation processes (Serow::Generation), each of which loads
# the app and forks its workers: started (at the start, on HUP, when the
# serving one died), promoted once loaded, retired, stopped.  Without serow
# FILE (no load_app) there are none.

# $fork: Serow::Master::Fork; $logs: Serow::Master::Logs; $run_worker: what
# a worker a generation process forks runs (Serow::Master::Workers,
# run_worker), given the app the generation loaded.
sub new {
    my ($class, %args) = @_;
    return bless {
        fork        => $args{fork},
        shared      => $args{shared},
        logs        => $args{logs},
        run_worker  => $args{run_worker},
        load_app    => $args{load_app}, # serow FILE: loads the app in a generation process
        app_file    => $args{app_file},
        running     => {},    # pid => Serow::Generation, every one still running
        serving     => undef, # the generation whose workers are current
        loading     => undef, # the one loading the app after a HUP (or at the start)
        last_number => 0,     # the number of the last one started
        retry_at    => undef, # when to try again, no generation holding the app
        retry_delay => undef,
    }, $class;
}

# Whether workers come from generation processes (serow FILE).
sub preloading { defined $_[0]{load_app} }

# The generation whose workers are current, or undef.
sub serving { $_[0]{serving} }

# The generation loading the app, or undef.
sub loading { $_[0]{loading} }

# How many generation processes run.
sub running { scalar keys %{ $_[0]{running} } }

sub is_generation {
    my ($self, $pid) = @_;
    return exists $self->{running}{$pid};
}

# Forks a generation process to load the app (at the start, on HUP, or
# when the serving one died).  A HUP that comes while one is loading
# starts over with the file as it is now.
sub start {
    my ($self) = @_;
    delete $self->{retry_at};
    if (my $loading = delete $self->{loading}) {
        Serow::Log->info("generation " . $loading->number . " has not loaded the app yet: "
            . "a new one loads it afresh");
        $loading->retire;
        kill 'KILL', $loading->pid; # (it ignores the master's signals)
    }
    my $generation = Serow::Generation->start(fork => $self->{fork}, logs => $self->{logs},
        run_worker => $self->{run_worker}, number => ++$self->{last_number},
        load_app => $self->{load_app}) or return;
    $self->{running}{ $generation->pid } = $generation;
    $self->{loading} = $generation;
    $self->publish;
}

# The generation processes running, for the process metrics (each holds a
# compiled copy of the app: memory an operator wants to see).
sub publish {
    my ($self) = @_;
    $self->{shared}->set_generation_pids(sort { $a <=> $b } keys %{ $self->{running} });
}

# The generation loading the app has loaded it ('loaded': it serves now; its
# workers become the current ones once the master starts them) or could not
# ('failed': it logged why; the old generation keeps serving).  $first: no
# generation has loaded the app yet (then serow exits 2).  '' until it says.
sub check_loading {
    my ($self, $first) = @_;
    my $loading = $self->{loading} or return '';
    my $result = $loading->read_load_result or return '';
    $self->{loading} = undef;
    my $number = $loading->number;
    if ($result eq 'loaded' && !$self->{running}{ $loading->pid }) {
        # It said so, then died before the master read it: reaped first.
        $loading->retire;
        Serow::Log->error("generation $number (pid " . $loading->pid . ") exited once it had loaded "
            . "the app: a new generation loads it in " . $self->retry_later . " s");
        return '';
    }
    if ($result eq 'loaded') {
        delete $self->{retry_delay};
        $self->{serving} = $loading;
        return 'loaded';
    }
    $loading->retire;
    if ($first) {
        Serow::Log->error("could not load the app $self->{app_file}: exiting");
    } elsif ($self->{serving}) {
        Serow::Log->error("generation $number could not load the app $self->{app_file}: "
            . "the workers of generation " . $self->{serving}->number . " keep serving");
    } else {
        # The serving generation died, and the file does not load now: the
        # workers that run serve on, but none can be forked in place of one
        # that leaves until a generation holds the app again.
        Serow::Log->error("generation $number could not load the app $self->{app_file}, and no "
            . "generation holds it: the running workers keep serving, none is started in place "
            . "of one that leaves; trying again in " . $self->retry_later . " s (or on HUP)");
    }
    return 'failed';
}

# No generation holding the app (the serving one died and the file does not
# load now): another is started after a while (start_when_due), longer each
# time (Serow::Master::Retry), until one loads it or a HUP tries at once.
# The delay, in seconds.
sub retry_later {
    my ($self) = @_;
    my $delay = $self->{retry_delay} = Serow::Master::Retry->next_delay($self->{retry_delay});
    $self->{retry_at} = Time::HiRes::time + $delay;
    return $delay;
}

sub start_when_due {
    my ($self) = @_;
    my $at = $self->{retry_at} or return;
    return if $self->{loading} || Time::HiRes::time < $at;
    $self->start;
}

# A generation process has exited (reaped): it was told to (retired, or
# stopping), or could not load the app (check_loading says so), or died
# while serving: then a new generation loads the app, and its workers
# replace the old ones once ready.
sub exited {
    my ($self, $pid, $status) = @_;
    my $generation = delete $self->{running}{$pid} or return;
    $self->publish;
    my $number = $generation->number;
    # (One loading the app: check_loading reads its end.)
    return if $self->{loading} && $generation == $self->{loading};
    $generation->retire;
    if (!$self->{serving} || $generation != $self->{serving}) {
        Serow::Log->info("generation $number (pid " . $generation->pid . ") exited") if $status == 0;
        return;
    }
    $self->{serving} = undef;
    Serow::Log->error("generation $number (pid " . $generation->pid . ") exited with status $status: "
        . "a new generation loads the app");
    $self->start unless $self->{loading};
}

# After a HUP, once the new generation's workers have all started: the
# older generation processes fork no more workers, and exit.
sub retire_all_but_serving {
    my ($self) = @_;
    my $serving = $self->{serving};
    $_->retire for grep { !$serving || $_ != $serving } values %{ $self->{running} };
}

# The stop: generation processes fork no more workers.
sub stop {
    my ($self) = @_;
    for my $generation (values %{ $self->{running} }) {
        $generation->retire;
        # (One still loading the app would finish loading first; it
        # ignores the master's signals.)
        kill 'KILL', $generation->pid if $generation->loading;
    }
    $self->{loading} = $self->{serving} = undef;
}

# In a child of the master: the channels to the generation processes are
# the master's.
sub close_in_child {
    my ($self) = @_;
    $_->close_in_child for values %{ $self->{running} };
}

1;
__END__

=head1 NAME

Serow::Master::Generations - serow FILE's generation processes (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: with C<serow FILE> each generation is a process
(L<Serow::Generation>) that loads the app and forks its workers; on HUP a
new one loads the file afresh, and one that cannot load it leaves the old
generation serving. The master retires the old generation once every
worker of the new one has started.

=cut
