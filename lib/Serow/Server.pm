package Serow::Server;
use strict;
use warnings;

use Serow ();
use Serow::Options ();
use Serow::Listener ();
use Serow::Master ();
use Serow::Log ();

use constant DEFAULT_LISTEN => '0.0.0.0:5000';

sub new {
    my ($class, %args) = @_;
    my $server_ready = delete $args{server_ready};
    my $sockets = delete $args{listen_sockets}; # already listening: used as they are
    my $options = Serow::Options->from_hash(%args);
    # Like Monoceros: by default at most half the descriptors a process may
    # open are kept-alive connections, leaving room for new ones and files.
    $options->{max_keepalive_connections} ||= int(_open_file_limit() / 2);
    return bless { options => $options, server_ready => $server_ready, listen_sockets => $sockets },
        $class;
}

sub options { $_[0]{options} }

sub _open_file_limit {
    my $limit = Serow::open_file_limit();
    return $limit > 0 ? $limit : 1024;
}

# Sockets given to new (listen_sockets), else the ones Server::Starter or
# systemd hand over, else the ones --listen names.
sub open_listeners {
    my ($self) = @_;
    my $options = $self->{options};
    if ($self->{listen_sockets}) {
        return map { Serow::Listener->from_socket($_) } @{ $self->{listen_sockets} };
    }
    if (defined $ENV{SERVER_STARTER_PORT}) {
        return Serow::Listener->from_server_starter($ENV{SERVER_STARTER_PORT});
    }
    if ($ENV{LISTEN_FDS} && ($ENV{LISTEN_PID} // $$) == $$) {
        return Serow::Listener->from_systemd($ENV{LISTEN_FDS});
    }
    my @addresses = @{ $options->{listen} };
    @addresses = (DEFAULT_LISTEN) unless @addresses;
    return map {
        my $l = Serow::Listener->open_address($_, backlog => $options->{backlog},
            socket_mode => $options->{socket_mode});
        $l->{owned} = 1;
        $l;
    } @addresses;
}

sub run {
    my ($self, $app) = @_;
    my @listeners = $self->open_listeners;
    my $master = Serow::Master->new(app => $app, options => $self->{options},
        listeners => \@listeners, on_ready => sub { $self->announce(@listeners) });
    my $status = $master->run;
    $_->close_and_unlink for @listeners;
    return $status;
}

# Says the server is up: only once the master's signal handlers are in
# place, so that whoever waits for this line may signal it at once.
sub announce {
    my ($self, @listeners) = @_;
    Serow::Log->info(sprintf "Serow %s listening on %s with %d workers (master pid %d)",
        $Serow::VERSION, join(', ', map { $_->{name} } @listeners), $self->{options}{workers}, $$);
    if ($self->{server_ready}) {
        my $first = $listeners[0];
        $self->{server_ready}->({ host => $first->{server_name}, port => $first->{server_port},
            server_software => 'Serow', proto => 'http' });
    }
}

1;
__END__

=head1 NAME

Serow::Server - a Serow server: options, listen sockets, master

=head1 SYNOPSIS

    use Serow::Server;
    Serow::Server->new(listen => ['127.0.0.1:5000'], workers => 4)->run($app);

=head1 DESCRIPTION

Checks the options (L<Serow::Options>), opens the listen sockets
(L<Serow::Listener>) and hands them with the app to the master
(L<Serow::Master>), which forks the workers (L<Serow::Worker>).

=cut
