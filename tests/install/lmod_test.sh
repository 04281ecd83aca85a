#!/usr/bin/env bash
# The Tcl modulefile also works under Lmod. Debian's lmod package conflicts with
# environment-modules, so scripts/setup.sh only downloads lmod_*.deb (and installs Lmod's
# dependencies); this test unpacks it into a temporary folder and runs Lmod from there
# against the installed (and moved) tree, then against the source checkout.
#   Usage: lmod_test.sh BUILD_DIR SOURCE_DIR      (GPT_LMOD_DEB=path/to/lmod.deb to override)
set -euo pipefail
build=$1; src=$2
cache=${GPT_LMOD_CACHE:-/var/cache/gpt-pretrain}
deb=${GPT_LMOD_DEB:-$(ls "$cache"/lmod_*.deb 2>/dev/null | tail -1 || true)}
[ -n "$deb" ] && [ -f "$deb" ] || {
  echo "FAIL: Lmod's package is missing (no lmod_*.deb in $cache, GPT_LMOD_DEB not set); scripts/setup.sh downloads it (apt-get download lmod)"; exit 1; }
command -v lua5.3 >/dev/null && lua5.3 -e 'require("posix"); require("lfs"); require("json"); require("term")' 2>/dev/null || {
  echo "FAIL: Lmod's dependencies are missing (lua5.3 lua-posix lua-filesystem lua-json lua-term); scripts/setup.sh installs them"; exit 1; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
start=$SECONDS

# Unpack Lmod and relocate it. libexec/lmod finds its own folder, but init/bash (LMOD_PKG,
# LMOD_CMD, ...) and tcl2lua.tcl (the lmod it runs for the Tcl `is-avail`) name
# /usr/share/lmod: rewrite those two files in the unpacked copy only.
dpkg -x "$deb" "$tmp/lmod" || { echo "FAIL: cannot unpack $deb (dpkg -x); rerun scripts/setup.sh after deleting it"; exit 1; }
root=$tmp/lmod/usr/share/lmod/lmod
[ -x "$root/libexec/lmod" ] && [ -f "$root/init/bash" ] || { echo "FAIL: $deb has no usr/share/lmod/lmod/{libexec/lmod,init/bash}"; exit 1; }
sed -i "s|/usr/share/lmod|$tmp/lmod/usr/share/lmod|g" "$root/init/bash" "$root/libexec/tcl2lua.tcl"
if grep -n "/usr/share/lmod" "$root/init/bash" "$root/libexec/tcl2lua.tcl" | grep -v "$tmp/"; then
  echo "FAIL: Lmod still refers to /usr/share/lmod after relocation"; exit 1; fi
ldd "$tmp/lmod/usr/lib/lmod/"*/lib/tcl2lua.so | grep "not found" && { echo "FAIL: tcl2lua.so cannot load (libtcl8.6 missing; scripts/setup.sh installs tcl)"; exit 1; }
version=$(dpkg-deb -f "$deb" Version)

cmake --install "$build" --prefix "$tmp/first" > "$tmp/install.log"
mv "$tmp/first" "$tmp/moved"
prefix=$tmp/moved

# Stand-ins for the site modules the modulefile loads when they exist (mpich, cuda, hdf5).
for m in mpich cuda hdf5; do
  mkdir -p "$tmp/site/$m"
  printf '#%%Module1.0\nsetenv FAKE_%s_LOADED 1\n' "$(echo $m | tr a-z A-Z)" > "$tmp/site/$m/1.0"
done
mkdir -p "$tmp/home"

lmod() {  # lmod LABEL SCRIPT: run SCRIPT under Lmod in a fresh non-interactive shell
  env -i HOME="$tmp/home" PATH=/usr/bin:/bin LMOD_CONFIG_DIR="$tmp/lmod/etc/lmod" \
      LMOD_REDIRECT=no LMOD_PAGER=none LMOD_COLORIZE=no \
      P="$prefix" SITE="$tmp/site" SRC="$src" bash --norc --noprofile -c "
    set -eu
    source '$root/init/bash'
    fail() { echo \"FAIL: \$*\"; module -t list 2>&1 | sed 's/^/  loaded: /'; exit 1; }
    listed() { module -t list 2>&1 | grep -v '^Currently\|^No modules loaded\|^\$' | sort | tr '\n' ' '; }
    $2
  " > "$tmp/$1.log" 2>&1 || { echo "FAIL: $1 (Lmod $version)"; cat "$tmp/$1.log"; exit 1; }
  echo "ok   $1: $(head -1 "$tmp/$1.log")"
}

# Installed tree, no site modules: loads alone, puts the moved binary on PATH, unload undoes it.
lmod installed-and-moved '
  [ "$(type -t module)" = function ] && [ "$LMOD_CMD" != "${LMOD_CMD#'"$tmp"'}" ] || fail "module is not the unpacked Lmod"
  module use "$P/share/modulefiles"
  module -t avail gpt-pretrain 2>&1 | grep -qx "gpt-pretrain/0.1.0" || fail "avail does not list gpt-pretrain/0.1.0"
  module load gpt-pretrain
  command -v gpt_pretrain
  [ "$(command -v gpt_pretrain)" = "$P/bin/gpt_pretrain" ] || fail "gpt_pretrain is $(command -v gpt_pretrain)"
  [ "$(listed)" = "gpt-pretrain/0.1.0 " ] || fail "module list: $(listed)"
  [ "$GPT_PRETRAIN_HOME" = "$P" ] || fail "GPT_PRETRAIN_HOME=$GPT_PRETRAIN_HOME"
  case ":$LD_LIBRARY_PATH:" in *":$P/lib:"*) ;; *) fail "LD_LIBRARY_PATH=$LD_LIBRARY_PATH";; esac
  gpt_pretrain --help | grep -q num-attention-heads
  test -f "$GPT_PRETRAIN_CONFIGS/gpt-tiny.ini"
  test -f "$GPT_PRETRAIN_SLURM/gpt22b.sbatch"
  gpt_pretrain --config "$GPT_PRETRAIN_CONFIGS/gpt-tiny.ini" --vocab-size 50257 --dry-run > /dev/null
  module help gpt-pretrain 2>&1 | grep -q "GPT_PRETRAIN_CONFIGS" || fail "module help"
  module whatis gpt-pretrain 2>&1 | grep -q "Megatron-style GPT pretraining" || fail "module whatis"
  module unload gpt-pretrain
  ! command -v gpt_pretrain > /dev/null || fail "still on PATH after unload: $(command -v gpt_pretrain)"
  case ":$PATH:${LD_LIBRARY_PATH:-}:" in *"$P"*) fail "PATH/LD_LIBRARY_PATH keep $P after unload";; esac
  [ -z "${GPT_PRETRAIN_HOME:-}" ] || fail "GPT_PRETRAIN_HOME survives unload"
  [ -z "$(listed)" ] || fail "module list after unload: $(listed)"
'

# Site provides mpich, cuda and hdf5: the modulefile's `is-avail` + `depends-on` load them
# with gpt-pretrain (tcl2lua.tcl's is-avail runs the relocated lmod: without the rewrite
# above it silently answers no), unloading gpt-pretrain unloads those it loaded, and one
# the user loaded first is neither loaded twice nor unloaded with it.
lmod prerequisites '
  module use "$P/share/modulefiles"
  module use "$SITE"
  module show gpt-pretrain 2>&1 | grep -q "depends_on(\"mpich\")" || fail "module show has no depends_on(\"mpich\")"
  module load gpt-pretrain
  echo "loaded: $(listed)"
  [ "$(listed)" = "cuda/1.0 gpt-pretrain/0.1.0 hdf5/1.0 mpich/1.0 " ] || fail "module list: $(listed)"
  [ "${FAKE_MPICH_LOADED:-}/${FAKE_CUDA_LOADED:-}/${FAKE_HDF5_LOADED:-}" = 1/1/1 ] || fail "prerequisites not in the environment"
  [ "$(command -v gpt_pretrain)" = "$P/bin/gpt_pretrain" ] || fail "gpt_pretrain is $(command -v gpt_pretrain)"
  module unload gpt-pretrain
  ! command -v gpt_pretrain > /dev/null || fail "still on PATH after unload"
  [ -z "$(listed)" ] || fail "unload left the prerequisites it loaded: $(listed)"
  [ -z "${FAKE_MPICH_LOADED:-}" ] || fail "FAKE_MPICH_LOADED survives unload"
  module load mpich
  module load gpt-pretrain
  [ "$(listed)" = "cuda/1.0 gpt-pretrain/0.1.0 hdf5/1.0 mpich/1.0 " ] || fail "with mpich preloaded, module list: $(listed)"
  module unload gpt-pretrain
  [ "$(listed)" = "mpich/1.0 " ] || fail "unload with mpich loaded by the user first left: $(listed)"
  module purge
  [ -z "$(listed)" ] || fail "purge left: $(listed)"
'

# From the source checkout (modules/ -> build/app), as the environment-modules test does.
lmod source-checkout '
  module use "$SRC/modules"
  module load gpt-pretrain
  command -v gpt_pretrain
  gpt_pretrain --help | grep -q num-attention-heads
  test -f "$GPT_PRETRAIN_CONFIGS/gpt-tiny.ini"
  module unload gpt-pretrain
  ! command -v gpt_pretrain > /dev/null || fail "still on PATH after unload"
'
grep -q "$src/build" "$tmp/source-checkout.log" || grep -q "/app/gpt_pretrain" "$tmp/source-checkout.log" || { echo "FAIL: not the checkout's binary"; exit 1; }
[ -z "$(ls -A "$tmp/home")" ] || echo "note: Lmod wrote into HOME: $(cd "$tmp/home" && find . | tr '\n' ' ')"
echo "PASS (Lmod $version from $deb, $((SECONDS - start)) s)"
