"""The comparison both references (gpt2_reference.py, llama_reference.py) end with: our fp32
logits against the float64 reference within N gamma_k M (the derivation is in each
reference's docstring: N stages of length-k fp32 reductions, M[t, v] = sum_i |x_t,i|
|head_v,i| with x the final norm's output), the largest error/bound printed, exit 1 on a
violation, and a guard against degenerate logits (all equal passes any bound).
"""
import sys

import numpy as np


def check_logits(ours_path, tokens, vocab, forward, cfg, w, head, stages, k):
    """forward(cfg, w, tokens, dtype) -> (logits, final norm output); head: [V, h] tensor."""
    import torch

    ours = np.fromfile(ours_path, dtype="<f4").reshape(len(tokens), vocab).astype(np.float64)
    ref64, xf = forward(cfg, w, tokens, torch.float64)
    ref64 = ref64.numpy()
    u = 2.0 ** -24
    gamma = k * u / (1 - k * u)
    M = (xf.abs() @ head.abs().T).numpy()
    bound = stages * gamma * M
    err = np.abs(ours - ref64)
    ratio = float((err / bound).max())
    ref32, _ = forward(cfg, w, tokens, torch.float32)
    print("logits %dx%d: max |ours - float64 reference| = %.3g, bound N gamma_k M: max %.3g, "
          "largest error/bound = %.3g; max |ours - fp32 torch| = %.3g; max |logit| = %.3g"
          % (len(tokens), vocab, err.max(), bound.max(), ratio,
             np.abs(ours - ref32.numpy().astype(np.float64)).max(), np.abs(ref64).max()))
    if not ratio <= 1.0:
        t, v = np.unravel_index(np.argmax(err / bound), err.shape)
        print("FAIL: position %d token %d: ours %.9g, reference %.9g, bound %.3g" % (t, v, ours[t, v], ref64[t, v], bound[t, v]))
        sys.exit(1)
    # The logits must say something: a model whose logits are all equal passes any bound.
    assert np.abs(ref64 - ref64.mean(axis=1, keepdims=True)).max() > 0.1, "degenerate logits"
    print("OK")
