use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages);
use Serow::Test::Framework qw(smoke);

# A Catalyst app with no plugins (t/frameworks/apps/catalyst/) under serow;
# $c->res->write streams its response.

need_debian_packages('libcatalyst-perl');
smoke(name => 'Catalyst', app_file => 't/frameworks/apps/catalyst.psgi', stream => 'delayed');
done_testing;
