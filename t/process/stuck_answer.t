# The master's answer to the client of a worker it killed past
# --request-timeout (src/shared/connection_transfer.c), decided from the worker's
# shared slot: 503 only if the app still ran the request whose connection
# the master copied, and no byte of its response went out.  The race it
# guards against (the app returns between the copy and the kill, and the
# worker goes on to another request) cannot be timed from outside:
# t/process/stuck_answer.c sets the slot by hand, as a worker would leave it
# (built with the system C compiler, and ASan + UBSan when they work here:
# Serow::Test::CProgram).  t/process/request_timeout.t has the real kills.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'stuck_answer',
    sources => [qw(t/process/stuck_answer.c src/shared/connection_transfer.c src/shared/shared_state.c
                   src/log/access_log.c src/log/access_log_format.c src/http/response_writer.c src/http/http_parser.c
                   src/connection/transport.c src/connection/tls_transport.c src/connection/tls_peer.c src/connection/tls_record.c
                   src/log/log.c)],
    libs => ['-lgnutls']);

done_testing;
