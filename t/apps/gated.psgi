# Serow::Test::gated_app as an app file: /slow waits on the test's gate (the
# read end of its pipe is descriptor $ENV{SEROW_TEST_GATE}); every answer
# names the worker that gave it.  Needs t/lib in @INC.
use Serow::Test ();
Serow::Test::gated_app(Serow::Test::Gate->from_fd($ENV{SEROW_TEST_GATE}));
