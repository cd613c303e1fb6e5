package Serow::App::Context;
use strict;
use warnings;

# What a route gets: the request (parameters, uploads), the template
# engine, and helpers that make responses.

use Encode ();
use Plack::Request ();

sub new {
    my ($class, %args) = @_;
    return bless { %args, headers => [] }, $class;
}

sub env    { $_[0]{env} }
sub app    { $_[0]{app} }
sub core   { $_[0]{core} }
sub req    { $_[0]{req} //= Plack::Request->new($_[0]{env}) }
sub method { $_[0]{env}{REQUEST_METHOD} }
sub path   { my $p = $_[0]{env}{PATH_INFO}; defined $p && length $p ? $p : '/' }

sub capture { $_[0]{captures}{ $_[1] } }

# Parses the query and the body once; a body that cannot be parsed (a
# broken multipart, a truncated body) is the client's error: 400.
sub _parse {
    my ($self) = @_;
    return if $self->{parsed}++;
    eval { $self->req->parameters; $self->req->uploads; 1 }
        or die Serow::App::BadRequest->new($@);
}

# Query and body parameters (urlencoded or multipart), decoded from UTF-8.
sub param {
    my ($self, $name) = @_;
    $self->_parse;
    my $params = $self->req->parameters;
    return map { Encode::decode('UTF-8', $_) } keys %$params unless defined $name;
    my @values = map { Encode::decode('UTF-8', $_) } $params->get_all($name);
    return wantarray ? @values : $values[-1];
}

sub upload {
    my ($self, $name) = @_;
    $self->_parse;
    return $self->req->upload($name);
}

sub render {
    my ($self, $name, @args) = @_;
    my %vars = @args == 1 && ref $args[0] eq 'HASH' ? %{ $args[0] } : @args;
    return $self->{core}->render($name, { %vars, c => $self });
}

sub header {
    my ($self, $name, $value) = @_;
    push @{ $self->{headers} }, $name, $value;
    return $self;
}

sub redirect {
    my ($self, $url, $status) = @_;
    return [$status // 303, ['Location' => $url, 'Content-Type' => 'text/plain'], ["See $url\n"]];
}

sub text {
    my ($self, $text, $status) = @_;
    return [$status // 200, ['Content-Type' => 'text/plain; charset=utf-8'], [Encode::encode('UTF-8', $text)]];
}

my %REASON = (400 => 'Bad Request', 403 => 'Forbidden', 404 => 'Not Found', 405 => 'Method Not Allowed',
              500 => 'Internal Server Error');

sub error {
    my ($self, $status, $message) = @_;
    return $self->text(($message // $REASON{$status} // "Error $status") . "\n", $status);
}

# A route's answer as a PSGI response: a string is an HTML page.
sub finalize {
    my ($self, $res) = @_;
    if (ref $res eq 'ARRAY' || ref $res eq 'CODE') {
        push @{ $res->[1] }, @{ $self->{headers} } if ref $res eq 'ARRAY' && @{ $self->{headers} };
        return $res;
    }
    $res //= '';
    return [200, ['Content-Type' => 'text/html; charset=utf-8', @{ $self->{headers} }],
        [Encode::encode('UTF-8', "$res")]];
}

package Serow::App::BadRequest;

# What dies when the request cannot be parsed; the app answers 400.
sub new { my ($class, $error) = @_; bless { error => $error }, $class }
sub error { $_[0]{error} }
use overload '""' => sub { "bad request: $_[0]{error}" }, fallback => 1;

1;
__END__

=head1 NAME

Serow::App::Context - the request context a Serow::App route gets ($c)

=head1 DESCRIPTION

See L<Serow::App/THE CONTEXT>.

=cut
