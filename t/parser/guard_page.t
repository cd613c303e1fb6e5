# The request parser and the chunked decoder on input that ends at a guard
# page (a PROT_NONE page right after the last byte), at every truncation
# length, so that reading one byte too far faults: t/parser/guard_page.c.
# The same binary replays the fuzz regression corpus (fuzz/regression/)
# through the fuzz targets, so that what the fuzzer once found stays fixed.
# Built with the system C compiler, with ASan and UBSan when they work here.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use POSIX ();
use lib 't/lib';
use Serow::Test ();

my $root = Serow::Test::root();
my $dir = File::Temp->newdir;
my $cc = (grep { compiler_works($_) } 'gcc', 'cc')[0]
    or plan skip_all => 'no C compiler (build-essential)';

my @sources = map { "$root/$_" } qw(t/parser/guard_page.c src/http_parser.c fuzz/replay.c
                                    fuzz/request_target.c fuzz/chunked_target.c);
my @flags = ('-std=gnu11', '-O1', '-g', '-Wall', '-Wextra', "-I$root/src",
             "-I$root/fuzz");
my @sanitize = ('-fsanitize=address,undefined', '-fno-sanitize-recover=all',
                '-fno-omit-frame-pointer');
# The sanitizers need their runtime libraries (libasan, libubsan): try them on a
# program first, so that a machine without them still runs the guard pages.
my $sanitized = compiler_works($cc, @sanitize);
my $binary = "$dir/guard_page";
my $out = run($cc, @flags, ($sanitized ? @sanitize : ()), '-o', $binary, @sources);
is $out->{status}, 0, "compiled with $cc" . ($sanitized ? ' and ASan + UBSan' : '')
    or diag $out->{output};
note 'no sanitizer runtime here: guard pages only' unless $sanitized;

# Leaks in a short-lived test program are no finding; any other report is.
local $ENV{ASAN_OPTIONS} = join ':', 'detect_leaks=0', 'abort_on_error=1',
    grep { length } $ENV{ASAN_OPTIONS} // '';
local $ENV{UBSAN_OPTIONS} = 'halt_on_error=1:print_stacktrace=1';

SKIP: {
    skip 'not compiled', 3 unless -x $binary;

    my $table = run($binary);
    my @lines = split /\n/, $table->{output};
    for my $line (grep { /^(not )?ok - / } @lines) {
        my ($not, $name) = $line =~ /^(not )?ok - (.*)/;
        ok !$not, $name;
    }
    is $table->{status}, 0, 'the table ran to its end'
        or diag $table->{output};

    for my $kind (qw(request chunked)) {
        my @dirs = grep { -d } map { "$root/fuzz/$_/$kind" } qw(regression corpus);
        my $replay = run($binary, 'replay', $kind, @dirs);
        is $replay->{status}, 0, "the $kind fuzz target on fuzz/regression/$kind and fuzz/corpus/$kind"
            or diag $replay->{output};
    }
}

done_testing;

sub compiler_works {
    my ($cc, @flags) = @_;
    my $src = "$dir/probe.c";
    open my $fh, '>', $src or die "$src: $!";
    print $fh "int main(void) { return 0; }\n";
    close $fh;
    my $exe = "$dir/probe";
    unlink $exe;
    return run($cc, @flags, '-o', $exe, $src)->{status} == 0 && run($exe)->{status} == 0;
}

# Runs a command; its exit status (or 128 + signal) and its output, both streams.
sub run {
    my @cmd = @_;
    my $pid = open my $fh, '-|';
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDERR, '>&', \*STDOUT or die;
        exec @cmd or do { print "exec $cmd[0]: $!\n"; POSIX::_exit(127) };
    }
    local $/;
    my $output = <$fh> // '';
    close $fh;
    my $status = $? & 127 ? 128 + ($? & 127) : $? >> 8;
    return { status => $status, output => $output };
}
