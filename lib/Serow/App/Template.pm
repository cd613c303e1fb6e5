package Serow::App::Template;
use strict;
use warnings;

# Templates with embedded Perl:
#   <% code %>      Perl run where it stands (loops, conditions, variables)
#   <%= expr %>     the value, HTML-escaped
#   <%== expr %>    the value as it is (HTML the template trusts)
#   <%# comment %>  nothing
# A template compiles to a Perl sub once per process (the compile cache);
# precompile compiles every matching file under template_dir ahead of time, so
# that a server that forks after it shares the compiled code copy-on-write.

use Carp ();
use Cwd ();
use File::Find ();
use File::Spec ();

# How many templates each process compiled: { pid => count }.  Keyed by pid
# so that a forked worker starts at zero whatever its parent compiled.
our %COMPILATIONS;

# The engine of the template being rendered, for include().
our $CURRENT;
our $CONTEXT;

sub new {
    my ($class, %args) = @_;
    my $dir = $args{template_dir} // '.';
    return bless { template_dir => $dir, cache => {} }, $class;
}

sub template_dir { $_[0]{template_dir} }

# How many templates this process compiled.
sub compilations { $COMPILATIONS{$$} // 0 }

sub escape {
    my ($text) = @_;
    return '' unless defined $text;
    $text =~ s/([&<>"'])/'&#' . ord($1) . ';'/ge;
    return $text;
}

# The path of template $name under template_dir; dies for names that leave it.
sub path_of {
    my ($self, $name) = @_;
    Carp::croak('no template name') unless defined $name && length $name;
    Carp::croak("bad template name '$name'")
        if File::Spec->file_name_is_absolute($name) || grep { $_ eq '..' } split m{[/\\]}, $name;
    return File::Spec->catfile($self->{template_dir}, $name);
}

# Compiles every template under template_dir (subdirectories included)
# whose path relative to template_dir matches $re; returns their names.
sub precompile {
    my ($self, $re) = @_;
    my $dir = $self->{template_dir};
    Carp::croak("template_dir $dir is not a directory") unless -d $dir;
    my @names;
    File::Find::find({ no_chdir => 1, wanted => sub {
        return unless -f $_;
        my $name = File::Spec->abs2rel($_, $dir);
        push @names, $name if $name =~ $re;
    } }, $dir);
    @names = sort @names;
    $self->compiled($_) for @names;
    return @names;
}

# The compiled sub of template $name, compiling it on first use.
sub compiled {
    my ($self, $name) = @_;
    return $self->{cache}{$name} //= $self->compile_file($name);
}

sub is_compiled { exists $_[0]{cache}{ $_[1] } }

sub compile_file {
    my ($self, $name) = @_;
    my $path = $self->path_of($name);
    open(my $fh, '<:encoding(UTF-8)', $path) or Carp::croak("cannot open template $path: $!");
    my $source = do { local $/; <$fh> };
    close $fh;
    return $self->compile($source, $path);
}

# Compiles template text to a sub ($vars, $c) returning the output.  $file
# names it in errors: the generated Perl carries #line directives, so an
# error points at the template's own file and line.
sub compile {
    my ($self, $source, $file) = @_;
    $file //= 'template';
    (my $line_file = $file) =~ s/["\r\n]/_/g;
    my $code = '';
    my $line = 1;
    my $pos = 0;
    while ($source =~ /\G(.*?)<%(==|=|\#)?(.*?)%>/gcs) {
        my ($text, $kind, $perl) = ($1, $2 // '', $3);
        # A code or comment tag alone on its line takes the line with it.
        my $alone = $kind ne '=' && $kind ne '==' && $text =~ /(?:\A|\n)[ \t]*\z/
            && $source =~ /\G[ \t]*(?:\n|\z)/gc;
        $line += ($text =~ tr/\n//);
        $text =~ s/[ \t]*\z// if $alone;
        $code .= _text($text, $line - ($text =~ tr/\n//), $line_file);
        if ($kind eq '#') {
            # nothing
        } elsif ($kind eq '') {
            $code .= qq{\n#line $line "$line_file"\n$perl;};
        } else {
            my $filter = $kind eq '=' ? 'Serow::App::Template::escape' : '';
            $code .= qq{\n#line $line "$line_file"\n\$_O .= $filter(scalar do { $perl });};
        }
        $line += ($perl =~ tr/\n//);
        $line++ if $alone && substr($source, pos($source) - 1, 1) eq "\n";
        $pos = pos $source;
    }
    $code .= _text(substr($source, $pos), $line, $line_file);
    my $sub = "package Serow::App::Template::Sandbox;\n"
        . "use strict; use warnings; no warnings 'uninitialized';\n"
        . "sub { my (\$v, \$c) = \@_; my \$_O = '';$code\n;\nreturn \$_O; }";
    my $compiled = _eval($sub);
    die $@ unless $compiled;
    $COMPILATIONS{$$}++;
    return $compiled;
}

sub _eval { eval $_[0] } ## no critic (StringyEval): compiling templates is its job

sub _text {
    my ($text, $line, $file) = @_;
    return '' unless length $text;
    $text =~ s/([\\'])/\\$1/g;
    return qq{\n#line $line "$file"\n\$_O .= '$text';};
}

# Renders template $name with variables (a hash reference or a list of
# pairs); the template sees them in $v, and the request context in $c.
sub render {
    my ($self, $name, @args) = @_;
    my $vars = @args == 1 && ref $args[0] eq 'HASH' ? $args[0] : {@args};
    my $c = $vars->{c} // $CONTEXT;
    local $CURRENT = $self;
    local $CONTEXT = $c;
    return $self->compiled($name)->($vars, $c);
}

# Oneman's name for rendering a template alone.
sub get_content { shift->render(@_) }

package Serow::App::Template::Sandbox;

# In templates: <%== include('parts/entry.html', entry => $e) %> renders
# another template with the same context ($c).
sub include {
    my ($name, @args) = @_;
    return $Serow::App::Template::CURRENT->render($name, @args);
}

1;
__END__

=head1 NAME

Serow::App::Template - templates with embedded Perl, compiled once per process

=head1 SYNOPSIS

    my $t = Serow::App::Template->new(template_dir => 'templates');
    $t->precompile(qr/\.html\z/);          # every match under templates/, subdirectories too
    print $t->render('page.html', title => 'Hi', items => [1, 2]);   # or get_content
    Serow::App::Template->compilations;    # templates this process compiled

=head1 SYNTAX

    <% Perl code %>     <%= escaped value %>     <%== raw value %>     <%# comment %>

A code or comment tag alone on its line leaves no empty line. The template
sees its variables in C<$v> (a hash reference) and the request context (if
any) in C<$c>; C<< include($name, %vars) >> renders another template. The
generated Perl carries C<#line> directives: an error names the template's
file and line. Names are relative to C<template_dir> and may not leave it.

=cut
