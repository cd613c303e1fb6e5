# The input buffers of connections, kept for reuse between requests
# (src/connection/connection.c): t/connection/buffers.c, built with the system C compiler
# and ASan + UBSan when they work here (Serow::Test::CProgram).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'buffers',
    sources => [qw(t/connection/buffers.c src/connection/connection.c)]);

done_testing;
