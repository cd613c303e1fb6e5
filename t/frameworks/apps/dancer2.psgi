# Dancer2 under Serow (t/frameworks/dancer2.t).  The routes every framework
# app here has: /hello/:name, POST /form, /json, /visits (a counter in a
# cookie: Dancer2's own sessions live in one process's memory, which two
# workers do not share), /stream (delayed: the first part goes out before
# the test opens the gate), and 404 for the rest; and /big for
# t/frameworks/client_gone.t.
use strict;
use warnings;
use Dancer2;
use Serow::Test ();

set logger => 'console';
set log => 'warning';

get '/hello/:name' => sub { 'hello ' . route_parameters->get('name') . " from $$" };

post '/form' => sub { 'form name=' . body_parameters->get('name') };

get '/json' => sub {
    content_type 'application/json';
    return to_json({ framework => 'Dancer2', numbers => [1, 2, 3] });
};

get '/visits' => sub {
    my $cookie = cookie('visits');
    my $visits = ($cookie ? $cookie->value : 0) + 1;
    cookie visits => $visits;
    return "visits $visits";
};

get '/stream' => sub {
    delayed {
        content_type 'text/plain';
        flush;
        content "first part\n";
        Serow::Test::Gate->from_fd($ENV{SEROW_TEST_GATE})->wait;
        content "second part\n";
        done;
    };
};

# 100 MB, a delayed response's content in 64 KiB parts: each part a write
# of the server's writer (t/frameworks/client_gone.t).  Dancer2 logs a
# delayed response that dies as an error.
get '/big' => sub {
    delayed {
        content_type 'text/plain';
        flush;
        content 'x' x 65536 for 1 .. 1600;
        done;
    };
};

to_app;
