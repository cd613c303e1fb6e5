package Serow::Master::Retry;
use strict;
use warnings;

# The wait before the next try of something that keeps failing: workers
# that fail at start (Serow::Master::Workers) and a generation that cannot
# load the app (Serow::Master::Generations).  Each round waits twice as long
# as the one before, up to MAX_SECONDS: a server left broken overnight
# neither floods its log nor spends a CPU compiling the app every second.

use constant FIRST_SECONDS => 1;
use constant MAX_SECONDS   => 16;

# The delay after $previous (undef: the first failure), in seconds.
sub next_delay {
    my ($class, $previous) = @_;
    my $delay = $previous ? $previous * 2 : FIRST_SECONDS;
    return $delay > MAX_SECONDS ? MAX_SECONDS : $delay;
}

1;
__END__

=head1 NAME

Serow::Master::Retry - how long the master waits before it tries again (L<Serow::Master>)

=head1 DESCRIPTION

Part of the master: the doubling wait, 1 second up to 16, between rounds
of workers that fail at start and between tries of a generation that
cannot load the app.

=cut
