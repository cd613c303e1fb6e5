use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow ();
use Serow::Test ();

# One version everywhere a release names it: lib/Serow.pm's $VERSION (the
# dist's, from VERSION_FROM), the newest entry of Changes, and the upstream
# part of the newest debian/changelog entry (docs/development.md: releasing).

my $ROOT = Serow::Test::root();
sub slurp { my ($f) = @_; open(my $fh, '<', "$ROOT/$f") or die "$f: $!"; local $/; <$fh> }

my @entries = slurp('Changes') =~ /^(\d+\.\d+)\s+(\S+)$/mg;
my %date = @entries;
my @versions = @entries[grep { $_ % 2 == 0 } 0 .. $#entries];
ok @versions, 'Changes has entries: VERSION  YYYY-MM-DD' or BAIL_OUT('no entries in Changes');
is $versions[0], $Serow::VERSION, "its newest entry is lib/Serow.pm's version, $Serow::VERSION";
like $date{$_}, qr/^\d{4}-\d\d-\d\d$/, "$_ has a date" for @versions;
is_deeply \@versions, [sort { $b <=> $a } @versions], 'newest first, each once';

SKIP: {
    skip 'no debian/ (an unpacked dist)', 1 unless -f "$ROOT/debian/changelog";
    my ($debian) = slurp('debian/changelog') =~ /\Aserow \(([^)]+)\)/;
    like $debian // '', qr/^\Q$Serow::VERSION\E-\d+$/, "debian/changelog's newest entry packages $Serow::VERSION";
}

done_testing;
