package Serow;
use strict;
use warnings;

our $VERSION = '0.01';

require XSLoader;
XSLoader::load('Serow', $VERSION);

1;
__END__

=head1 NAME

Serow - a fast, strict HTTP/1.1 preforking PSGI server with its hot path in C

=cut
