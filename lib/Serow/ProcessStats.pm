package Serow::ProcessStats;
use strict;
use warnings;

use Serow ();

# What /proc says of one process, for the process_* metrics (Serow::Metrics):
# the numbers Prometheus' client libraries report of their own process
# (client_golang's process collector reads the same files), read here for
# any process of the server.  The worker that answers /metrics reads its
# siblings' files when it is scraped: nothing is collected between scrapes,
# and no request but the scrape pays for it.

# Seconds since the epoch when the machine booted (/proc/stat's btime): the
# start times in /proc/PID/stat are clock ticks after it.  It does not change
# while the machine runs, so a worker reads it once.
my $BOOT_TIME;

sub boot_time {
    return $BOOT_TIME if defined $BOOT_TIME;
    open(my $fh, '<', '/proc/stat') or return undef;
    while (my $line = <$fh>) {
        return $BOOT_TIME = $1 if $line =~ /\Abtime (\d+)/;
    }
    return undef;
}

# { cpu_seconds, children_cpu_seconds, resident_bytes, virtual_bytes,
#   start_time, open_fds, max_fds } of process $pid, or undef when it is gone.
# open_fds is undef when its descriptors cannot be listed (another user's
# process: the master, run as root with --user), max_fds when it has no limit.
sub of_pid {
    my ($class, $pid) = @_;
    my $stats = _stat($pid) or return undef;
    $stats->{open_fds} = _open_fds($pid);
    $stats->{max_fds} = _max_fds($pid);
    return $stats;
}

# The resident memory of process $pid in bytes (the pages it still shares
# with the process it was forked from count too), or undef when it is gone: what --max-worker-rss
# compares with its limit (Serow::Master::Limits), and process_resident_memory_bytes.
sub resident_bytes {
    my ($class, $pid) = @_;
    my $stats = _stat($pid) or return undef;
    return $stats->{resident_bytes};
}

# /proc/PID/stat: the fields after the command name, which is in
# parentheses and may itself hold spaces and parentheses (proc(5)).
sub _stat {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/stat") or return undef;
    my $line = <$fh> // return undef;
    # (The last ") ": greedy, the name's own are passed over.)
    my ($after_name) = $line =~ /\A\d+ \(.*\) (.*)\z/s or return undef;
    # Field 3 of proc(5) (the state) is $f[0]: field N is $f[N - 3].
    my @f = split / /, $after_name;
    my $ticks = Serow::CLOCK_TICKS;
    my $boot = boot_time() // 0;
    return {
        cpu_seconds          => ($f[11] + $f[12]) / $ticks, # utime + stime
        children_cpu_seconds => ($f[13] + $f[14]) / $ticks, # cutime + cstime: children waited for
        start_time           => $boot + $f[19] / $ticks,
        virtual_bytes        => $f[20] + 0,
        resident_bytes       => $f[21] * Serow::PAGE_SIZE,
    };
}

sub _open_fds {
    my ($pid) = @_;
    opendir(my $dir, "/proc/$pid/fd") or return undef;
    return scalar grep { !/\A\.\.?\z/ } readdir $dir;
}

# The soft limit of "Max open files" in /proc/PID/limits.
sub _max_fds {
    my ($pid) = @_;
    open(my $fh, '<', "/proc/$pid/limits") or return undef;
    while (my $line = <$fh>) {
        my ($soft) = $line =~ /\AMax open files\s+(\S+)/ or next;
        return $soft =~ /\A\d+\z/ ? $soft + 0 : undef; # "unlimited"
    }
    return undef;
}

1;
__END__

=head1 NAME

Serow::ProcessStats - memory, CPU time and descriptors of a process, from /proc

=head1 SYNOPSIS

    my $stats = Serow::ProcessStats->of_pid($pid) or die "gone";
    $stats->{resident_bytes}; $stats->{cpu_seconds}; $stats->{open_fds};

=head1 DESCRIPTION

Reads F</proc/PID/stat> (CPU time of the process and of its children waited
for, start time, virtual and resident memory), counts F</proc/PID/fd> and
reads the soft C<Max open files> limit from F</proc/PID/limits>, for the
C<process_*> and C<serow_process_*> metrics of L<Serow::Metrics>.

=cut
