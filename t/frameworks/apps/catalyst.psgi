# Catalyst under Serow (t/frameworks/catalyst.t): the app is in lib/.
use strict;
use warnings;
use File::Basename ();
use lib File::Basename::dirname(__FILE__) . '/catalyst/lib';
use SerowTestCat;

SerowTestCat->psgi_app;
