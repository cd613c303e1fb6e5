package Plack::Handler::Serow;
use strict;
use warnings;

use Serow::Server ();

# plackup folds --host, --port and --socket into listen; Plack::Loader (and
# Plack::Test::Server) pass host and port alone, or a socket it opened
# (listen_sock, as Plack::Test::Server does with listen => 1).
sub new {
    my ($class, %args) = @_;
    my ($host, $port, $socket, $listen, $listen_sock) = delete @args{qw(host port socket listen listen_sock)};
    if ($listen_sock) {
        return bless { server => Serow::Server->new(%args, listen_sockets => [$listen_sock]) }, $class;
    }
    my @listen = @{ $listen || [] };
    if (!@listen) {
        push @listen, $socket if defined $socket;
        push @listen, ($host // '0.0.0.0') . ':' . ($port // 5000) if defined $port || !@listen;
    }
    return bless { server => Serow::Server->new(%args, listen => \@listen) }, $class;
}

sub run {
    my ($self, $app) = @_;
    return $self->{server}->run($app);
}

1;
__END__

=head1 NAME

Plack::Handler::Serow - run PSGI apps with Serow from plackup

=head1 SYNOPSIS

    plackup -s Serow --listen 127.0.0.1:5000 --workers 8 app.psgi

=head1 DESCRIPTION

Every option of L<serow> can be given to plackup, with dashes or
underscores, and so can the option names of Starman, Starlet and Gazelle
(C<--max-workers>, C<--max-reqs-per-child>, C<--disable-keepalive>, ...):
C<plackup -s Starlet ...> becomes C<plackup -s Serow ...> with nothing else
changed (see F<docs/migrating.md>). An unknown option is an error, and so is
one Serow does not support (C<-D>, C<--enable-ssl>, ...), with what to do
instead.

C<host> and C<port> (as L<Plack::Loader> passes them) work as well as
C<listen>, and so does C<listen_sock>, a listening socket already open (as
L<Plack::Test::Server> passes it).

=cut
