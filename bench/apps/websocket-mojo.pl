#!/usr/bin/perl
# bench/websocket's app for Mojolicious: /ws echoes each message, and keeps
# the connection in its process's list of subscribers; a POST to /publish
# sends its body to that list, as a Mojolicious chat without a broker does.
# Each process has its own list: under the prefork server a publish reaches
# only the clients of the worker that took the POST (Mojolicious has no
# pubsub between workers of its own; its users add Redis or PostgreSQL).
use Mojolicious::Lite -signatures;

my %subscribers;

websocket '/ws' => sub ($c) {
    # held clients are quiet between publishes: no inactivity timeout
    $c->inactivity_timeout(0);
    my $id = "$c";
    $subscribers{$id} = $c->tx;
    $c->on(message => sub ($c, $msg) { $c->send($msg) });
    $c->on(finish => sub ($c, @) { delete $subscribers{$id} });
};

post '/publish' => sub ($c) {
    my $msg = $c->req->body;
    $_->send($msg) for values %subscribers;
    $c->render(text => scalar(keys %subscribers) . "\n");
};

get '/' => { text => "ok\n" };

app->log->level('warn');
app->start;
