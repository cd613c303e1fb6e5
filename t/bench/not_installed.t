use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib', 'bench/lib';
use Serow::Bench::Config ();
use Serow::Bench::Report ();
use Serow::Bench::Results qw(%RESULTS %LEFT_OUT servers_for);

# bench/run with a server that is not installed: the run goes on without it,
# and says so in its output and in every part of the report that names the
# servers, never silently.  Here nothing on PATH: only Serow (built here) is
# installed; Starman needs its command, Feersum its Perl module (perl from
# PATH, the one plackup runs).

Serow::Bench::Config::setup(opt => { servers => 'serow,starman,feersum', quick => 1, rounds => 1,
    duration => 1 }, scenarios => [[hello_keepalive => 'hello, keep-alive'], [streaming => 'streamed']],
    args => []);

my $empty = File::Temp->newdir;
my ($log, @run) = ('');
{
    local $ENV{PATH} = "$empty";
    open my $err, '>', \$log or die;
    local *STDERR = $err;
    @run = servers_for('hello_keepalive');
}
is_deeply \@run, ['serow'], 'only the installed server runs';
is_deeply $LEFT_OUT{hello_keepalive}{starman}, ['not installed', 'no starman command'], 'Starman: no command';
is $LEFT_OUT{hello_keepalive}{feersum}[0], 'not installed', 'Feersum: not installed';
like $LEFT_OUT{hello_keepalive}{feersum}[1], qr/^perl finds no Plack::Handler::Feersum \(cpanm Feersum/,
    'for want of its module; and how to install it';
like $log, qr/Feersum \(pre-fork\): not installed/, 'said in the output';

# The report of such a run (Serow's figure made up: this tests the report).
$RESULTS{hello_keepalive}{serow} = [{ rps => 1000, errors => 0 }];
my $md = Serow::Bench::Report::report('start', 'end', 0, 0);
like $md, qr/^\| hello, keep-alive \| 1000 \| not installed \| not installed \|$/m,
    'the throughput table has a column for each, saying so';
like $md, qr/^- Feersum \(pre-fork\): not installed: perl finds no Plack::Handler::Feersum/m,
    'listed under the servers left out';
like $md, qr/versions \|[^\n]*Feersum \(pre-fork\) not installed/, 'and among the versions';

done_testing;
