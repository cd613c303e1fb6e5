use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get serow_command wait_until);

# Standard error connected to the journal: systemd says so in JOURNAL_STREAM
# ("DEVICE:INODE" of that stream, systemd.exec(5)), and every line then
# starts with its syslog priority, "<3>" to "<7>" (sd-daemon(3)), which
# journald records as its level; each line of a message of several lines
# too, since journald makes a record of each.  Here standard error is a
# file whose device and inode the test puts in JOURNAL_STREAM: what Serow
# looks at is the same.  Another stream's numbers, or none, and there is no
# prefix.

my $dir = File::Temp->newdir;
my $app_file = "$dir/app.psgi";
open(my $fh, '>', $app_file) or die;
print {$fh} <<'APP';
sub {
    my ($env) = @_;
    die "the app failed\non two lines\n" if $env->{PATH_INFO} eq '/die';
    [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
}
APP
close $fh;

sub slurp { open(my $in, '<', $_[0]) or return ''; local $/; <$in> }

# Serow with its standard error on $log and JOURNAL_STREAM as given (undef:
# not set); asks /die, stops; returns what $log got.
sub run_with_stderr {
    my ($log, $journal_stream) = @_;
    my $env = defined $journal_stream ? { JOURNAL_STREAM => $journal_stream } : {};
    my $server = start_server(env => $env, command => ['sh', '-c', 'f=$1; shift; exec "$@" 2>>"$f"', 'sh', $log,
        serow_command('--workers', 1, '--log-level', 'debug', $app_file)]);
    ok wait_until(sub { slurp($log) =~ /worker \d+ started/ }), 'the server runs' or diag slurp($log);
    is http_get($server, '/die')->{status}, 500, 'the app dies: an error line';
    ok wait_until(sub { slurp($log) =~ /on two lines/ }), 'logged';
    is $server->stop, 0, 'stops cleanly';
    return slurp($log);
}
delete $ENV{JOURNAL_STREAM}; # (a test run from a systemd service's shell)

subtest 'standard error is the journal: a priority on every line' => sub {
    my $log = "$dir/journal.log";
    open(my $create, '>', $log) or die;
    close $create;
    my ($dev, $ino) = stat $log;
    my $text = run_with_stderr($log, "$dev:$ino");
    my @lines = split /\n/, $text;
    my @bare = grep { !/\A<[0-7]>/ } @lines;
    is_deeply \@bare, [], 'every line starts with <N>' or diag $text;
    like $text, qr/^<6>\[[^]]+\] \[info\] .*listening on/m, 'info: <6>';
    like $text, qr/^<7>\[[^]]+\] \[debug\] .*connection holder \d+ started/m, "debug: <7> (the holder's C)";
    like $text, qr/^<7>\[[^]]+\] \[debug\] .*forked worker/m, "debug: <7> (the master's Perl)";
    like $text, qr{^<3>\[[^]]+\] \[error\] .*GET /die: the app died: the app failed\n<3>on two lines$}m,
        'error: <3>, on each of its lines';
};

subtest 'JOURNAL_STREAM of another stream: no prefix' => sub {
    my $log = "$dir/not-journal.log";
    my $other = "$dir/other";
    open(my $create, '>', $other) or die;
    close $create;
    my ($dev, $ino) = stat $other;
    my $text = run_with_stderr($log, "$dev:$ino");
    like $text, qr/^\[[^]]+\] \[info\] .*listening on/m, 'the lines as ever';
    unlike $text, qr/^</m, 'none with a priority';
};

subtest 'no JOURNAL_STREAM: no prefix' => sub {
    my $text = run_with_stderr("$dir/plain.log", undef);
    like $text, qr/^\[[^]]+\] \[error\] .*GET \/die/m, 'the lines as ever';
    unlike $text, qr/^</m, 'none with a priority';
};

done_testing;
