# Loading waits on the test's gate (SEROW_TEST_GATE, Serow::Test::gate): a
# signal the test sends meanwhile comes before the master has set its
# handlers (t/process/early_signals.t).
use strict;
use warnings;
use Serow::Test ();

print STDERR "app loading in pid $$\n";
Serow::Test::Gate->from_fd($ENV{SEROW_TEST_GATE})->wait;
sub { [200, ['Content-Type' => 'text/plain'], ["pid $$"]] };
