"""Replays our initial weights and batches in the PyTorch peer model and compares losses.

    bench_train_cpu --dump DIR --warmup 0 --steps 3 [--num-layers ... shape flags]
    /usr/bin/python3 bench/train_cpu/compare_with_peer.py DIR --heads N [--peers ../shared/peers]

Loads params.bin/layout.txt (Megatron names, our [heads, 3, head_dim] QKV row order) into
peer_torch_gpt.GPT (rows ordered [3, heads, head_dim]), runs the same AdamW steps (decay on
matrices only, as Megatron; lr 1e-4 constant, clip 1.0) on the same batches, and prints both
loss sequences. A reference check only: training never needs Python.
"""
import argparse, os, sys
import numpy as np
import torch

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--peers", default=os.path.join(os.path.dirname(__file__), "../../../shared/peers"))
ap.add_argument("--heads", type=int, default=4, help="--num-attention-heads of the dump")
ap.add_argument("--tolerance", type=float, default=2e-3)
args = ap.parse_args()
sys.path.insert(0, args.peers)
from peer_torch_gpt import GPT  # noqa: E402

flat = np.fromfile(os.path.join(args.dir, "params.bin"), dtype=np.float32)
layout = {}
for line in open(os.path.join(args.dir, "layout.txt")):
    name, off, *shape = line.split()
    shape = [int(x) for x in shape]
    layout[name] = torch.from_numpy(flat[int(off): int(off) + int(np.prod(shape))].reshape(shape).copy())
ours = [float(x) for x in open(os.path.join(args.dir, "ours.txt"))]

wte = layout["language_model/embedding/word_embeddings/weight"]
V, h = wte.shape
s = layout["language_model/embedding/position_embeddings/weight"].shape[0]
L = sum(1 for n in layout if n.endswith("input_layernorm/weight"))
tokens = torch.from_numpy(np.fromfile(os.path.join(args.dir, "tokens.bin"), dtype=np.int32).astype(np.int64))
batches = tokens.reshape(4, -1, s + 1)
B = batches.shape[1]


def qkv_rows(w, heads):
    # ours: row = head*3*hn + which*hn + e ; peer: row = which*h + head*hn + e
    hn = h // heads
    return w.reshape(heads, 3, hn, *w.shape[1:]).transpose(0, 1).reshape(w.shape)


def run(heads):
    torch.manual_seed(0)
    m = GPT(L, h, heads, s, V)
    with torch.no_grad():
        m.wte.weight.copy_(wte)
        m.wpe.weight.copy_(layout["language_model/embedding/position_embeddings/weight"])
        for i, blk in enumerate(m.blocks):
            p = f"language_model/encoder/layers.{i}/"
            blk.ln1.weight.copy_(layout[p + "input_layernorm/weight"]); blk.ln1.bias.copy_(layout[p + "input_layernorm/bias"])
            blk.qkv.weight.copy_(qkv_rows(layout[p + "self_attention/query_key_value/weight"], heads))
            blk.qkv.bias.copy_(qkv_rows(layout[p + "self_attention/query_key_value/bias"], heads))
            blk.proj.weight.copy_(layout[p + "self_attention/dense/weight"]); blk.proj.bias.copy_(layout[p + "self_attention/dense/bias"])
            blk.ln2.weight.copy_(layout[p + "post_attention_layernorm/weight"]); blk.ln2.bias.copy_(layout[p + "post_attention_layernorm/bias"])
            blk.fc1.weight.copy_(layout[p + "mlp/dense_h_to_4h/weight"]); blk.fc1.bias.copy_(layout[p + "mlp/dense_h_to_4h/bias"])
            blk.fc2.weight.copy_(layout[p + "mlp/dense_4h_to_h/weight"]); blk.fc2.bias.copy_(layout[p + "mlp/dense_4h_to_h/bias"])
        m.lnf.weight.copy_(layout["language_model/encoder/final_layernorm/weight"])
        m.lnf.bias.copy_(layout["language_model/encoder/final_layernorm/bias"])
    decay = [p for p in m.parameters() if p.dim() == 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    losses = []
    for i in range(len(ours)):
        t = batches[i % 4]
        loss = m(t[:, :-1], t[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


peer = run(args.heads)
worst = 0.0
print(f"{'step':>4} {'gpt-pretrain':>14} {'pytorch peer':>14} {'rel diff':>10}")
for i, (x, y) in enumerate(zip(ours, peer)):
    d = abs(x - y) / abs(y)
    worst = max(worst, d)
    print(f"{i + 1:>4} {x:>14.6f} {y:>14.6f} {d:>10.2e}")
print("MATCH" if worst < args.tolerance else "MISMATCH", f"(worst relative difference {worst:.2e})")
sys.exit(0 if worst < args.tolerance else 1)
