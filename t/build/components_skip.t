use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(run_command);

# Under make test as a CPAN install runs it, a test whose component is missing
# skips and names it: need_debian_packages installs only as root from a git
# source tree (the README's command, CI), and says why not otherwise.  Each case
# runs a test script that needs a package no machine has.

my $ROOT = Serow::Test::root();
my $NO_SUCH = 'serow-test-no-such-package';

# The TAP of a script that needs $NO_SUCH, with t/lib from $lib, run as $uid.
sub needs_missing_package {
    my (%o) = @_;
    my $script = <<"END";
use POSIX ();
if (defined $o{uid}) { POSIX::setgid($o{uid}); POSIX::setuid($o{uid}) or die "setuid: \$!"; }
use Test::More;
use Serow::Test::Components qw(need_debian_packages);
need_debian_packages('$NO_SUCH');
pass 'not skipped';
done_testing;
END
    return run_command($^X, '-I', $o{lib}, '-e', $script)->{output};
}

subtest 'not root: skipped, naming the package' => sub {
    my $uid = $> == 0 ? scalar(getpwnam('nobody')) : undef;
    plan skip_all => 'root without a user nobody to become' if $> == 0 && !defined $uid;
    like needs_missing_package(lib => "$ROOT/t/lib", uid => $uid // 'undef'),
        qr/^1\.\.0 # SKIP needs Debian packages \Q$NO_SUCH\E \(run as root to install them\)$/m;
};

subtest 'root, from a dist (META.json): skipped, installs nothing' => sub {
    plan skip_all => 'needs root' if $> != 0;
    # A copy of the helpers in a tree that has what make dist writes.
    my $dist = File::Temp->newdir;
    mkdir "$dist/t" or die "mkdir: $!";
    open(my $meta, '>', "$dist/META.json") or die "META.json: $!";
    close $meta;
    system('cp', '-r', "$ROOT/t/lib", "$dist/t/lib") == 0 or die 'cp failed';
    like needs_missing_package(lib => "$dist/t/lib", uid => 'undef'),
        qr/^1\.\.0 # SKIP needs Debian packages \Q$NO_SUCH\E \(a test run from a dist installs no system packages/m;
};

done_testing;
