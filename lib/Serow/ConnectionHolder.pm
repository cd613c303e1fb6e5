package Serow::ConnectionHolder;
use strict;
use warnings;

use Serow ();
use Serow::Log ();
use Serow::Publish::Redis ();

# The connection holder process: a C event loop (src/holder/connection_holder.c)
# that keeps idle keep-alive connections so that they cost no worker, and
# passes each one that has a request to whichever worker is free.

# (A worker busy in one request for SHARED_STUCK_AFTER_MS, src/shared/shared_state.h,
# loses its idle connections to the holder, so that other workers serve them.)
# A connection idle this long in a worker moves to the holder.
use constant IDLE_HANDOFF_MS => 500;

# The channels: the ready channel (holder -> workers) and the hand-back
# channel (stopping workers -> holder).  Made by the master before forking.
sub new {
    my ($class, %args) = @_;
    my $shared = $args{shared};
    my ($ready_send, $ready_receive) = $shared->make_channel;
    my ($handback_send, $handback_receive) = $shared->make_channel;
    return bless {
        shared           => $shared,
        options          => $args{options},
        ready_send       => $ready_send,
        ready_receive    => $ready_receive,
        handback_send    => $handback_send,
        handback_receive => $handback_receive,
    }, $class;
}

# The worker's ends of the channels.
sub worker_channels {
    my ($self) = @_;
    return ($self->{ready_receive}, $self->{handback_send});
}

# Runs in the forked holder process; returns when it is told to stop.
# $access_log_fh: the master's handle on --access-log (undef: standard
# error, or none), on which the holder logs the requests it sheds.
sub run {
    my ($self, $access_log_fh) = @_;
    $0 = "serow connection holder";
    return $self->{shared}->run_holder($self->{ready_send}, $self->{handback_receive},
        $self->settings($self->{options}, $access_log_fh));
}

# What the holder's C takes (Serow::Shared->run_holder, which has no default
# of its own: a missing one is an error).
sub settings {
    my ($class, $options, $access_log_fh) = @_;
    # --publish-redis (checked at start-up): its parts; host '': none
    my $redis = defined $options->{publish_redis} ? Serow::Publish::Redis->parse($options->{publish_redis})
        : { host => '', port => 0, prefix => '' };
    return {
        keepalive_timeout         => $options->{keepalive_timeout},
        max_keepalive_connections => $options->{max_keepalive_connections},
        idle_handoff_ms           => IDLE_HANDOFF_MS,
        max_queue_wait            => $options->{max_queue_wait}, # ms; 0: no limit
        # reopened on USR1; undef: none (or syslog)
        error_log                 => Serow::Log->file($options->{error_log}),
        # for the 503s of --max-queue-wait; undef: none
        access_log                => $options->{access_log},
        access_log_format         => $options->{access_log_format},
        access_log_fd             => $access_log_fh ? fileno($access_log_fh) : -1, # -1: stderr
        # the id of those 503s' requests; '': none
        request_id_header         => $options->{request_id_header} // '',
        # --grip: held connections (0: off)
        hold_max_pending          => $options->{grip} ? $options->{hold_max_pending} || 1 : 0,
        max_held_connections      => $options->{max_held_connections},
        redis_host                => $redis->{host},
        redis_port                => $redis->{port},
        redis_prefix              => $redis->{prefix},
        hold_max_channels         => $options->{hold_max_channels},
        publish_max_item          => $options->{publish_max_item},
        # WebSockets in the holder (with --grip)
        websocket_max_message     => $options->{websocket_max_message},
        websocket_max_gathered    => $options->{websocket_max_gathered},
        websocket_ping_interval   => $options->{websocket_ping_interval}, # seconds
        websocket_ping_timeout    => $options->{websocket_ping_timeout},
        websocket_deflate         => $options->{websocket_deflate} eq 'on' ? 1 : 0,
    };
}

1;
__END__

=head1 NAME

Serow::ConnectionHolder - the process that holds idle keep-alive connections

=head1 DESCRIPTION

See F<docs/keepalive.md> for the design: workers publish their idle
connections in shared memory; the holder takes over those of a worker that
is busy for more than 2 ms and those idle for more than 500 ms (with
pidfd_getfd(2), no work for the worker), waits on them in one epoll, and
passes each one that has a request to any free worker.

=cut
