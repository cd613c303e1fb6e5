use strict;
use warnings;
use Test::More;
use ExtUtils::Manifest ();
use lib 't/lib';
use Serow::Test qw(find_command);

# MANIFEST (what make dist packs) is true: every file it names exists and is
# not one MANIFEST.SKIP leaves out; in a git checkout it is exactly the
# tracked files MANIFEST.SKIP does not skip, so a file added on another branch
# fails here until `make manifest` (docs/development.md: releasing).

my $ROOT = Serow::Test::root();
chdir $ROOT or die "cd $ROOT: $!";

my $manifest = ExtUtils::Manifest::maniread();
my @listed = sort keys %$manifest;
my $skip = ExtUtils::Manifest::maniskip();

ok scalar(@listed), 'MANIFEST lists files';
# (maniread makes a hash: a name listed twice, as tools/update-manifest
# writes one when a merge's unresolved index lists it three times, would not
# show in it)
{
    open my $fh, '<', 'MANIFEST' or die "MANIFEST: $!";
    my %count;
    $count{ (split ' ', $_)[0] // '' }++ for grep { /\S/ && !/^\s*#/ } <$fh>;
    is_deeply [sort grep { $count{$_} > 1 } keys %count], [], 'MANIFEST lists each file once';
}
ok exists $manifest->{$_}, "MANIFEST lists $_" for qw(MANIFEST MANIFEST.SKIP Changes Makefile.PL README.md Serow.xs);
is_deeply [grep { !-f } @listed], [], 'every file MANIFEST lists exists';
is_deeply [grep { $skip->($_) } @listed], [], 'none of them is one MANIFEST.SKIP leaves out';
is_deeply [grep { m{^(?:debian|\.ci)/} } @listed], [], 'no debian/ or CI files in the dist';

SKIP: {
    skip 'not a git checkout (an unpacked dist): nothing to compare with', 3 unless -e "$ROOT/.git";
    skip 'git is not installed', 3 unless find_command('git');
    my @tracked = sort grep { !$skip->($_) } split /\0/, `git ls-files -z`;
    is $?, 0, 'git ls-files';
    my %in_manifest = map { ($_ => 1) } @listed;
    my %tracked = map { ($_ => 1) } @tracked;
    is_deeply { missing => [grep { !$in_manifest{$_} } @tracked], extra => [grep { !$tracked{$_} } @listed] },
        { missing => [], extra => [] },
        'MANIFEST is the tracked files MANIFEST.SKIP keeps'
        or diag 'run make manifest (tools/update-manifest) and commit MANIFEST';
    # ExtUtils::Manifest's backups (MANIFEST.bak, MANIFEST.SKIP.bak) and any
    # other *.bak are left out of MANIFEST by MANIFEST.SKIP, so the check
    # above cannot see one that got committed; .gitignore keeps them out.
    is_deeply [grep { /\.bak\z/ } split /\0/, `git ls-files -z`], [], 'no backup file (*.bak) is tracked';
}

done_testing;
