package Serow::Master::Systemd;
use strict;
use warnings;

# What the master tells systemd under Type=notify, and when (Serow::Notify
# speaks the protocol).  Without $NOTIFY_SOCKET every method does nothing.

# How often the master looks whether its new workers have all started while
# systemd waits for READY=1 (only then, and only under Type=notify).
use constant READY_POLL_SECONDS => 0.05;

sub new {
    my ($class, %args) = @_;
    return bless {
        notify         => $args{notify}, # Serow::Notify, or undef
        awaiting_ready => 1, # READY=1 is owed once the current generation has started
        ready_once     => 0, # READY=1 has been said
    }, $class;
}

# Whether systemd listens (Type=notify).
sub active { defined $_[0]{notify} }

# How long the master may sleep, at most $timeout: less while systemd waits
# for READY=1 (unless $stopping), or when the watchdog's ping is due sooner.
sub timeout {
    my ($self, $timeout, $stopping) = @_;
    my $notify = $self->{notify} or return $timeout;
    $timeout = READY_POLL_SECONDS if $self->{awaiting_ready} && !$stopping;
    my $watchdog = $notify->watchdog;
    $timeout = $watchdog if defined $watchdog && $watchdog < $timeout;
    return $timeout;
}

# READY=1 once the workers are up ($ready: the master's generation_ready,
# after the start, after a HUP), STATUS= from the shared memory's $status
# when it changes, and the watchdog's ping.
sub update {
    my ($self, $status, $ready) = @_;
    my $notify = $self->{notify} or return;
    if ($self->{awaiting_ready} && $ready) {
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

# A HUP's new code could not be loaded (a generation, or --lazy-app's new
# workers): the old workers serve on, and the reload is over.
sub reload_failed {
    my ($self) = @_;
    return unless $self->{notify} && $self->{awaiting_ready};
    $self->{awaiting_ready} = 0;
    $self->{ready_once} = 1;
    $self->{notify}->ready;
}

# A HUP: RELOADING=1, and READY=1 is owed again once the new workers are up.
sub reloading {
    my ($self) = @_;
    my $notify = $self->{notify} or return;
    $notify->reloading;
    $self->{awaiting_ready} = 1;
}

# The stop: STOPPING=1.
sub stopping {
    my ($self) = @_;
    $self->{notify}->stopping if $self->{notify};
}

# In a child of the master: systemd's socket is the master's alone.
sub close_in_child {
    my ($self) = @_;
    $self->{notify}->close_in_child if $self->{notify};
}

1;
__END__

=head1 NAME

Serow::Master::Systemd - what the master tells systemd (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: under C<Type=notify>, C<READY=1> once the holder and
every worker of the current generation run, C<RELOADING=1> on HUP,
C<STATUS=> and the watchdog's ping. L<Serow::Notify> sends the messages;
see "systemd" in L<Serow::Master>.

=cut
