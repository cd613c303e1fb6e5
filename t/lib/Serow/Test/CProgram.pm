package Serow::Test::CProgram;
# The C test programs (t/parser/guard_page.c, t/connection/buffers.c,
# t/process/stuck_answer.c...): built with the system C compiler from Serow's
# own sources, with ASan and UBSan when their runtimes work here, and run with
# their reports made fatal.  A program prints "ok - NAME" or "not ok - NAME"
# per check (t/lib/serow_unit.h, on every program's include path);
# report() turns those into Test::More tests.
use strict;
use warnings;
use File::Temp ();
use Test::More ();
use Serow::Test::Common qw(root);
use Serow::Test::Process qw(run_command);

my @FLAGS = ('-std=gnu11', '-O1', '-g', '-Wall', '-Wextra');
my @SANITIZE = ('-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-fno-omit-frame-pointer');

# build(name => NAME, sources => [paths from the repository's root],
#       includes => [dirs from the root], libs => [linker flags, e.g. -lhiredis])
# Returns { binary, sanitized, status, output, compiler }; binary is undef
# when no C compiler works here.
sub build {
    my (%o) = @_;
    my $root = root();
    my $dir = File::Temp::tempdir(CLEANUP => 1);
    my $cc = (grep { compiler_works($dir, $_) } 'gcc', 'cc')[0]
        or return { binary => undef };
    # The sanitizers need their runtime libraries (libasan, libubsan): tried on
    # a program first, so that a machine without them still runs the checks.
    my $sanitized = compiler_works($dir, $cc, @SANITIZE);
    my $binary = "$dir/$o{name}";
    my $out = run($cc, @FLAGS, (map { "-I$root/$_" } @{ $o{includes} || ['src'] }, 't/lib'),
        ($sanitized ? @SANITIZE : ()), '-o', $binary, (map { "$root/$_" } @{ $o{sources} }), @{ $o{libs} || [] });
    return { %$out, binary => $out->{status} == 0 ? $binary : undef, sanitized => $sanitized,
        compiler => $cc };
}

# Runs a command with the sanitizers' reports fatal (leaks in a short-lived
# test program are no finding); its exit status (or 128 + signal) and its
# output, both streams.
sub run {
    my @cmd = @_;
    local $ENV{ASAN_OPTIONS} = join ':', 'detect_leaks=0', 'abort_on_error=1',
        grep { length } $ENV{ASAN_OPTIONS} // '';
    local $ENV{UBSAN_OPTIONS} = 'halt_on_error=1:print_stacktrace=1';
    return run_command(@cmd);
}

# One Test::More test per "ok - NAME" / "not ok - NAME" line of a run's output,
# then one that the program ran to its end.
sub report {
    my ($out, $what) = @_;
    for my $line (split /\n/, $out->{output}) {
        my ($not, $name) = $line =~ /^(not )?ok - (.*)/ or next;
        Test::More::ok(!$not, $name);
    }
    Test::More::is($out->{status}, 0, "$what ran to its end") or Test::More::diag($out->{output});
}

# The whole test of a program that reports its own checks: built (skipping
# the test file without a C compiler), run, and its checks reported.
# Arguments as build's, and args: the program's arguments, or a sub that
# returns them, called once it is built (for what must be fresh, a free port).
sub test_program {
    my (%o) = @_;
    my $build = build(%o);
    Test::More::plan(skip_all => 'no C compiler (build-essential)') unless $build->{compiler};
    Test::More::is($build->{status}, 0, "compiled with $build->{compiler}"
        . ($build->{sanitized} ? ' and ASan + UBSan' : '')) or Test::More::diag($build->{output});
    SKIP: {
        Test::More::skip('not compiled', 1) unless $build->{binary};
        my $args = $o{args} || [];
        report(run($build->{binary}, ref $args eq 'CODE' ? $args->() : @$args), 'the checks');
    }
}

sub compiler_works {
    my ($dir, $cc, @flags) = @_;
    my $src = "$dir/probe.c";
    open my $fh, '>', $src or die "$src: $!";
    print $fh "int main(void) { return 0; }\n";
    close $fh;
    my $exe = "$dir/probe";
    unlink $exe;
    return run($cc, @flags, '-o', $exe, $src)->{status} == 0 && run($exe)->{status} == 0;
}

1;
