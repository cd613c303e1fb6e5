use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib', 'bench/lib';
use Serow::Test::Process qw(run_command);
use Serow::Bench::Util qw(cpu_count slurp);

# bench/stream-delay, short: a few events of each kind; the run ends well and
# its report has a row with every figure for each.  No figure is judged: the
# machine is shared (t/response/gathered_writes.t checks the order of
# things instead).

plan skip_all => 'bench/stream-delay pins the server to CPU 0 and the client to CPU 1' if cpu_count() < 2;
my $out = File::Temp->newdir;
my $run = run_command($^X, 'bench/stream-delay', '--events', 5, '--ms', 5, '--out', "$out");
is $run->{status}, 0, 'bench/stream-delay ran to its end' or diag $run->{output};
my $md = slurp("$out/stream-delay.md") // '';
my $figure = qr/[\d.]+/;
like $md, qr/^\| an event, then the app sleeps \| 5 \| $figure \| $figure \| $figure \| $figure \|$/m, 'sleeps';
like $md, qr/^\| an event, then the app computes \| 5 \| $figure \| $figure \| $figure \| $figure \|$/m, 'computes';
like $md, qr/^\| three events in a row, then the app sleeps \| 15 \| $figure \| $figure \| $figure \| $figure \|$/m,
    'bursts';
done_testing;
