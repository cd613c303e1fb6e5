package Serow::Bench::Format;
use strict;
use warnings;

# How the report writes numbers and tables (markdown).

use Exporter 'import';
our @EXPORT_OK = qw(fmt_rps fmt_ms fmt_x ratio table);

sub fmt_rps {
    my ($v) = @_;
    return '—' unless defined $v;
    return sprintf '%.1fk', $v / 1000 if $v >= 10000;
    return sprintf '%.0f', $v;
}

sub fmt_ms { defined $_[0] ? sprintf('%.2f ms', $_[0]) : '—' }

sub ratio {
    my ($a, $b) = @_;
    return undef unless defined $a && defined $b && $b > 0;
    return $a / $b;
}

sub fmt_x { defined $_[0] ? sprintf('%.2fx', $_[0]) : '—' }

sub table {
    my ($head, @rows) = @_;
    my $md = '| ' . join(' | ', @$head) . " |\n|" . join('|', map { '---' } @$head) . "|\n";
    $md .= '| ' . join(' | ', map { $_ // '—' } @$_) . " |\n" for @rows;
    return $md;
}

1;
