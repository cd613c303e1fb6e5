# The C core's exported names carry the serow_ prefix: the shared object a
# Perl process loads exports boot_Serow and serow_* only, never a bare
# parse_request_head that another library loaded beside it could also have.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test ();

my $ROOT = Serow::Test::root();
my ($so) = glob "$ROOT/blib/arch/auto/Serow/Serow.so";
ok $so, 'the build made the shared object' or BAIL_OUT('no blib/arch/auto/Serow/Serow.so: run make');
my $nm = Serow::Test::find_command('nm') or plan skip_all => 'nm (Debian: binutils) is not installed';

my @defined = map { (split ' ')[-1] } grep { /\s[TDBR]\s/ } `"$nm" -D --defined-only "$so"`;
is $?, 0, 'nm read its dynamic symbols';
ok scalar(grep { /^serow_/ } @defined), 'it exports serow_ functions';
my @bare = grep { !/^(?:serow_|boot_Serow\z|_)/ } @defined;
is_deeply \@bare, [], 'every other exported name has the serow_ prefix'
    or diag "exported without the prefix: @bare";

done_testing;
