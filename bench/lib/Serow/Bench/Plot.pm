package Serow::Bench::Plot;
use strict;
use warnings;

# The chart of a run (bench/results/latest.png): requests/s per server and
# scenario, log scale, drawn by gnuplot.

use Serow::Bench::Config qw(@SCENARIOS $ROUNDS $DURATION tmpdir);
use Serow::Bench::Results qw(%RESULTS rs med_of);
use Serow::Bench::Servers qw(@SERVERS %TITLE);
use Serow::Bench::Util qw(note);

use Exporter 'import';
our @EXPORT_OK = qw(plot);

sub plot {
    my ($png) = @_;
    my @scen = grep { $RESULTS{$_} } map { $_->[0] } @SCENARIOS;
    return unless @scen;
    my @servers = grep { my $s = $_; grep { rs($_, $s) } @scen } @SERVERS;
    my $data = tmpdir() . "/plot.dat";
    open my $fh, '>', $data or die "$data: $!\n";
    print {$fh} join("\t", 'scenario', map { "\"$TITLE{$_}\"" } @servers), "\n";
    my $max = 1;
    for my $s (@scen) {
        my $label = $s =~ s/_/ /gr;
        my @v = map { my $x = med_of($s, $_, 'rps'); $max = $x if defined $x && $x > $max; defined $x && $x > 0 ? sprintf('%.1f', $x) : '-' } @servers;
        print {$fh} join("\t", "\"$label\"", @v), "\n";
    }
    close $fh;
    my $n = @servers;
    my $script = <<"EOF";
set terminal pngcairo size 1600,700 font "sans,10"
set output "$png"
set title "Serow benchmark: requests/s per server core (median of $ROUNDS round(s) of ${DURATION} s); server on CPU 0, load generator on CPU 1"
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [10:${\ ($max * 3)}]
set ylabel "requests/s (log scale)"
set grid ytics
set key top right
set xtics rotate by -25 noenhanced
set key noenhanced
set bmargin 7
set label 1 "No bar: the server was not run in that scenario (not installed, or the scenario does not apply: latest.md says which), or answered nothing (idle 10k: prefork servers whose workers all hold idle connections)" at screen 0.01, screen 0.02 font "sans,9" noenhanced
plot for [i=2:${\ ($n + 1)}] "$data" using i:xtic(1) title columnheader(i)
EOF
    open my $g, '|-', 'gnuplot' or do { note("gnuplot did not run: $!"); return };
    print {$g} $script;
    close $g or note("gnuplot failed: $?");
}

1;
