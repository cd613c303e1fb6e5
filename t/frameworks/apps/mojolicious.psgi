# Mojolicious::Lite under Serow (t/frameworks/mojolicious.t).  The routes
# every framework app here has: /hello/:name, POST /form, /json, /visits (a
# counter in the session: Mojolicious signs it into a cookie, so any worker
# reads it), /stream, and 404 for the rest; and /big for
# t/frameworks/client_gone.t.
use Mojolicious::Lite -signatures;

app->secrets(['serow framework test']);
app->log->level('warn');

get '/hello/:name' => sub ($c) { $c->render(text => 'hello ' . $c->param('name') . " from $$") };

post '/form' => sub ($c) { $c->render(text => 'form name=' . $c->param('name')) };

get '/json' => sub ($c) { $c->render(json => { framework => 'Mojolicious', numbers => [1, 2, 3] }) };

get '/visits' => sub ($c) {
    my $visits = ++$c->session->{visits};
    $c->render(text => "visits $visits");
};

# Under PSGI, Mojolicious hands the server its response as soon as the action
# returns: what write_chunk wrote by then streams out (chunked), but nothing
# written later, from a timer or a non-blocking call, ever does (the IOLoop
# does not run; such a route answers at once with an empty 404).  See
# docs/deployment.md.
get '/stream' => sub ($c) {
    $c->write_chunk("first part\n");
    $c->write_chunk("second part\n");
    $c->write_chunk('');
};

# 32 MiB, written before the action returns (see /stream): the server sends
# it in parts from the adapter's getline (t/frameworks/client_gone.t).
get '/big' => sub ($c) {
    $c->res->headers->content_type('text/plain');
    $c->write_chunk('x' x 65536) for 1 .. 512;
    $c->write_chunk('');
};

app->start;
