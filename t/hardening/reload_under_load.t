use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages);

# Reloads under load, short form (bench/reload-under-load runs 30 s with 5
# reloads): wrk keeps 64 connections busy while the server is reloaded
# twice, by start_server's HUP, by Serow's own HUP, by TTIN/TTOU, and by
# deploys (the app file rewritten, then HUP).  Every request gets a 2xx
# answer; no socket fails (a reset is a read or write error); a deploy's
# bodies are each one version's, whole.

need_debian_packages('wrk', 'libserver-starter-perl');
require Serow::Test::ReloadUnderLoad;

for my $kind (Serow::Test::ReloadUnderLoad::kinds()) {
    subtest "$kind under load" => sub {
        my $r = Serow::Test::ReloadUnderLoad::reload_under_load(kind => $kind, seconds => 6, reloads => 2,
            connections => 64, workers => 4);
        is $r->{error}, undef, 'wrk ran' or return diag $r->{wrk_output};
        is_deeply $r->{reload_failures}, [], 'both reloads happened';
        cmp_ok $r->{responses}, '>', 0, "$r->{responses} responses";
        is $r->{non2xx}, 0, 'all 2xx';
        is $r->{$_}, 0, "no $_ error" for qw(connect read write timeout);
        is_deeply $r->{server_errors}, [], 'the server logged no error';
        return unless $kind eq 'deploy';
        is $r->{mixed}, 0, 'every body is one version\'s, whole';
        # (The last version may have had little time on a slow machine.)
        like $r->{versions}, qr/\A1,2\b/, "the old and the new code answered (versions $r->{versions})";
    };
}

done_testing;
