package Serow::Test::Components;
use strict;
use warnings;

# The real components some tests need beside Serow: commands in PATH,
# Debian packages a test installs itself, and a headless Chromium.

use Exporter 'import';
use Fcntl ();
use File::Spec ();
use File::Temp ();
use POSIX ();
use Test::More ();
use Serow::Test::Common qw(root);

our @EXPORT_OK = qw(find_command need_debian_packages headless_chromium);

# The path of a command (plackup, start_server), or undef: looked for in @dirs
# first (nginx is in /usr/sbin, not always in PATH), then in PATH.
sub find_command {
    my ($name, @dirs) = @_;
    return (grep { -f && -x } map { "$_/$name" } @dirs, split /:/, $ENV{PATH} // '')[0];
}

# need_debian_packages('nginx', 'libmojolicious-perl', ...): a test that needs a
# real component installs it itself (the README's setup installs only what
# the server needs).  Missing packages are installed with apt-get when the test
# runs as root from the source tree (as the README's command, CI and
# tools/test-sanitized's copy do); tests running side by side queue on dpkg's
# lock.  Otherwise the test is skipped with the packages' names and why they
# were not installed: not root, a dist (make test under cpanm or a Debian
# build installs nothing on the system), no apt-get, or no network.
sub need_debian_packages {
    my @packages = @_;
    my @missing = grep { !_debian_package_installed($_) } @packages;
    return 1 unless @missing;
    my $cannot = _cannot_install();
    Test::More::plan(skip_all => "needs Debian packages @missing ($cannot)") if $cannot;
    # One test at a time installs (tests run side by side): apt's own locks
    # make a second apt-get fail rather than wait, for the package lists.
    open(my $lock, '>>', File::Spec->catfile(File::Spec->tmpdir, 'serow-tests-apt.lock'))
        or die "cannot open the apt lock file: $!";
    flock($lock, Fcntl::LOCK_EX()) or die "cannot lock the apt lock file: $!";
    @missing = grep { !_debian_package_installed($_) } @missing; # another test may have
    return 1 unless @missing;
    my @apt = ('apt-get', '-o', 'DPkg::Lock::Timeout=900', '-y', '-qq', '--no-install-recommends');
    my $log = File::Temp->new;
    local $ENV{DEBIAN_FRONTEND} = 'noninteractive';
    # The package lists are fetched only when an install fails without them
    # (a fresh machine has none).
    for my $attempt (1, 2) {
        system("@apt install @missing >$log 2>&1") == 0 and last;
        system("apt-get -o DPkg::Lock::Timeout=900 -qq update >>$log 2>&1") if $attempt == 1;
    }
    @missing = grep { !_debian_package_installed($_) } @missing;
    return 1 unless @missing;
    open my $fh, '<', $log->filename;
    my $output = join '', <$fh>;
    # No network is the machine's state, not a fault of Serow or its tests.
    Test::More::plan(skip_all => "needs Debian packages @missing (apt-get could not reach the archive: $1)")
        if $output =~ /^(.*(?:Temporary failure resolving|Could not resolve|Network is unreachable|Could not connect|Connection failed|Unable to connect).*)$/m;
    Test::More::BAIL_OUT("could not install Debian packages @missing:\n$output");
}

# Why this test run may not install system packages, or undef if it may.
sub _cannot_install {
    return 'run as root to install them' if $> != 0;
    # make dist writes META.json; the source tree has only perl Makefile.PL's MYMETA.json.
    return 'a test run from a dist installs no system packages: apt-get install them'
        if -e File::Spec->catfile(root(), 'META.json');
    return 'no apt-get to install them' unless find_command('apt-get');
    return undef;
}

sub _debian_package_installed {
    my ($package) = @_;
    my $status = `dpkg-query -W -f='\${Status}' $package 2>/dev/null` // '';
    return $status =~ /install ok installed/;
}

# headless_chromium($url, '--dump-dom', '--virtual-time-budget=5000'): runs
# Debian's chromium headless (--no-sandbox --disable-gpu, a profile of its own
# so that runs side by side do not share one) on $url with the given
# switches, bounded by CHROMIUM_TIMEOUT.  Returns what it printed (the DOM
# for --dump-dom), or undef after a diagnostic with the end of its stderr.
use constant CHROMIUM_TIMEOUT => 180; # a cold start takes 25 s on a loaded machine

sub headless_chromium {
    my ($url, @switches) = @_;
    my $profile = File::Temp->newdir;
    my $errors = File::Temp->new;
    my @command = ('timeout', '-k', 10, CHROMIUM_TIMEOUT, 'chromium', '--headless', '--no-sandbox',
        '--disable-gpu', '--no-first-run', "--user-data-dir=$profile", @switches, $url);
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open(STDERR, '>&', $errors) or POSIX::_exit(111);
        # tools/test-sanitized preloads ASan into every process it starts;
        # Chromium (a browser, not Serow) does not run under it.
        delete $ENV{LD_PRELOAD};
        { exec { $command[0] } @command }
        POSIX::_exit(112);
    }
    my $output = do { local $/; <$out> } // '';
    return $output if close($out);
    seek($errors, 0, 0);
    my @lines = grep { !/dbus|Fontconfig/ } <$errors>;
    splice(@lines, 0, -10) if @lines > 10;
    Test::More::diag("chromium exited with status $?: " . join('', @lines));
    return undef;
}

1;
