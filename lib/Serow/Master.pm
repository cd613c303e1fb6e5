package Serow::Master;
use strict;
use warnings;

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
# Each worker draws its own --max-requests limit, up to this share below the
# option, so that workers started together do not all restart together.
use constant MAX_REQUESTS_SPREAD => 0.25;

# Worker slots in the shared memory: room for TTIN and for old workers that
# finish while their replacements run.
use constant MIN_WORKER_SLOTS => 64;

my @SIGNALS = qw(TERM INT QUIT HUP TTIN TTOU CHLD);

# What each signal asks of the master (CHLD only wakes it up to reap).
my %ON_SIGNAL = (
    TERM => 'stop',
    INT  => 'stop',
    QUIT => 'stop',
    HUP  => 'restart_workers',
    TTIN => 'add_worker',
    TTOU => 'remove_worker',
);

sub new {
    my ($class, %args) = @_;
    my $workers = $args{options}{workers};
    my $slots = $workers * 4 > MIN_WORKER_SLOTS ? $workers * 4 : MIN_WORKER_SLOTS;
    my $shared = Serow::Shared->new($slots);
    return bless {
        shared     => $shared, # what workers and the holder publish (src/shared_state.h)
        holder     => Serow::ConnectionHolder->new(shared => $shared, options => $args{options}),
        holder_pid => undef,
        app        => $args{app},
        options    => $args{options},
        listeners  => $args{listeners},
        on_ready   => $args{on_ready}, # called once the signal handlers are in place
        target     => $args{options}{workers},
        workers    => {},   # pid => { generation, started, stopping_since, killed, slot }
        generation => 1,
        pending    => [],   # signals received, handled in order by the loop
    }, $class;
}

sub run {
    my ($self) = @_;
    local $0 = "serow master";
    local @SIG{@SIGNALS} = map { my $sig = $_; sub { push @{ $self->{pending} }, $sig } } @SIGNALS;
    local $SIG{PIPE} = 'IGNORE';
    $self->{pid} = $$;
    $self->{on_ready}->() if $self->{on_ready};

    $self->spawn_holder;
    $self->spawn_missing_workers;
    until ($self->{stopping} && !%{ $self->{workers} } && !$self->{holder_pid}) {
        $self->wait_for_event;
        $self->reap_workers;
        $self->handle_signals;
        $self->kill_overdue_workers;
        if ($self->{stopping}) {
            # The workers have handed their idle connections over: now the
            # holder closes them and goes too.
            $self->stop_holder unless %{ $self->{workers} };
            next;
        }
        $self->spawn_holder unless $self->{holder_pid};
        $self->retire_surplus_workers;
        $self->spawn_missing_workers;
    }
    Serow::Log->info("stopped");
    return 0;
}

sub wait_for_event {
    my ($self) = @_;
    select(undef, undef, undef, IDLE_WAKE_SECONDS) unless @{ $self->{pending} };
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
    Serow::Log->info("received SIG$sig: finishing in-flight requests, then exiting");
    $self->{stopping} = 1;
    $self->{shared}->set_server_stopping;
    $self->stop_worker($_) for keys %{ $self->{workers} };
}

# New workers first, then the old ones finish what they have: the listen
# sockets never go unserved.
sub restart_workers {
    my ($self, $sig) = @_;
    Serow::Log->info("received SIG$sig: replacing workers gracefully");
    my @old = keys %{ $self->{workers} };
    $self->{generation}++;
    $self->spawn_missing_workers;
    $self->stop_worker($_) for @old;
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
    my $missing = $self->{target} - $self->current_workers;
    for (1 .. $missing) {
        return if $self->{throttled_until} && Time::HiRes::time < $self->{throttled_until};
        $self->spawn_worker;
    }
}

sub request_limit {
    my ($self) = @_;
    my $max = $self->{options}{max_requests} or return 0;
    return $max - int(rand($max * MAX_REQUESTS_SPREAD));
}

# Forks a child that runs $child_main (which never returns); returns the pid,
# or undef when fork failed.
sub fork_child {
    my ($self, $child_main) = @_;
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
        # A child whose master is gone finishes its work and leaves; the
        # master may have died before this line, leaving nobody to signal it.
        Serow::set_parent_death_signal(Serow::signal_number('TERM'));
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
        my ($signal_mask) = @_;
        close $_->{socket} for @{ $self->{listeners} }; # it accepts nothing
        Serow::set_signal_mask($signal_mask);
        Serow::exit_now($self->{holder}->run == 0 ? 0 : 1);
    });
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
    my $pid = $self->fork_child(sub { $self->run_worker($limit, $slot, @_) }) or return;
    $self->{workers}{$pid} = { generation => $self->{generation}, started => Time::HiRes::time,
                               slot => $slot };
}

# In the child: becomes a worker and never returns.
sub run_worker {
    my ($self, $limit, $slot, $signal_mask) = @_;
    $0 = "serow worker";
    # Else every worker would draw the same rand() sequence as its siblings.
    srand();
    my $worker = Serow::Worker->new(
        app           => $self->{app},
        options       => $self->{options},
        listeners     => $self->{listeners},
        request_limit => $limit,
        signal_mask   => $signal_mask,
        shared        => $self->{shared},
        slot          => $slot,
        channels      => [ $self->{holder}->worker_channels ],
    );
    my $status = eval { $worker->run; 1 } ? 0 : do { Serow::Log->error("worker failed: $@"); 1 };
    exit $status;
}

sub stop_worker {
    my ($self, $pid) = @_;
    my $w = $self->{workers}{$pid} or return;
    return if $w->{stopping_since};
    $w->{stopping_since} = Time::HiRes::time;
    kill 'TERM', $pid;
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
        next if !$w->{stopping_since} || $w->{killed} || $now - $w->{stopping_since} <= $limit;
        Serow::Log->error("worker $pid did not finish within --graceful-timeout ${limit}s: killed");
        kill 'KILL', $pid;
        $w->{killed} = 1;
    }
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
        my $w = delete $self->{workers}{$pid} or next;
        $self->{shared}->reset_worker($w->{slot});
        $self->log_worker_exit($pid, $w, $status);
        # One that fails right after it started would fail again at once.
        if (!$w->{stopping_since} && $status != 0
                && Time::HiRes::time - $w->{started} < FAST_DEATH_SECONDS) {
            $self->{throttled_until} = Time::HiRes::time + FAST_DEATH_SECONDS;
        }
    }
}

sub log_worker_exit {
    my ($self, $pid, $w, $status) = @_;
    my $how = $status & 127 ? "was killed by signal " . ($status & 127)
            : "exited with status " . ($status >> 8);
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

The master holds the listen sockets and the loaded app, forks the
connection holder (L<Serow::ConnectionHolder>, see F<docs/keepalive.md>) and
C<--workers> workers, and replaces any that exits (C<--max-requests>, C<psgix.harakiri>,
a crash). It logs a line when a worker exits (C<worker PID exited with
status N> or C<was killed by signal N>); the worker itself logs when it is
ready (C<worker PID started>, with its own request limit under
C<--max-requests>) and when it stops accepting (C<worker PID stopping>).

A worker whose master dies (even by SIGKILL) gets SIGTERM from the kernel
and finishes its requests, so no worker outlives its master for long.

=head2 Signals

=over

=item TERM, INT, QUIT

Stop accepting, let the workers finish the requests they have (up to
C<--graceful-timeout>), then exit 0. Signals other than these are ignored
from then on.

=item HUP

Start a new set of workers, then let the old ones finish and exit (each
within C<--graceful-timeout>).

=item TTIN, TTOU

One worker more, one worker less (never fewer than one).

=back

=cut
