#!/usr/bin/env bash
# gpt_pretrain's command line: the reference layout prints its table, and every kind of
# user error is one line on stderr with exit code 2.
set -u
bin=$1; mpiexec=$2; src=$3
cd "$src"
fails=0
expect() {  # expect NAME WANT_RC PATTERN... -- command...: every PATTERN in the output
  local name=$1 want=$2 patterns=() p missing=""; shift 2
  while [ "$1" != -- ]; do patterns+=("$1"); shift; done; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  for p in "${patterns[@]}"; do grep -qE -- "$p" <<<"$out" || missing="$missing '$p'"; done
  if [ "$rc" -ne "$want" ] || [ -n "$missing" ]; then
    echo "FAIL $name: rc=$rc (want $want), pattern(s)$missing not in:"; echo "$out" | tail -20; fails=$((fails+1))
  else echo "ok   $name"; fi
}
one_line() {  # one_line NAME PATTERN -- command...: exit 2 and exactly one line matching PATTERN
  local name=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne 2 ] || [ "$(grep -c . <<<"$out")" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc, want 2 and one line:"; echo "$out"; fails=$((fails+1))
  else echo "ok   $name: $out"; fi
}

# The reference layout on 16 ranks (one launch: each costs 10 s on 2 cores): the rank table,
# the arguments table, and the environment variables that change a run as rows of it.
expect gpt22b-16-ranks 0 '15: 7 0 1' 'tensor_model_parallel_size \.{22} 8' 'DEVICE_MEMORY_GB \.{32} 640' -- \
  env DEVICE_MEMORY_GB=640 "$mpiexec" -n 16 "$bin" --config configs/gpt22b.ini \
  --tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 --dry-run
expect help 0 'num-attention-heads' -- "$bin" --help
one_line typo-flag "did you mean --num-layers" -- "$bin" --config configs/gpt22b.ini --num-layres 4
one_line typo-key "hiden-size.*typo.ini.*did you mean hidden-size" -- "$bin" --config "$src/tests/app/typo.ini"
one_line missing-config "/no/such/config.ini" -- "$bin" --config /no/such/config.ini
one_line impossible-layout "world size 4 is not divisible by .* 3 x 1 = 3" -- "$mpiexec" -n 4 "$bin" --config configs/gpt22b.ini \
  --tensor-model-parallel-size 3 --pipeline-model-parallel-size 1 --dry-run
one_line heads-vs-tp "num-attention-heads 63 is not divisible by tensor-model-parallel-size 2" -- "$mpiexec" -n 2 "$bin" --config configs/gpt22b.ini \
  --tensor-model-parallel-size 2 --num-attention-heads 63 --hidden-size 6174 --dry-run
# A check of the flags alone fires at validation, in a dry run, before any checkpoint is read.
one_line both-schedules "override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler exclude each other" -- \
  "$mpiexec" -n 1 "$bin" --config configs/gpt-tiny.ini --load no/such/folder --override-opt_param-scheduler \
  --use-checkpoint-opt_param-scheduler --dry-run
expect typo-suggests 2 'did you mean --num-layers' -- "$bin" --num-layres 4
# Megatron's --exit-on-missing-checkpoint: a --load folder without a checkpoint stops the run
# (exit 1, as Megatron's) before anything is built, from one rank, dry run included.
expect exit-on-missing-checkpoint 1 '^gpt_pretrain: error on rank 0: --exit-on-missing-checkpoint: no checkpoint was found in --load no/such/folder' -- \
  "$mpiexec" -n 2 "$bin" --config configs/gpt-tiny.ini --load no/such/folder --exit-on-missing-checkpoint --dry-run
# The Llama-style configs parse and validate; K/V groups must split over TP.
expect llama-tiny-dry-run 0 'num_query_groups \.+ 2' -- "$mpiexec" -n 2 "$bin" --config configs/llama-tiny.ini \
  --tensor-model-parallel-size 2 --vocab-size 512 --dry-run
expect llama-1b-dry-run 0 'swiglu \.+ True' -- "$mpiexec" -n 8 "$bin" --config configs/llama-style-1b.ini \
  --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --vocab-size 32000 --dry-run
one_line groups-vs-tp "num-query-groups 2 is not divisible by --tensor-model-parallel-size 4" -- "$mpiexec" -n 4 "$bin" \
  --config configs/llama-tiny.ini --tensor-model-parallel-size 4 --vocab-size 512 --dry-run
# FP8 (issue 34): --plan-only plans it (the FP8 line and the FP8 share of the GEMM time),
# A100 is refused; gpt-tiny trains in FP8 on the CPU backend (the reference arithmetic).
expect fp8-plan-only 0 'FP8 GEMMs: [0-9.]+% of the GEMM time' -- env DEVICE_MEMORY_GB=80 "$bin" --config configs/gpt22b.ini \
  --fp8-format hybrid --plan-only --world-size 16 --local-world-size 8
one_line fp8-plan-a100 "--fp8-format hybrid: the planner's device a100-80gb has no FP8 tensor cores" -- "$bin" \
  --config configs/gpt22b.ini --fp8-format hybrid --plan-only --world-size 16 --plan-device a100-80gb
one_line fp8-mxfp8 "--fp8-recipe mxfp8 is not supported: " -- "$bin" --config configs/gpt22b.ini --fp8-format hybrid \
  --fp8-recipe mxfp8 --plan-only --world-size 16
expect fp8-training 0 'training done: 2 iterations, 0 skipped' -- \
  env OMP_NUM_THREADS=1 "$mpiexec" -n 1 "$bin" --config configs/gpt-tiny.ini --bf16 --fp8-format hybrid --train-iters 2 \
  --lr-warmup-iters 1 --eval-iters 0
# --eod-mask-loss takes its token from the tokenizer: real data read with --vocab-size alone
# has none, refused in a dry run.
one_line eod-mask-without-tokenizer "^gpt_pretrain: error: --eod-mask-loss needs the end-of-document token" -- \
  "$mpiexec" -n 1 "$bin" --config configs/gpt-tiny.ini --vocab-file "" --merge-file "" --vocab-size 1000 \
  --data-path /no/such/data --eod-mask-loss --dry-run
one_line reset-documents-without-tokenizer \
  "^gpt_pretrain: error: --reset-position-ids, --reset-attention-mask needs the end-of-document token" -- \
  "$mpiexec" -n 1 "$bin" --config configs/gpt-tiny.ini --vocab-file "" --merge-file "" --vocab-size 1000 \
  --data-path /no/such/data --reset-position-ids --reset-attention-mask --dry-run
# Megatron's --step-batch-size-schedule (thresholds in tokens: 512 is sample 2 at sequence
# 256): one rank trains the batch of 2 and saves; two ranks cannot split that batch (micro-batch
# 2 x DP 2), so resuming where it still applies stops before the first iteration, with one
# error line; resuming past it (the 8 splits) trains to the end: a run scaled up mid-schedule.
step_ck=$(mktemp -d)
step=(--config configs/gpt-tiny.ini --num-layers 1 --hidden-size 64 --train-iters 0 --train-samples 18
  --lr-warmup-iters 0 --log-interval 1 --eval-iters 0 --save "$step_ck" --save-interval 1)
expect step-schedule-1-rank 0 'iteration +1/ +3 \| consumed samples: +2 \|.*global batch size: +2 \|' -- \
  env OMP_NUM_THREADS=1 "$mpiexec" -n 1 "$bin" "${step[@]}" --step-batch-size-schedule "0:2 512:8" --exit-interval 1
expect step-schedule-resume-too-early 2 \
  '^gpt_pretrain: error on rank 0: --step-batch-size-schedule: the global batch 2 \(from sample 2\) is not divisible by micro-batch-size x DP = 2 x 2 = 4$' -- \
  env OMP_NUM_THREADS=1 "$mpiexec" -n 2 "$bin" "${step[@]}" --step-batch-size-schedule "0:2 1K:8" --load "$step_ck"
expect step-schedule-resume-dp2 0 'training done: 3 iterations' \
  'iteration +3/ +3 \| consumed samples: +18 \|.*global batch size: +8 \|' -- \
  env OMP_NUM_THREADS=1 "$mpiexec" -n 2 "$bin" "${step[@]}" --step-batch-size-schedule "0:2 512:8" --load "$step_ck"
rm -rf "$step_ck"
# gpt-tiny on 8 CPU ranks, TP 2 x PP 2 x DP 2 with the distributed
# optimizer and sequence parallelism, trains (3 iterations here; mock data from the config),
# with Megatron's example-script flags: the EOD loss mask, the documents' positions and
# attention masks reset at each EOD, the per-token loss, and the batch-size ramp-up 4 -> 8
# (Megatron's calculator: batches of 4, 4, 8 in 20 samples; one micro-batch per DP rank, then
# two, through the pipeline).
expect gpt-tiny-ptdp-8-ranks 0 'training done: 3 iterations, 0 skipped' 'ramping up batch size from 4 to 8' \
  'iteration +3/ +3 \| consumed samples: +16 \|.*global batch size: +8 \| lm loss' 'eod_mask_loss \.+ True' \
  'reset_attention_mask \.+ True' 'reset_position_ids \.+ True' -- \
  env OMP_NUM_THREADS=1 "$mpiexec" -n 8 "$bin" --config configs/gpt-tiny.ini --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --use-distributed-optimizer --sequence-parallel \
  --eod-mask-loss --reset-position-ids --reset-attention-mask --calculate-per-token-loss --rampup-batch-size 4 4 8 \
  --train-iters 0 --train-samples 20 --lr-warmup-iters 0 --lr-warmup-samples 4 --log-interval 1 --eval-iters 1
[ "$fails" -eq 0 ] && echo PASS || { echo "$fails failed"; exit 1; }
