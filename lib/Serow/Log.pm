package Serow::Log;
use strict;
use warnings;

use Serow ();

# The error log from Perl: each line goes to src/log/log.c, which writes the C
# code's lines too, so that both have one format, one --log-level and one
# destination: "[2026-11-22 02:20:11] [info] [pid 1234] message" on
# standard error ("<6>" before it when that is the journal), or syslog.
# (No POSIX for strftime: what the master loads is in every worker.)

sub error { Serow::log_line(Serow::LOG_ERROR, $_[1]) }
sub warn  { Serow::log_line(Serow::LOG_WARN, $_[1]) }
sub info  { Serow::log_line(Serow::LOG_INFO, $_[1]) }
sub debug { Serow::log_line(Serow::LOG_DEBUG, $_[1]) }

my %LEVEL = (error => Serow::LOG_ERROR, warn => Serow::LOG_WARN,
             info => Serow::LOG_INFO, debug => Serow::LOG_DEBUG);

# syslog's facility when none is named: Serow is a daemon, and the daemon
# facility is where syslog configurations put daemons (Debian's rsyslog
# writes it to /var/log/daemon.log); user is for user programs.
use constant DEFAULT_FACILITY => 'daemon';

# --error-log syslog or syslog:FACILITY: the facility, or undef for a file.
# Dies, naming the option, for a facility syslog has no name for.  (A file
# called "syslog" is ./syslog.)
sub syslog_facility {
    my ($class, $error_log) = @_;
    return undef unless defined $error_log && $error_log =~ /\Asyslog(?::(.*))?\z/s;
    my $facility = $1 // DEFAULT_FACILITY;
    Serow::log_facility($facility) >= 0
        or die "--error-log: '$error_log': '$facility' is not a syslog facility Serow logs to "
            . "(user, daemon, local0 to local7)\n";
    return $facility;
}

# The file --error-log names, or undef (none, or syslog).
sub file {
    my ($class, $error_log) = @_;
    return undef if !defined $error_log || defined $class->syslog_facility($error_log);
    return $error_log;
}

# --log-level and --error-log syslog, for every process the master forks
# from now on (and itself).  Called once standard error is where it stays
# (--error-log FILE opened): whether it is the journal is looked at here.
sub configure {
    my ($class, $options) = @_;
    my $facility = $class->syslog_facility($options->{error_log});
    Serow::log_configure($LEVEL{ $options->{log_level} }, $facility, $options->{syslog_socket})
        or die "--syslog-socket: '$options->{syslog_socket}' is too long for a socket's path\n";
    return;
}

# --error-log FILE: standard error (the log, and whatever the app prints
# there) appended to $path; again on USR1, after logrotate moved the file
# away.  False (with $!) when it cannot be opened: standard error is then
# unchanged.
sub open_file {
    my ($class, $path) = @_;
    open(my $fh, '>>', $path) or return 0;
    open(STDERR, '>&', $fh) or return 0;
    STDERR->autoflush(1);
    return 1;
}

1;
__END__

=head1 NAME

Serow::Log - the error log: levels, journald, syslog

=head1 DESCRIPTION

C<< Serow::Log->error($message) >>, C<< ->warn >>, C<< ->info >> and
C<< ->debug >> write one line each, through the same C as the connection
holder's and the worker's own lines (F<src/log/log.c>):
C<[2026-11-22 02:20:11] [info] [pid 1234] message> on standard error, which
C<--error-log FILE> reopens on a file (C<< Serow::Log->open_file >>; USR1
opens it again). Lines less important than C<--log-level> are dropped.

When standard error is the journal (systemd's C<JOURNAL_STREAM> names its
device and inode), each line starts with its syslog priority, C<< <3> >>
to C<< <7> >>, which journald takes as the record's level (sd-daemon(3)).
With C<--error-log syslog> or C<syslog:FACILITY>, lines go to the syslog
socket (C<--syslog-socket>, F</dev/log> by default) instead, as
C<serow[PID]: [level] message> at that priority and facility (daemon by
default).

C<< Serow::Log->configure($options) >> sets all this once, in the master
before it forks.

=cut
