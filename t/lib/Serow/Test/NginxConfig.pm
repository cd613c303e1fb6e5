package Serow::Test::NginxConfig;
use strict;
use warnings;

# nginx configurations for Serow, as text: the one the tests put in front of
# Serow (t/nginx, Serow::Test::Nginx), the one the benchmark uses
# (bench/lib/Serow/Bench/Servers.pm), and the samples in eg/nginx/ that docs/deployment.md
# shows (t/nginx/config_samples.t checks that those are what site() makes, so
# the configuration people copy is the one the tests run).
#
#   site(%o)        the "upstream" and "server" blocks: what goes into
#                   /etc/nginx/conf.d/ on a real host
#   main(%o)        a whole nginx.conf that runs from one directory as the
#                   current user, in the foreground, every path inside it

use Exporter 'import';
our @EXPORT_OK = qw(site main samples);

# Idle upstream connections each nginx worker keeps to Serow.  Enough for
# the requests one nginx worker has in flight at once; more only holds
# descriptors in Serow's connection holder.
use constant UPSTREAM_KEEPALIVE => 32;

# nginx must close an idle upstream connection before Serow does
# (--keepalive-timeout, default 75): a request nginx sends on a
# connection Serow is closing at that moment fails, and nginx does not
# retry a POST (it is not idempotent), so the client would get a 502.
# 60 s is nginx's own default for it: the line says so explicitly, so that
# whoever lowers Serow's sees what must stay below it.
use constant UPSTREAM_KEEPALIVE_TIMEOUT => '60s';

# Requests on one upstream connection before nginx opens a new one.  High:
# Serow has no reason to have its connections recycled (0 = no limit in
# Serow's own --max-keepalive-requests).
use constant UPSTREAM_KEEPALIVE_REQUESTS => 10000;

sub _address {
    my ($address) = @_;
    return $address =~ m{^/} ? "unix:$address" : $address;
}

# site(listen => 'HOST:PORT' | '/path.sock', and one of
#        upstream => 'HOST:PORT' | '/path.sock' | [several],
#        body => TEXT (nginx answers itself: return 200 "TEXT"),
#        root => DIR (static files);
#      keepalive => N, keepalive_timeout => '4s', keepalive_requests => N,
#      request_buffering => 1 | 0, name => 'serow' (the upstream's name),
#      server_params => 'max_fails=2 fail_timeout=5s' (after each server),
#      live => '/events' (a location for held requests, docs/holding.md:
#        responses not buffered, a longer read timeout),
#      comments => 1 (explain each setting, for the samples))
sub site {
    my (%o) = @_;
    my $listen = _address($o{listen} // 80);
    my $c = $o{comments} ? sub { join '', map { "$_[0]# $_\n" } split /\n/, $_[1] } : sub { '' };
    my ($upstream, $location) = ('', '');
    if (defined $o{body}) {
        (my $text = $o{body}) =~ s/(["\\\$])/\\$1/g;
        $location = "        return 200 \"$text\";\n";
    } elsif (defined $o{root}) {
        $location = "        root $o{root};\n";
    } else {
        my $name = $o{name} // 'serow';
        my @servers = ref $o{upstream} ? @{ $o{upstream} } : ($o{upstream} // '127.0.0.1:5000');
        $upstream = "upstream $name {\n"
            . (@servers > 1 ? $c->('    ', "A host that fails max_fails times is left out for fail_timeout.") : '')
            . join('', map { "    server " . _address($_) . ($o{server_params} ? " $o{server_params}" : '') . ";\n" } @servers)
            . (($o{keepalive} // 1) ? $c->('    ', "Idle connections to Serow each nginx worker keeps open and reuses:\n"
                . "no connect per request, and no TIME_WAIT sockets piling up.")
            . "    keepalive " . ($o{keepalive} // UPSTREAM_KEEPALIVE) . ";\n"
            . $c->('    ', "Below Serow's --keepalive-timeout (default 75): nginx closes an\n"
                . "idle connection before Serow does, so it never sends a request on a\n"
                . "connection Serow is closing (a POST sent there would end in a 502).")
            . "    keepalive_timeout " . ($o{keepalive_timeout} // UPSTREAM_KEEPALIVE_TIMEOUT) . ";\n"
            . "    keepalive_requests " . ($o{keepalive_requests} // UPSTREAM_KEEPALIVE_REQUESTS) . ";\n"
              : '') # keepalive => 0: a new connection for each request (tests compare)
            . "}\n\n";
        $location = "        proxy_pass http://$name;\n"
            . $c->('        ', "Keep-alive to the upstream needs HTTP/1.1 and no \"Connection: close\".")
            . "        proxy_http_version 1.1;\n"
            . "        proxy_set_header Connection \"\";\n"
            . $c->('        ', "For Plack::Middleware::ReverseProxy: the client's address, host and scheme.\n"
                . "X-Forwarded-For also tells Serow the request is not local: its status page\n"
                . "and --metrics-path refuse it (docs/status.md).")
            . "        proxy_set_header Host \$host;\n"
            . "        proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;\n"
            . "        proxy_set_header X-Forwarded-Proto \$scheme;\n"
            . $c->('        ', "on: nginx reads the whole body before it passes the request on, so a\n"
                . "slow upload holds no Serow worker.  off: the body streams through to\n"
                . "Serow as it comes (chunked if the client sent it chunked): no temp file\n"
                . "in nginx, but a slow upload holds a Serow worker.")
            . "        proxy_request_buffering " . (($o{request_buffering} // 1) ? 'on' : 'off') . ";\n"
            . $c->('        ', "Responses are buffered (the default): a slow client holds nginx, not a\n"
                . "Serow worker.  A streaming response sends \"X-Accel-Buffering: no\".");
    }
    my $extra = $o{server_extra} // '';
    my $live = defined $o{live} && length $upstream ? _live_location($o{live}, $location, $c) : '';
    return "${upstream}server {\n    listen $listen;\n$extra    location / {\n$location    }\n$live}\n";
}

# Longer than a held request stays quiet (docs/holding.md): a stream's
# Grip-Keep-Alive timeout, a long poll's Grip-Timeout (55 s by default).
use constant LIVE_READ_TIMEOUT => '120s';

# The location of held requests (server-sent events, long polls): the proxy
# lines of location / ($location), with the response passed on as it comes.
sub _live_location {
    my ($path, $location, $c) = @_;
    $location =~ s/^ *#.*\n//mg;
    return "\n    location $path {\n"
        . $c->('        ', "As location /, and:")
        . $location
        . $c->('        ', "Each event passed on as it comes, not held until nginx's buffer fills.\n"
            . "A slow client still holds no Serow worker: the connection holder keeps\n"
            . "held connections, with their pending output bounded.")
        . "        proxy_buffering off;\n"
        . $c->('        ', "Longer than a held request stays quiet: a stream's Grip-Keep-Alive\n"
            . "timeout, a long poll's Grip-Timeout (55 s by default).  Past it nginx\n"
            . "closes the connection (EventSource reconnects).")
        . "        proxy_read_timeout " . LIVE_READ_TIMEOUT . ";\n"
        . "    }\n";
}

# main(dir => DIR, site => TEXT (or the options of site()),
#      connections => worker_connections, rlimit_nofile => N, comment => TEXT,
#      access_log => 0 (none: the benchmark))
# A whole nginx.conf: one worker, in the foreground, pid, logs and temp
# files under DIR (which must exist), runs as whoever starts it.
sub main {
    my (%o) = @_;
    my $dir = $o{dir} or die "main: no dir\n";
    my $site = $o{site} // site(%o);
    $site =~ s/^(?=.)/    /mg;
    my $conns = $o{connections} // 1024;
    my $user = $> == 0 ? "user root;\n" : ''; # root would otherwise switch to nobody
    my $rlimit = $o{rlimit_nofile} ? "worker_rlimit_nofile $o{rlimit_nofile};\n" : '';
    my $comment = $o{comment} // 'generated by Serow::Test::NginxConfig';
    my $access_log = ($o{access_log} // 1) ? "$dir/access.log" : 'off';
    return <<"EOF";
# $comment
${user}worker_processes 1;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
$rlimit
events { worker_connections $conns; }
http {
    access_log $access_log;
    default_type text/plain;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    client_max_body_size 0;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
$site}
EOF
}

# The samples in eg/nginx/: file name => what site() makes for it.
sub samples {
    my $head = "# Generated by t/lib/Serow/Test/NginxConfig.pm (see docs/deployment.md);\n"
        . "# t/nginx/ runs this configuration in front of Serow.\n";
    return (
        'serow-tcp.conf' => $head . "# Serow started with: serow --listen 127.0.0.1:5000 app.psgi\n\n"
            . site(listen => 80, upstream => '127.0.0.1:5000', comments => 1),
        'serow-unix.conf' => $head . "# Serow started with: serow --listen /run/serow/serow.sock app.psgi\n"
            . "# (the socket writable by nginx's user: --socket-mode 0666, or a shared group)\n\n"
            . site(listen => 80, upstream => '/run/serow/serow.sock', comments => 1),
        'serow-live.conf' => $head . "# Serow started with: serow --grip --listen 127.0.0.1:5000 eg/live/live.psgi\n"
            . "# (held requests, docs/holding.md: location /events is eg/live's stream)\n\n"
            . site(listen => 80, upstream => '127.0.0.1:5000', live => '/events', comments => 1),
        'serow-hosts.conf' => $head . "# Several hosts, each running serow --listen 0.0.0.0:5000 app.psgi\n\n"
            . site(listen => 80, upstream => ['10.0.0.11:5000', '10.0.0.12:5000', '10.0.0.13:5000'],
                server_params => 'max_fails=2 fail_timeout=5s', comments => 1),
    );
}

1;
