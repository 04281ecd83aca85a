#!/bin/bash
# Submits the preprocessing array and the dependent merge in one go.
#   slurm/submit-preprocess.sh 'corpus/*.json' data/corpus [NAME]
# SBATCH_ARGS adds sbatch options to both jobs, e.g. SBATCH_ARGS="--partition=cpu
# --cpus-per-task=4" (--cpus-per-task on the command line beats the script's 8; a request
# larger than the partition's nodes pends forever with Reason=PartitionConfig).
set -euo pipefail
glob=$1 out=$2 name=${3:-my-gpt2}
read -r -a extra <<< "${SBATCH_ARGS:-}"
n=$(ls -1 $glob | wc -l)
[ "$n" -gt 0 ] || { echo "no files match $glob"; exit 1; }
here=$(dirname "$(readlink -f "$0")")
mkdir -p runs/preprocess
jid=$(sbatch --parsable "${extra[@]}" --array=0-$((n - 1)) --export=ALL,MODE=shard,INPUT_GLOB="$glob",OUT="$out",NAME="$name" "$here/preprocess.sbatch")
mid=$(sbatch --parsable "${extra[@]}" --dependency=afterok:"$jid" --export=ALL,MODE=merge,OUT="$out",NAME="$name" "$here/preprocess.sbatch")
echo "preprocess array $jid ($n shards), merge job $mid"
