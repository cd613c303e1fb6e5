package Serow::Test::Common;
use strict;
use warnings;

# What every helper of Serow's tests stands on, and nothing else: the
# repository's root, the bounds of the waits, ignored SIGPIPE, and writing
# and reading the small files tests hand a server.  Loads no
# other Serow::Test module (they all load this one).

use Exporter 'import';
use Cwd ();
use File::Spec ();

our @EXPORT_OK = qw(root READ_TIMEOUT STOP_TIMEOUT write_file_whole file_lines);

# Generous: the machine is shared and slow; these bound a wait, never pace it.
use constant READ_TIMEOUT => 30;
use constant STOP_TIMEOUT => 60;

my $ROOT = Cwd::abs_path(File::Spec->catdir(__FILE__, (File::Spec->updir) x 5));

# A write to a connection the server closed (or to a pipe whose reader left)
# must fail, not kill the test before it has stopped what it started.
$SIG{PIPE} = 'IGNORE';

sub root { $ROOT }

# Writes $text to $file through a rename, so that a server reading the file
# meanwhile (a HUP, a worker loading the app) sees the old file or the new
# one whole, never half written.
sub write_file_whole {
    my ($file, $text) = @_;
    open(my $fh, '>', "$file.new") or die "$file.new: $!";
    print $fh $text;
    close $fh or die "$file.new: $!";
    rename "$file.new", $file or die "rename $file.new: $!";
}

# The lines of $file, without their ends; none while it does not exist.
sub file_lines {
    my ($file) = @_;
    open(my $fh, '<', $file) or return ();
    return map { chomp; $_ } <$fh>;
}

1;
