package SerowTestCat;
# The smallest Catalyst app: no plugins, one controller
# (SerowTestCat::Controller::Root).
use strict;
use warnings;
use Catalyst::Runtime;
use Catalyst;

__PACKAGE__->config(name => 'SerowTestCat', disable_component_resolution_regex_fallback => 1);
__PACKAGE__->setup;
__PACKAGE__->log->levels('warn', 'error', 'fatal');

1;
