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

open(my $oh, '>', "$out.tmp") or die "rewrite_cu.pl: cannot write $out: $!\n";
print $oh "#line 1 \"$in\"\n", $src;
close($oh) or die "rewrite_cu.pl: cannot write $out: $!\n";
rename("$out.tmp", $out) or die "rewrite_cu.pl: cannot rename to $out: $!\n";
