use strict;
use warnings;
use Test::More;
use CPAN::Meta ();
use File::Find ();
use Module::CoreList ();
use lib 't/lib';
use Serow::Test ();

# META (MYMETA.json, which perl Makefile.PL writes from Makefile.PL's lists)
# names every module the code loads: lib/ and script/ under runtime requires;
# t/ under runtime or test requires, or test recommends for the tests that skip
# without them.  Each one not in perl's core has its Debian package where the
# README's set-up (tools/setup) and the Debian package (debian/control) get it.

my $ROOT = Serow::Test::root();
chdir $ROOT or die "cd $ROOT: $!";

# The module META names for a module that comes with another's distribution.
my %DISTRIBUTION = (
    'Net::EmptyPort' => 'Test::TCP',
    'HTML::Mason::PSGIHandler::Streamy' => 'HTML::Mason::PSGIHandler',
    map({ ($_ => 'HTTP::Message') } qw(HTTP::Request::Common HTTP::Request HTTP::Response HTTP::Headers)),
);
my @BY_PREFIX = ([qr/^Plack::/ => 'Plack'], [qr/^Catalyst\b/ => 'Catalyst::Runtime'], [qr/^Mojolicious\b/ => 'Mojolicious']);

# Debian's package of each prerequisite not in perl's core.
my %DEBIAN = (
    'Plack' => 'libplack-perl', 'HTTP::Entity::Parser' => 'libhttp-entity-parser-perl',
    'Test::TCP' => 'libtest-tcp-perl', 'HTTP::Date' => 'libhttp-date-perl',
    'HTTP::Message' => 'libhttp-message-perl', 'LWP::UserAgent' => 'libwww-perl',
);

sub distribution_of {
    my ($module) = @_;
    return $DISTRIBUTION{$module} if $DISTRIBUTION{$module};
    $module =~ $_->[0] and return $_->[1] for @BY_PREFIX;
    return $module;
}

# Modules the files under @dirs load with use or require (POD left out).
sub modules_used {
    my @files;
    File::Find::find({ no_chdir => 1, wanted => sub { push @files, $_ if -f && (/\.(?:pm|t|psgi)$/ || m{^script/}) } }, @_);
    my %used;
    for my $file (@files) {
        open(my $fh, '<', $file) or die "$file: $!";
        my $pod;
        while (my $line = <$fh>) {
            last if $line =~ /^__(?:END|DATA)__$/;
            $pod = 1 if $line =~ /^=[a-z]/;
            if ($pod) { $pod = 0 if $line =~ /^=cut/; next }
            $used{$1}{$file} = 1 if $line =~ /^\s*(?:use|require)\s+([A-Z]\w*(?:::\w+)*)/;
        }
    }
    return \%used;
}

my %own = map { s{^(?:lib|t/lib|bench/lib|t/frameworks/apps/catalyst/lib)/}{}r =~ s{/}{::}gr =~ s{\.pm$}{}r => 1 }
    grep { /\.pm$/ } do { my @pm; File::Find::find({ no_chdir => 1, wanted => sub { push @pm, $_ if -f } },
        'lib', 't/lib', 'bench/lib', 't/frameworks/apps/catalyst/lib'); @pm };

ok -f 'MYMETA.json', 'perl Makefile.PL wrote MYMETA.json' or BAIL_OUT('run perl Makefile.PL');
my $prereqs = CPAN::Meta->load_file('MYMETA.json')->effective_prereqs;
my %declared = map {
    my ($phase, $type) = @$_;
    ("$phase $type" => { map { ($_ => 1) } $prereqs->requirements_for($phase, $type)->required_modules });
} ['runtime', 'requires'], ['test', 'requires'], ['test', 'recommends'], ['configure', 'requires'];

sub undeclared {
    my ($used, @lists) = @_;
    my @missing;
    for my $module (sort keys %$used) {
        next if $own{$module};
        my $dist = distribution_of($module);
        next if grep { $declared{$_}{$dist} } @lists;
        push @missing, "$module (" . join(', ', sort keys %{ $used->{$module} }) . ')';
    }
    return \@missing;
}

sub none_undeclared {
    my ($missing, $name) = @_;
    is scalar(@$missing), 0, $name or diag join("\n", 'not declared:', @$missing);
}
none_undeclared(undeclared(modules_used('lib', 'script'), 'runtime requires'),
    'every module lib/ and script/ load is a runtime prerequisite (Makefile.PL: PREREQ_PM)');
none_undeclared(undeclared(modules_used('t'), 'runtime requires', 'test requires', 'test recommends'),
    'every module t/ loads is a runtime or test prerequisite (TEST_REQUIRES, or recommends in META_MERGE)');
ok $declared{'configure requires'}{'ExtUtils::MakeMaker'}, 'ExtUtils::MakeMaker is a configure prerequisite';

sub in_core { my ($m) = @_; Module::CoreList::first_release($m) && !Module::CoreList::removed_from($m) }

my $setup = do { open(my $fh, '<', 'tools/setup') or die "tools/setup: $!"; local $/; <$fh> };
my $control = -f 'debian/control' && do { open(my $fh, '<', 'debian/control') or die; local $/; <$fh> };
for my $phase ('runtime', 'test') {
    for my $module (sort grep { !in_core($_) } keys %{ $declared{"$phase requires"} }) {
        next if $module eq 'perl';
        my $package = $DEBIAN{$module};
        ok $package, "$module ($phase, not core) has a Debian package in this test's table" or next;
        ok $setup =~ /\b\Q$package\E\b/, "tools/setup installs $package";
        SKIP: {
            skip 'no debian/ (an unpacked dist)', 1 unless $control;
            my $field = $phase eq 'runtime' ? 'Depends' : 'Build-Depends';
            my ($value) = $control =~ /^\Q$field\E:((?:.*\n)(?:[ \t].*\n)*)/m;
            like $value // '', qr/(?:^|[\s,])\Q$package\E\b/, "debian/control's $field: $package";
        }
    }
}

done_testing;
