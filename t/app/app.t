use strict;
use warnings;
use utf8;
use Test::More;
use Plack::Test;
use HTTP::Request::Common qw(GET POST HEAD PUT);
use Encode ();
use File::Temp ();
use Serow::App;

# Serow::App in the process (Plack::Test): routes, the context, parameters
# (query, urlencoded, multipart) and uploads, responses, errors; core and cache.

binmode Test::More->builder->$_, ':encoding(UTF-8)' for qw(output failure_output todo_output);

my $dir = File::Temp->newdir;
sub write_file { open(my $fh, '>', "$dir/$_[0]") or die; print {$fh} $_[1]; close $fh }
write_file('hello.html', 'Hello <%= $v->{name} %> from <%= $c->path %>');
write_file('plain.html', 'Hello <%= $v->{name} %>');
write_file('broken.html', "fine\n<%= \$v->{nothing}->call %>\n");

{
    package My::App;
    use parent -norequire, 'Serow::App';
    __PACKAGE__->get('/' => sub { $_[0]->render('hello.html', name => 'class') });
    __PACKAGE__->get('/entry/:id/:part' => sub {
        my ($c) = @_;
        return $c->text(join ',', $c->capture('id'), $c->capture('part'));
    });
    __PACKAGE__->post('/entry/:id/:part' => sub { $_[0]->text('posted') });
    __PACKAGE__->get('/params' => sub {
        my ($c) = @_;
        return $c->text(join ';', map { "$_=" . join(',', $c->param($_)) } sort $c->param);
    });
    __PACKAGE__->post('/params' => sub {
        my ($c) = @_;
        return $c->text(join ';', map { "$_=" . join(',', $c->param($_)) } sort $c->param);
    });
    __PACKAGE__->post('/upload' => sub {
        my ($c) = @_;
        my $u = $c->upload('file') or return $c->error(400, 'no file');
        open(my $fh, '<:raw', $u->path) or die;
        my $content = do { local $/; <$fh> };
        return $c->text(join '|', $u->filename, $u->size, $u->content_type, $content, $c->param('title'));
    });
    __PACKAGE__->get('/broken' => sub { $_[0]->render('broken.html') });
    __PACKAGE__->get('/psgi' => sub { [201, ['Content-Type' => 'text/plain'], ['raw psgi']] });
    __PACKAGE__->get('/header' => sub { $_[0]->header('X-Test' => 'yes'); 'with a header' });
    __PACKAGE__->any('/any' => sub { $_[0]->text($_[0]->method) });
    __PACKAGE__->get('/go' => sub { $_[0]->redirect('/there') });
}

my $app = My::App->new(template_dir => "$dir")->psgi_app;

test_psgi $app, sub {
    my ($cb) = @_;
    my $res = $cb->(GET '/');
    is $res->code, 200;
    is $res->content_type, 'text/html', 'a string is an HTML page';
    is $res->content, 'Hello class from /', 'rendered with variables and the context';

    is $cb->(GET '/entry/42/%C3%A9t%C3%A9')->decoded_content, '42,été', 'captures, decoded';
    is $cb->(GET '/entry/%2541/x')->content, '%41,x', 'PATH_INFO comes unescaped: not unescaped twice';
    is $cb->(POST '/entry/1/x')->content, 'posted', 'the route of the method';
    is $cb->(PUT '/entry/1/x')->code, 405, 'a path with routes for other methods: 405';
    is $cb->(GET '/nowhere')->code, 404, 'no route: 404';
    my $head = $cb->(HEAD '/');
    is $head->code, 200, 'HEAD runs the GET route';
    is $cb->(PUT '/any')->content, 'PUT', 'any takes every method';

    is $cb->(GET '/params?a=1&b=%C3%A9&a=2')->decoded_content, 'a=1,2;b=é', 'query parameters, decoded, all values';
    is $cb->(POST '/params?q=1', [name => 'Zoë', list => 'x', list => 'y'])->decoded_content,
        'list=x,y;name=Zoë;q=1', 'urlencoded body and query together';
    is $cb->(POST '/params', Content_Type => 'form-data', Content => [name => 'Ann', n => 7])->content,
        'n=7;name=Ann', 'multipart fields';

    my $upload = $cb->(POST '/upload', Content_Type => 'form-data', Content => [
        title => 'a file',
        file => [undef, 'notes.txt', 'Content-Type' => 'text/plain', Content => "line 1\nline 2\0binary"],
    ]);
    is $upload->content, "notes.txt|20|text/plain|line 1\nline 2\0binary|a file", 'an upload: name, size, type, content';
    is $cb->(POST '/upload', [title => 'x'])->code, 400, 'no upload: undef';

    is $cb->(GET '/psgi')->code, 201, 'a PSGI response passes as it is';
    is $cb->(GET '/header')->header('X-Test'), 'yes', 'header adds to the response';
    my $redirect = $cb->(GET '/go');
    is $redirect->code, 303, 'redirect';
    is $redirect->header('Location'), '/there';
};

subtest 'an error: 500, logged with the template file and line' => sub {
    my $errors = '';
    open(my $err_fh, '>', \$errors) or die;
    my $res;
    test_psgi app => sub { $_[0]{'psgi.errors'} = $err_fh; $app->($_[0]) },
        client => sub { $res = $_[0]->(GET '/broken') };
    is $res->code, 500;
    is $res->content, "Internal Server Error\n", 'no details by default';
    like $errors, qr{GET /broken: Can't call method "call" on an undefined value at \Q$dir\E/broken\.html line 2\.},
        'the log names the template and line';
    my $debug = My::App->new(template_dir => "$dir", debug => 1)->psgi_app;
    test_psgi app => sub { $_[0]{'psgi.errors'} = $err_fh; $debug->($_[0]) },
        client => sub { $res = $_[0]->(GET '/broken') };
    like $res->content, qr{at \Q$dir\E/broken\.html line 2\.}, 'debug => 1 shows it in the page';
};

subtest 'a body that cannot be parsed: 400' => sub {
    my $errors = '';
    open(my $err_fh, '>', \$errors) or die;
    test_psgi app => sub { $_[0]{'psgi.errors'} = $err_fh; $app->($_[0]) }, client => sub {
        my ($cb) = @_;
        my $req = HTTP::Request->new(POST => '/params', ['Content-Type' => 'multipart/form-data',
            'Content-Length' => 5], 'abcde');
        my $res = $cb->($req);
        is $res->code, 400, 'a multipart body without a boundary';
        like $res->content, qr/\ABad Request/;
        is $cb->(POST '/params', [a => 1])->code, 200, 'the next request is fine';
    };
    like $errors, qr{POST /params: bad request: }, 'logged';
};

subtest 'an app from a code reference, with instance routes' => sub {
    my $app = Serow::App->new(sub {
        my ($c) = @_;
        return $c->render('hello.html', name => scalar $c->param('name'));
    }, template_dir => "$dir");
    $app->get('/special' => sub { 'special' });
    test_psgi $app->build, sub {
        my ($cb) = @_;
        is $cb->(GET '/x?name=%3Cb%3E')->content, 'Hello &#60;b&#62; from /x', 'the handler takes what no route takes';
        is $cb->(GET '/special')->content, 'special', 'routes first';
    };
    test_psgi(Serow::App->new(sub { 'é' })->psgi_app, sub {
        my $res = $_[0]->(GET '/');
        is $res->header('Content-Type'), 'text/html; charset=utf-8';
        is $res->content, Encode::encode('UTF-8', 'é'), 'encoded as UTF-8';
    });
    ok !eval { Serow::App->new->psgi_app; 1 }, 'an app with nothing to answer is an error';
    ok !eval { Serow::App->new(sub { 1 }, template_die => 'x'); 1 }, 'an unknown option is an error';
    like $@, qr/unknown option\(s\): template_die/, 'that names it';
    ok !eval { Serow::App->new(sub { 1 }, precompile => '.html'); 1 }, 'precompile takes a regex';
};

subtest 'a subclass with a handle method' => sub {
    {
        package My::Handle;
        use parent -norequire, 'Serow::App';
        sub handle { my ($self, $c) = @_; $c->text("handled " . $c->path) }
    }
    test_psgi(My::Handle->psgi_app, sub { is $_[0]->(GET '/a/b')->content, 'handled /a/b' });
};

subtest 'core: the template engine alone' => sub {
    is(Serow::App->core(template_dir => "$dir")->get_content('plain.html', name => 'core'),
        'Hello core', 'get_content without a request');
    my $app = My::App->new(template_dir => "$dir");
    is $app->core->get_content('plain.html', { name => 'x' }), 'Hello x', 'with the options of the app';
};

subtest 'cache keeps the built app in the process' => sub {
    my @apps;
    my $before = Serow::App::Template->compilations;
    for (1 .. 3) {
        push @apps, My::App->cache(template_dir => "$dir", precompile => qr/hello/);
    }
    is $apps[0], $apps[1], 'the same app each time';
    is $apps[1], $apps[2];
    is $apps[0]->psgi_app, $apps[2]->psgi_app, 'built once';
    is(Serow::App::Template->compilations - $before, 1, 'its templates compiled once');
    isnt(My::App->cache(template_dir => "$dir"), $apps[0], 'another place of call, another app');
    is(My::App->cache(key => 'k', template_dir => "$dir"), My::App->cache(key => 'k'), 'or the same key');
};

done_testing;
