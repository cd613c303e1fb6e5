package SerowTestCat::Controller::Root;
# The routes every framework app in t/frameworks/apps has: /hello/:name,
# POST /form, /json, /visits (a counter in a cookie), /stream (the first
# part goes out before the test opens the gate), and 404 for the rest.
use strict;
use warnings;
use JSON::PP ();
use Serow::Test ();
use base 'Catalyst::Controller';

__PACKAGE__->config(namespace => '');

sub hello :Path('hello') :Args(1) {
    my ($self, $c, $name) = @_;
    $c->res->content_type('text/plain');
    $c->res->body("hello $name from $$");
}

sub form :Path('form') :Args(0) {
    my ($self, $c) = @_;
    $c->res->content_type('text/plain');
    $c->res->body('form name=' . $c->req->body_parameters->{name});
}

sub json :Path('json') :Args(0) {
    my ($self, $c) = @_;
    $c->res->content_type('application/json');
    $c->res->body(JSON::PP::encode_json({ framework => 'Catalyst', numbers => [1, 2, 3] }));
}

sub visits :Path('visits') :Args(0) {
    my ($self, $c) = @_;
    my $cookie = $c->req->cookie('visits');
    my $visits = ($cookie ? $cookie->value : 0) + 1;
    $c->res->cookies->{visits} = { value => $visits };
    $c->res->content_type('text/plain');
    $c->res->body("visits $visits");
}

sub stream :Path('stream') :Args(0) {
    my ($self, $c) = @_;
    $c->res->content_type('text/plain');
    $c->res->write("first part\n");
    Serow::Test::Gate->from_fd($ENV{SEROW_TEST_GATE})->wait;
    $c->res->write("second part\n");
}

sub default :Path {
    my ($self, $c) = @_;
    $c->res->status(404);
    $c->res->content_type('text/plain');
    $c->res->body('not found');
}

1;
