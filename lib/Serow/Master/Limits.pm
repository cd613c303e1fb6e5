package Serow::Master::Limits;
use strict;
use warnings;

use Time::HiRes ();

use Serow::Log ();
use Serow::ProcessStats ();

# The limits the master enforces on a worker from outside, on its own
# clock: --max-worker-rss (the worker replaced), --graceful-timeout (a
# stopping worker killed), and --request-timeout's last resort (a worker
# whose app outlived it killed, its client answered 503 and the 503 logged).

# --max-worker-rss: how often the master reads its workers' resident memory.
# The master does it, on its own clock, so that a worker spends nothing on it;
# a worker over the limit may answer requests for up to this long more.
use constant RSS_CHECK_SECONDS => 1;

# $workers: Serow::Master::Workers; $logs: Serow::Master::Logs (the 503's
# access log line).
sub new {
    my ($class, %args) = @_;
    return bless {
        options      => $args{options},
        shared       => $args{shared},
        workers      => $args{workers},
        logs         => $args{logs},
        rss_checked  => undef, # when --max-worker-rss was last looked at
        killed       => {},    # pid => 1: killed, not reaped yet
        # pid => [fd, since_ms, app_fd]: the connection of a stuck request,
        # taken before its worker was killed, to answer once it is dead
        stuck_client => {},
    }, $class;
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
    for my $pid ($self->{workers}->current) {
        my $mib = worker_rss_mib($pid) // next;
        next if $mib <= $limit;
        Serow::Log->info("worker $pid uses $mib MiB, over --max-worker-rss $limit: replaced");
        $self->{shared}->count_worker_recycled('rss');
        $self->{workers}->recycle($pid);
    }
}

# A process's resident memory in whole MiB, or undef when it is gone.
sub worker_rss_mib {
    my ($pid) = @_;
    my $bytes = Serow::ProcessStats->resident_bytes($pid) // return undef;
    return int($bytes / (1024 * 1024));
}

sub kill_overdue_workers {
    my ($self) = @_;
    my $limit = $self->{options}{graceful_timeout};
    my $now = Time::HiRes::time;
    my $workers = $self->{workers};
    for my $pid ($workers->pids) {
        next if $self->{killed}{$pid};
        my $stopping_since = $workers->stopping_since($pid);
        if ($stopping_since && $now - $stopping_since > $limit) {
            $self->kill_worker($pid, "did not finish within --graceful-timeout ${limit}s");
        } elsif (my $stuck = $self->stuck_request($workers->slot($pid))) {
            # The die of --request-timeout did not end the app (a blocking C
            # call, SIGALRM ignored, an eval that swallowed it): nothing in
            # the worker can, so the master does.
            $self->{shared}->count_request_timeout;
            $self->take_from_stuck_worker($pid);
            $self->kill_worker($pid, $stuck);
        }
    }
}

# Why the app of the worker in $slot has outlived --request-timeout and its
# grace, or ''.
sub stuck_request {
    my ($self, $slot) = @_;
    my $timeout = $self->{options}{request_timeout} or return '';
    my $grace = $self->{options}{request_timeout_grace};
    my ($ms, $request, $id) = $self->{shared}->app_running($slot) or return '';
    return '' if $ms <= ($timeout + $grace) * 1000;
    return sprintf "ran %s%s for %.1fs, past --request-timeout ${timeout}s and "
        . "--request-timeout-grace ${grace}s; its client gets 503 unless its response had begun",
        $request, defined $id ? " (request id $id)" : '', $ms / 1000;
}

# Before a stuck worker is killed: the connection of the stuck request, to
# answer once it is dead (worker_exited), kept with which request it was
# (since when the app ran it, and the worker's descriptor number): the app
# may return before the kill, and the worker go on to another request.
# Its parked connections are with the holder already: it takes those idle
# in a worker for IDLE_HANDOFF_MS (Serow::ConnectionHolder), less than any
# --request-timeout.  Connections it was reading (a partial head, pipelined
# requests) close with it.
sub take_from_stuck_worker {
    my ($self, $pid) = @_;
    my ($fd, $since_ms, $app_fd) = $self->{shared}->take_app_connection($self->{workers}->slot($pid))
        or return;
    $self->{stuck_client}{$pid} = [$fd, $since_ms, $app_fd];
}

sub kill_worker {
    my ($self, $pid, $why) = @_;
    Serow::Log->error("worker $pid $why: killed");
    kill 'KILL', $pid;
    $self->{killed}{$pid} = 1;
}

# A worker has exited (reaped), its slot not reset yet: the client of its
# stuck request, if it was killed for one, is answered.
sub worker_exited {
    my ($self, $pid) = @_;
    delete $self->{killed}{$pid};
    my $taken = delete $self->{stuck_client}{$pid} // return;
    $self->answer_stuck_client($pid, $self->{workers}->slot($pid), $taken);
}

# A killed worker is dead (its slot not reset yet): the client of its stuck
# request gets 503 unless bytes of the response had gone out or the app had
# returned from that request before the kill, and the 503 its access log
# line (written by the master, from what the worker left in its slot:
# src/shared/connection_transfer.c).
sub answer_stuck_client {
    my ($self, $pid, $slot, $taken) = @_;
    my $answered = $self->{shared}->answer_app_connection($slot, @$taken,
        $self->stuck_answer_settings($self->{options}, $self->{logs}->access_log_fh));
    return if $answered > 0;
    if ($answered == 0) {
        Serow::Log->error("worker $pid: its stuck request had begun its response: the client's "
            . "connection is closed, the response cut");
    } else {
        Serow::Log->warn("worker $pid: its stuck request ended just before the kill: the "
            . "client's connection is closed, with no 503");
    }
}

# What Serow::Shared->answer_app_connection takes (it has no default of its
# own: a missing one is an error).  $access_log_fh: the master's handle on
# --access-log (Serow::Master::Logs; undef: standard error, or none).
sub stuck_answer_settings {
    my ($class, $options, $access_log_fh) = @_;
    return {
        request_id_header => $options->{request_id_header} // '', # '': none
        access_log        => $options->{access_log},               # undef: none
        access_log_format => $options->{access_log_format},
        access_log_fd     => $access_log_fh ? fileno($access_log_fh) : -1, # -1: stderr
    };
}

1;
__END__

=head1 NAME

Serow::Master::Limits - the limits the master enforces on its workers (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: C<--max-worker-rss>, C<--graceful-timeout>, and the
kill of a worker whose app outlived C<--request-timeout> and
C<--request-timeout-grace> (see F<docs/hardening.md>).

=cut
