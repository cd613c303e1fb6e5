# Two requests served by one worker at once, interleaved, each a struct
# serow_request of its own (src/request/request.h) driven through the worker's
# public face (src/worker/worker_loop.h): t/request/interleaved.c, built with the
# system C compiler and ASan + UBSan when they work here
# (Serow::Test::CProgram).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'interleaved',
    sources => [qw(t/request/interleaved.c
                   src/worker/worker_loop.c src/worker/worker_output.c
                   src/worker/worker_connections.c src/worker/worker_parking.c
                   src/worker/worker_request_body.c src/worker/worker_intake.c
                   src/worker/worker_gather.c src/worker/worker_timers.c
                   src/worker/worker_slots.c src/worker/request_timeout.c src/worker/worker_websocket.c
                   src/request/request_accounting.c src/log/request_id.c src/log/access_log.c
                   src/log/access_log_format.c src/log/log.c src/shared/request_metrics.c
                   src/connection/transport.c src/connection/tls_transport.c src/connection/tls_peer.c src/connection/tls_record.c
                   src/shared/connection_transfer.c src/shared/shared_state.c src/shared/holding_channel.c
                   src/connection/connection.c src/connection/fd_passing.c
                   src/http/http_parser.c src/http/response_writer.c)],
    libs => ['-lgnutls']);

done_testing;
