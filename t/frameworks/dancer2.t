use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages);
use Serow::Test::Framework qw(smoke);

# A Dancer2 app (t/frameworks/apps/dancer2.psgi) under serow, with a
# delayed (streamed) response.

need_debian_packages('libdancer2-perl');
smoke(name => 'Dancer2', app_file => 't/frameworks/apps/dancer2.psgi', stream => 'delayed');
done_testing;
