package Serow::Bench::Fairness;
use strict;
use warnings;

# The keep-alive fairness scenarios of bench/run: (a) idle keep-alive
# connections beside active ones, (b) a blocking app with more clients than
# workers, (c) a few slow requests among fast ones, (d) nginx in front.

use Time::HiRes ();
use Serow::Bench::Config qw($QUICK $WARMUP $DURATION $IDLE $ACTIVE);
use Serow::Bench::Cpu qw(probe_start probe_end wrk_recording_stalls);
use Serow::Bench::Load qw(wrk client_load idle_open idle_again idle_kill);
use Serow::Bench::Process qw(stop group_processes);
use Serow::Bench::Results qw(rounds servers_for check_alive);
use Serow::Bench::Scenarios qw(measure_behind_nginx);
use Serow::Bench::Servers qw(start with_server);
use Serow::Bench::Util qw(ensure);

# (a) IDLE idle keep-alive connections while 32 connections load the server.
sub idle_10k {
    my @servers = servers_for('idle_10k');
    rounds('idle_10k', \@servers, sub {
        my ($server) = @_;
        my ($p, $err) = start($server, app => 'hello', workers => 4, keepalive => 120,
            connections => $IDLE + 1000, nginx => { body => 'Hello World' });
        die "$err\n" unless $p;
        my $idle;
        return ensure(sub { idle_round($p, \$idle) }, sub { idle_kill($idle); stop($p) });
    });
}

# One round of (a) on a started server: wrk and bench/client without the idle
# connections, with them, and wrk without them again.  $$idle: the idle
# client's handle, for the caller to stop if this dies.
sub idle_round {
    my ($p, $idle) = @_;
    my ($port) = $p->{listen} =~ /:(\d+)$/;
    my %w = (addr => $p->{listen}, path => '/', conns => $ACTIVE);
    wrk(%w, duration => $WARMUP);
    my $base = wrk_recording_stalls($p, %w, duration => $DURATION);
    # the same load from bench/client, which leaves CPU 1 more room
    # than wrk (docs/keepalive.md, "The load generator's share")
    my %l = (addr => $p->{listen}, conns => $w{conns}, duration => $DURATION);
    my $base_client = client_load(%l);
    my %before = map { $_->{pid} => $_ } group_processes($p);
    $$idle = idle_open(port => $port, conns => $IDLE);
    Time::HiRes::sleep(1.5); # Serow moves connections idle for 0.5 s to its holder
    my @after = group_processes($p);
    my $probe = probe_start($p);
    my $loaded = wrk_recording_stalls($p, %w, duration => $DURATION);
    probe_end($probe, $loaded, $loaded->{requests});
    my $loaded_client = client_load(%l);
    my %c = %{ idle_again($$idle) };
    # Without them again, so that each round's "without" brackets its
    # "with": the machine's speed drifts by more than the target's 10%
    # within a round (docs/keepalive.md), and the mean of the runs
    # before and after cancels a steady drift where one run cannot.
    wrk(%w, duration => $WARMUP);
    my $after = wrk(%w, duration => $DURATION);
    check_alive($p);
    my %r = (rps => $loaded->{rps}, p99 => $loaded->{p99}, errors => $loaded->{errors},
        cpu0_other => $loaded->{cpu0_other}, cpu1_other => $loaded->{cpu1_other},
        base_rps => $base->{rps}, base_p99 => $base->{p99}, base_errors => $base->{errors},
        after_rps => $after->{rps}, after_p99 => $after->{p99}, after_errors => $after->{errors},
        # what else took CPU 0 and CPU 1 (wrk_recording_stalls), with and without
        (map { ($_ => $loaded->{$_}, "base_$_" => $base->{$_}) }
            map { ("${_}stall_ms", "${_}stall_longest_ms", "${_}stall_longest_by") } '', 'loadgen_'),
        client_rps => $loaded_client->{rps}, client_p99 => $loaded_client->{p99_ms},
        client_errors => $loaded_client->{errors},
        base_client_rps => $base_client->{rps}, base_client_p99 => $base_client->{p99_ms},
        base_client_errors => $base_client->{errors},
        opened => $c{opened} // 0, again_ok => $c{again_ok} // 0,
        again_closed => $c{again_closed} // 0, again_failed => $c{again_failed} // 0,
        closed_while_idle => $c{closed_while_idle} // 0);
    # "the same run without idle connections": the mean of the two
    # runs around the one with them
    my @without = grep { defined } $base->{rps}, $after->{rps};
    my $without_sum = 0;
    $without_sum += $_ for @without;
    $r{without_rps} = @without ? $without_sum / @without : undef;
    idle_memory(\%r, $p->{name}, \%before, \@after);
    $r{extra} = sprintf 'without idle %.0f req/s p99 %.2f ms, after them %.0f req/s p99 %.2f ms; '
        . 'bench/client p99 %.2f ms, without idle %.2f ms; idle opened %d, answered again %d',
        $r{base_rps}, $r{base_p99} // -1, $r{after_rps} // -1, $r{after_p99} // -1,
        $r{client_p99} // -1, $r{base_client_p99} // -1,
        $r{opened}, $r{again_ok};
    return \%r;
}

# The memory of the idle connections, from the server's processes before
# they opened and while it held them: the holder (Serow) or the worker
# (nginx), RSS after minus before; and all processes' PSS.
sub idle_memory {
    my ($r, $server, $before, $after) = @_;
    my ($holder) = grep { $_->{cmd} eq 'serow connection holder' } @$after;
    ($holder) = grep { $_->{cmd} =~ /worker process/ } @$after if $server eq 'nginx';
    if ($holder && $before->{ $holder->{pid} } && $r->{opened} >= 100) {
        $r->{holder_rss_before} = $before->{ $holder->{pid} }{rss};
        $r->{holder_rss_after} = $holder->{rss};
        $r->{holder_fds} = $holder->{fds};
        $r->{bytes_per_idle} = ($holder->{rss} - $before->{ $holder->{pid} }{rss}) * 1024 / $r->{opened};
    }
    my ($sum_before, $sum_after) = (0, 0);
    $sum_before += $_->{pss} for values %$before;
    $sum_after += $_->{pss} for @$after;
    $r->{server_pss_per_idle} = ($sum_after - $sum_before) * 1024 / $r->{opened} if $r->{opened} >= 100;
}

# One bench/client load measurement of a started server (%o: conns,
# slow_every), with the server's CPU time; p99 as wrk's is named.
sub measure_client {
    my ($p, %o) = @_;
    my $probe = probe_start($p);
    my $r = client_load(addr => $p->{listen}, duration => $DURATION, %o);
    probe_end($probe, $r, $r->{requests});
    check_alive($p);
    $r->{p99} = $r->{p99_ms};
    return $r;
}

# The rounds of (b) or (c): each server in turn, started with %$start,
# measured by $body->($p) and stopped.
sub rounds_with_server {
    my ($scenario, $start, $body) = @_;
    rounds($scenario, [servers_for($scenario)], sub { with_server($_[0], $start, $body) });
}

# (b) Every request blocks for 10 ms; 200 clients, 8 workers: 800 req/s ideal.
sub blocking_10ms {
    my $clients = $QUICK ? 50 : 200;
    rounds_with_server('blocking_10ms', { app => 'sleep', workers => 8 }, sub {
        my ($p) = @_;
        wrk(addr => $p->{listen}, path => '/', conns => 8, duration => $WARMUP);
        my $r = measure_client($p, conns => $clients);
        $r->{extra} = sprintf 'p50 %.1f ms, longest wait %.0f ms, answers per connection min %d median %d max %d, unserved %d',
            $r->{p50_ms}, $r->{longest_wait_ms}, $r->{answers_min}, $r->{answers_median},
            $r->{answers_max}, $r->{connections_unserved};
        $r;
    });
}

# (c) 2% of the requests block for 50 ms; 64 clients, 8 workers.  Capacity:
# 8 workers / (0.02 x 50 ms + the server's own time per fast request, from a
# run of fast requests only).
sub slow_2pct {
    my $clients = $QUICK ? 16 : 64;
    rounds_with_server('slow_2pct', { app => 'mixed', workers => 8 }, sub {
        my ($p) = @_;
        wrk(addr => $p->{listen}, path => '/', conns => $clients, duration => $WARMUP);
        my $fast = wrk(addr => $p->{listen}, path => '/', conns => $clients, duration => $DURATION);
        my $r = measure_client($p, conns => $clients, slow_every => 50);
        $r->{fast_rps} = $fast->{rps};
        $r->{capacity} = $fast->{rps} > 0 ? 8 / (0.02 * 0.050 + 1 / $fast->{rps}) : 0;
        $r->{extra} = sprintf 'capacity %.0f (fast only %.0f), p50 %.2f p90 %.2f ms, longest wait %.0f ms, answers min %d, unserved %d',
            $r->{capacity}, $r->{fast_rps}, $r->{p50_ms}, $r->{p90_ms}, $r->{longest_wait_ms},
            $r->{answers_min}, $r->{connections_unserved};
        $r;
    });
}

# (d) nginx in front (upstream keep-alive 32), 64 clients, 4 workers.
sub nginx_front {
    my @servers = servers_for('nginx_front');
    rounds('nginx_front', \@servers, sub {
        my ($server) = @_;
        return measure_behind_nginx($server, app => 'hello', conns => $QUICK ? 16 : 64, workers => 4);
    });
}

1;
