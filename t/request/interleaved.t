# Two requests served by one worker at once, interleaved, each a struct
# serow_request of its own (src/request.h) driven through the worker's
# public face (src/worker_loop.h): t/request/interleaved.c, built with the
# system C compiler and ASan + UBSan when they work here
# (Serow::Test::CProgram).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'interleaved',
    sources => [qw(t/request/interleaved.c src/worker_loop.c src/worker_output.c
                   src/worker_connections.c src/worker_parking.c src/worker_request_body.c
                   src/worker_intake.c src/worker_gather.c src/worker_timers.c src/worker_slots.c
                   src/request_timeout.c src/request_accounting.c src/request_id.c
                   src/request_metrics.c src/connection.c src/connection_transfer.c
                   src/fd_passing.c src/http_parser.c src/response_writer.c src/access_log.c
                   src/access_log_format.c src/shared_state.c src/log.c)]);

done_testing;
