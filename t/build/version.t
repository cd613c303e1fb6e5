use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow ();
use Serow::Version ();
use Serow::Test qw(find_command);

# serow --version (and the start-up line, t/logs/startup_line.t) name the
# version, and the commit when Serow runs from a git checkout; a tree without
# .git (a dist, a package) runs no git and says the version alone.

my $ROOT = Serow::Test::root();

like $Serow::VERSION, qr/\A\d+\.\d+\z/, "a CPAN version: $Serow::VERSION";

is Serow::Version::commit(File::Temp->newdir->dirname), undef, 'no .git: no commit';
is Serow::Version::commit(undef), undef, 'no source tree: no commit';

my $out = `$^X -Mblib $ROOT/script/serow --version`;
is $?, 0, 'serow --version exits 0';

SKIP: {
    skip 'not a git checkout (a dist): the version alone', 2 unless -e "$ROOT/.git";
    skip 'git is not installed', 2 unless find_command('git');
    is Serow::Version::source_tree(), $ROOT, 'the modules come from this checkout';
    chomp(my $head = `git -C $ROOT rev-parse --short HEAD`);
    like $out, qr/\ASerow \Q$Serow::VERSION\E \(git \S*\Q$head\E\S*\)\n\z/, "the version and the commit: $out";
}
SKIP: {
    skip 'a git checkout: the commit too', 1 if -e "$ROOT/.git";
    is $out, "Serow $Serow::VERSION\n", 'the version alone';
}

done_testing;
