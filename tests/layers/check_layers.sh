#!/usr/bin/env bash
# Checks lib/'s floors against lib/layers.txt: every #include "<folder>/..." of a file in
# lib/<X>/ names X itself or a folder on X's line, and that folder's target gpt_<folder>
# is linked in lib/<X>/CMakeLists.txt. Every lib/ folder must have a line.
# A subfolder with its own line (a room, e.g. train/step) is a folder of its own: its files
# are checked against its line, not its parent's, an include "train/step/..." names it,
# and its target is gpt_<folder> with '/' as '_' (gpt_train_step) in its own CMakeLists.txt.
# A subfolder without a line (backend/cpu) is part of its parent.
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

# The folder an included file's folder (e.g. train/step) names: its first two components
# when they are a room, else the first.
folder_of() {
  local path=$1 first=${1%%/*} rest=${1#*/}
  if [[ $path == */* && -n ${allowed[$first/${rest%%/*}]+x} ]]; then
    echo "$first/${rest%%/*}"
  else
    echo "$first"
  fi
}

folders=()
for dir in "$root"/lib/*/ "$root"/lib/*/*/; do
  dir=${dir%/}
  folder=${dir#"$root"/lib/}
  # A subfolder without a line belongs to its parent.
  [[ $folder == */* && -z ${allowed[$folder]+x} ]] && continue
  folders+=("$folder")
done

for folder in "${folders[@]}"; do
  dir=$root/lib/$folder
  if [[ -z ${allowed[$folder]+x} ]]; then
    echo "lib/$folder has no line in lib/layers.txt"
    status=1
    continue
  fi
  cmake_file=$dir/CMakeLists.txt
  # This folder's files: its own and those of its subfolders that are not rooms.
  prune=()
  for sub in "$dir"/*/; do
    sub=${sub%/}
    [[ -d $sub && -n ${allowed[${sub#"$root"/lib/}]+x} ]] && prune+=(-path "$sub" -prune -o)
  done
  mapfile -t files < <(find "$dir" "${prune[@]}" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' \
                         -o -name '*.cuh' -o -name '*.h' \) -print | sort)
  [[ ${#files[@]} == 0 ]] && continue
  # The lib/ folders this folder's sources and headers include.
  used=$(grep -hoE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_0-9/]+/' "${files[@]}" |
         sed -E 's/.*"([a-z_0-9/]+)\/$/\1/' | while read -r p; do folder_of "$p"; done | sort -u)
  for dep in $used; do
    [[ $dep == "$folder" ]] && continue
    [[ -d $root/lib/$dep ]] || continue  # not a lib/ folder (e.g. a system header path)
    if [[ ${allowed[$folder]} != *" $dep "* ]]; then
      where=$(grep -lE "#[[:space:]]*include[[:space:]]+\"$dep/" "${files[@]}" | head -3 | sed "s|$root/||" | tr '\n' ' ')
      echo "lib/$folder includes lib/$dep, which lib/layers.txt does not allow ($where)"
      status=1
    elif ! grep -qE "(^|[[:space:]])gpt_${dep//\//_}([[:space:]]|\)|$)" "$cmake_file"; then
      echo "lib/$folder includes lib/$dep but lib/$folder/CMakeLists.txt does not link gpt_${dep//\//_}"
      status=1
    fi
  done
done
[[ $status == 0 ]] && echo "lib/ includes follow lib/layers.txt"
exit $status
