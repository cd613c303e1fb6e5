use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get);

# The ways of running an app other than psgi_app: ->start (a Serow server
# with server options), ->run (one CGI request) and ->cache->run (a
# persistent interpreter that runs the script again for each request: the
# app is built, and its templates compiled, once).

my $ROOT = Serow::Test::root();
my @PERL = ($^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch");
my $dir = File::Temp->newdir;
{ open(my $fh, '>', "$dir/hi.html") or die; print {$fh} 'hi <%= $v->{who} %>'; close $fh }

subtest '->start(%server_options) serves with Serow' => sub {
    my $code = <<'PERL';
use Serow::App;
Serow::App->new(sub { $_[0]->render('hi.html', who => $$) }, template_dir => $ARGV[0], precompile => qr/html/)
    ->start(workers => 3, max_requests => 50);
PERL
    my $server = start_server(command => [@PERL, '-e', $code, "$dir"]);
    ok $server->wait_for_log(qr/listening on .* with 3 workers/), 'the server options apply'
        or return diag $server->log;
    my $res = http_get($server, '/');
    is $res->{status}, 200;
    like $res->{body}, qr/\Ahi \d+\z/, 'the app answers';
    is $server->stop, 0, 'stops cleanly';
};

# Runs $code in a new perl with CGI variables for GET $path_info; returns
# what it printed.
sub run_script {
    my ($code, @requests) = @_;
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open(STDIN, '<', '/dev/null') or die;
        delete @ENV{grep { /^(?:HTTP_|SERVER_STARTER|CONTENT_)/ } keys %ENV};
        %ENV = (%ENV, GATEWAY_INTERFACE => 'CGI/1.1', REQUEST_METHOD => 'GET', SCRIPT_NAME => '/app.cgi',
            QUERY_STRING => '', SERVER_NAME => 'localhost', SERVER_PORT => 80, SERVER_PROTOCOL => 'HTTP/1.0');
        exec @PERL, '-e', $code, "$dir", @requests or die "exec: $!";
    }
    my $raw = do { local $/; <$out> };
    close $out;
    is $?, 0, 'the script exits 0';
    return $raw;
}

subtest '->run: one CGI request' => sub {
    my $raw = run_script(<<'PERL', '/who');
use Serow::App;
$ENV{PATH_INFO} = $ARGV[1];
Serow::App->new(sub { $_[0]->render('hi.html', who => $_[0]->path) }, template_dir => $ARGV[0])->run;
PERL
    like $raw, qr{\AStatus: 200[^\n]*\r?\nContent-Type: text/html; charset=utf-8\r?\n\r?\nhi /who\z},
        'the CGI response on stdout';
};

# The "script", run three times by the same interpreter as a persistent CGI
# host would; each run prints how many templates the process has compiled.
sub persistent {
    my ($run) = @_;
    my $raw = run_script(<<"PERL", '/a', '/b', '/c');
use Serow::App;
my (\$dir, \@paths) = \@ARGV;
my \$script = sub {
    Serow::App->new(sub {
        my (\$c) = \@_;
        \$c->render('hi.html', who => \$c->path . ' compiled ' . Serow::App::Template->compilations);
    }, template_dir => \$dir, precompile => qr/\\.html\\z/)->$run;
};
for my \$path (\@paths) {
    \$ENV{PATH_INFO} = \$path;
    \$script->();
    print "\\n--\\n";
}
PERL
    return [ map { /\r?\n\r?\n(.*)\z/s ? $1 : $_ } split /\n--\n/, $raw ];
}

subtest '->cache->run: built once in a persistent interpreter' => sub {
    is_deeply persistent('cache->run'), ['hi /a compiled 1', 'hi /b compiled 1', 'hi /c compiled 1'],
        'three requests, one app: its template compiled once';
    is_deeply persistent('run'), ['hi /a compiled 1', 'hi /b compiled 2', 'hi /c compiled 3'],
        'without cache, each run builds the app again';
};

done_testing;
