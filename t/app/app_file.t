use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get find_command);

# The .psgi file must end with the app.  One that returns anything else is
# refused at start-up, naming the file and what it returned; serving it
# would answer every request with a 500.

my $dir = File::Temp->newdir;

# A server expected to refuse to start: it opens its own socket on any free
# port, so that one that starts after all serves nobody, and the test's
# wait_exit (bounded) fails instead of hanging.
sub refused_start {
    my (%args) = @_;
    return start_server(listen => 'none', options => ['--listen', '127.0.0.1:0'], %args);
}

sub app_file {
    my ($name, $code) = @_;
    my $path = "$dir/$name";
    open(my $fh, '>', $path) or die "$path: $!";
    print {$fh} $code;
    close $fh;
    return $path;
}

for my $case (
    ['returns a number', 'number.psgi', "42;\n", qr/it returned '42', not a PSGI app \(a code reference\)/],
    ['returns a hash', 'hash.psgi', "+{ app => 1 };\n", qr/it returned a HASH reference, not a PSGI app/],
    ['is empty', 'empty.psgi', '', qr/it returned undef, not a PSGI app .*is the file empty/],
) {
    my ($what, $name, $code, $message) = @$case;
    subtest "a file that $what is refused" => sub {
        my $path = app_file($name, $code);
        my $server = refused_start(app_file => $path);
        is $server->wait_exit, 2 << 8, 'exit status 2';
        like $server->log, qr/\[error\] .*cannot load \Q$path\E: $message/,
            'the error names the file and what it returned';
        unlike $server->log, qr/listening on/, 'the server never started';
    };
}

subtest 'a file that does not compile says why' => sub {
    my $path = app_file('syntax.psgi', "sub {\n");
    my $server = refused_start(app_file => $path);
    is $server->wait_exit, 2 << 8, 'exit status 2';
    like $server->log, qr/cannot load \Q$path\E: Error while loading .*syntax\.psgi: Missing right curly/,
        "the file and perl's message";
};

subtest 'an object that can be called as a code reference is an app' => sub {
    my $path = app_file('component.psgi', <<'EOT');
package Hello;
use parent 'Plack::Component';
sub call { [200, ['Content-Type' => 'text/plain'], ['hello from a component']] }
package main;
Hello->new;
EOT
    my $server = start_server(app_file => $path, options => ['--workers', 1]);
    my $res = http_get($server, '/');
    is $res && $res->{body}, 'hello from a component', 'served' or diag $server->log;
    is $server->stop, 0;
};

subtest 'plackup -s Serow refuses an app that is no code reference' => sub {
    my $plackup = find_command('plackup') or plan skip_all => 'no plackup (libplack-perl)';
    my $path = app_file('plackup.psgi', "42;\n");
    # (-E deployment: no middleware wraps the 42 in a code reference.)
    my $server = refused_start(command => [$^X, '-Mblib', $plackup, '-s', 'Serow', '-E', 'deployment',
        '--listen', '127.0.0.1:0', $path]);
    my $status = $server->wait_exit;
    ok defined $status && $status != 0, 'plackup exits non-zero';
    like $server->log, qr/the app is '42', not a PSGI app \(a code reference\)/, 'saying what the app is';
    unlike $server->log, qr/listening on/, 'the server never started';
};

done_testing;
