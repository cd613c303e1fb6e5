package Serow::App;
use strict;
use warnings;

use Carp ();
use Encode ();
use Scalar::Util ();
use Serow::App::Template ();
use Serow::App::Context ();

our %ROUTES; # class => [ route, ... ] (routes a subclass declares)
our %CACHE;  # apps ->cache keeps built in this process

# Serow::App->new(sub { my ($c) = @_; ... }, %options)   an app from a code reference
# MyApp->new(%options)                                   a subclass (routes, handle)
# Options: template_dir (default '.'), precompile (a regex), debug (errors in the 500 page).
sub new {
    my ($class, @args) = @_;
    my $handler = ref $args[0] eq 'CODE' ? shift @args : undef;
    Carp::croak('odd number of options') if @args % 2;
    _check_options(@args);
    return bless { handler => $handler, options => {@args}, routes => [] }, $class;
}

my %OPTIONS = map { $_ => 1 } qw(template_dir precompile debug);
sub _check_options {
    my (%options) = @_;
    my @unknown = grep { !$OPTIONS{$_} } sort keys %options;
    Carp::croak("unknown option(s): @unknown (known: template_dir, precompile, debug)") if @unknown;
    Carp::croak('precompile takes a regex') if defined $options{precompile} && ref $options{precompile} ne 'Regexp';
}

sub _instance { ref $_[0] ? $_[0] : $_[0]->new }

# Routes: $app->get('/path/:id' => sub { my ($c) = @_; ... }) on an instance,
# or __PACKAGE__->get(...) in a subclass.  post, put, delete and any too.
sub route {
    my ($self, $method, $path, $code) = @_;
    Carp::croak('a route needs a path and a code reference') unless defined $path && ref $code eq 'CODE';
    my @names;
    (my $re = quotemeta $path) =~ s{\\:(\w+)}{push @names, $1; '([^/]+)'}ge;
    my $route = { method => uc $method, path => $path, re => qr/\A$re\z/, names => \@names, code => $code };
    push @{ ref $self ? $self->{routes} : ($ROUTES{$self} //= []) }, $route;
    return $self;
}
sub get    { shift->route(GET    => @_) }
sub post   { shift->route(POST   => @_) }
sub put    { shift->route(PUT    => @_) }
sub delete { shift->route(DELETE => @_) }
sub any    { shift->route(ANY    => @_) }

sub _routes {
    my ($self) = @_;
    my @routes = @{ $self->{routes} };
    require mro;
    push @routes, @{ $ROUTES{$_} || [] } for @{ mro::get_linear_isa(ref $self) };
    return @routes;
}

# The template engine alone: ->core(template_dir => ...)->get_content('page.html', name => ...)
sub core {
    my ($self, %options) = @_;
    _check_options(%options);
    my %all = (ref $self ? %{ $self->{options} } : (), %options);
    my $core = Serow::App::Template->new(template_dir => $all{template_dir});
    $core->precompile($all{precompile}) if $all{precompile};
    return $core;
}

# The PSGI app.  Templates matching precompile are compiled here, so build
# (or load the .psgi file) before the server forks.
sub psgi_app {
    my ($self, %options) = @_;
    $self = $self->_instance;
    return $self->{psgi} if $self->{psgi} && !%options;
    my $core = $self->core(%options);
    my %all = (%{ $self->{options} }, %options);
    my @routes = $self->_routes;
    Carp::croak('an app needs a handler (a code reference), routes or a handle method')
        unless $self->{handler} || @routes || $self->can('handle') ne \&handle;
    my $app = sub {
        my ($env) = @_;
        my $c = Serow::App::Context->new(env => $env, app => $self, core => $core);
        my $res = eval { $self->dispatch($c, \@routes) };
        if (!defined $res && $@) {
            my $error = $@;
            $env->{'psgi.errors'}->print("Serow::App: " . $c->method . " " . $c->path . ": $error");
            return $c->error(400, 'Bad Request: the request body cannot be read')
                if Scalar::Util::blessed($error) && $error->isa('Serow::App::BadRequest');
            return [500, ['Content-Type' => 'text/plain; charset=utf-8'],
                [$all{debug} ? Encode::encode('UTF-8', $error) : "Internal Server Error\n"]];
        }
        return $c->finalize($res);
    };
    $self->{psgi} = $app unless %options;
    return $app;
}
sub build { shift->psgi_app(@_) }

# Dispatches by route; the first whose path matches and whose method is
# the request's (or ANY; HEAD runs GET routes) answers.  Else the handler
# code reference, else the handle method, else 404 (405 when only the
# method did not match).
sub dispatch {
    my ($self, $c, $routes) = @_;
    my $method = $c->method;
    my $path = $c->path;
    my $path_matched;
    for my $r (@$routes) {
        my @values = $path =~ $r->{re} or next;
        $path_matched = 1;
        next unless $r->{method} eq 'ANY' || $r->{method} eq $method
            || ($method eq 'HEAD' && $r->{method} eq 'GET');
        my %captures;
        @captures{ @{ $r->{names} } } = map { Encode::decode('UTF-8', $_) } @values # PATH_INFO comes URL-decoded
            if @{ $r->{names} };
        $c->{captures} = \%captures;
        return $r->{code}->($c);
    }
    return $self->{handler}->($c) if $self->{handler};
    return $self->handle($c) if $self->can('handle') ne \&handle;
    return $path_matched ? $c->error(405) : $c->error(404);
}

sub handle { $_[1]->error(404) }

# Serves the app with Serow: ->start(listen => ['127.0.0.1:8080'], workers => 4).
sub start {
    my ($self, %server_options) = @_;
    require Serow::Server;
    my $app = $self->psgi_app;
    return Serow::Server->new(%server_options)->run($app);
}

# Runs the app once as a CGI script: the request from the CGI environment
# and STDIN, the response on STDOUT.
sub run {
    my ($self) = @_;
    require Plack::Handler::CGI;
    my $app = $self->psgi_app;
    Plack::Handler::CGI->new->run($app);
    return 1;
}

# For a persistent interpreter that runs the script again for each request
# (PersistentPerl, mod_perl's Registry): the first call builds the app and
# keeps it in the process, the next ones return it as built.
#   MyApp->cache->run;   Serow::App->new(sub { ... })->cache->run;
# The key is the class and the place of the call (key => NAME to choose one).
sub cache {
    my ($self, %args) = @_;
    my $key = delete $args{key} // join "\0", (ref $self || $self), (caller)[1, 2];
    my $app = $CACHE{$key} //= do { my $app = ref $self ? $self : $self->new(%args); $app->psgi_app; $app };
    return $app;
}

1;
__END__

=head1 NAME

Serow::App - a small web framework: one-file apps, templates compiled before fork

=head1 SYNOPSIS

    # guestbook.psgi
    package Guestbook;
    use parent 'Serow::App';

    __PACKAGE__->get('/' => sub {
        my ($c) = @_;
        $c->render('index.html', entries => [ read_entries() ]);
    });
    __PACKAGE__->post('/sign' => sub {
        my ($c) = @_;
        add_entry($c->param('name'), $c->param('message'));
        $c->redirect('/');
    });

    my $app = Guestbook->new(template_dir => 'templates', precompile => qr/\.html\z/);
    return $app->psgi_app if caller;   # serow, plackup: the file returns the PSGI app
    $app->run;                         # perl guestbook.psgi as a CGI script

An app can as well be a code reference:

    Serow::App->new(sub { my ($c) = @_; 'Hello, ' . $c->param('name') })->start;

=head1 WAYS OF RUNNING AN APP

A synopsis for each, then the details:

    how it runs             the script says                                      started by
    ----------------------  ---------------------------------------------------  -----------------------------------
    PSGI                    return MyApp->psgi_app(%options);  # or ->build      serow app.psgi, plackup app.psgi
    its own Serow server    MyApp->new(%options)->start(workers => 4);           perl app.psgi
    CGI                     MyApp->new(%options)->run;                           the web server, each request
    persistent interpreter  MyApp->cache(%options)->run;                         the host, each request (built once)
    templates alone         MyApp->core(%options)->get_content($name, %vars)     any code: returns the text

C<MyApp> is a subclass, or C<< Serow::App->new(sub { ... }, %options) >> in
its place. F<eg/guestbook/guestbook.psgi> runs each way from one file.

=over

=item PSGI

    Guestbook->psgi_app(template_dir => 'templates', precompile => qr/\.html\z/);

The last value of the F<.psgi> file. C<build> is another name for it.
Templates matching C<precompile> are compiled now, while C<serow> loads the
file once before forking the workers: every worker shares them (copy-on-write) and compiles
nothing.

=item Its own server

    Guestbook->new(template_dir => 'templates')->start(listen => ['127.0.0.1:8080'], workers => 4);

C<< Serow::Server->new(%server_options)->run($psgi_app) >>: the options
are C<serow>'s (L<Serow::Options>), with underscores.

=item CGI

    Guestbook->new(template_dir => 'templates')->run;

One request from the CGI environment (C<REQUEST_METHOD>, C<QUERY_STRING>,
C<CONTENT_LENGTH>, ...) and STDIN, the response (C<Status:> first) on
STDOUT, through L<Plack::Handler::CGI>.

=item Persistent interpreter

    Guestbook->cache(template_dir => 'templates')->run;

C<cache> builds the app on its first call and keeps it in the process
(keyed by class and the place of the call, or C<< key => NAME >>); later
calls return the app already built, its templates already compiled.

=item Templates alone

    my $core = Serow::App->core(template_dir => 'templates');
    print $core->get_content('mail.txt', name => 'Ann');

=back

=head1 OPTIONS

=over

=item template_dir

Where templates are (default: the current directory).

=item precompile

A regex: every file under C<template_dir>, subdirectories included (by
L<File::Find>), whose path relative to it matches is compiled when the app
is built. A template that does not compile stops the build there.

=item debug

A 500 response shows the error (default: only the log, C<psgi.errors>).

=back

=head1 ROUTES

    __PACKAGE__->get('/entry/:id' => sub { my ($c) = @_; $c->capture('id') ... });
    $app->post('/sign' => sub { ... });          # on an instance
    # also put, delete, any; HEAD runs the GET route

The first route whose path and method match answers. Without a match, the
code reference given to C<new> answers, else a C<handle> method of the
subclass, else 404 (405 when a path matched with another method). Routes
are read when the app is built: declare them before C<psgi_app>.

A route answers with a string (an HTML page, C<200>, UTF-8), or a PSGI
response (an array reference), or what C<< $c->redirect >>, C<< $c->text >>,
C<< $c->error >> return.

=head1 THE CONTEXT

=over

=item $c->param($name)

A query or body parameter (urlencoded or multipart), decoded from UTF-8; in
list context all the values of the name (so write
C<< name => scalar $c->param('name') >> in a list). C<< $c->param >> lists the
names. A body that cannot be parsed (a broken multipart body) answers 400.

=item $c->upload($name)

An uploaded file (L<Plack::Request::Upload>: C<filename>, C<path>, C<size>,
C<content_type>), or undef.

=item $c->req

The L<Plack::Request>.  C<< $c->env >>, C<< $c->method >>, C<< $c->path >>.

=item $c->capture($name)

A C<:name> part of the route's path.

=item $c->render($template, %vars)

The template's output. The template sees the variables as C<< $v->{name} >>
and the context as C<$c>.

=item $c->redirect($url, $status = 303), $c->text($text, $status = 200), $c->error($status)

Responses.  C<< $c->header(Name => value) >> adds a header to the response.

=back

=head1 TEMPLATES

    <h1><%= $v->{title} %></h1>            escaped (& < > " ')
    <%== $v->{html} %>                      as it is
    <% for my $e (@{ $v->{entries} }) { %>
      <%== include('parts/entry.html', entry => $e) %>
    <% } %>
    <%# a comment %>

Templates are read as UTF-8 and compiled once per process. An error, at
compile time or while rendering, names the template's file and line.
C<< Serow::App::Template->compilations >> says how many templates the
process compiled (a worker of an app built with C<precompile>: none).
See L<Serow::App::Template>.

=cut
