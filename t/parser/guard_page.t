# The request parser and the chunked decoder on input that ends at a guard
# page (a PROT_NONE page right after the last byte), at every truncation
# length, so that reading one byte too far faults: t/parser/guard_page.c.
# The same binary replays the fuzz regression corpus (fuzz/regression/)
# through the fuzz targets, so that what the fuzzer once found stays fixed
# (the held connections' Grip-* headers and holder messages, and the TLS
# record layer's opening, too).
# Built with the system C compiler, with ASan and UBSan when they work here
# (Serow::Test::CProgram).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test ();
use Serow::Test::CProgram ();

my $root = Serow::Test::root();
my $build = Serow::Test::CProgram::build(name => 'guard_page', includes => ['src', 'fuzz'],
    sources => [qw(t/parser/guard_page.c src/http/http_parser.c fuzz/replay.c
                   fuzz/request_target.c fuzz/chunked_target.c
                   src/http/grip_instruct.c src/shared/holder_message.c
                   fuzz/grip_target.c fuzz/holder_message_target.c
                   src/connection/tls_record.c fuzz/tls_record_target.c)],
    libs => ['-lgnutls']);
plan skip_all => 'no C compiler (build-essential)' unless $build->{compiler};
is $build->{status}, 0, "compiled with $build->{compiler}" . ($build->{sanitized} ? ' and ASan + UBSan' : '')
    or diag $build->{output};
note 'no sanitizer runtime here: guard pages only' unless $build->{sanitized};

SKIP: {
    skip 'not compiled', 6 unless $build->{binary};

    Serow::Test::CProgram::report(Serow::Test::CProgram::run($build->{binary}), 'the table');

    for my $kind (qw(request chunked grip holder_message tls_record)) {
        my @dirs = grep { -d } map { "$root/fuzz/$_/$kind" } qw(regression corpus);
        my $replay = Serow::Test::CProgram::run($build->{binary}, 'replay', $kind, @dirs);
        is $replay->{status}, 0, "the $kind fuzz target on fuzz/regression/$kind and fuzz/corpus/$kind"
            or diag $replay->{output};
    }
}

done_testing;
