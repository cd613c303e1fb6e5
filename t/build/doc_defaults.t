use strict;
use warnings;
use Test::More;
use File::Find ();
use lib 't/lib';
use Serow::Options ();
use Serow::Test ();

# Every default of an option that the documentation quotes is the default in
# lib/Serow/Options.pm, the one home of every option's default.
#
# A quote is written one way, so that this test finds every one:
#
#   `--keepalive-timeout` (default 75)        Markdown (the README, docs/)
#   `--max-queue-wait MS` (default 0: off)    an argument may follow the name
#   C<--max-body-size> (default 1G)           POD
#   Serow's --keepalive-timeout (default 75)  comments (eg/)
#   =item --backlog N                         in POD, an option's own item:
#   Listen queue length (default 1024).       "(default ...)" in its text
#
# VALUE is the default as Options.pm has it, in the option's units (75, 75 s;
# 64K, 64 KiB, 65536; 1 KiB/s), or off/none for an option that is off by
# default (0, no value, an empty list). An option whose table entry has no
# value (--listen, --min-requests, --group) says its default in its help text
# ("default 0.0.0.0:5000"), and the doc quotes that.
#
# Other phrasings of a default next to an option ("`--header-timeout` (10 s)",
# "(off by default)", "the default `--max-header-size`", "Off by default." in
# an option's POD item) fail here: this test could not check them.

my $ROOT = Serow::Test::root();
chdir $ROOT or die "cd $ROOT: $!";

my %OPTION = map { (dashed($_) => $_) } Serow::Options->names;
my $NAME = join '|', map { quotemeta } sort { length $b <=> length $a } keys %OPTION;

sub dashed { (my $n = shift) =~ tr/_/-/; $n }

# The files that talk to users: the README, docs/, the POD of the commands and
# modules (the man pages), the examples.
my @files = grep { -f } 'README.md', glob('docs/*.md'), glob('script/*');
# Options.pm itself is the source, not a quote.
File::Find::find({ no_chdir => 1, wanted => sub { push @files, $_ if -f && /\.(?:pm|pod)\z/ && !m{/Serow/Options\.pm\z} } }, 'lib');
File::Find::find({ no_chdir => 1, wanted => sub { push @files, $_ if -f && /\.(?:conf|cfg|psgi|pl|md|service|socket)\z/ } }, 'eg');

# The option as the docs mark it up, with an optional argument, then the
# parenthesis after it.
my $MARKED = qr{(?<![\w-])--($NAME)(?![\w-])(?:[ =](?:[A-Z][A-Z0-9_.|:\[\]]*|[a-z][a-z|]*(?=`)))?(?:`|>)*(?:\*\*)?};

my (@quotes, @irregular);
for my $file (sort @files) {
    open my $fh, '<', $file or die "$file: $!";
    my $text = do { local $/; <$fh> };
    # In a module or a command, the POD is the documentation (its code
    # comments are for contributors, and say what the code does).
    my $pod = $file =~ /\.(?:pm|pod)\z/ || ($file =~ m{\Ascript/} && $text =~ /^=head1/m);
    $text = join "\n\n", $text =~ /^(=[a-z].*?)(?:^=cut\b|\z)/msg if $pod;
    my $item; # the option whose =item the paragraph is in (POD)
    for my $para (split /\n\s*\n/, $text) {
        (my $flat = $para) =~ s/\s+/ /g;
        my $where = "$file: " . substr($flat, 0, 70);
        # An option's own =item in POD: its text quotes its default alone.
        if ($pod && $flat =~ /\A=item --($NAME)(?![\w-])/) {
            $item = $1;
            next;
        }
        if ($pod && $flat =~ /\A=(?:item|back|head)/) {
            $item = undef;
            next;
        }
        while ($flat =~ /$MARKED \(([^)]*)\)/g) {
            my ($name, $inside) = ($1, $2);
            if ($inside =~ /\Adefault:? (.+)\z/) {
                push @quotes, [$file, $name, $1, $where];
            }
            elsif ($inside =~ /\bdefault\b/i || ($inside =~ /\A\d/ && $inside !~ /\A[1-5]\d\d\z/)) {
                push @irregular, "$where: --$name ($inside)";
            }
        }
        while ($flat =~ /\bdefault(?:s| is| of)?,? (?:[^\s|()]+ ){0,2}?(?:`|C<|B<|\*\*)*--($NAME)(?![\w-])/gi) {
            push @irregular, "$where: 'default ... --$1'";
        }
        while ($flat =~ /--($NAME)(?![\w-])(?:`|>)*(?:'s default| defaults to)/g) {
            push @irregular, "$where: '--$1 ... default'";
        }
        if ($pod && $item) {
            my $name = $item;
            # "(default ...)" not right after another option is this item's.
            (my $own = $flat) =~ s/$MARKED \([^)]*\)//g;
            while ($own =~ /\(default:? ([^)]*)\)/g) {
                push @quotes, [$file, $name, $1, $where];
            }
            push @irregular, "$where: --$name: '$1'"
                while $own =~ /(\b[Bb]y default\b|\b[Tt]he default\b|(?:\A|\. )Default\b|\(default\b(?![: ]))/g;
        }
    }
}

cmp_ok scalar(@quotes), '>=', 40, 'the docs quote the defaults of many options (the pattern finds them)';
is scalar(@irregular), 0, 'every default next to an option is written "(default VALUE)"'
    or diag join "\n", @irregular, 'write each as `--option` (default VALUE), or C<--option> (default VALUE) in POD';

for my $quote (@quotes) {
    my ($file, $name, $value, $where) = @$quote;
    my ($ok, $expected) = matches($OPTION{$name}, $value);
    ok $ok, "$file: --$name (default $value)"
        or diag "$where\nOptions.pm's default for --$name: $expected";
}

# Whether a quoted VALUE is the option's default; and that default, for the
# message.
sub matches {
    my ($option, $quoted) = @_;
    my ($type, $default, $help) = @{ Serow::Options->spec($option) };
    my $value = plain($quoted);
    # "0: no limit", "1G, 0: no limit", "info, which is ...": the value is
    # what comes before the explanation.
    $value =~ s/(?:[;,]| \(|: ).*\z//;
    $value =~ s/\.\z//;
    my $off = !defined $default || (!ref $default && ($default eq '0' || $default eq ''))
        || (ref $default eq 'ARRAY' && !@$default);
    my ($help_default) = $help =~ /\bdefault:? ([^;)]+)/;
    if (defined $help_default && (!defined $default || (ref $default eq 'ARRAY' && !@$default))) {
        $help_default = plain($help_default);
        return (plain($quoted) eq $help_default || $help_default =~ /\A\Q$value\E\b/, $help_default);
    }
    my $shown = ref $default eq 'ARRAY' ? join(', ', @$default) || 'none' : $default // 'none';
    return ($off, $shown) if $value =~ /\A(?:off|none|no limit|never)\z/i;
    if (ref $default eq 'ARRAY') {
        my @want = sort map { s{/(?:32|128)\z}{}r } @$default;
        my @got = sort grep { length } split /\s*(?:,|\band\b)\s*/, plain($quoted) =~ s/[;)].*//r;
        return ("@got" eq "@want", join(', ', @want));
    }
    return (0, $shown) unless defined $default;
    if ($type eq 'size') {
        my ($n, $unit) = $value =~ /\A(\d+)\s*([KMG]?)(?:i?B)?(?:\/s)?\z/i or return (0, $shown);
        return ($n * { '' => 1, K => 1024, M => 1024**2, G => 1024**3 }->{ uc $unit } == $default, $shown);
    }
    if ($type =~ /\A(?:int|count|seconds|switch)\z/) {
        my ($n) = $value =~ /\A(\d+(?:\.\d+)?)(?:\s*(?:s|seconds?|ms))?\z/ or return (0, $shown);
        return ($n == $default, $shown);
    }
    return ($value eq $default, $shown);
}

# The text without its markup: `code`, C<code>, F<file>, **bold**.
sub plain {
    my ($s) = @_;
    1 while $s =~ s/[CFIB]<([^<>]*)>/$1/;
    $s =~ s/[`*]//g;
    $s =~ s/\A\s+|\s+\z//g;
    return $s;
}

done_testing;
