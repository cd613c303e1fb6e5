use strict;
use warnings;
use utf8;
use Test::More;
use File::Temp ();
use File::Path ();
use Serow::App::Template ();

binmode Test::More->builder->$_, ':encoding(UTF-8)' for qw(output failure_output todo_output);

# The template engine alone: tags, escaping, the compile cache, precompile
# over subdirectories, and errors that name the template's file and line.

my $dir = File::Temp->newdir;
sub write_file {
    my ($name, $text) = @_;
    my $path = "$dir/$name";
    (my $parent = $path) =~ s{/[^/]+\z}{};
    File::Path::make_path($parent);
    open(my $fh, '>:encoding(UTF-8)', $path) or die "$path: $!";
    print {$fh} $text;
    close $fh;
}

write_file('page.html', <<'T');
<h1><%= $v->{title} %></h1>
<%# a comment %>
<% for my $i (1 .. $v->{n}) { %>
<p><%= $i %></p>
<% } %>
<%== $v->{raw} %>|<%= undef %>|<%== include('parts/item.html', item => 'é') %>
T
write_file('parts/item.html', '<i><%= $v->{item} %></i>');
write_file('deep/er/x.html', 'deep');
write_file('notes.txt', 'not a match');
write_file('runtime_error.html', "one\ntwo <%= 1 %>\n<% my \$x = 'a'; %>\n<%= \$v->{object}->method %>\n");
write_file('syntax_error.html', "one\n<% my \$x = ; %>\n");
write_file('multi_line_code.html', "<%\n my \$a = 1;\n my \$b = 2;\n%>\n<% die 'here' %>\n");

my $t = Serow::App::Template->new(template_dir => "$dir");

subtest 'tags and escaping' => sub {
    my $out = $t->render('page.html', title => q{<a href="x">'&'</a>}, n => 2, raw => '<br>');
    is $out, "<h1>&#60;a href=&#34;x&#34;&#62;&#39;&#38;&#39;&#60;/a&#62;</h1>\n<p>1</p>\n<p>2</p>\n"
        . "<br>||<i>é</i>\n", 'escaped by default, raw with <%==, code lines leave no blank lines';
    is $t->get_content('page.html', { title => 't', n => 0, raw => '' }),
        "<h1>t</h1>\n||<i>é</i>\n", 'get_content takes a hash reference too';
};

subtest 'compile cache' => sub {
    my $t = Serow::App::Template->new(template_dir => "$dir");
    my $before = Serow::App::Template->compilations;
    $t->render('parts/item.html', item => $_) for 1 .. 3;
    is(Serow::App::Template->compilations - $before, 1, 'three renders, one compilation');
};

subtest 'precompile walks template_dir, subdirectories included' => sub {
    my $t = Serow::App::Template->new(template_dir => "$dir");
    my $before = Serow::App::Template->compilations;
    my @names = $t->precompile(qr/(?:page|item|x)\.html\z/);
    is_deeply \@names, ['deep/er/x.html', 'page.html', 'parts/item.html'], 'every match, by relative path';
    is(Serow::App::Template->compilations - $before, 3, 'each compiled once');
    ok !$t->is_compiled('notes.txt'), 'what does not match is not compiled';
    $t->render('page.html', title => 'x', n => 1, raw => '');
    is(Serow::App::Template->compilations - $before, 3, 'rendering afterwards compiles nothing');
    ok !eval { $t->precompile(qr/_error\.html\z/); 1 }, 'a template that does not compile stops precompile';
    like $@, qr/syntax_error\.html line 2/, 'and says where';
};

subtest 'errors name the template file and line' => sub {
    ok !eval { $t->render('runtime_error.html', object => undef); 1 }, 'a runtime error dies';
    like $@, qr/^Can't call method "method" on an undefined value at \Q$dir\E\/runtime_error\.html line 4\.$/,
        'with the file and line of the template';
    ok !eval { $t->render('syntax_error.html'); 1 }, 'a syntax error dies';
    like $@, qr/syntax error at \Q$dir\E\/syntax_error\.html line 2/, 'with the file and line';
    ok !eval { $t->render('multi_line_code.html'); 1 };
    like $@, qr/^here at \Q$dir\E\/multi_line_code\.html line 5\.$/, 'lines count across multi-line code';
};

subtest 'names' => sub {
    ok !eval { $t->render('../etc/passwd'); 1 }, 'a name cannot leave template_dir';
    ok !eval { $t->render('/etc/passwd'); 1 }, 'nor be absolute';
    ok !eval { $t->render('missing.html'); 1 }, 'a missing template dies';
    like $@, qr/cannot open template/;
};

subtest 'template_dir defaults to the current directory' => sub {
    require Cwd;
    my $cwd = Cwd::getcwd();
    chdir $dir or die;
    my $out = Serow::App::Template->new->render('parts/item.html', item => 'here');
    chdir $cwd or die;
    is $out, '<i>here</i>';
};

done_testing;
