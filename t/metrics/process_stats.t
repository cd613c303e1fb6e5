use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow ();
use Serow::ProcessStats ();
use POSIX ();

# /proc/PID/stat: the command name sits in parentheses and may hold ") "
# itself (an app sets $0, which sets it): the fields are the ones after the
# last ") ".  A child named so is read as /proc/PID/statm reads it.
# (PAGE_SIZE from Serow, as ProcessStats uses it.)

pipe(my $ready_r, my $ready_w) or die "pipe: $!";
pipe(my $stop_r, my $stop_w) or die "pipe: $!";
my $pid = fork // die "fork: $!";
if ($pid == 0) {
    close $ready_r;
    close $stop_w;
    $0 = 'a) b (c) d';
    syswrite $ready_w, "x";
    sysread $stop_r, my $byte, 1; # until the test is done
    POSIX::_exit(0);
}
close $ready_w;
close $stop_r;
sysread $ready_r, my $byte, 1;

open(my $fh, '<', "/proc/$pid/stat") or die "stat: $!";
my $stat = <$fh>;
like $stat, qr/\(a\) b \(c\) d\) [A-Z] /, "its name in /proc/$pid/stat has ') ' in it" or diag $stat;

open(my $statm, '<', "/proc/$pid/statm") or die "statm: $!";
my (undef, $resident_pages) = split ' ', scalar <$statm>;
# (The kernel's two counts may differ by a few pages: they are summed from
# per-CPU counters; a neighbouring field, the virtual size in pages or a
# limit, would be off by orders of magnitude.)
my $resident = Serow::ProcessStats->resident_bytes($pid);
my $want = $resident_pages * Serow::PAGE_SIZE;
ok $resident > $want * 0.75 && $resident < $want * 1.25,
    'resident_bytes: the resident set, not a neighbouring field' or diag "$resident, statm says $want";

close $stop_w;
waitpid($pid, 0);
done_testing;
