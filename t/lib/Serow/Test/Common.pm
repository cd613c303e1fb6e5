package Serow::Test::Common;
use strict;
use warnings;

# What every helper of Serow's tests stands on, and nothing else: the
# repository's root, the bounds of the waits, and ignored SIGPIPE.  Loads no
# other Serow::Test module (they all load this one).

use Exporter 'import';
use Cwd ();
use File::Spec ();

our @EXPORT_OK = qw(root READ_TIMEOUT STOP_TIMEOUT);

# Generous: the machine is shared and slow; these bound a wait, never pace it.
use constant READ_TIMEOUT => 30;
use constant STOP_TIMEOUT => 60;

my $ROOT = Cwd::abs_path(File::Spec->catdir(__FILE__, (File::Spec->updir) x 5));

# A write to a connection the server closed (or to a pipe whose reader left)
# must fail, not kill the test before it has stopped what it started.
$SIG{PIPE} = 'IGNORE';

sub root { $ROOT }

1;
