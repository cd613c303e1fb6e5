# The TLS record layer (src/connection/tls_record.c) against GnuTLS's own:
# t/connection/tls_record.c, built with the system C compiler (and ASan +
# UBSan when they work here), does real handshakes between a GnuTLS client
# and server over a socketpair, then speaks for the server with the state it
# exported, for each cipher in TLS 1.3 and 1.2.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'tls_record',
    sources => [qw(t/connection/tls_record.c src/connection/tls_record.c)],
    libs => ['-lgnutls']);

done_testing;
