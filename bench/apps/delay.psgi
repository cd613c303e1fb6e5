# bench/stream-delay's app: a stream of server-sent events, each carrying
# the time it was written (CLOCK_MONOTONIC, the same clock the client reads),
# with a pause after each in which the app does not come back to the server:
#   /?events=N&ms=M&pause=sleep    sleeps M ms (an SSE app waiting for news)
#   /?events=N&ms=M&pause=compute  computes for M ms
#   /?events=N&ms=M&pause=burst    writes three events in a row, then sleeps
use strict;
use warnings;
use Time::HiRes ();

sub now { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) }

sub {
    my ($env) = @_;
    my %q = map { split /=/, $_, 2 } split /&/, $env->{QUERY_STRING} // '';
    my $events = $q{events} // 100;
    my $pause = ($q{ms} // 20) / 1000;
    my $kind = $q{pause} // 'sleep';
    return sub {
        my $writer = shift->([200, ['Content-Type' => 'text/event-stream', 'Cache-Control' => 'no-cache']]);
        for (1 .. $events) {
            for (1 .. ($kind eq 'burst' ? 3 : 1)) {
                $writer->write(sprintf "data: %.6f\n\n", now());
            }
            if ($kind eq 'compute') {
                my $until = now() + $pause;
                1 while now() < $until;
            } else {
                Time::HiRes::sleep($pause);
            }
        }
        $writer->close;
    };
};
