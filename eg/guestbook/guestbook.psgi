#!/usr/bin/perl
# A guestbook in one file, with Serow::App.  The same file runs:
#   serow eg/guestbook/guestbook.psgi            (Serow; templates compiled before fork)
#   plackup eg/guestbook/guestbook.psgi          (any PSGI server)
#   perl eg/guestbook/guestbook.psgi             (its own Serow server on 127.0.0.1:5000)
#   as a CGI script (GATEWAY_INTERFACE set)      (one request, answer on STDOUT)
# Entries go to $GUESTBOOK_FILE (default: guestbook.txt next to this file).
package Guestbook;
use strict;
use warnings;
use parent 'Serow::App';
use Fcntl qw(:flock);
use File::Basename ();

my $DIR = File::Basename::dirname(__FILE__);
my $FILE = $ENV{GUESTBOOK_FILE} // "$DIR/guestbook.txt";

# One entry a line: name, tab, message (tabs and newlines as \t, \n).
sub entries {
    open(my $fh, '<:encoding(UTF-8)', $FILE) or return ();
    flock($fh, LOCK_SH);
    my @entries;
    while (my $line = <$fh>) {
        chomp $line;
        my ($name, $message) = map { s/\\n/\n/g; s/\\t/\t/g; s/\\\\/\\/g; $_ } split /\t/, $line, 2;
        unshift @entries, { name => $name, message => $message // '' };
    }
    return @entries;
}

sub add_entry {
    my ($name, $message) = @_;
    open(my $fh, '>>:encoding(UTF-8)', $FILE) or die "cannot write $FILE: $!";
    flock($fh, LOCK_EX);
    print {$fh} join("\t", map { s/\\/\\\\/g; s/\t/\\t/g; s/\r?\n/\\n/g; $_ } $name, $message), "\n";
    close $fh or die "cannot write $FILE: $!";
}

__PACKAGE__->get('/' => sub {
    my ($c) = @_;
    return $c->render('index.html', entries => [ entries() ], pid => $$);
});

__PACKAGE__->post('/sign' => sub {
    my ($c) = @_;
    my $name = $c->param('name') // '';
    my $message = $c->param('message') // '';
    return $c->error(400, 'A name and a message, please') unless length $name && length $message;
    add_entry($name, $message);
    return $c->redirect($c->req->script_name . '/');
});

my $app = Guestbook->new(template_dir => "$DIR/templates", precompile => qr/\.html\z/);
return $app->psgi_app if caller;        # loaded by serow or plackup
if ($ENV{GATEWAY_INTERFACE}) {
    $app->run;                          # a CGI request
} else {
    $app->start(listen => [$ENV{GUESTBOOK_LISTEN} // '127.0.0.1:5000'], workers => 2);
}
