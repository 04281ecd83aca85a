#!/usr/bin/env bash
# Checks lib/'s floors against lib/layers.txt: every #include "<folder>/..." of a file in
# lib/<X>/ names X itself or a folder on X's line, and that folder's target gpt_<folder>
# is linked in lib/<X>/CMakeLists.txt. Every lib/ folder must have a line.
# Usage: check_layers.sh <source root>
set -euo pipefail
root=${1:?usage: check_layers.sh <source root>}
matrix=$root/lib/layers.txt
declare -A allowed
status=0
while IFS= read -r line; do
  line=${line%%#*}
  [[ $line =~ ^[[:space:]]*$ ]] && continue
  folder=${line%%:*}
  # Floors: a folder may name only folders on earlier lines, so no include can loop.
  for dep in ${line#*:}; do
    if [[ -z ${allowed[$dep]+x} ]]; then
      echo "lib/layers.txt: $folder may include $dep, which is not on an earlier line"
      status=1
    fi
  done
  allowed[$folder]=" ${line#*:} "
done < "$matrix"

for dir in "$root"/lib/*/; do
  folder=$(basename "$dir")
  if [[ -z ${allowed[$folder]+x} ]]; then
    echo "lib/$folder has no line in lib/layers.txt"
    status=1
    continue
  fi
  cmake_file=$dir/CMakeLists.txt
  # The lib/ folders this folder's sources and headers include.
  used=$(grep -rhoE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$dir" \
           --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' --include='*.h' |
         sed -E 's/.*"([a-z_]+)\/$/\1/' | sort -u)
  for dep in $used; do
    [[ $dep == "$folder" ]] && continue
    [[ -d $root/lib/$dep ]] || continue  # not a lib/ folder (e.g. a system header path)
    if [[ ${allowed[$folder]} != *" $dep "* ]]; then
      where=$(grep -rlE "#[[:space:]]*include[[:space:]]+\"$dep/" "$dir" | head -3 | sed "s|$root/||" | tr '\n' ' ')
      echo "lib/$folder includes lib/$dep, which lib/layers.txt does not allow ($where)"
      status=1
    elif ! grep -qE "(^|[[:space:]])gpt_$dep([[:space:]]|\)|$)" "$cmake_file"; then
      echo "lib/$folder includes lib/$dep but lib/$folder/CMakeLists.txt does not link gpt_$dep"
      status=1
    fi
  done
done
[[ $status == 0 ]] && echo "lib/ includes follow lib/layers.txt"
exit $status
