package Serow::Test::Trace;
use strict;
use warnings;

# The system calls a Serow worker makes while a test talks to it, seen with
# strace(8) (tools/setup installs it).  A test attaches to the worker, waits
# for strace to say it is attached (no sleep), does its requests, then makes
# the app call mark(): a write strace logs like any other.  A traced process
# stops at the end of each system call until strace has logged it, so once
# the response of the request that marked is in, every call before the mark
# is in the log; the calls after it may not be, and are not returned.

use Exporter 'import';
use File::Temp ();
use POSIX ();
use Serow::Test::Client qw(read_until_match);
use Serow::Test::Process qw(child_pids);

our @EXPORT_OK = qw(have_strace worker_pids trace_syscalls mark client_writes);

use constant ATTACH_TIMEOUT => 30;
use constant MARK => 'serow-trace-mark';

# Called by the app being traced: the end of what the test looks at.
sub mark {
    open(my $null, '>', '/dev/null') or die "/dev/null: $!";
    syswrite($null, MARK);
    close $null;
}

# The calls traced: whatever can put bytes on a socket or read a file.
my @SYSCALLS = qw(write writev pwrite64 pwritev send sendto sendmsg sendmmsg sendfile
                  read readv pread64 preadv);

sub have_strace {
    return !system('strace -V >/dev/null 2>&1');
}

# A master's workers (Serow::Test::Process::child_pids), under the name
# the tests that trace one know.
sub worker_pids { child_pids(@_) }

# The calls that write to clients: not the log (fd 2), and not the 8-byte
# eventfd write with which a worker that becomes busy wakes the connection
# holder (docs/keepalive.md).
my $WRITE_CALL = qr/\A(?:write|writev|pwrite64|pwritev|send|sendto|sendmsg|sendmmsg|sendfile)\z/;

sub client_writes {
    return grep {
        $_->{name} =~ $WRITE_CALL && ($_->{fd} // -1) != 2
            && !($_->{name} eq 'write' && $_->{args} =~ /\A\d+, "\\1\\0\\0\\0\\0\\0\\0\\0", 8\z/)
    } @_;
}

# Runs $code while strace watches process $pid; $code must end with a
# request whose app calls mark().  Returns the calls made before the mark:
# a list of { name, fd, args (the text between the parentheses), result }.
# Option until_mark => 0: every call logged (for a process that runs no app,
# such as the connection holder: $code ends once the test has seen the
# effect of the last call it looks at, which strace had logged by then).
sub trace_syscalls {
    my ($pid, $code, %opt) = @_;
    my $log = File::Temp->new;
    pipe(my $notes_read, my $notes_write) or die "pipe: $!";
    my $strace = fork // die "fork: $!";
    if ($strace == 0) {
        close $notes_read;
        POSIX::dup2(fileno($notes_write), 2) or POSIX::_exit(111);
        { exec 'strace', '-f', '-s', '32', '-e', 'trace=' . join(',', @SYSCALLS),
            '-e', 'signal=none', '-o', $log->filename, '-p', $pid }
        POSIX::_exit(112);
    }
    close $notes_write;
    my $notes = read_until_match($notes_read, qr/attached/, ATTACH_TIMEOUT);
    if ($notes !~ /attached/) {
        kill 'KILL', $strace;
        waitpid($strace, 0);
        die "strace did not attach to $pid: $notes";
    }
    my $ok = eval { $code->(); 1 };
    my $error = $@;
    kill 'INT', $strace; # detaches and writes the rest of its log
    waitpid($strace, 0);
    die $error unless $ok;
    my @calls = parse_log(do { local $/; my $fh = $log; seek($fh, 0, 0); <$fh> });
    return @calls if defined $opt{until_mark} && !$opt{until_mark};
    my $mark = MARK;
    for my $i (0 .. $#calls) {
        return @calls[0 .. $i - 1] if $calls[$i]{args} =~ /\Q$mark/;
    }
    die "the trace has no mark: did the last request's app call mark()?\n";
}

sub parse_log {
    my ($text) = @_;
    my (@calls, %unfinished);
    for my $line (split /\n/, $text) {
        my $pid = $line =~ s/\A(\d+)\s+// ? $1 : 0;
        # a call interrupted by another process's: "<unfinished ...>", then
        # "<... writev resumed>"
        if ($line =~ /\A(.*) <unfinished \.\.\.>\z/) {
            $unfinished{$pid} = $1;
            next;
        }
        if ($line =~ /\A<\.\.\. \w+ resumed>(.*)\z/) {
            $line = ($unfinished{$pid} // next) . $1;
            delete $unfinished{$pid};
        }
        # a call strace had not seen end when it detached (the bytes of a
        # send may have reached the client already: strace lags behind a
        # busy machine): "sendto(19, ..., 0 <detached ...>"
        if ($line =~ /\A(\w+)\((.*?)\s*<detached \.\.\.>\z/) {
            my ($name, $args) = ($1, $2);
            my ($fd) = $args =~ /\A(\d+)/;
            push @calls, { pid => $pid, name => $name, fd => $fd, args => $args, result => '?' };
            next;
        }
        my ($name, $args, $result) = $line =~ /\A(\w+)\((.*)\)\s+=\s+(-?\d+|\?)/ or next;
        my ($fd) = $args =~ /\A(\d+)/;
        push @calls, { pid => $pid, name => $name, fd => $fd, args => $args, result => $result };
    }
    return @calls;
}

1;
