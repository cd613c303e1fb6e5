use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::Soak ();

# The soak, short form (bench/soak runs it for minutes): 20 s of mixed load
# (kept-alive GETs, Connection: close, uploads through a temp file and
# chunked, streamed responses, pipelined requests, clients leaving
# mid-request and mid-response) against 4 workers, after a 5 s warm-up.
# Afterwards: every request answered as it should, no worker or holder exited
# or was replaced, no process holds more descriptors of any kind than before,
# no worker grew by 1 MiB, no temp file is left, nothing logged an error.

# Under tools/test-sanitized, AddressSanitizer's quarantine keeps freed memory
# (up to 256 MiB): there the RSS says nothing about leaks, the rest still holds.
my $under_asan = ($ENV{ASAN_OPTIONS} // '') ne '';
note 'under AddressSanitizer: RSS growth not checked' if $under_asan;
my $r = Serow::Test::Soak::soak(seconds => 20, warmup => 5, clients => 4, workers => 4,
    check_rss => !$under_asan);
is $r->{error}, undef, 'the server started' or BAIL_OUT($r->{error});
for my $name (Serow::Test::Soak::scenarios()) {
    my $c = $r->{counts}{$name} || {};
    cmp_ok $c->{ok} // 0, '>', 0, "$name: " . ($c->{ok} // 0) . ' done';
    is $c->{failed} // 0, 0, "$name: none failed";
}
for my $pid (sort { $a <=> $b } keys %{ $r->{before} }) {
    my ($then, $now) = ($r->{before}{$pid}, $r->{after}{$pid} || {});
    note sprintf '%-6s %d: RSS %d -> %s kB, %d -> %s descriptors', $then->{role}, $pid, $then->{rss_kb},
        $now->{rss_kb} // 'gone', $then->{fds}, $now->{fds} // 'gone';
}
is_deeply $r->{problems}, [], 'no crash, no replaced process, no fd leak, no growth, no temp file, no error'
    or diag explain $r->{problems};

done_testing;
