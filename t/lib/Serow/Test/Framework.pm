package Serow::Test::Framework;
use strict;
use warnings;

# The smoke test every framework app in t/frameworks/apps/ passes under a
# real serow with 2 workers: a route parameter, a POST form, JSON, a cookie
# carried over requests (any worker may answer each), a streamed response,
# the app's 404, and a HUP with no failed request.  Each app has the same
# routes; t/frameworks/NAME.t says which app and how it streams:
#   stream => 'delayed'  the first part reaches the client while the app
#                        waits on a gate (SEROW_TEST_GATE), the rest after
#   stream => 'at_once'  the whole body, chunked, once the action returned

use Exporter 'import';
our @EXPORT_OK = qw(smoke);

use JSON::PP ();
use Test::More;
use Serow::Test::Common qw(root);
use Serow::Test::Client qw(read_until_match raw_connect send_all read_response http_get);
use Serow::Test::Server qw(start_server);
use Serow::Test::Gate qw(gate);
use Serow::Test::Hammer qw(hammer);

sub request {
    my ($server, $head, $body) = @_;
    my $sock = raw_connect($server);
    my $buffer = '';
    send_all($sock, $head . "Connection: close\r\n\r\n" . ($body // ''), buffer => \$buffer);
    return read_response($sock, buffer => \$buffer);
}

sub smoke {
    my (%o) = @_;
    my $gate = gate();
    my $lib = root() . '/t/lib';
    my $server = start_server(app_file => $o{app_file}, options => ['--workers', 2],
        env => { SEROW_TEST_GATE => $gate->fd,
                 PERL5LIB => join(':', $lib, grep { defined && length } $ENV{PERL5LIB}) });
    my @workers = $server->wait_for_log_all(qr/worker (\d+) started/, 2, 120);
    is scalar(@workers), 2, "$o{name}: two workers started" or return diag $server->log;

    subtest 'a GET with a route parameter' => sub {
        my $res = http_get($server, '/hello/serow');
        is $res && $res->{status}, 200, 'status 200' or diag $server->log;
        like $res && $res->{body}, qr/^hello serow from \d+$/, 'the parameter reached the action';
    };

    subtest 'POST forms' => sub {
        # Several, each its own: a worker refills one psgi.input handle for
        # small bodies while nothing else holds it (src/psgi/psgi_env.c).
        for my $n (1 .. 6) {
            my $form = "name=form+$n%21";
            my $res = request($server, "POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: "
                . "application/x-www-form-urlencoded\r\nContent-Length: " . length($form) . "\r\n", $form);
            is $res && $res->{status}, 200, "form $n: status 200";
            is $res && $res->{body}, "form name=form $n!", "form $n: the decoded field";
        }
    };

    subtest 'a JSON response' => sub {
        my $res = http_get($server, '/json');
        like $res && $res->{headers}{'content-type'}, qr{^application/json}, 'application/json';
        is_deeply eval { JSON::PP::decode_json($res->{body}) }, { framework => $o{name}, numbers => [1, 2, 3] },
            'the document';
    };

    subtest 'a cookie over requests' => sub {
        my $cookie = '';
        for my $n (1 .. 3) {
            my $res = request($server, "GET /visits HTTP/1.1\r\nHost: x\r\n"
                . (length $cookie ? "Cookie: $cookie\r\n" : ''));
            is $res && $res->{body}, "visits $n", "visit $n";
            my ($set) = ($res && $res->{headers}{'set-cookie'} // '') =~ /^([^;]+)/;
            $cookie = $set if defined $set;
        }
    };

    subtest 'a streamed response' => sub {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
        if ($o{stream} eq 'delayed') {
            my $buffer = read_until_match($sock, qr/first part/);
            like $buffer, qr/first part\n/, 'the first part arrives while the app waits';
            unlike $buffer, qr/second part/, 'before the second is written';
            $gate->open;
            my $res = read_response($sock, buffer => \$buffer);
            is $res && $res->{body}, "first part\nsecond part\n", 'then the rest';
        } else {
            my $res = read_response($sock);
            is $res && $res->{body}, "first part\nsecond part\n", 'the whole body';
            like $res && $res->{headers}{'transfer-encoding'}, qr/chunked/, 'chunked';
        }
    };

    subtest "the framework's 404" => sub {
        my $res = http_get($server, '/no/such/route');
        is $res && $res->{status}, 404, 'status 404';
    };

    subtest 'HUP: new workers, no failed request' => sub {
        my $hammer = hammer($server, clients => 2, path => '/hello/hup', expect => qr/^hello hup from \d+$/);
        ok $hammer->wait_running, 'clients are sending requests';
        my $mark = $server->log_mark;
        $server->signal('HUP');
        my @new = $server->wait_for_log_all(qr/worker (\d+) started/, 2, 120, $mark);
        is scalar(@new), 2, 'two new workers';
        ok $server->wait_for_log(qr/worker $_ exited with status 0/, 120, $mark), "old worker $_ left"
            for @workers;
        my $result = $hammer->stop;
        cmp_ok $result->{ok}, '>', 0, "$result->{ok} requests answered meanwhile";
        is $result->{failed}, 0, 'none failed' or diag explain $result->{errors};
        my $res = http_get($server, '/hello/after');
        like $res && $res->{body}, qr/^hello after from \d+$/, 'the new workers serve the app';
    };

    is $server->stop, 0, 'serow stops cleanly' or diag $server->log;
    unlike $server->log, qr/\b(?:died|error)\b/i, 'and logged no error' or diag $server->log;
}

1;
