# HTML::Mason through its streaming PSGI handler (HTML::Mason::PSGIHandler::Streamy,
# the one Request Tracker builds on), under Serow (t/frameworks/client_gone.t):
# /hello.html; /big.html sends 100 MB, flushed in 64 KiB parts, each a write of the
# server's writer.  A write that died when the client had gone would come
# back through Mason as the component's error.
use strict;
use warnings;
use File::Basename ();
use File::Temp ();
use HTML::Mason::PSGIHandler::Streamy;

my $data_dir = File::Temp->newdir;
my $handler = HTML::Mason::PSGIHandler::Streamy->new(
    comp_root => File::Basename::dirname(__FILE__) . '/mason',
    data_dir  => "$data_dir",
);

sub { $handler->handle_psgi(@_) };
