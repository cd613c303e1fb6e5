package Plack::Handler::Serow;
use strict;
use warnings;

use Serow::Options ();
use Serow::Server ();

# plackup folds --host, --port and --socket into listen; Plack::Loader (and
# Plack::Test::Server) pass host and port alone, or a socket it opened
# (listen_sock, as Plack::Test::Server does with listen => 1).
sub new {
    my ($class, %args) = @_;
    my $self = $class->_new(%args);
    # plackup has loaded the app in this process before it calls run: too late
    # to load it in each worker.
    die "--lazy-app does not work with plackup -s Serow, which has already loaded the app: "
        . "run serow --lazy-app app.psgi, or plackup -L Delayed (each worker loads the app at its first request)\n"
        if $self->{server}->options->{lazy_app};
    return $self;
}

# Keys Serow::Server->new takes besides the options.
my %SERVER_KEYS = map { $_ => 1 } qw(server_ready notify);

sub _new {
    my ($class, %args) = @_;
    my ($host, $port, $socket, $listen, $listen_sock) = delete @args{qw(host port socket listen listen_sock)};
    # Launchers hand the server options of their own (RT's rt-server its
    # --webpath, through Plack::Runner): Starman ignores them, and so does
    # Serow, with a warning naming each (a plackup typo among them).  The
    # serow command line stays strict: a typo there is the user's own.
    my @unknown = sort grep { !$SERVER_KEYS{$_} && !Serow::Options->knows($_) } keys %args;
    delete @args{@unknown};
    $args{ignored_options} = \@unknown if @unknown;
    if ($listen_sock) {
        return bless { server => Serow::Server->new(%args, listen_sockets => [$listen_sock]) }, $class;
    }
    my @listen = @{ $listen || [] };
    if (!@listen) {
        push @listen, $socket if defined $socket;
        push @listen, Serow::Options->listen_address($host, $port) if defined $port || !@listen;
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
changed (see F<docs/migrating.md>). An option Serow does not know is
ignored, with a warning in the error log naming it (and the option it may be
a typo of): launchers such as RT's C<rt-server> pass options of their own
(C<--webpath>) through L<Plack::Runner>, as to any server. The C<serow>
command line refuses such an option instead. One Serow knows but does not
support (C<-D>, C<--disable-proctitle>, ...) is an error here too, with what
to do instead. plackup's C<--enable-ssl> (C<ssl =E<gt> 1>), C<--ssl-cert> and
C<--ssl-key> are Serow's own (F<docs/tls.md>).

C<host> and C<port> (as L<Plack::Loader> passes them) work as well as
C<listen>, and so does C<listen_sock>, a listening socket already open (as
L<Plack::Test::Server> passes it).

plackup loads the app itself and hands it over, so a HUP to the master
replaces the workers with the same code; C<serow app.psgi> loads the file
afresh on HUP (a deploy: see F<docs/operations.md>). Under plackup, deploy
with Server::Starter or a restart.

=head1 TESTING AN APP THROUGH SEROW

An app's own tests can run it under a real Serow (forked workers, real
sockets, HTTP/1.1 framing) instead of in the test process.  With
L<Plack::Test>, choose the C<Server> implementation and Serow as its server:

    use Test::More;
    use Plack::Test;
    use HTTP::Request::Common;

    $Plack::Test::Impl = 'Server';   # or PLACK_TEST_IMPL=Server in the environment
    $ENV{PLACK_SERVER} = 'Serow';

    test_psgi $app, sub {
        my ($cb) = @_;
        my $res = $cb->(GET '/hello');
        is $res->code, 200;
        $res = $cb->(POST '/form', [name => 'serow']);
        like $res->content, qr/serow/;
    };
    done_testing;

L<Plack::Test::Server> binds a free port and hands the listening socket to
Serow (C<listen_sock>), so there is no port to guess.  Should Serow fail to
load, L<Plack::Loader> silently falls back to another server: a test that
must run under Serow can have the app answer with C<$0> (C<serow worker>
in a worker) and check it.

With L<Test::TCP> and L<Plack::Runner>, the server gets the options
C<plackup> would, Serow's own included:

    use Test::TCP;
    use Plack::Runner;
    use HTTP::Tiny;

    test_tcp(
        server => sub {
            my ($port) = @_;
            my $runner = Plack::Runner->new;
            $runner->parse_options('-s', 'Serow', '-E', 'deployment',
                '--listen', "127.0.0.1:$port", '--workers', 2);
            $runner->run($app);
        },
        client => sub {
            my ($port) = @_;
            my $res = HTTP::Tiny->new->get("http://127.0.0.1:$port/");
            is $res->{status}, 200;
        },
    );

Both are in Serow's own tests (F<t/plack/users_tests.t>).

=cut
