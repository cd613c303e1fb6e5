package Serow::Test::Prometheus;
use strict;
use warnings;

# A strict parser of the Prometheus text exposition format 0.0.4, for the
# tests of --metrics-path: it dies on anything a scraper could read
# differently, and checks what the format asks of counters and histograms.
#
#   my $m = Serow::Test::Prometheus::parse($text);
#   $m->{families}{serow_requests_total}{type}           # 'counter'
#   $m->{samples}{'serow_requests_total{code="200"}'}    # 12
#   value($m, 'serow_requests_total', code => 200)       # 12 (0 when absent)

use Exporter 'import';
our @EXPORT_OK = qw(parse value);

my $NAME = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
my $LABEL = qr/[a-zA-Z_][a-zA-Z0-9_]*/;
my $FLOAT = qr/[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Inf|NaN)/;
my %TYPES = map { $_ => 1 } qw(counter gauge histogram summary untyped);

sub _number {
    my ($text) = @_;
    return 9**9**9 if $text =~ /\A\+?Inf\z/;
    return -9**9**9 if $text eq '-Inf';
    return $text + 0;
}

# The family a sample belongs to: a histogram's _bucket, _sum and _count
# samples belong to the histogram's name.
sub _family_of {
    my ($families, $name) = @_;
    return $name if $families->{$name};
    my ($base) = $name =~ /\A(.*)_(?:bucket|sum|count)\z/;
    return $base if defined $base && $families->{$base}
        && ($families->{$base}{type} // '') =~ /\A(?:histogram|summary)\z/;
    return undef;
}

sub parse {
    my ($text) = @_;
    die "the text does not end with a line feed\n" unless $text =~ /\n\z/;
    my (%families, %samples, @order, %done);
    my $current; # the family whose samples are being read
    my $n = 0;
    for my $line (split /\n/, $text) {
        $n++;
        next if $line eq '';
        if ($line =~ /\A#/) {
            if ($line =~ /\A# HELP ($NAME) (.*)\z/) {
                my ($name, $help) = ($1, $2);
                die "line $n: a backslash in HELP that is not \\\\ or \\n\n" if $help =~ /\\(?![\\n])/;
                die "line $n: a second HELP for $name\n" if defined $families{$name}{help};
                $families{$name}{help} = $help;
            } elsif ($line =~ /\A# TYPE ($NAME) (\S+)\z/) {
                my ($name, $type) = ($1, $2);
                die "line $n: unknown type '$type'\n" unless $TYPES{$type};
                die "line $n: a second TYPE for $name\n" if defined $families{$name}{type};
                die "line $n: TYPE for $name after its samples\n" if $done{$name} || $families{$name}{samples};
                $families{$name}{type} = $type;
                push @order, $name;
            } elsif ($line =~ /\A# (?:HELP|TYPE)/) {
                die "line $n: malformed: $line\n";
            }
            next;
        }
        $line =~ /\A($NAME)(\{(.*)\})? ($FLOAT)(?: (-?\d+))?\z/ or die "line $n: not a sample: $line\n";
        my ($name, $labels_text, $value) = ($1, $3, $4);
        my %labels;
        if (defined $labels_text) {
            my $rest = $labels_text;
            while (length $rest) {
                $rest =~ s/\A($LABEL)="((?:[^"\\\n]|\\[\\"n])*)"// or die "line $n: malformed labels: {$labels_text}\n";
                my ($l, $v) = ($1, $2);
                die "line $n: label $l twice\n" if exists $labels{$l};
                $v =~ s/\\(.)/$1 eq 'n' ? "\n" : $1/ge;
                $labels{$l} = $v;
                last if $rest eq '';
                $rest =~ s/\A,// or die "line $n: malformed labels: {$labels_text}\n";
            }
        }
        my $family = _family_of(\%families, $name) // $name;
        die "line $n: the samples of $family are not together\n"
            if $done{$family} || (defined $current && $current ne $family && $families{$family}{samples});
        $done{$current} = 1 if defined $current && $current ne $family;
        $current = $family;
        my $type = $families{$family}{type} // 'untyped';
        die "line $n: a counter sample whose name does not end in _total: $name\n"
            if $type eq 'counter' && $name !~ /_total\z/;
        die "line $n: a bucket without le\n" if $name =~ /_bucket\z/ && $type eq 'histogram' && !exists $labels{le};
        my $key = $name . '{' . join(',', map { qq{$_="$labels{$_}"} } sort keys %labels) . '}';
        die "line $n: $key twice\n" if exists $samples{$key};
        $samples{$key} = _number($value);
        push @{ $families{$family}{samples} }, { name => $name, labels => \%labels, value => _number($value) };
    }
    for my $family (grep { ($families{$_}{type} // '') eq 'histogram' } keys %families) {
        # One histogram per set of labels other than le (e.g. {phase="queue"}).
        my %series;
        for my $b (grep { $_->{name} eq "${family}_bucket" } @{ $families{$family}{samples} || [] }) {
            my %rest = %{ $b->{labels} };
            delete $rest{le};
            push @{ $series{ join ',', map { qq{$_="$rest{$_}"} } sort keys %rest } }, $b;
        }
        die "$family: no buckets\n" unless %series;
        for my $labels (sort keys %series) {
            my @buckets = @{ $series{$labels} };
            my $what = "$family\{$labels\}";
            my $previous;
            for my $b (@buckets) {
                my $le = _number($b->{labels}{le});
                die "$what: buckets not in order of le\n" if $previous && $le <= $previous->[0];
                die "$what: bucket counts go down\n" if $previous && $b->{value} < $previous->[1];
                $previous = [$le, $b->{value}];
            }
            die "$what: the last bucket is not le=\"+Inf\"\n" unless $buckets[-1]{labels}{le} eq '+Inf';
            my $count = $samples{"${family}_count{$labels}"} // die "$what: no _count\n";
            exists $samples{"${family}_sum{$labels}"} or die "$what: no _sum\n";
            die "$what: le=\"+Inf\" is $buckets[-1]{value}, _count is $count\n"
                unless $buckets[-1]{value} == $count;
        }
    }
    return { families => \%families, samples => \%samples, order => \@order };
}

# A sample's value (0 when there is none).
sub value {
    my ($m, $name, %labels) = @_;
    my $key = $name . '{' . join(',', map { qq{$_="$labels{$_}"} } sort keys %labels) . '}';
    return $m->{samples}{$key} // 0;
}

1;
