#!/usr/bin/env bash
# `cmake --install` gives a tree that works after it is moved, and the modulefile puts
# gpt_pretrain on PATH in a non-interactive shell, both installed and from the checkout.
set -euo pipefail
build=$1; src=$2
init=/usr/share/modules/init/bash
[ -f "$init" ] || { echo "FAIL: environment-modules is not installed ($init missing); scripts/setup.sh installs it"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/first" > "$tmp/install.log"
mv "$tmp/first" "$tmp/moved"
grep -rl "$build" "$tmp/moved/share" && { echo "FAIL: the installed tree refers to the build folder"; exit 1; }

check() {  # check LABEL MODULEPATH: load the module in a fresh non-interactive shell
  env -i HOME="$HOME" PATH=/usr/bin:/bin bash --norc --noprofile -c "
    set -e
    source $init
    module use '$2'
    module load gpt-pretrain
    command -v gpt_pretrain
    gpt_pretrain --help | grep -q num-attention-heads
    test -f \"\$GPT_PRETRAIN_CONFIGS/gpt-tiny.ini\"
    test -f \"\$GPT_PRETRAIN_SLURM/gpt22b.sbatch\"
    gpt_pretrain --config \"\$GPT_PRETRAIN_CONFIGS/gpt-tiny.ini\" --vocab-size 50257 --dry-run > /dev/null
  " > "$tmp/$1.log" 2>&1 || { echo "FAIL: $1"; cat "$tmp/$1.log"; exit 1; }
  echo "ok   $1: $(head -1 "$tmp/$1.log")"
}
check installed-and-moved "$tmp/moved/share/modulefiles"
grep -q "$tmp/moved/bin/gpt_pretrain" "$tmp/installed-and-moved.log" || { echo "FAIL: not the moved binary"; exit 1; }
check source-checkout "$src/modules"
grep -q "$src/build" "$tmp/source-checkout.log" || grep -q "/app/gpt_pretrain" "$tmp/source-checkout.log" || { echo "FAIL: not the checkout's binary"; exit 1; }
# Prerequisites: with site modules mpich, cuda and hdf5 available, loading gpt-pretrain
# loads them, unloading it unloads those it loaded but keeps one the user loaded first
# (tests/install/lmod_test.sh checks the same under Lmod).
for m in mpich cuda hdf5; do mkdir -p "$tmp/site/$m"; printf '#%%Module1.0\nsetenv FAKE_%s 1\n' "$m" > "$tmp/site/$m/1.0"; done
env -i HOME="$HOME" PATH=/usr/bin:/bin bash --norc --noprofile -c "
  set -e
  source $init
  listed() { module -t list 2>&1 | grep -v '^Currently\\|^No Modulefiles' | sort | tr '\n' ' '; }
  module use '$tmp/moved/share/modulefiles'; module use '$tmp/site'
  module load gpt-pretrain
  [ \"\$(listed)\" = 'cuda/1.0 gpt-pretrain/0.1.0 hdf5/1.0 mpich/1.0 ' ] || { echo \"loaded: \$(listed)\"; exit 1; }
  module unload gpt-pretrain
  [ -z \"\$(listed)\" ] || { echo \"after unload: \$(listed)\"; exit 1; }
  module load mpich; module load gpt-pretrain; module unload gpt-pretrain
  [ \"\$(listed)\" = 'mpich/1.0 ' ] || { echo \"after unload, mpich loaded first: \$(listed)\"; exit 1; }
" > "$tmp/prerequisites.log" 2>&1 || { echo "FAIL: prerequisites"; cat "$tmp/prerequisites.log"; exit 1; }
echo "ok   prerequisites: mpich, cuda, hdf5 loaded with gpt-pretrain and unloaded with it"
echo PASS
