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

=head1 SYNOPSIS

    serow --listen 127.0.0.1:5000 --workers 8 app.psgi
    plackup -s Serow --listen 127.0.0.1:5000 app.psgi

    use Serow::Server;
    Serow::Server->new(listen => ['127.0.0.1:5000'], workers => 8)->run($app);

=head1 DESCRIPTION

Serow serves PSGI apps. A master process opens the listen sockets (or
takes them from Server::Starter or systemd) and starts a connection holder
and, with C<serow FILE>, a generation process, which loads the app and
forks the workers (the master never loads it, so that a HUP can load new
code in a new generation; under plackup, which has loaded the app, the
master forks the workers itself). Each worker runs an event loop in C
(accept, read, parse, env, write) and calls the app for one request at a
time; idle keep-alive connections move to the connection holder, so they
cost no worker, and any free worker serves any connection that has a
request.

Every request is parsed strictly (RFC 9112): ambiguous framing, malformed
fields and oversized heads are answered with the right status and a closed
connection before the app sees them.

=head1 SEE ALSO

L<serow> (the command and its options), L<Serow::Server>,
L<Plack::Handler::Serow>, L<Plack::Middleware::SerowStatus>,
L<Serow::Metrics> (C<--metrics-path>),
F<docs/psgi.md>, F<docs/keepalive.md>, F<docs/logs-and-metrics.md> (C<--access-log>,
C<--metrics-path>).

=cut
