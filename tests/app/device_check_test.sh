#!/bin/bash
# scripts/device_check.sh without a GPU: what a lent machine's one call depends on.
#  1. Its plan (DEVICE_CHECK_DRY=1) in the worst case (every step to its limit) still runs
#     every reserved step and every step of the concurrent phase, and leaves no negative time.
#  2. The correctness steps really run at once: stand-in binaries (shell scripts in place of
#     the bundle's) each mark their step and wait for all seven marks. Run one after another,
#     the first would wait alone until it gives up and fails. Each step's output reaches
#     tests.log in table order, and the summary has each step's verdict and digest.
#  3. DEVICE_CHECK_AFTER leaves the phase and the steps up to the one named out, and a name
#     of no step is refused.
#   device_check_test.sh SOURCE_DIR SCRATCH
set -uo pipefail
src=$1 tmp=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/marks" || fail "cannot use $tmp"
check=$src/scripts/device_check.sh

# 1. The worst-case plan.
DEVICE_CHECK_DRY=1 DEVICE_CHECK_BIN="$tmp/bin" bash "$check" >"$tmp/plan.txt" 2>&1 || { cat "$tmp/plan.txt"; fail "dry run failed"; }
reserved=$(awk '$6 == "R"' "$tmp/plan.txt")
[ -n "$reserved" ] || { cat "$tmp/plan.txt"; fail "no reserved step in the plan"; }
if awk '$6 == "R" || $6 == "P"' "$tmp/plan.txt" | grep -q "skipped"; then
  cat "$tmp/plan.txt"; fail "a reserved or correctness step is skipped in the worst case"
fi
[ "$(awk '$6 == "P"' "$tmp/plan.txt" | grep -c "s, concurrent")" -eq 7 ] || { cat "$tmp/plan.txt"; fail "the phase has not 7 concurrent steps"; }
grep -Eq "^the plan leaves [0-9]+ s of 530" "$tmp/plan.txt" || { cat "$tmp/plan.txt"; fail "the plan overruns its budget"; }

# 2. Stand-ins: each step's process marks its step (its scratch folder's name) and waits for
#    the other six; 2 ranks of the mpiexec steps mark the same step.
cat >"$tmp/bin/stand_in" <<EOF
#!/bin/bash
step=\$(basename "\$GPT_TEST_BINARY_DIR")
touch "$tmp/marks/\$step"
for _ in \$(seq 150); do
  [ "\$(ls "$tmp/marks" | wc -l)" -ge 7 ] && break
  sleep 0.2
done
if [ "\$(ls "$tmp/marks" | wc -l)" -lt 7 ]; then echo "\$step: alone (\$(ls "$tmp/marks" | tr '\n' ' '))"; exit 1; fi
case \$(basename "\$0") in
  gpt_pretrain) echo " iteration       10/      10 | step \$step" ;;
  *) echo "[  PASSED  ] 1 test. (\$step)" ;;
esac
EOF
chmod +x "$tmp/bin/stand_in"
for b in test_backend_cuda test_cuda_wgmma test_cuda_training gpt_pretrain; do ln -s stand_in "$tmp/bin/$b"; done
OUT=$tmp/out DEVICE_CHECK_BIN=$tmp/bin DEVICE_CHECK_RT=$tmp/no-rt DEVICE_CHECK_WORK=$tmp/work DEVICE_BUDGET_S=200 \
  bash "$check" "ops train app" >"$tmp/run.txt" 2>&1 || { cat "$tmp/run.txt"; fail "device_check exited non-zero"; }
summary=$tmp/out/summary.txt
for step in ops wgmma train train-mpi2 app-cpu app-cuda app-mpi2; do
  grep -q "^$step: exit 0 after .*, concurrent)" "$summary" || { cat "$summary" "$tmp/out/tests.log"; fail "$step did not pass beside the others"; }
done
[ "$(grep -c '^\[  PASSED  \] 1 test' "$summary")" -ge 4 ] || { cat "$summary"; fail "the tests' digests are missing"; }
[ "$(grep -c 'iteration       10/' "$summary")" -ge 3 ] || { cat "$summary"; fail "the app steps' digests are missing"; }
order=$(grep -o '^==== [a-z0-9-]*' "$tmp/out/tests.log" | cut -c6- | tr '\n' ' ')
[ "$order" = "ops wgmma train train-mpi2 app-cpu app-cuda app-mpi2 " ] || fail "tests.log in the order: $order"
grep -q "PASSED  \] 1 test. (train-mpi2)" "$tmp/out/tests.log" || fail "train-mpi2's output is not under its header"

# 3. A second call.
DEVICE_CHECK_DRY=1 DEVICE_CHECK_AFTER=gemm-fp8 DEVICE_CHECK_BIN="$tmp/bin" bash "$check" >"$tmp/after.txt" 2>&1 || fail "dry run with DEVICE_CHECK_AFTER failed"
[ "$(grep -c "left out (DEVICE_CHECK_AFTER)" "$tmp/after.txt")" -eq 10 ] || { cat "$tmp/after.txt"; fail "DEVICE_CHECK_AFTER=gemm-fp8 did not leave out the phase and the 3 steps up to it"; }
grep -Eq "^attn-flash-sm90-dq-atomic .* [0-9]+ s$" "$tmp/after.txt" || { cat "$tmp/after.txt"; fail "the step after gemm-fp8 has no time"; }
# The phase ran whole in the first call: naming one of its steps leaves out all seven.
DEVICE_CHECK_DRY=1 DEVICE_CHECK_AFTER=ops DEVICE_CHECK_BIN="$tmp/bin" bash "$check" >"$tmp/after-ops.txt" 2>&1 || fail "dry run with DEVICE_CHECK_AFTER=ops failed"
[ "$(grep -c "left out (DEVICE_CHECK_AFTER)" "$tmp/after-ops.txt")" -eq 7 ] || { cat "$tmp/after-ops.txt"; fail "DEVICE_CHECK_AFTER=ops did not leave out exactly the phase"; }
if DEVICE_CHECK_DRY=1 DEVICE_CHECK_AFTER=gemm-fp9 bash "$check" >"$tmp/bad.txt" 2>&1; then fail "an unknown DEVICE_CHECK_AFTER was accepted"; fi
grep -q "DEVICE_CHECK_AFTER='gemm-fp9' names no step" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "unclear refusal"; }
echo "PASS: the worst-case plan runs every reserved step; 7 correctness steps ran at once; DEVICE_CHECK_AFTER"
