package Serow::Test;
use strict;
use warnings;

# Helpers for Serow's own tests, one module per concern under Serow::Test::,
# each loading only the ones below it:
#
#   Common      root(), READ_TIMEOUT, STOP_TIMEOUT, write_file_whole, file_lines (and SIGPIPE ignored)
#   Process     wait_until, /proc (child_pids, all_child_pids, process_alive,
#               proc_stat_fields, is_connection_holder), processes a test
#               starts (fork_group, wait_for_exit, kill_group, run_command)
#   Client      raw HTTP: raw_connect, raw_request, read_until_close,
#               read_until_match, send_all, read_response, parse_response(_head),
#               http_get, rejects, answered_and_closed, answer_to_unfinished_head,
#               SMUGGLED
#   Server      start_server (the server object), run_serow, serow_command
#   Apps        echo_app, gated_app
#   Gate        gate(), Serow::Test::Gate
#   Hammer      hammer(), Serow::Test::Hammer
#   Components  find_command, need_debian_packages, headless_chromium
#
# This module is their facade: it loads them all and exports whatever any of
# them exports, so that a test's "use Serow::Test qw(...)" and its calls of
# Serow::Test::NAME work whichever module NAME lives in.

use Exporter 'import';

our @MODULES = qw(Common Process Client Server Apps Gate Hammer Components);
our @EXPORT_OK;

for my $module (map { "Serow::Test::$_" } @MODULES) {
    (my $file = "$module.pm") =~ s{::}{/}g;
    require $file;
    no strict 'refs';
    my @names = @{"${module}::EXPORT_OK"};
    $module->import(@names); # into Serow::Test: Serow::Test::NAME
    push @EXPORT_OK, @names;
}

1;
