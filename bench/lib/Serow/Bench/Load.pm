package Serow::Bench::Load;
use strict;
use warnings;

# The load generators, on CPU 1: wrk (run and its output parsed) and
# bench/client (load: a closed loop with per-connection counts; idle: the
# idle keep-alive connections of scenario (a)); and the kernel's counts that
# go with a measurement (bytes per client connection, accepted connections).

use IPC::Open2 ();
use Time::HiRes ();
use Serow::Bench::Config qw($CLIENT);
use Serow::Bench::Util qw(median slurp capture);

use Exporter 'import';
our @EXPORT_OK = qw(wrk client_load idle_open idle_again idle_kill passive_opens);

sub to_ms {
    my ($v) = @_;
    return undef unless defined $v && $v =~ /^([\d.]+)(us|ms|s|m)$/;
    return $1 / 1000 if $2 eq 'us';
    return $1 if $2 eq 'ms';
    return $1 * 1000 if $2 eq 's';
    return $1 * 60000;
}

# wrk on CPU 1, one thread.  Returns { rps, requests, p50, p99 (ms), errors, ... }.
sub wrk {
    my (%o) = @_;
    my @cmd = ('taskset', '-c', '1', 'wrk', '-t1', "-c$o{conns}", "-d$o{duration}s",
        '--timeout', '5s', '--latency');
    push @cmd, '-H', 'Connection: close' if $o{close};
    push @cmd, '-s', $o{script} if $o{script};
    push @cmd, "http://$o{addr}$o{path}";
    my ($out, $conns);
    if ($o{sample}) {
        # Near the end, how many bytes each of wrk's connections has received:
        # wrk's latency figures cover only the requests that were answered,
        # and cannot show a connection that a server left waiting.
        open my $fh, '-|', @cmd or die "bench: wrk: $!\n";
        Time::HiRes::sleep($o{duration} > 1 ? $o{duration} - 0.5 : 0.7);
        $conns = connection_bytes($o{addr});
        local $/;
        $out = <$fh> // '';
        close $fh;
    } else {
        $out = capture(@cmd);
    }
    my %r = (output => $out);
    if ($conns && @$conns) {
        my @b = sort { $a <=> $b } @$conns;
        $r{conns_seen} = @b;
        $r{conns_answered} = grep { $_ > 0 } @b;
        my $med = median(@b);
        $r{least_share} = $med > 0 ? $b[0] / $med : 0;
    }
    ($r{rps}) = $out =~ /Requests\/sec:\s+([\d.]+)/;
    ($r{requests}) = $out =~ /(\d+) requests in/;
    $r{p50} = to_ms($out =~ /^\s+50%\s+(\S+)/m ? $1 : undef);
    $r{p99} = to_ms($out =~ /^\s+99%\s+(\S+)/m ? $1 : undef);
    my ($c, $rd, $w, $t) = $out =~ /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/;
    my ($non2xx) = $out =~ /Non-2xx or 3xx responses: (\d+)/;
    @r{qw(err_connect err_read err_write err_timeout non2xx)} = map { $_ // 0 } ($c, $rd, $w, $t, $non2xx);
    $r{errors} = $r{err_connect} + $r{err_read} + $r{err_write} + $r{err_timeout} + $r{non2xx};
    $r{rps} //= 0;
    $r{requests} //= 0;
    # no answer, no latency (wrk prints zeros)
    $r{p50} = $r{p99} = undef unless $r{requests};
    return \%r;
}

# Bytes received so far by each established client connection to $addr
# (tcp_info from ss(8)); undef when ss is missing.
sub connection_bytes {
    my ($addr) = @_;
    my ($port) = $addr =~ /:(\d+)$/ or return undef;
    open my $fh, '-|', 'ss', '-Htin', 'state', 'established', "( dport = :$port )" or return undef;
    local $/;
    my $text = <$fh> // '';
    close $fh or return undef;
    my @bytes;
    # one entry per connection: the address line, then an indented info line
    for my $entry (split /\n(?=\S)/, $text) {
        next unless $entry =~ /\S/;
        push @bytes, $entry =~ /bytes_received:(\d+)/ ? $1 : 0;
    }
    return \@bytes;
}

# bench/client load: per-connection answer counts and the longest wait.
sub client_load {
    my (%o) = @_;
    my ($host, $port) = split /:/, $o{addr};
    my @cmd = ('taskset', '-c', '1', $CLIENT, 'load', '--port', $port, '--conns', $o{conns},
        '--duration', $o{duration}, '--timeout', $o{duration} + 30);
    push @cmd, '--slow-every', $o{slow_every}, '--slow-path', '/slow' if $o{slow_every};
    my $out = capture(@cmd);
    my %r = map { split ' ', $_, 2 } grep { /\S/ } split /\n/, $out;
    $r{rps} = $r{req_per_sec} // 0;
    # the same kinds as wrk's, so that an error says what it was
    @r{qw(err_connect err_read err_write err_timeout)} =
        map { $r{$_} // 0 } qw(errors_connect errors_read errors_write errors_timeout);
    $r{non2xx} //= 0;
    $r{errors} = $r{err_connect} + $r{err_read} + $r{err_write} + $r{err_timeout} + $r{non2xx};
    return \%r;
}

# bench/client idle: opens $conns idle keep-alive connections to the port and
# returns once it has tried them all, with a handle whose {counts} has what it
# said so far (opened, ...).
sub idle_open {
    my (%o) = @_;
    my %h;
    $h{pid} = IPC::Open2::open2($h{out}, $h{in}, 'taskset', '-c', '1', $CLIENT,
        'idle', '--port', $o{port}, '--conns', $o{conns}, '--timeout', 10);
    while (my $line = readline $h{out}) {
        my ($k, $v) = split ' ', $line;
        $h{counts}{$k} = $v;
        last if $k eq 'tried';
    }
    return \%h;
}

# Asks each idle connection again, waits for bench/client to end and returns
# every count (again_ok, again_closed, ...).
sub idle_again {
    my ($h) = @_;
    print { $h->{in} } "go\n";
    close $h->{in};
    while (my $line = readline $h->{out}) {
        my ($k, $v) = split ' ', $line;
        $h->{counts}{$k} = $v;
    }
    waitpid $h->{pid}, 0;
    delete $h->{pid};
    return $h->{counts};
}

# Stops bench/client idle if it still runs (the measurement died).
sub idle_kill {
    my ($h) = @_;
    return unless $h && $h->{pid};
    kill 'KILL', $h->{pid};
    waitpid $h->{pid}, 0;
    delete $h->{pid};
}

# Connections per request during a measurement, from the kernel's count of
# accepted TCP connections (machine-wide: other activity adds a little).
sub passive_opens {
    my $snmp = slurp('/proc/net/snmp') // return undef;
    my @lines = grep { /^Tcp:/ } split /\n/, $snmp;
    my @names = split ' ', $lines[0];
    my @values = split ' ', $lines[1];
    my %t;
    @t{@names} = @values;
    return $t{PassiveOpens};
}

1;
