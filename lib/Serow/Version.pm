package Serow::Version;
use strict;
use warnings;

# What `serow --version` and the start-up line call this Serow: the version,
# and when it runs from a git checkout (its lib/ or blib/lib/), the commit.
# A dist or a package has no .git, and then no git is run at all.

use Cwd ();
use File::Basename ();
use File::Spec ();
use Serow ();

my $described; # once per process: git runs at most once

sub describe {
    return $described //= do {
        my $commit = commit(source_tree());
        defined $commit ? "$Serow::VERSION (git $commit)" : $Serow::VERSION;
    };
}

# The checkout these modules were loaded from, or undef: the directory above
# lib/ (or above blib/lib/, where make copies them) that holds Serow.xs.
sub source_tree {
    my $module = $INC{'Serow/Version.pm'} or return undef;
    my $lib = Cwd::abs_path(File::Spec->catdir(File::Basename::dirname($module), File::Spec->updir)) // return undef;
    my $top = File::Basename::dirname($lib);
    $top = File::Basename::dirname($top) if File::Basename::basename($top) eq 'blib';
    return -f "$top/Serow.xs" ? $top : undef;
}

# git describe of the checkout at $dir ("v0.02-3-g1a2b3c4", "1a2b3c4-dirty"
# before the first tag), or undef when $dir has no .git or git is missing.
sub commit {
    my ($dir) = @_;
    return undef unless defined $dir && -e "$dir/.git"; # a directory, or a worktree's file
    my $pid = open(my $git, '-|') // return undef;
    if (!$pid) {
        open(STDERR, '>', File::Spec->devnull);
        { exec 'git', '-C', $dir, 'describe', '--tags', '--always', '--dirty' }
        require POSIX;
        POSIX::_exit(127);
    }
    my $out = do { local $/; <$git> } // '';
    close $git or return undef;
    chomp $out;
    return $out =~ /\A[\w.+-]+\z/ ? $out : undef;
}

1;
