package Serow::Test::Hammer;
use strict;
use warnings;

# hammer($target, clients => 2, path => '/', expect => qr/.../): processes
# that send GET requests, each on a new connection, until stopped (or
# max_seconds / max_requests pass).  ->wait_running waits for every client's
# first answer; ->stop returns { ok, failed, errors => [first few] }.

use Exporter 'import';
use IO::Handle ();
use IO::Select ();
use POSIX ();
use Time::HiRes ();
use Serow::Test::Common qw(READ_TIMEOUT STOP_TIMEOUT);
use Serow::Test::Client qw(http_get);

our @EXPORT_OK = qw(hammer);

sub hammer { __PACKAGE__->new(@_) }

sub new {
    my ($class, $target, %opts) = @_;
    my $self = bless { clients => [], reports => {} }, $class;
    pipe(my $stop_r, my $stop_w) or die "pipe: $!";
    pipe(my $report_r, my $report_w) or die "pipe: $!";
    $report_w->autoflush(1);
    for (1 .. $opts{clients} // 2) {
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            close $stop_w;
            close $report_r;
            my $status = eval { _client($target, $stop_r, $report_w, %opts); 1 } ? 0 : 1;
            print {$report_w} "result 0 1 client died: $@\n" if $status;
            POSIX::_exit($status);
        }
        push @{ $self->{clients} }, $pid;
    }
    close $stop_r;
    close $report_w;
    @$self{qw(stop_w report_r)} = ($stop_w, $report_r);
    return $self;
}

sub _client {
    my ($target, $stop, $report, %opts) = @_;
    my $deadline = Time::HiRes::time + ($opts{max_seconds} // 120);
    my $max = $opts{max_requests} // 100_000;
    my $expect = $opts{expect} // qr/\A/;
    my $stopped = IO::Select->new($stop);
    my ($ok, $failed, @errors) = (0, 0);
    while ($ok + $failed < $max && Time::HiRes::time < $deadline && !$stopped->can_read(0)) {
        my $res = eval { http_get($target, $opts{path} // '/') };
        if ($res && $res->{status} == 200 && $res->{body} =~ $expect) {
            print {$report} "running\n" if !$ok++;
        } else {
            $failed++;
            push @errors, $@ ? "no connection: $@" : $res ? "status $res->{status}: $res->{body}"
                : 'no response' if @errors < 5;
        }
    }
    s/\s+/ /g for @errors;
    print {$report} join(' ', 'result', $ok, $failed, join(' | ', @errors)), "\n";
}

sub _read_reports {
    my ($self, $timeout) = @_;
    my $sel = IO::Select->new($self->{report_r});
    return 0 unless $sel->can_read($timeout);
    my $n = sysread($self->{report_r}, my $chunk, 65536);
    return 0 unless $n;
    $self->{buffer} .= $chunk;
    while ($self->{buffer} =~ s/\A([^\n]*)\n//) {
        my $line = $1;
        if ($line eq 'running') { $self->{running}++ }
        elsif ($line =~ /\Aresult (\d+) (\d+) ?(.*)\z/) { push @{ $self->{results} }, [$1, $2, $3] }
    }
    return 1;
}

# Waits until every client has had one answer; returns whether they have.
sub wait_running {
    my ($self, $timeout) = @_;
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    # A client that finished has said "running" before its result, unless it
    # never had an answer: count those, not every result, or a fast client
    # would be counted twice while another's "running" is still unread.
    while (($self->{running} // 0) + (grep { $_->[0] == 0 } @{ $self->{results} || [] })
            < @{ $self->{clients} }) {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0;
        $self->_read_reports($left);
    }
    return ($self->{running} // 0) == @{ $self->{clients} };
}

sub stop {
    my ($self) = @_;
    syswrite($self->{stop_w}, 'x');
    my $deadline = Time::HiRes::time + STOP_TIMEOUT;
    while (@{ $self->{results} || [] } < @{ $self->{clients} } && Time::HiRes::time < $deadline) {
        $self->_read_reports($deadline - Time::HiRes::time);
    }
    $self->_reap;
    my %total = (ok => 0, failed => 0, errors => []);
    for (@{ $self->{results} || [] }) {
        $total{ok} += $_->[0];
        $total{failed} += $_->[1];
        push @{ $total{errors} }, $_->[2] if length $_->[2];
    }
    $total{failed} += @{ $self->{clients} } - @{ $self->{results} || [] }; # a client that never answered
    return \%total;
}

sub _reap {
    my ($self) = @_;
    for my $pid (@{ $self->{clients} }) {
        kill 'KILL', $pid;
        waitpid($pid, 0);
    }
    $self->{clients_reaped} = 1;
}

sub DESTROY {
    my ($self) = @_;
    local ($?, $@, $!);
    $self->_reap unless $self->{clients_reaped};
}

1;
