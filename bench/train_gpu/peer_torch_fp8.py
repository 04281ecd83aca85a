"""FP8 peer: the PyTorch GPT of ../shared/peers/peer_torch_gpt.py with its four linear layers
per block (QKV, projection, FC1, FC2) on torch's own FP8 GEMM, torch._scaled_mm (issue #34).

Without Transformer Engine or torchao (neither is on the device machine), this is PyTorch's
FP8 path as a user writes it: bf16 autocast elsewhere; per-tensor current scaling (each
operand's scale from its own amax at the cast, as our --fp8-recipe tensorwise; our
bench_train_gpu --precision fp8 runs Megatron's default, delayed scaling); E4M3 for
activations and weights, E5M2 for gradients (Megatron's --fp8-format hybrid); fast
accumulation in the forward GEMM and full-precision accumulation in the two backward ones
(Transformer Engine's defaults); the FP8 activation and weight saved for backward, their
transposed copies made there (Hopper's FP8 GEMM takes only A row-major x B column-major).
Attention, layernorm, the embedding/LM head, loss and AdamW stay as in the bf16 peer, which
is why the measured step is the peer's "torch FP8" bar, not a reimplementation of Megatron.

  python3 bench/train_gpu/peer_torch_fp8.py --peers ../shared/peers [--only CONFIG] [--eager]
  python3 bench/train_gpu/peer_torch_fp8.py --peers ../shared/peers --selfcheck   # CPU, any torch

--selfcheck checks the autograd function's transposes and scales on the CPU with an exact
stand-in for the FP8 cast and GEMM (no rounding: the codes are the values), against
nn.Linear's forward and gradients; the FP8 rounding itself is torch's.
One JSON line per config (peer "pytorch-fp8-compile" or "pytorch-fp8-eager"), or an "error"
line naming why the config could not run (no FP8 dtype, no _scaled_mm, no GPU).
"""
import argparse, json, os, sys

import torch
import torch.nn as nn
import torch.nn.functional as F

E4M3_MAX, E5M2_MAX = 448.0, 57344.0


class ExactStandIn:
    """The FP8 cast and GEMM without rounding, for --selfcheck on a CPU (and any torch)."""

    e4m3 = e5m2 = None

    @staticmethod
    def cast(t, dtype):
        return t.float()

    @staticmethod
    def mm(a, b, scale_a, scale_b, out_dtype, fast):
        return (a @ b) * (scale_a * scale_b)


class TorchFp8:
    e4m3 = getattr(torch, "float8_e4m3fn", None)
    e5m2 = getattr(torch, "float8_e5m2", None)

    @staticmethod
    def cast(t, dtype):
        return t.to(dtype)

    @staticmethod
    def mm(a, b, scale_a, scale_b, out_dtype, fast):
        # a (M, K) row-major, b (K, N) column-major; scales are the dequantisation factors.
        return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype, use_fast_accum=fast)


OPS = TorchFp8


def quantize(t, fmt_max, dtype):
    """t / scale as FP8 codes and the dequantisation factor (scale), current scaling."""
    amax = t.detach().abs().amax().float().clamp(min=1e-12)
    scale = amax / fmt_max
    return OPS.cast((t.float() / scale).clamp(-fmt_max, fmt_max), dtype), scale


class Fp8LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        xq, sx = quantize(x2, E4M3_MAX, OPS.e4m3)
        wq, sw = quantize(w, E4M3_MAX, OPS.e4m3)
        out_dtype = torch.bfloat16 if OPS is TorchFp8 else torch.float32
        # y = x w^T: w (N, K) row-major read as w^T (K, N) column-major, as _scaled_mm wants.
        y = OPS.mm(xq, wq.t(), sx, sw, out_dtype, True)
        if b is not None:
            y = y + b.to(y.dtype)
        ctx.save_for_backward(xq, sx, wq, sw)
        ctx.has_bias = b is not None
        ctx.shape, ctx.x_dtype = shape, x.dtype
        return y.reshape(*shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        xq, sx, wq, sw = ctx.saved_tensors
        g2 = gy.reshape(-1, gy.shape[-1])
        gq, sg = quantize(g2, E5M2_MAX, OPS.e5m2)
        out_dtype = torch.bfloat16 if OPS is TorchFp8 else torch.float32
        # dx = g w: A = g (M, N) row-major, B = w (N, K) column-major, a transposed copy of w.
        w_cm = wq.t().contiguous().t()
        dx = OPS.mm(gq, w_cm, sg, sw, out_dtype, False)
        # dw = g^T x: A = g^T (N, M) row-major (a transposed copy of g), B = x (M, K) column-major.
        dw = OPS.mm(gq.t().contiguous(), xq.t().contiguous().t(), sg, sx, torch.float32, False)
        db = g2.float().sum(0) if ctx.has_bias else None
        return dx.reshape(ctx.shape).to(ctx.x_dtype), dw, db


class Fp8Linear(nn.Linear):
    def forward(self, x):
        return Fp8LinearFn.apply(x, self.weight, self.bias)


def fp8_model(peer, l, h, a, s, V):
    """The peer's GPT with every block's nn.Linear replaced by Fp8Linear (same init)."""
    model = peer.GPT(l, h, a, s, V)
    for blk in model.blocks:
        for name in ("qkv", "proj", "fc1", "fc2"):
            old = getattr(blk, name)
            new = Fp8Linear(old.in_features, old.out_features)
            new.load_state_dict(old.state_dict())
            setattr(blk, name, new)
    return model


def selfcheck():
    global OPS
    OPS = ExactStandIn
    torch.manual_seed(0)
    ref = nn.Linear(48, 32).double()
    lin = Fp8Linear(48, 32).double()
    lin.load_state_dict(ref.state_dict())
    x = torch.randn(2, 5, 48, dtype=torch.float64, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    gy = torch.randn(2, 5, 32, dtype=torch.float64)
    ref(x).backward(gy)
    lin(x2).backward(gy)
    # No rounding in the stand-in: only the fp32 GEMM and scale round-off (K = 48 or M = 10).
    for what, a, b in (("forward", lin(x2), ref(x)), ("dx", x2.grad, x.grad), ("dw", lin.weight.grad, ref.weight.grad),
                       ("db", lin.bias.grad, ref.bias.grad)):
        err = (a.double() - b.double()).abs().max().item() / max(b.abs().max().item(), 1e-30)
        if not err < 1e-5:
            print(f"selfcheck: {what} differs from nn.Linear by {err:.3g} relative", file=sys.stderr)
            return 1
    print("selfcheck: Fp8LinearFn forward, dx, dw, db equal nn.Linear's (exact stand-in for the FP8 cast and GEMM)")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "peers"))
    ap.add_argument("--only", default="")
    ap.add_argument("--eager", action="store_true", help="no torch.compile")
    ap.add_argument("--selfcheck", action="store_true")
    args = ap.parse_args()
    if args.selfcheck:
        return selfcheck()
    sys.path.insert(0, os.path.abspath(args.peers))
    import peer_torch_gpt as peer  # the bf16/fp16 peer: its model, FLOP formula and timing loop

    runs = [("gpt-1.3b", dict(l=24, h=2048, a=16, s=2048, B=8)),
            ("gpt22b-shape-4layers", dict(l=4, h=6144, a=64, s=2048, B=4))]
    name_of = "pytorch-fp8-" + ("eager" if args.eager else "compile")
    for name, kw in runs:
        if args.only and args.only not in name:
            continue
        try:
            if OPS.e4m3 is None or OPS.e5m2 is None or not hasattr(torch, "_scaled_mm"):
                raise RuntimeError(f"torch {torch.__version__} has no float8 dtypes or no torch._scaled_mm")
            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA device")
            rec = bench(peer, name, kw, compile_=not args.eager)
            rec["peer"] = name_of
            print(json.dumps(rec), flush=True)
        except Exception as e:  # one failure must not cost the other config
            print(json.dumps(dict(config=name, peer=name_of, error=repr(e)[:300])), flush=True)
    return 0


def bench(peer, name, kw, compile_, steps=20, warmup=6):
    """peer.bench's loop in bf16 (no grad scaler) on the FP8 model; the same record fields."""
    import time

    l, h, a, s, B = kw["l"], kw["h"], kw["a"], kw["s"], kw["B"]
    V = 50304
    torch.manual_seed(0)
    model = fp8_model(peer, l, h, a, s, V).to("cuda")
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step_fn = torch.compile(model) if compile_ else model
    batches = [torch.randint(0, V, (B, s + 1), device="cuda") for _ in range(4)]
    torch.cuda.reset_peak_memory_stats()

    def one(i):
        t = batches[i % 4]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(t[:, :-1], t[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for i in range(warmup):
        one(i)
    torch.cuda.synchronize()
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    for i in range(steps):
        loss = one(i)
    ev1.record()
    torch.cuda.synchronize()
    dt = ev0.elapsed_time(ev1) / 1000 / steps
    tflops = peer.megatron_flops(B, s, l, h, V) / dt / 1e12
    return dict(config=name, layers=l, hidden=h, heads=a, seq=s, micro_batch=B, params_b=round(nparams / 1e9, 3),
                ms_per_iter=round(dt * 1000, 1), tokens_per_s=round(B * s / dt), model_tflops=round(tflops, 1),
                peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 1), loss=round(loss.item(), 3))


if __name__ == "__main__":
    sys.exit(main())
