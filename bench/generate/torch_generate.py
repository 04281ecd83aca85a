"""PyTorch peer of gpt_generate for bench/generate/run.sh: the same GPT (pre-LN, learned
positions, tied LM head, fused QKV laid out per head as Megatron's query_key_value) with a
KV cache, on the fp32 main parameters read from our checkpoint with h5py. Greedy: prefill
the prompts once, then `steps` one-token decode steps. Prints one JSON line per run:
prefill and decode tokens/s and the chosen tokens (to check both compute the same thing).

usage: torch_generate.py CHECKPOINT_H5 PROMPTS_JSON STEPS RUNS THREADS
"""
import json
import sys
import time

import h5py
import torch
import torch.nn.functional as F


def load(path):
    f = h5py.File(path, "r")
    cfg = {}
    table = f.attrs["config"]
    table = table.decode() if isinstance(table, bytes) else str(table)
    for line in table.splitlines():
        parts = line.split()
        if len(parts) >= 3 and set(parts[1]) == {"."}:
            cfg[parts[0]] = " ".join(parts[2:])
    p = lambda n: torch.from_numpy(f["optimizer/main_param/language_model/" + n][()])
    layers = []
    for i in range(int(cfg["num_layers"])):
        q = "encoder/layers.%d/" % i
        layers.append({k: p(q + v) for k, v in {
            "ln1_w": "input_layernorm/weight", "ln1_b": "input_layernorm/bias",
            "qkv_w": "self_attention/query_key_value/weight", "qkv_b": "self_attention/query_key_value/bias",
            "dense_w": "self_attention/dense/weight", "dense_b": "self_attention/dense/bias",
            "ln2_w": "post_attention_layernorm/weight", "ln2_b": "post_attention_layernorm/bias",
            "fc1_w": "mlp/dense_h_to_4h/weight", "fc1_b": "mlp/dense_h_to_4h/bias",
            "fc2_w": "mlp/dense_4h_to_h/weight", "fc2_b": "mlp/dense_4h_to_h/bias"}.items()})
    model = {
        "word": p("embedding/word_embeddings/weight"), "pos": p("embedding/position_embeddings/weight"),
        "lnf_w": p("encoder/final_layernorm/weight"), "lnf_b": p("encoder/final_layernorm/bias"),
        "layers": layers, "heads": int(cfg["num_attention_heads"]), "eps": float(cfg["layernorm_epsilon"]),
        "tanh": cfg.get("openai_gelu") == "True" or cfg.get("no_bias_gelu_fusion") != "True",
    }
    return model


def forward(m, tokens, cache, start):
    """tokens (b, n) at positions [start, start + n); cache: per layer [k, v] (b, heads, len, hn)."""
    b, n = tokens.shape
    h = m["word"].shape[1]
    nh = m["heads"]
    hn = h // nh
    x = m["word"][tokens] + m["pos"][start:start + n]
    for i, L in enumerate(m["layers"]):
        a = F.layer_norm(x, (h,), L["ln1_w"], L["ln1_b"], m["eps"])
        qkv = F.linear(a, L["qkv_w"], L["qkv_b"]).view(b, n, nh, 3, hn)
        q, k, v = (qkv[:, :, :, j].transpose(1, 2) for j in range(3))  # (b, nh, n, hn)
        if cache[i] is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        cache[i] = (k, v)
        s = q @ k.transpose(-1, -2) / hn ** 0.5
        if n > 1:
            mask = torch.ones(n, k.shape[2], dtype=torch.bool).tril(k.shape[2] - n)
            s = s.masked_fill(~mask, float("-inf"))
        ctx = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, h)
        x = x + F.linear(ctx, L["dense_w"], L["dense_b"])
        a = F.layer_norm(x, (h,), L["ln2_w"], L["ln2_b"], m["eps"])
        g = F.gelu(F.linear(a, L["fc1_w"], L["fc1_b"]), approximate="tanh" if m["tanh"] else "none")
        x = x + F.linear(g, L["fc2_w"], L["fc2_b"])
    last = F.layer_norm(x[:, -1], (h,), m["lnf_w"], m["lnf_b"], m["eps"])
    return last @ m["word"].t()


def main():
    path, prompts_json, steps, runs, threads = sys.argv[1:6]
    torch.set_num_threads(int(threads))
    m = load(path)
    prompts = torch.tensor(json.load(open(prompts_json)), dtype=torch.long)
    vocab = 50257
    b, n = prompts.shape
    with torch.no_grad():
        for _ in range(int(runs)):
            cache = [None] * len(m["layers"])
            t0 = time.perf_counter()
            logits = forward(m, prompts, cache, 0)
            t1 = time.perf_counter()
            out = []
            for k in range(int(steps)):
                nxt = logits[:, :vocab].argmax(-1)
                out.append(nxt.tolist())
                logits = forward(m, nxt[:, None], cache, n + k)
            t2 = time.perf_counter()
            out.append(logits[:, :vocab].argmax(-1).tolist())
            print(json.dumps({"prefill_tokens_per_s": b * n / (t1 - t0),
                              "decode_tokens_per_s": b * int(steps) / max(t2 - t1, 1e-9),
                              "tokens": [[row[i] for row in out] for i in range(b)]}), flush=True)


if __name__ == "__main__":
    main()
