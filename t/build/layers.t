# src/ is built in layers, one folder each (docs/development.md, "The C core"):
# a file includes project headers from its own folder and from folders below
# it only, each written with its folder ("http/http_parser.h"), and a
# folder's *_internal.h stays inside that folder.  This test reads every file
# under src/ and is where the order of the folders is written.
use strict;
use warnings;
use Test::More;
use File::Find ();
use lib 't/lib';
use Serow::Test ();

# From the ground up.  Folders on one line are beside each other: neither
# includes the other.
my @LAYERS = (
    [qw(http)],          # HTTP/1.x bytes: the parser, what a response head says, error pages
    [qw(log)],           # the error log, the access log, request ids
    [qw(connection)],    # a client connection: its buffers, passing its descriptor
    [qw(shared)],        # the memory processes share, its counters, taking a connection out of a worker
    [qw(request)],       # one request: its state and what is accounted of it
    [qw(holder worker)], # the two C event loops: the connection holder's (and its channel store) and a worker's
    [qw(psgi)],          # the C that speaks Perl: PSGI env, input, response, request; shared values
);

# Includes that only another part of issue 28 can remove: each is named, with
# why it is there, and must still be in its file (so this list shrinks as
# they go, and cannot keep one that is gone).  None is left: the code that
# serves a request asks its worker through worker/worker_loop.h and
# request/request_worker.h.
my %KNOWN = map { ("$_->[0] -> $_->[1]" => $_->[2]) } (
);

my $ROOT = Serow::Test::root();
chdir $ROOT or die "cd $ROOT: $!";

my %rank;
for my $i (0 .. $#LAYERS) {
    $rank{$_} = $i for @{ $LAYERS[$i] };
}

my @files;
File::Find::find({ no_chdir => 1, wanted => sub {
    push @files, $File::Find::name =~ s{^src/}{}r if -f && /\.[ch]\z/;
} }, 'src');
@files = sort @files;
ok scalar(@files), 'src/ has C files';

my @folders = sort keys %{{ map { m{^([^/]+)/} ? ($1 => 1) : () } @files }};
is_deeply [grep { !m{^[^/]+/[^/]+\z} } @files], [], 'every C file under src/ is in a layer folder, one deep';
is_deeply [grep { !exists $rank{$_} } @folders], [], 'every folder of src/ has its place in the layers'
    or diag 'add it to @LAYERS here and to the map in docs/development.md';
is_deeply [grep { !-d "src/$_" } sort keys %rank], [], 'every layer named here is a folder of src/';

# Every quoted include of each file: [file, line number, header].
my @includes;
for my $file (@files) {
    open my $fh, '<', "src/$file" or die "src/$file: $!";
    while (my $line = <$fh>) {
        push @includes, [$file, $., $1] if $line =~ /^\s*#\s*include\s+"([^"]+)"/;
    }
}

my %is_project = map { ($_ => 1) } @files;
my %basename_of_project = map { (m{([^/]+)\z} => $_) } @files;
my (@unqualified, @missing, @upward, %seen_known);
for my $inc (@includes) {
    my ($file, $line, $header) = @$inc;
    if ($header !~ m{/}) {
        # Perl's own headers (EXTERN.h, perl.h, XSUB.h, perliol.h) are quoted too.
        push @unqualified, "src/$file:$line \"$header\" (write \"$basename_of_project{$header}\")"
            if $basename_of_project{$header};
        next;
    }
    if (!$is_project{$header}) {
        push @missing, "src/$file:$line \"$header\"";
        next;
    }
    my ($own) = $file =~ m{^([^/]+)/};
    my ($theirs, $name) = $header =~ m{^([^/]+)/(.+)\z};
    my $why;
    if ($theirs ne $own && $rank{$theirs} >= $rank{$own}) {
        $why = $rank{$theirs} > $rank{$own} ? "$theirs/ is above $own/" : "$theirs/ is beside $own/";
    }
    elsif ($theirs ne $own && $name =~ /_internal\.h\z/) {
        $why = "$header is private to $theirs/";
    }
    next unless $why;
    my $key = "$file -> $header";
    if (exists $KNOWN{$key}) {
        $seen_known{$key} = 1;
        next;
    }
    push @upward, "src/$file:$line includes \"$header\": $why";
}
none(\@unqualified, 'every include of a project header names its folder');
none(\@missing, 'every include with a folder names a file under src/');
none(\@upward, 'no file includes from a folder above or beside its own, nor another folder\'s _internal.h')
    or diag 'move the code to the layer it belongs to (docs/development.md, "The C core")';
none([grep { !$seen_known{$_} } sort keys %KNOWN],
    'every known exception is still there (remove the ones that are gone from %KNOWN)');

# The glue reaches a worker's loop through its public header only; the
# #error in worker_internal.h is what stops it at compile time.
{
    open my $fh, '<', 'src/worker/worker_internal.h' or die "worker_internal.h: $!";
    my $text = do { local $/; <$fh> };
    like $text, qr/#ifdef SEROW_XS_GLUE\s*\n#error/, 'worker_internal.h refuses to be compiled into Serow.xs';
    open $fh, '<', 'Serow.xs' or die "Serow.xs: $!";
    $text = do { local $/; <$fh> };
    like $text, qr/^#define SEROW_XS_GLUE 1$/m, 'Serow.xs says it is the glue';
    unlike $text, qr/^\s*#\s*include\s+"[^"]*_internal\.h"/m, 'Serow.xs includes no _internal.h';
}

done_testing;

# Passes when the list is empty; otherwise names every entry, not the first.
sub none {
    my ($list, $name) = @_;
    return ok(!@$list, $name) || diag(join "\n", @$list) || 0;
}
