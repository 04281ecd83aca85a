#!/usr/bin/python3
"""Independent PyTorch (fp64) implementation of the GPT model with the Llama-style options,
used by tests/model/test_decoder_arch.cpp: reads the C++ model's weights and tokens, writes
the mean loss (over the tokens Megatron's --eod-mask-loss counts, when the config names an
eod) and every parameter's gradient.

Written from the architecture's definitions (Megatron's layouts), not from our kernels:
QKV rows grouped [ng, np/ng + 2, hn]; rope as Megatron's cos/sin tables with rotate_half;
K/V repeated over the heads of their group; SwiGLU's fc1 as [gate; up]; RMSNorm with weight
only; --qk-layernorm as Megatron's q_layernorm / k_layernorm over each head's hn dims, before
rope. Format: a config line, a tokens line, then per tensor "name ndim dims..." and its
float32 bytes. Several IN OUT pairs may be given: one model each."""
import math
import sys

import torch
import torch.nn.functional as F


def read_input(path):
    with open(path, "rb") as f:
        cfg_words = f.readline().split()[1:]
        cfg = {cfg_words[i].decode(): float(cfg_words[i + 1]) for i in range(0, len(cfg_words), 2)}
        tokens = [int(t) for t in f.readline().split()[1:]]
        params = {}
        while True:
            line = f.readline()
            if not line:
                break
            words = line.split()
            name, ndim = words[0].decode(), int(words[1])
            shape = [int(w) for w in words[2:2 + ndim]]
            n = math.prod(shape)
            data = torch.frombuffer(bytearray(f.read(4 * n)), dtype=torch.float32).reshape(shape)
            f.readline()
            params[name] = data.to(torch.float64).requires_grad_(True)
    return cfg, tokens, params


def rotary(t, rot, base, interleaved):
    # t: [b, s, heads, hn]; Megatron's apply_rotary_pos_emb on the first rot dims.
    s = t.shape[1]
    inv_freq = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    freqs = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)  # [s, rot/2]
    if interleaved:
        emb = torch.stack((freqs, freqs), dim=-1).reshape(s, rot)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    x, rest = t[..., :rot], t[..., rot:]
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rot_half = torch.stack((-x2, x1), dim=-1).reshape(x.shape)
    else:
        x1, x2 = x[..., : rot // 2], x[..., rot // 2:]
        rot_half = torch.cat((-x2, x1), dim=-1)
    return torch.cat((x * cos + rot_half * sin, rest), dim=-1)


def run(in_path, out_path):
    cfg, tokens, P = read_input(in_path)
    L, H, NP, NG = int(cfg["layers"]), int(cfg["hidden"]), int(cfg["heads"]), int(cfg["groups"])
    S, B, V = int(cfg["seq"]), int(cfg["batch"]), int(cfg["vocab"])
    HN, QPG = H // NP, NP // NG
    eps, rms = cfg["eps"], cfg["rmsnorm"] != 0
    tok = torch.tensor(tokens).reshape(B, S + 1)
    inputs, targets = tok[:, :S], tok[:, 1:]

    def get(name):
        return P.get(name)

    def norm(x, prefix):
        w, b = get(prefix + "/weight"), get(prefix + "/bias")
        if cfg["layernorm_1p"]:
            w = w + 1  # Megatron's --apply-layernorm-1p (zero-centred gamma)
        if rms:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
        return F.layer_norm(x, (x.shape[-1],), w, b, eps)

    def linear(x, prefix):
        w = get(prefix + "/weight")
        return F.linear(x, w.reshape(-1, w.shape[-1]), None if get(prefix + "/bias") is None
                        else get(prefix + "/bias").reshape(-1))

    x = P["language_model/embedding/word_embeddings/weight"][inputs]  # [b, s, h]
    pos = get("language_model/embedding/position_embeddings/weight")
    if pos is not None:
        x = x + pos[:S][None]
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
    for l in range(L):
        pre = "language_model/encoder/layers.%d/" % l
        qkv = linear(norm(x, pre + "input_layernorm"), pre + "self_attention/query_key_value")
        qkv = qkv.reshape(B, S, NG, QPG + 2, HN)
        q = qkv[:, :, :, :QPG].reshape(B, S, NP, HN)
        k, v = qkv[:, :, :, QPG], qkv[:, :, :, QPG + 1]  # [b, s, ng, hn]
        if cfg.get("qk_layernorm", 0):
            q = norm(q, pre + "self_attention/q_layernorm")
            k = norm(k, pre + "self_attention/k_layernorm")
        if cfg["rope"]:
            rot = int(cfg["rotary_dim"])
            q = rotary(q, rot, cfg["rotary_base"], cfg["interleaved"] != 0)
            k = rotary(k, rot, cfg["rotary_base"], cfg["interleaved"] != 0)
        k = k.repeat_interleave(QPG, dim=2)
        v = v.repeat_interleave(QPG, dim=2)
        scores = torch.einsum("bsnd,btnd->bnst", q, k) / math.sqrt(HN)
        probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
        ctx = torch.einsum("bnst,btnd->bsnd", probs, v).reshape(B, S, H)
        x = x + linear(ctx, pre + "self_attention/dense")
        h1 = linear(norm(x, pre + "post_attention_layernorm"), pre + "mlp/dense_h_to_4h")
        if cfg["swiglu"]:
            gate, up = h1.chunk(2, dim=-1)
            act = F.silu(gate) * up
        elif cfg["squared_relu"]:
            act = torch.pow(F.relu(h1), 2)  # Megatron's squared_relu
        else:
            act = F.gelu(h1, approximate="tanh" if cfg["tanh_gelu"] else "none")
        x = x + linear(act, pre + "mlp/dense_4h_to_h")
    y = norm(x, "language_model/encoder/final_layernorm")
    head = get("language_model/output_layer/weight")
    if head is None:
        head = P["language_model/embedding/word_embeddings/weight"]
    logits = y @ head.t()
    eod = int(cfg.get("eod", -1))
    if eod >= 0:
        # Megatron's --eod-mask-loss: loss_mask[inputs == eod] = 0, then loss_func's sum of
        # the masked losses over the micro-batch's counted tokens.
        mask = (inputs != eod).reshape(-1).to(torch.float64)
        losses = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="none")
        loss = (losses * mask).sum() / mask.sum().clamp(min=1)
    else:
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    loss.backward()
    with open(out_path, "wb") as f:
        f.write(("loss %.17g\n" % loss.item()).encode())
        for name, p in P.items():
            f.write(("%s %d %s\n" % (name, p.dim(), " ".join(str(s) for s in p.shape))).encode())
            f.write(p.grad.to(torch.float32).contiguous().numpy().tobytes())
            f.write(b"\n")


# Pairs of input and output files, one model each (one process: torch's import is the cost).
args = sys.argv[1:]
assert args and len(args) % 2 == 0, "usage: torch_decoder_reference.py IN OUT [IN OUT ...]"
for i in range(0, len(args), 2):
    run(args[i], args[i + 1])
