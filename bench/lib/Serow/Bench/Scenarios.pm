package Serow::Bench::Scenarios;
use strict;
use warnings;

# The throughput scenarios (every server in turn under wrk: hello, close,
# 8 KiB, 2.4 MB file, POST, streaming, behind nginx over a UNIX socket), and
# the measurements they share with the keep-alive scenarios of
# Serow::Bench::Fairness: one wrk run of a server, one behind nginx.

use File::Basename ();
use File::Path ();
use Serow::Bench::Config qw($BENCH $WARMUP $DURATION tmpdir);
use Serow::Bench::Cpu qw(probe_start probe_end);
use Serow::Bench::Load qw(wrk passive_opens);
use Serow::Bench::Process qw(stop group_processes);
use Serow::Bench::Results qw(rounds servers_for check_alive);
use Serow::Bench::Servers qw(workers_of with_server start_behind_nginx);
use Serow::Bench::Util qw(median ensure);

use Exporter 'import';
our @EXPORT_OK = qw(measure_behind_nginx);

# One wrk measurement of a server started with %start; warm-up first.
sub measure_wrk {
    my ($server, %o) = @_;
    return with_server($server, $o{start}, sub {
        my ($p) = @_;
        my %w = (addr => $p->{listen}, path => $o{path} // '/', conns => $o{conns},
            close => $o{close}, script => $o{script});
        wrk(%w, duration => $WARMUP);
        my $opens = passive_opens();
        my $probe = probe_start($p);
        my $r = wrk(%w, duration => $DURATION, sample => !$o{close} && !$o{close_mode} && $server ne 'hsp');
        probe_end($probe, $r, $r->{requests});
        my $opens_after = passive_opens();
        $r->{conn_per_req} = ($opens_after - $opens) / $r->{requests} if $r->{requests} && defined $opens;
        check_alive($p);
        die "no request was answered: " . ($r->{output} =~ s/\s+/ /gr) . "\n" unless $r->{requests} > 0;
        $o{after}->($p, $r) if $o{after};
        $r;
    });
}

# One wrk measurement through nginx in front of the server
# (Serow::Bench::Servers::start_behind_nginx); warm-up first.
sub measure_behind_nginx {
    my ($server, %o) = @_;
    my ($front, $b) = start_behind_nginx($server, %o);
    return ensure(sub {
        wrk(addr => $front->{listen}, path => '/', conns => $o{conns}, duration => $WARMUP);
        my $probe = probe_start($front, $b);
        my $r = wrk(addr => $front->{listen}, path => '/', conns => $o{conns}, duration => $DURATION);
        probe_end($probe, $r, $r->{requests});
        check_alive($b);
        check_alive($front);
        die "no request was answered\n" unless $r->{requests} > 0;
        $r;
    }, sub { stop($front); stop($b) });
}

sub throughput {
    my ($scenario, %o) = @_;
    my @servers = servers_for($scenario);
    rounds($scenario, \@servers, sub {
        my ($server) = @_;
        my %start = (app => $o{app}, close_mode => $o{close_mode}, path => $o{path},
            nginx => $o{nginx});
        return measure_wrk($server, start => \%start, conns => $o{conns} // 16, path => $o{path},
            close => $o{close}, close_mode => $o{close_mode}, script => $o{script}, after => $o{after});
    });
}

sub hello_keepalive {
    throughput('hello_keepalive', app => 'hello', nginx => { body => 'Hello World' },
        after => sub {
            my ($p, $r) = @_;
            # worker RSS after the run: the same app in every server
            my @procs = group_processes($p);
            my @workers = workers_of($p->{name}, $p, @procs);
            $r->{worker_rss} = median(map { $_->{rss} } @workers);
            $r->{worker_pss} = median(map { $_->{pss} } @workers);
            $r->{all_rss} = 0;
            $r->{all_rss} += $_->{rss} for @procs;
            $r->{all_pss} = 0;
            $r->{all_pss} += $_->{pss} for @procs;
            $r->{processes} = scalar @procs;
            $r->{nworkers} = scalar @workers;
        });
}

sub hello_close {
    throughput('hello_close', app => 'hello', close => 1, close_mode => 1,
        nginx => { body => 'Hello World' });
}

sub body_8k {
    # nginx's configuration takes no 8 KiB string: it serves the same bytes
    # from a file instead.
    my $dir = tmpdir() . "/static8k";
    File::Path::make_path($dir);
    open my $fh, '>', "$dir/body8k" or die "$dir/body8k: $!\n";
    print {$fh} 'x' x 8192;
    close $fh;
    chmod 0644, "$dir/body8k";
    throughput('body_8k', app => 'body8k', path => '/body8k', nginx => { root => $dir });
}

my $BIG_FILE;
sub big_file {
    return $BIG_FILE if $BIG_FILE;
    my $dir = tmpdir() . "/static";
    File::Path::make_path($dir);
    $BIG_FILE = "$dir/big.bin";
    open my $fh, '>', $BIG_FILE or die "$BIG_FILE: $!\n";
    binmode $fh;
    my $block = join '', map { chr(($_ * 7 + 3) % 256) } 0 .. 65535;
    my $size = 2_400_000;
    print {$fh} substr($block x (int($size / 65536) + 1), 0, $size);
    close $fh;
    chmod 0644, $BIG_FILE;
    $ENV{SEROW_BENCH_FILE} = $BIG_FILE;
    return $BIG_FILE;
}

sub file_2_4mb {
    my $file = big_file();
    throughput('file_2_4mb', app => 'file', conns => 4, path => '/big.bin',
        nginx => { root => File::Basename::dirname($file) });
}

sub post_64k {
    # nginx answers without reading the body into anything: a ceiling only.
    throughput('post_64k', app => 'post', script => "$BENCH/apps/post.lua",
        nginx => { body => 'read 65536 bytes' });
}

sub streaming {
    throughput('streaming', app => 'stream', close_mode => 1);
}

sub behind_nginx_unix {
    my @servers = servers_for('behind_nginx_unix');
    rounds('behind_nginx_unix', \@servers, sub {
        my ($server) = @_;
        return measure_behind_nginx($server, app => 'hello', unix => 1, conns => 16, workers => 4);
    });
}

1;
