use strict;
use warnings;
use Test::More;
use Pod::Checker ();
use Pod::Man ();
use File::Temp ();
use lib 't/lib';
use Serow::Options ();
use Serow::Test ();

# The man page (the POD of script/serow) is valid, becomes a man page, and
# names every option of the table and every alias, so that they cannot
# drift apart.

my $ROOT = Serow::Test::root();
my $script = "$ROOT/script/serow";

my $chunkview = "$ROOT/script/serow-chunkview";

subtest 'the POD has no errors or warnings' => sub {
    for my $file ($script, $chunkview, map { "$ROOT/lib/Serow/$_.pm" } qw(Options PidFile Privileges)) {
        my $log = '';
        open(my $out, '>', \$log) or die;
        my $checker = Pod::Checker->new(-warnings => 2);
        $checker->parse_from_file($file, $out);
        is $checker->num_errors, 0, "$file: no errors" or diag $log;
        is $checker->num_warnings, 0, "$file: no warnings" or diag $log;
    }
};

subtest 'pod2man makes a man page of it' => sub {
    my $man = '';
    my $parser = Pod::Man->new(section => 1, center => 'Serow', errors => 'die');
    $parser->output_string(\$man);
    ok eval { $parser->parse_file($script); 1 }, 'no error' or diag $@;
    like $man, qr/^\.SH "?\Q$_\E"?/m, "section $_" for 'NAME', 'SYNOPSIS', 'OPTIONS', 'SIGNALS', 'EXIT STATUS',
        'FILES', 'EXAMPLES';
    for my $command ('serow', 'serow-chunkview') {
        my ($built) = glob "$ROOT/blib/man1/$command.1*";
        ok $built, "make builds $command\'s (blib/man1), so make install installs it";
    }
};

my %make = do {
    open(my $fh, '<', "$ROOT/Makefile") or die "no Makefile (run perl Makefile.PL): $!";
    my $text = do { local $/; <$fh> };
    $text =~ s/\\\n\s*/ /g; # a value continued on the next lines, as one
    map { /^(\w+) = (.*)$/ ? ($1 => $2) : () } split /\n/, $text;
};

subtest 'make install installs it' => sub {
    my @pods = sort split ' ', $make{MAN1PODS};
    is_deeply \@pods, ['script/serow', 'script/serow-chunkview'], 'the Makefile manifies both commands';
    isnt $make{INSTALLSITEMAN1DIR} // 'none', 'none', "into $make{INSTALLSITEMAN1DIR}";
};

# The real thing: a make install into a temp DESTDIR, then man.  Long (and
# make must not rebuild blib under the other tests' feet).
subtest 'man serow after make install' => sub {
    plan skip_all => 'SEROW_LONG_TESTS=1 installs into a temp dir and runs man' unless $ENV{SEROW_LONG_TESTS};
    my $dest = File::Temp->newdir;
    system("cd \Q$ROOT\E && make pure_install DESTDIR=\Q$dest\E >/dev/null") == 0 or return fail 'make pure_install';
    my ($page) = glob "$dest$make{INSTALLSITEMAN1DIR}/serow.*";
    ok $page, "installed: $page";
    my $man = Serow::Test::find_command('man') or return;
    local $ENV{MANPATH} = "$dest" . ($make{INSTALLSITEMAN1DIR} =~ s{/man1$}{}r);
    like scalar(`man serow 2>&1`), qr/serow - serve a PSGI app with Serow/, 'man serow shows it';
    like scalar(`man serow-chunkview 2>&1`), qr/serow-chunkview - /, 'man serow-chunkview too';
};

my $pod = do { open(my $fh, '<', $script) or die; local $/; <$fh> };
$pod =~ s/\A.*?^__END__\n//ms;

subtest 'every option of the table is an item of OPTIONS' => sub {
    for my $name (Serow::Options->names) {
        (my $flag = $name) =~ tr/_/-/;
        ok $pod =~ /^=item --\Q$flag\E\b/m, "--$flag" or diag "no =item --$flag in script/serow";
    }
};

# The defaults it states are the table's: t/build/doc_defaults.t checks them
# with every other default the documentation quotes.

subtest 'every alias is in the POD' => sub {
    for my $alias (Serow::Options->aliases) {
        my $flag = Serow::Options->alias_flag($alias);
        ok $pod =~ /(?:^=item |C<|, )\Q$flag\E\b/m, $flag or diag "$flag is not in the POD of script/serow";
    }
};

subtest 'the signals the master handles are documented' => sub {
    like $pod, qr/^=item .*\b$_\b/m, $_ for qw(TERM INT QUIT HUP TTIN TTOU);
};

done_testing;
