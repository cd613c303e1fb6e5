package Serow::Bench::Results;
use strict;
use warnings;

# The results of a run: each scenario's rounds per server, the failures, the
# servers left out and why, and the load average seen; choosing a scenario's
# servers (servers_for), running its rounds (rounds), and the medians the
# report reads (med_of).

use Serow::Bench::Config qw(%opt $ROUNDS);
use Serow::Bench::Process qw(alive);
use Serow::Bench::Servers qw(@SERVERS %TITLE missing not_applicable);
use Serow::Bench::Util qw(note logf median slurp loadavg);

use Exporter 'import';
our @EXPORT_OK = qw(%RESULTS %FAILED %LEFT_OUT %LOAD rs failed left_out selected med_of rounds servers_for
    check_alive any_failure);

# $RESULTS{scenario}{server} = [ per-round hashes ]
our %RESULTS;
our %FAILED;      # "server in scenario" => reason
our %LEFT_OUT;    # scenario => server => [kind ('not installed' or 'does not apply'), why]
our %LOAD;        # scenario => [load averages seen]
my $ANY_FAILURE = 0;

sub any_failure { $ANY_FAILURE }

# Lookups that create nothing (no autovivification).
sub rs { $RESULTS{ $_[0] } ? $RESULTS{ $_[0] }{ $_[1] } : undef }
sub failed { $FAILED{ $_[0] } ? $FAILED{ $_[0] }{ $_[1] } : undef }
sub left_out { $LEFT_OUT{ $_[0] } ? $LEFT_OUT{ $_[0] }{ $_[1] } : undef }

sub med_of {
    my ($scenario, $server, $key) = @_;
    my $rs = rs($scenario, $server) or return undef;
    return median(map { $_->{$key} } @$rs);
}

sub fail {
    my ($scenario, $server, $why) = @_;
    $FAILED{$scenario}{$server} //= $why;
    $ANY_FAILURE = 1;
    logf("  %s: FAILED: %s", $TITLE{$server}, $why);
}

# The servers --servers names (all by default), in the order of every table.
sub selected {
    my %only = map { $_ => 1 } split /,/, $opt{servers} // '';
    return grep { !%only || $only{$_} } @SERVERS;
}

# The selected servers that run in a scenario; the others, not installed or
# not applicable, are logged and kept with the reason for the report.
sub servers_for {
    my ($scenario) = @_;
    my @run;
    for my $server (selected()) {
        my ($kind, $why) = ('not installed', missing($server));
        ($kind, $why) = ('does not apply', not_applicable($server, $scenario)) unless $why;
        if (!$why) {
            push @run, $server;
            next;
        }
        $LEFT_OUT{$scenario}{$server} = [$kind, $why];
        logf("  %s: %s: %s", $TITLE{$server}, $kind, $why);
    }
    return @run;
}

# Runs $measure->($server, $round) for each round and server in turn; a round
# in which the server process died (something outside stopped it) is run again
# once.
sub rounds {
    my ($scenario, $servers, $measure) = @_;
    local $Serow::Bench::Servers::SCENARIO = $scenario;
    for my $round (1 .. $ROUNDS) {
        push @{ $LOAD{$scenario} }, loadavg();
        for my $server (@$servers) {
            next if failed($scenario, $server);
            for my $try (1, 2) {
                my $r = eval { $measure->($server, $round) };
                if (!$r) {
                    my $err = $@ || 'no result';
                    chomp $err;
                    if ($err =~ /^RETRY: (.*)/ && $try == 1) {
                        note("$scenario, $TITLE{$server}, round $round: $1; the round was run again");
                        next;
                    }
                    $err =~ s/^RETRY: //;
                    fail($scenario, $server, $err);
                    last;
                }
                push @{ $RESULTS{$scenario}{$server} }, $r;
                logf("  round %d %-20s %s", $round, $TITLE{$server}, summary($r));
                last;
            }
        }
    }
}

# One round's result in a line of the progress log.
sub summary {
    my ($r) = @_;
    my @s = (sprintf '%.0f req/s', $r->{rps});
    push @s, sprintf 'p99 %.2f ms', $r->{p99} if defined $r->{p99};
    push @s, "errors $r->{errors}" . (defined $r->{err_read}
        ? " (connect $r->{err_connect}, read $r->{err_read}, write $r->{err_write}, timeout $r->{err_timeout}, non-2xx $r->{non2xx})"
        : '') if $r->{errors};
    push @s, sprintf 'server CPU %.1f us/req', $r->{cpu_us} if defined $r->{cpu_us};
    push @s, sprintf 'others took %.0f%% of CPU 0, %.0f%% of CPU 1', 100 * $r->{cpu0_other}, 100 * ($r->{cpu1_other} // 0)
        if defined $r->{cpu0_other};
    push @s, $r->{extra} if $r->{extra};
    return join ', ', @s;
}

# Dies with RETRY when the server is gone after a measurement.
sub check_alive {
    my ($p) = @_;
    return if alive($p);
    my $log = slurp($p->{log}) // '';
    die "RETRY: the server exited during the measurement ("
        . (($p->{status} // 0) & 127 ? 'signal ' . ($p->{status} & 127) : 'status ' . (($p->{status} // 0) >> 8))
        . ')' . ($log =~ /(received SIG\w+)/ ? ": it $1 from outside the benchmark" : '') . "\n";
}

1;
