package Serow::Master;
use strict;
use warnings;

use POSIX qw(WNOHANG SIGTERM SIGKILL SIG_BLOCK SIG_SETMASK);
use Time::HiRes ();

use Serow ();
use Serow::ConnectionHolder ();
use Serow::Worker ();
use Serow::Log ();

# How long the master sleeps between looks at its workers when no signal
# wakes it: signals and child exits interrupt the sleep at once.
use constant IDLE_WAKE_SECONDS => 1;
# A worker that dies this soon after it started is probably failing at start:
# replacements are then spawned no faster than one per this many seconds.
use constant FAST_DEATH_SECONDS => 1;

my @SIGNALS = qw(TERM INT QUIT HUP TTIN TTOU CHLD);

# Worker slots in the shared memory: room for TTIN and for old workers that
# finish while their replacements run.
use constant MIN_WORKER_SLOTS => 64;

sub new {
    my ($class, %args) = @_;
    my $workers = $args{options}{workers};
    my $slots = $workers * 4 > MIN_WORKER_SLOTS ? $workers * 4 : MIN_WORKER_SLOTS;
    my $shared = Serow::Shared->new($slots);
    return bless {
        app        => $args{app},
        options    => $args{options},
        listeners  => $args{listeners},
        target     => $workers,
        workers    => {},   # pid => { generation, started, stopping_since, slot }
        generation => 1,
        pending    => [],   # signals received, handled in order by the loop
        shared     => $shared,
        holder     => Serow::ConnectionHolder->new(shared => $shared, options => $args{options}),
        holder_pid => undef,
    }, $class;
}

sub shared { $_[0]{shared} }

sub run {
    my ($self) = @_;
    local $0 = "serow master";
    local @SIG{@SIGNALS} = map { my $sig = $_; sub { push @{ $self->{pending} }, $sig } } @SIGNALS;
    local $SIG{PIPE} = 'IGNORE';

    $self->spawn_holder;
    $self->spawn_missing_workers;
    for (;;) {
        select(undef, undef, undef, IDLE_WAKE_SECONDS) unless @{ $self->{pending} };
        $self->reap_workers;
        while (defined(my $sig = shift @{ $self->{pending} })) {
            $self->handle_signal($sig);
        }
        if ($self->{stopping}) {
            $self->kill_overdue_workers;
            next if %{ $self->{workers} };
            # The workers have handed their idle connections over: now the
            # holder closes them and goes too.
            last unless $self->{holder_pid};
            kill SIGTERM, $self->{holder_pid} unless $self->{holder_told_to_stop}++;
            next;
        }
        $self->spawn_holder unless $self->{holder_pid};
        $self->retire_surplus_workers;
        $self->kill_overdue_workers;
        $self->spawn_missing_workers;
    }
    Serow::Log->info("stopped");
    return 0;
}

sub handle_signal {
    my ($self, $sig) = @_;
    if ($sig eq 'TERM' || $sig eq 'INT' || $sig eq 'QUIT') {
        return if $self->{stopping};
        Serow::Log->info("received SIG$sig: finishing in-flight requests, then exiting");
        $self->{stopping} = 1;
        $self->stop_worker($_) for keys %{ $self->{workers} };
    } elsif ($sig eq 'HUP') {
        # New workers first, then the old ones finish what they have: the
        # listen sockets never go unserved.
        Serow::Log->info("received SIGHUP: replacing workers gracefully");
        my @old = keys %{ $self->{workers} };
        $self->{generation}++;
        $self->spawn_missing_workers;
        $self->stop_worker($_) for @old;
    } elsif ($sig eq 'TTIN') {
        $self->{target}++;
        Serow::Log->info("received SIGTTIN: $self->{target} workers");
    } elsif ($sig eq 'TTOU') {
        $self->{target}-- if $self->{target} > 1;
        Serow::Log->info("received SIGTTOU: $self->{target} workers");
    }
}

sub current_workers {
    my ($self) = @_;
    my $w = $self->{workers};
    return grep { $w->{$_}{generation} == $self->{generation} && !$w->{$_}{stopping_since} } keys %$w;
}

sub spawn_missing_workers {
    my ($self) = @_;
    my $missing = $self->{target} - $self->current_workers;
    for (1 .. $missing) {
        my $now = Time::HiRes::time;
        if ($self->{throttled_until} && $now < $self->{throttled_until}) {
            return;
        }
        $self->spawn_worker;
    }
}

# Forks a child that runs $child_main; returns its pid (undef if fork failed).
sub fork_child {
    my ($self, $child_main) = @_;
    # Signals stay blocked across fork so that the child never runs the
    # master's handlers; the child installs its own before unblocking.
    my $block = POSIX::SigSet->new(map { POSIX->can("SIG$_")->() } @SIGNALS);
    my $old = POSIX::SigSet->new;
    POSIX::sigprocmask(SIG_BLOCK, $block, $old);
    my $pid = fork;
    if (!defined $pid) {
        POSIX::sigprocmask(SIG_SETMASK, $old);
        Serow::Log->error("cannot fork: $!");
        $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS;
        return undef;
    }
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for @SIGNALS;
        my $status = eval { $child_main->($old); 1 } ? 0 : do { Serow::Log->error("$0 failed: $@"); 1 };
        exit $status;
    }
    POSIX::sigprocmask(SIG_SETMASK, $old);
    return $pid;
}

sub spawn_holder {
    my ($self) = @_;
    my $pid = $self->fork_child(sub {
        my ($mask) = @_;
        close $_->{socket} for @{ $self->{listeners} }; # it accepts nothing
        POSIX::sigprocmask(SIG_SETMASK, $mask);
        $self->{holder}->run;
    }) or return;
    $self->{holder_pid} = $pid;
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
    my $slot = $self->free_worker_slot;
    if (!defined $slot) {
        Serow::Log->error("no free worker slot: more workers than " . $self->{shared}->max_workers);
        return;
    }
    $self->{shared}->reset_worker($slot);
    my $pid = $self->fork_child(sub {
        my ($mask) = @_;
        my $worker = Serow::Worker->new(
            app       => $self->{app},
            options   => $self->{options},
            listeners => $self->{listeners},
            shared    => $self->{shared},
            slot      => $slot,
            channels  => [ $self->{holder}->worker_channels ],
        );
        $0 = "serow worker";
        POSIX::sigprocmask(SIG_SETMASK, $mask);
        $worker->run;
    }) or return;
    $self->{workers}{$pid} = { generation => $self->{generation}, started => Time::HiRes::time,
                               slot => $slot };
}

sub stop_worker {
    my ($self, $pid) = @_;
    my $w = $self->{workers}{$pid} or return;
    return if $w->{stopping_since};
    $w->{stopping_since} = Time::HiRes::time;
    kill SIGTERM, $pid;
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
        my $since = $self->{workers}{$pid}{stopping_since} or next;
        if ($now - $since > $limit && !$self->{workers}{$pid}{killed}) {
            Serow::Log->error("worker $pid did not finish within --graceful-timeout ${limit}s: killed");
            kill SIGKILL, $pid;
            $self->{workers}{$pid}{killed} = 1;
        }
    }
}

sub reap_workers {
    my ($self) = @_;
    while ((my $pid = waitpid(-1, WNOHANG)) > 0) {
        my $status = $?;
        if ($self->{holder_pid} && $pid == $self->{holder_pid}) {
            $self->{holder_pid} = undef;
            Serow::Log->error("the connection holder exited with status $status; starting a new one")
                unless $self->{stopping};
            next;
        }
        my $w = delete $self->{workers}{$pid} or next;
        $self->{shared}->reset_worker($w->{slot});
        next if $w->{stopping_since};
        # A worker that left on its own: max-requests, harakiri, or a crash.
        if ($status != 0) {
            my $how = $status & 127 ? "was killed by signal " . ($status & 127) : "exited with status " . ($status >> 8);
            Serow::Log->error("worker $pid $how; starting a new one");
        }
        if (Time::HiRes::time - $w->{started} < FAST_DEATH_SECONDS && $status != 0) {
            $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS;
        }
    }
}

1;
__END__

=head1 NAME

Serow::Master - the master process: forks workers, replaces them, handles signals

=head1 DESCRIPTION

The master holds the listen sockets and the loaded app, forks C<--workers>
workers and replaces any that exits (C<--max-requests>, C<psgix.harakiri>,
a crash).

=head2 Signals

=over

=item TERM, INT, QUIT

Stop accepting, let the workers finish the requests they have (up to
C<--graceful-timeout>), then exit.

=item HUP

Start a new set of workers, then let the old ones finish and exit.

=item TTIN, TTOU

One worker more, one worker less.

=back

=cut
