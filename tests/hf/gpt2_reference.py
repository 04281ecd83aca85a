"""An independent GPT-2 forward written from Hugging Face's conventions (transformers'
modeling_gpt2.py: Conv1D weights [in, out], c_attn = [q | k | v], pre-LayerNorm blocks,
1/sqrt(head_dim) attention scaling, gelu_new or gelu, lm_head tied to wte), reading the
exported folder itself (config.json; model.safetensors through struct/json/numpy), compared
with our model's logits from `convert_checkpoint --dump-logits`.

usage: gpt2_reference.py HF_DIR OUR_LOGITS TOKENS(comma-separated)

Tolerance (error analysis, not a fit): our side computes in fp32, the reference in float64,
so the difference is our rounding. A length-k fp32 dot product has error at most
gamma_k * sum_i |a_i b_i| with gamma_k = k u / (1 - k u), u = 2^-24 (Higham, Accuracy and
Stability, 3.1). Along the path to a logit there are 6 such reductions per layer (qkv, q.k,
p.v, attention projection, fc, fc projection) plus the two layernorm statistics and the head:
N = 6 L + 3 stages, each over at most k = max(hidden, ffn, tokens) terms. The layernorms map
errors relative to the residual stream's scale, so errors stay relative to each stage's
sum_i |a_i b_i|; at the head that is M[t, v] = sum_i |x_t,i| |wte_v,i| (x: the final
layernorm's output). Bound: |ours - ref| <= N gamma_k M[t, v] for every position t and token
v. It is a worst case (errors of random sign grow like sqrt(k), not k); the script prints the
largest ratio of the observed error to it.
"""
import json
import math
import sys

import torch

from logits_bound import check_logits
from safetensors_read import read_safetensors


def forward(cfg, w, tokens, dtype):
    def p(name):
        return w["transformer." + name].to(dtype)

    h, heads = cfg["n_embd"], cfg["n_head"]
    hd = h // heads
    eps = cfg["layer_norm_epsilon"]
    n = len(tokens)

    def ln(x, pre):
        return torch.nn.functional.layer_norm(x, (h,), p(pre + ".weight"), p(pre + ".bias"), eps)

    if cfg["activation_function"] == "gelu_new":
        def act(x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    else:
        def act(x):
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

    t = torch.tensor(tokens)
    x = p("wte.weight")[t] + p("wpe.weight")[torch.arange(n)]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for i in range(cfg["n_layer"]):
        pre = "h.%d." % i
        a = ln(x, pre + "ln_1")
        qkv = a @ p(pre + "attn.c_attn.weight") + p(pre + "attn.c_attn.bias")  # Conv1D: x W + b
        q, k, v = qkv.split(h, dim=1)
        q, k, v = (z.reshape(n, heads, hd).transpose(0, 1) for z in (q, k, v))
        s = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        s = s.masked_fill(~mask, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(n, h)
        x = x + ctx @ p(pre + "attn.c_proj.weight") + p(pre + "attn.c_proj.bias")
        m = ln(x, pre + "ln_2")
        f = act(m @ p(pre + "mlp.c_fc.weight") + p(pre + "mlp.c_fc.bias"))
        x = x + f @ p(pre + "mlp.c_proj.weight") + p(pre + "mlp.c_proj.bias")
    xf = ln(x, "ln_f")
    return xf @ p("wte.weight").T, xf


def main():
    hf_dir, ours_path, tokens_text = sys.argv[1:4]
    tokens = [int(t) for t in tokens_text.split(",")]
    with open(hf_dir + "/config.json") as f:
        cfg = json.load(f)
    header, w = read_safetensors(hf_dir + "/model.safetensors")
    assert header["__metadata__"] == {"format": "pt"}, header["__metadata__"]
    assert "lm_head.weight" not in w and "transformer.lm_head.weight" not in w  # tied
    V, h = cfg["vocab_size"], cfg["n_embd"]
    assert tuple(w["transformer.wte.weight"].shape) == (V, h)
    ffn = cfg["n_inner"] or 4 * h
    check_logits(ours_path, tokens, V, forward, cfg, w, w["transformer.wte.weight"], stages=6 * cfg["n_layer"] + 3,
                 k=max(h, ffn, len(tokens)))


main()
