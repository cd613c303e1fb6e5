use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages);
use Serow::Test::Framework qw(smoke);

# A Mojolicious::Lite app (t/frameworks/apps/mojolicious.psgi) under serow.
# Its /stream writes everything before the action returns: Mojolicious's
# PSGI adapter passes on nothing written later (see the app).

need_debian_packages('libmojolicious-perl');
smoke(name => 'Mojolicious', app_file => 't/frameworks/apps/mojolicious.psgi', stream => 'at_once');
done_testing;
