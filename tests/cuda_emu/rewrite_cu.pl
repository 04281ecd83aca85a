#!/usr/bin/perl
# rewrite_cu.pl IN.cu OUT.cpp -- turns one of our CUDA sources into host C++ for the SIMT
# emulator: `kernel<<<grid, block[, smem[, stream]]>>>(args)` becomes
# `::gpt_emu::launch(kernel, grid, block, smem, stream)(args)` and the dynamic shared
# memory declaration points at the emulator's buffer. Everything else compiles as is
# against tests/cuda_emu/include. A #line keeps diagnostics pointing at the original file.
use strict;
use warnings;

my ($in, $out) = @ARGV;
die "usage: rewrite_cu.pl IN OUT\n" unless defined $out;
open(my $fh, '<', $in) or die "rewrite_cu.pl: cannot read $in: $!\n";
my $src = do { local $/; <$fh> };
close($fh);

my $launches = ($src =~ s/([A-Za-z_][\w:]*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(/::gpt_emu::launch($1, $2)(/gs);
$src =~ s/extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w ]+?)\s+(\w+)\s*\[\s*\]\s*;/$1* $2 = reinterpret_cast<$1*>(::gpt_emu::g_dynamic_smem);/g;
die "rewrite_cu.pl: $in still has a launch the pattern missed\n" if $src =~ /<<</;
# A kernel's __launch_bounds__(max threads[, min blocks]) becomes a check at the top of its
# body: launched with a larger block, the kernel fails as on a GPU (too many resources
# requested: ptxas sized its registers for the bound).
sub launch_bounds_check {
    my ($args, $decl) = @_;
    my ($max) = split /,/, $args;
    my $open = chr(123);  # the body's opening brace
    return "$decl$open ::gpt_emu::check_launch_bounds($max);";
}
$src =~ s/__launch_bounds__\(([^()]*)\)(\s+[A-Za-z_]\w*\s*\([^{};]*\)\s*)\{/launch_bounds_check($1, $2)/ge;
# Static shared memory (function statics here) is poisoned per block, as a GPU leaves it
# garbage: each declaration is followed by ::gpt_emu::poison_static_shared for each name.
$src =~ s{\b__shared__\s+((?:__align__\(\d+\)\s+)?(?:(?:unsigned|signed|const|volatile)\s+)*[A-Za-z_][\w:]*)\s+([^;{}()]+);}{
    my ($type, $decls) = ($1, $2);
    my @names = map { /^\s*([A-Za-z_]\w*)/ ? $1 : die "rewrite_cu.pl: $in: cannot parse __shared__ $decls\n" }
                split /,/, $decls;
    "__shared__ $type $decls; " . join(' ', map { "::gpt_emu::poison_static_shared(&$_, sizeof($_));" } @names)
}ge;

open(my $oh, '>', "$out.tmp") or die "rewrite_cu.pl: cannot write $out: $!\n";
print $oh "#line 1 \"$in\"\n", $src;
close($oh) or die "rewrite_cu.pl: cannot write $out: $!\n";
rename("$out.tmp", $out) or die "rewrite_cu.pl: cannot rename to $out: $!\n";
