package Serow::Master::Systemd;
use strict;
use warnings;

# What the master tells systemd under Type=notify, and when (Serow::Notify
# speaks the protocol).  Methods of the master object (Serow::Master); the
# fields they own are 'notify' (the Serow::Notify, or undef), 'awaiting_ready'
# and 'ready_once'.

# How often the master looks whether its new workers have all started while
# systemd waits for READY=1 (only then, and only under Type=notify).
use constant READY_POLL_SECONDS => 0.05;

# How long the master may sleep, at most $timeout: less while systemd waits
# for READY=1, or when the watchdog's ping is due sooner.
sub systemd_timeout {
    my ($self, $timeout) = @_;
    my $notify = $self->{notify} or return $timeout;
    $timeout = READY_POLL_SECONDS if $self->{awaiting_ready} && !$self->{stopping};
    my $watchdog = $notify->watchdog;
    $timeout = $watchdog if defined $watchdog && $watchdog < $timeout;
    return $timeout;
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
sub notify_reloading {
    my ($self) = @_;
    my $notify = $self->{notify} or return;
    $notify->reloading;
    $self->{awaiting_ready} = 1;
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
