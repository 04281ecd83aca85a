# Steps both convert_checkpoint tests (hf_convert_test.sh, hf_llama_test.sh) take, sourced
# after they set conv, bin, mpiexec, py and src and define fail.

# round_trip OURS HF TRAIN-ARGS...: --to megatron imports HF into b; every parameter equals
# OURS's (compare_checkpoints.py); the re-export is byte-identical; gpt_pretrain --finetune
# trains from b with TRAIN-ARGS.
round_trip() {
    local ours=$1 hf=$2
    shift 2
    "$conv" --to megatron --load-hf "$hf" --save b > import.log 2>&1 || { cat import.log; fail "import failed"; }
    $py "$src/tests/hf/compare_checkpoints.py" "$ours" b 50257 || fail "export -> import changed parameters"
    "$conv" --to hf --load b --output hf2 > export2.log 2>&1 || { cat export2.log; fail "re-export failed"; }
    cmp "$hf/model.safetensors" hf2/model.safetensors || fail "re-export is not byte-identical"
    cmp "$hf/config.json" hf2/config.json || fail "re-export config.json differs"
    "$mpiexec" -n 1 "$bin" "$@" --load b --finetune --train-iters 2 > ft.log 2>&1 \
        || { cat ft.log; fail "finetune from the import failed"; }
    grep -q "successfully loaded checkpoint from b at iteration 0 (--finetune" ft.log || fail "finetune did not load b"
}

# expect_refused NAME FOLDER PATTERN [EXIT: 1 damaged input (default), 2 a model we cannot
# express]: the import of FOLDER exits EXIT with one line matching PATTERN and writes nothing.
expect_refused() {
    local name=$1 dir=$2 pattern=$3 want=${4:-1}
    "$conv" --to megatron --load-hf "$dir" --save "out_$name" > "$name.log" 2>&1
    local rc=$?
    [ $rc -eq "$want" ] || { cat "$name.log"; fail "$name: exit $rc, expected $want"; }
    [ "$(wc -l < "$name.log")" -eq 1 ] || { cat "$name.log"; fail "$name: not one line"; }
    grep -q "$pattern" "$name.log" || { cat "$name.log"; fail "$name: message lacks '$pattern'"; }
    ls -d out_"$name"* > /dev/null 2>&1 && fail "$name: left output behind"
    true
}
