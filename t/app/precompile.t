use strict;
use warnings;
use Test::More;
use File::Temp ();
use File::Path ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response http_get gate);
use Serow::App;

# precompile => qr/\.html\z/ compiles the templates when the app is built,
# before the server forks: each worker of a real multi-worker Serow server
# renders every template and has compiled none itself (the count is per
# process, keyed by pid).  Without precompile, a worker compiles on first use.

use constant WORKERS => 3;

my $dir = File::Temp->newdir;
for (['page.html', 'page <%= $v->{n} %>'], ['sub/dir/deep.html', 'deep <%= $v->{n} %>'], ['other.html', 'other']) {
    my ($name, $text) = @$_;
    File::Path::make_path("$dir/" . ($name =~ m{(.*)/} ? $1 : ''));
    open(my $fh, '>', "$dir/$name") or die;
    print {$fh} $text;
    close $fh;
}

my $gate = gate();
my $built_in = $$;
sub app {
    my (%options) = @_;
    my $app = Serow::App->new(sub {
        my ($c) = @_;
        if ($c->path eq '/hold') {
            print STDERR "holding $$\n";
            $gate->wait;
        }
        my $out = join ' ', map { $c->render($_, n => 1) } 'page.html', 'sub/dir/deep.html', 'other.html';
        return $c->text(sprintf "pid=%d compiled=%d built-in=%d %s\n", $$,
            Serow::App::Template->compilations, $built_in, $out);
    }, template_dir => "$dir", %options);
    return $app->psgi_app;
}

subtest 'precompiled before fork: no worker compiles' => sub {
    my $before = Serow::App::Template->compilations;
    my $app = app(precompile => qr/\.html\z/);
    is(Serow::App::Template->compilations - $before, 3, 'building compiled the 3 templates, subdirectories included');

    my $server = start_server(app => $app, options => ['--workers', WORKERS]);
    is scalar($server->wait_for_log_all(qr/worker (\d+) started/, WORKERS)), WORKERS, 'the workers started'
        or return diag $server->log;
    # One request held in each worker: a worker busy with one takes no other,
    # so WORKERS held requests are in WORKERS different workers.
    my @socks = map {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        $sock;
    } 1 .. WORKERS;
    my @holding = $server->wait_for_log_all(qr/holding (\d+)\n/, WORKERS);
    is scalar(@holding), WORKERS, 'every worker holds a request';
    $gate->open(WORKERS);
    my %seen;
    for my $sock (@socks) {
        my $res = read_response($sock);
        is $res && $res->{status}, 200, 'answered';
        my ($pid, $compiled, $built) = ($res->{body} // '') =~ /\Apid=(\d+) compiled=(\d+) built-in=(\d+) page 1 deep 1 other\n\z/
            or fail("unexpected: " . ($res->{body} // '')), next;
        $seen{$pid}++;
        isnt $pid, $built, "worker $pid is not the process that built the app";
        is $compiled, 0, "worker $pid rendered every template and compiled none";
    }
    is scalar(keys %seen), WORKERS, 'from ' . WORKERS . ' different workers';
    is $server->stop, 0, 'the server stops cleanly';
};

subtest 'without precompile, a worker compiles on first use, once' => sub {
    my $server = start_server(app => app(), options => ['--workers', 1]);
    my $first = http_get($server, '/');
    like $first->{body}, qr/\Apid=\d+ compiled=3 /, 'the first request compiles the 3 templates';
    like http_get($server, '/')->{body}, qr/\Apid=\d+ compiled=3 /, 'the next one compiles nothing more';
    is $server->stop, 0;
};

done_testing;
