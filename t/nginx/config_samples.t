use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Net::EmptyPort qw(empty_port);
use Serow::Test qw(need_debian_packages);
use Serow::Test::Nginx;
use Serow::Test::NginxConfig qw(samples main);

# The nginx configurations in eg/nginx/ (shown in docs/deployment.md) are
# what Serow::Test::NginxConfig makes, the generator the other tests here
# run nginx with, and nginx accepts them (nginx -t).  After a change to the
# generator: SEROW_WRITE_NGINX_SAMPLES=1 prove -b t/nginx/config_samples.t

need_debian_packages('nginx');

my %samples = samples();
for my $file (sort keys %samples) {
    my $path = "eg/nginx/$file";
    if ($ENV{SEROW_WRITE_NGINX_SAMPLES}) {
        open my $fh, '>', $path or die "$path: $!";
        print {$fh} $samples{$file};
        close $fh;
    }
    my $text = do { local $/; open my $fh, '<', $path or die "$path: $!"; <$fh> };
    is $text, $samples{$file}, "$path is what the tests run";

    # nginx -t binds the listen addresses: port 80 needs root, so a test
    # that is not root checks the same file on a free port instead.
    my $checked = $> == 0 ? $text : $text =~ s/^(\s*listen\s+)80;/$1 . empty_port() . ';'/gemr;
    my $dir = File::Temp->newdir;
    open my $fh, '>', "$dir/nginx.conf" or die $!;
    print {$fh} main(dir => "$dir", site => $checked);
    close $fh;
    my $out = do { local $ENV{LD_PRELOAD}; delete $ENV{LD_PRELOAD};
        `@{[Serow::Test::Nginx::nginx_binary()]} -t -p $dir -c $dir/nginx.conf -e $dir/error.log 2>&1` };
    is $?, 0, "nginx -t accepts $path" or diag $out;
}

done_testing;
