#!/usr/bin/env bash
# The checkpoint is plain HDF5: h5ls/h5dump list the global shapes and Megatron-style names, and
# h5py (system Python, test only) reads values, dtypes and attributes.
set -u
probe=$1; mpiexec=$2; scratch=$3; pyscript=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$scratch"; mkdir -p "$scratch"
"$mpiexec" -n 2 "$probe" save "$scratch/save" 100 1 1 || fail "save"
file=$scratch/save/iter_0000100/model_optim.h5
listing=$(h5ls -r "$file") || fail "h5ls -r"
for want in "/language_model/encoder/layers.0/self_attention/query_key_value/weight Dataset {96, 32}" \
            "/language_model/encoder/layers.0/mlp/dense_h_to_4h/weight Dataset {256, 1024}" \
            "/language_model/embedding/word_embeddings/weight Dataset {100, 64}"; do
    echo "$listing" | grep -qF "$want" || fail "h5ls does not list '$want': $listing"
done
h5dump -H "$file" > /dev/null || fail "h5dump -H"
h5dump -d /language_model/embedding/word_embeddings/weight -s "0,0" -c "1,4" "$file" | grep -q '(0,0): 13, 14.75, 1.25, 3$' \
    || fail "h5dump values of word_embeddings"
h5dump -a /_checkpoint/complete "$file" | grep -q '(0): 1' || fail "h5dump complete marker"
/usr/bin/python3 "$pyscript" "$file" || fail "h5py"
echo PASS
