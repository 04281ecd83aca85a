"""Export -> import round trip: the parameters of checkpoint A (any iteration, fp32 run) and of
the checkpoint B that convert_checkpoint --to megatron made from A's Hugging Face export must
be bit-identical, dataset by dataset (h5py), except the vocabulary padding rows, which the
export drops and the import fills with copies of the last real row (embeddings and an untied
output layer) (A's padding follows its
TP size, B's TP 1); B's Adam moments are
zero and its iteration 0.

usage: compare_checkpoints.py A_DIR B_DIR VOCAB
"""
import sys

import h5py
import numpy as np


def latest(d):
    with open(d + "/latest_checkpointed_iteration.txt") as f:
        it = int(f.read().strip())
    return h5py.File("%s/iter_%07d/model_optim.h5" % (d, it), "r")


def datasets(f):
    names = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and not n.startswith("_") else None)
    return sorted(names)


a_dir, b_dir, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3])
with latest(a_dir) as a, latest(b_dir) as b:
    assert b.attrs["iteration"] == 0, b.attrs["iteration"]
    na, nb = datasets(a), datasets(b)
    assert na == nb, (set(na) ^ set(nb))
    params = 0
    for n in na:
        x, y = a[n][...], b[n][...]
        assert y.dtype == np.float32, (n, y.dtype)
        if "exp_avg" in n:
            assert not y.any(), "%s: import left non-zero Adam moments" % n
            continue
        if "word_embeddings" in n or "output_layer" in n:
            # A's rows are padded for its TP size, B's for TP 1: the real rows must agree.
            assert (y[vocab:] == y[vocab - 1]).all(), "%s: padding rows are not copies of the last row" % n
            x, y = x[:vocab], y[:vocab]
        assert x.shape == y.shape, (n, x.shape, y.shape)
        if x.dtype != np.float32:
            sys.exit("%s is %s in A: the round trip compares fp32 runs" % (n, x.dtype))
        if x.tobytes() != y.tobytes():
            bad = np.argwhere(x != y)
            sys.exit("FAIL: %s differs at %d elements, first %s: %r vs %r"
                     % (n, len(bad), tuple(bad[0]), x[tuple(bad[0])], y[tuple(bad[0])]))
        params += 1
    assert params > 0
    print("OK: %d parameter and main-parameter datasets bit-identical, moments zero" % params)
