#!/usr/bin/env python3
"""PyTorch's causal attention on bench_attention's shapes: the peer of bench/attention_gpu.

torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) on contiguous
[b, np, s, hn] tensors (PyTorch's preferred layout: no transposes counted), with the flash
backend forced where PyTorch lets us (torch.nn.attention.sdpa_kernel, or the older
torch.backends.cuda.sdp_kernel); if forcing fails the default dispatch runs and the line
says so. Without scaled_dot_product_attention (torch < 2.0) an explicit masked-softmax
attention runs instead (backend=math-manual: only for smoke runs).

Then, in the same run, the same call with PyTorch's cuDNN backend forced
(SDPBackend.CUDNN_ATTENTION: cuDNN 9's fused flash attention, what Megatron reaches through
Transformer Engine on Hopper) as its own line, impl=torch-cudnn. Where this torch or device
has no cuDNN attention, or cuDNN refuses the shape, that line says why
(impl=torch-cudnn unavailable="...") and nothing else runs in its place.

Timing and FLOPs as bench_attention: device-synchronised wall time of each call, median of
--reps after 3 warm-ups; forward = 2*b*np*s*s*hn (the causal half of QK^T and PV),
forward+backward = 3.5 x forward. Backward is torch.autograd.grad of the output with a
fixed random dout (fresh gradients each call, no accumulation).

With --doc-len N (bench_attention's: every sample packed with documents of N tokens, the
last one shorter when N does not divide s) the peer is PyTorch's document masking instead:
torch.nn.attention.flex_attention, compiled (torch.compile; uncompiled it is a slow
reference), with a block mask from create_block_mask over "same document and causal" (key
blocks wholly outside a query block's document skipped, as our kernels skip tiles), one
line impl=torch-flex. FLOPs then count the masked work as bench_attention's do
(flop=masked: each document's causal half, forward = 2*b*np*hn * the sum of L*L over a
sample's documents, forward+backward = 3.5 x that). SDPA's flash and cuDNN backends take no
document mask (a dense boolean mask sends SDPA to other kernels that compute every score, not a fair
peer), so they have no masked line. Where this torch has no flex_attention (it came in
2.5) or cannot run it as asked (dropout: flex_attention has none), the line says why
(impl=torch-flex unavailable="...") and nothing else runs in its place.

  python3 peer_torch_attention.py                          # every shape but tiny, cuda fp16
  python3 peer_torch_attention.py --shape gpt-1.3b --doc-len 512   # flex_attention, documents
  python3 peer_torch_attention.py --device cpu --shape tiny --reps 2   # smoke run

Prints '#' header lines, then per shape one key=value line per peer (shape, impl, device,
dtype, b, np, s, hn, backend, fwd_ms, fwd_tflops, fwdbwd_ms, fwdbwd_tflops): impl=torch
(flash) and impl=torch-cudnn; or shape=NAME impl=IMPL error="..." when it failed, or
shape=NAME impl=torch-cudnn unavailable="..." when cuDNN attention cannot run. With
--doc-len: impl=torch-flex lines with doc_len, flop=masked and flop_fraction (the masked
count over the causal one) added, or shape=NAME impl=torch-flex doc_len=N unavailable="...".
"""
import argparse
import contextlib
import statistics
import sys
import time
import warnings

SHAPES = {  # name: (b, np, s, hn), as bench_attention.cpp
    "gpt-1.3b": (8, 16, 2048, 128),
    "gpt2-1.5b-s1024": (16, 25, 1024, 64),
    "gpt22b-shape": (4, 64, 2048, 96),
    "tiny": (2, 2, 256, 64),
}
WARMUP = 3


def flash_context(torch):
    """A context manager forcing the flash backend and its name, or (None, why not)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
        return (lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)), "flash"
    except ImportError:
        pass
    sdp_kernel = getattr(getattr(torch.backends, "cuda", None), "sdp_kernel", None)
    if sdp_kernel is not None:  # torch 2.0 - 2.2
        return (lambda: sdp_kernel(enable_flash=True, enable_math=False,
                                   enable_mem_efficient=False)), "flash"
    return None, "no way to force flash in torch %s" % torch.__version__


def cudnn_context(torch, device):
    """A context manager forcing PyTorch's cuDNN attention, or (None, why not)."""
    if device != "cuda":
        return None, "cuDNN attention needs a CUDA device"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
    except ImportError:
        return None, "torch %s has no torch.nn.attention.sdpa_kernel" % torch.__version__
    backend = getattr(SDPBackend, "CUDNN_ATTENTION", None)
    if backend is None:
        return None, "torch %s has no SDPBackend.CUDNN_ATTENTION" % torch.__version__
    return (lambda: sdpa_kernel(backend)), "cudnn"


def manual_attention(torch, q, k, v, dropout_p=0.0):
    # fp32 arithmetic: old CPU builds have no half matmul (a smoke path, not a peer number).
    s = q.shape[-2]
    qf, kf, vf = q.float(), k.float(), v.float()
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), p=dropout_p)
    return torch.matmul(probs, vf).to(q.dtype)


def median_seconds(torch, device, reps, fn):
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def inputs(torch, args, name):
    """q, k, v (requiring gradients) and the output gradient of one shape: uniform(-1, 1) like
    bench_attention, made on the host so both devices see the same data."""
    b, np_, s, hn = SHAPES[name]
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    g = torch.Generator(device="cpu").manual_seed(1)
    q, k, v, dout = (((torch.rand(b, np_, s, hn, generator=g) * 2 - 1)
                      .to(device=args.device, dtype=dtype)) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    return q, k, v, dout


def run_shape(torch, args, name, ctx_factory, backend_name, impl="torch", fallback=True):
    """One shape with one forced backend. fallback: when forcing fails, time the default
    dispatch instead (the flash row); else print why and time nothing (the cuDNN row)."""
    import torch.nn.functional as F
    b, np_, s, hn = SHAPES[name]
    q, k, v, dout = inputs(torch, args, name)

    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is None:
        attend, backend = (lambda: manual_attention(torch, q, k, v, args.dropout)), "math-manual"
    else:
        attend, backend = (lambda: sdpa(q, k, v, is_causal=True, dropout_p=args.dropout)), backend_name
    ctx = ctx_factory if (sdpa is not None and ctx_factory is not None) else contextlib.nullcontext
    note = ""
    # PyTorch says why a forced backend cannot run in warnings, then raises "No available
    # kernel": both go into the note.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with ctx():
                attend().backward(dout)  # probe: raises when the forced backend cannot run
            failure = None
        except RuntimeError as e:
            failure = e
    if failure is not None:
        e = failure
        note = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        why = [str(w.message).splitlines()[0] for w in caught if str(w.message)]
        why = [w for w in why if "cudnn" in w.lower()] or why
        if why:
            note += " (" + why[0][:160] + ")"
        note = note.replace('"', "'")
        if not fallback:
            print('shape=%s impl=%s unavailable="forcing %s failed: %s"' % (name, impl, backend_name, note),
                  flush=True)
            return
        ctx, backend = contextlib.nullcontext, "default"
    q.grad = k.grad = v.grad = None

    def fwd():
        with torch.no_grad(), ctx():
            attend()

    def fwdbwd():
        with ctx():
            torch.autograd.grad(attend(), (q, k, v), dout)

    t_fwd = median_seconds(torch, args.device, args.reps, fwd)
    t_fb = median_seconds(torch, args.device, args.reps, fwdbwd)
    flop = 2.0 * b * np_ * s * s * hn  # the causal half of QK^T and PV
    line = ("shape=%s impl=%s device=%s dtype=%s dropout=%g b=%d np=%d s=%d hn=%d backend=%s "
            "fwd_ms=%.4f fwd_tflops=%.4f fwdbwd_ms=%.4f fwdbwd_tflops=%.4f"
            % (name, impl, args.device, args.dtype, args.dropout, b, np_, s, hn, backend, t_fwd * 1e3,
               flop / t_fwd * 1e-12, t_fb * 1e3, 3.5 * flop / t_fb * 1e-12))
    if note:
        line += ' note="forcing flash failed: %s"' % note
    print(line, flush=True)


def document_square_sum(s, doc_len):
    """Sum of L*L over one sample's documents: s // doc_len of doc_len tokens, then the rest."""
    full, rest = divmod(s, doc_len)
    return full * doc_len * doc_len + rest * rest


def flex_unavailable(torch, args):
    """Why flex_attention cannot be this run's masked peer, or None when it can."""
    if args.dropout > 0:
        return "flex_attention has no attention dropout (dropout_p); run the masked peer with DROPOUT=0"
    try:
        import torch.nn.attention.flex_attention  # noqa: F401  (torch >= 2.5)
    except ImportError as e:
        return "torch %s has no torch.nn.attention.flex_attention (PyTorch >= 2.5): %s" % (
            torch.__version__, str(e).splitlines()[0][:120] if str(e) else type(e).__name__)
    if not hasattr(torch, "compile"):
        return "torch %s has no torch.compile, and uncompiled flex_attention is a slow reference" % (
            torch.__version__)
    return None


def run_flex(torch, args, name):
    """Documents of args.doc_len tokens in every sample through flex_attention, compiled, with
    a document block mask: the masked peer of bench_attention --doc-len."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    b, np_, s, hn = SHAPES[name]
    q, k, v, dout = inputs(torch, args, name)
    # Every sample has the same documents (bench_attention's layout), so one mask for the
    # batch and heads (B=None, H=None broadcast). doc[i]: the document of position i.
    doc = torch.arange(s, device=args.device) // args.doc_len

    def same_document_causal(batch, head, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (doc[q_idx] == doc[kv_idx])

    # Built once and not timed, as bench_attention builds doc_start once.
    block_mask = create_block_mask(same_document_causal, None, None, s, s, device=args.device)
    flex = torch.compile(flex_attention, dynamic=False)

    def attend():
        return flex(q, k, v, block_mask=block_mask)

    attend().backward(dout)  # compiles the forward and backward; a failure is this row's error
    q.grad = k.grad = v.grad = None

    def fwd():
        with torch.no_grad():
            attend()

    def fwdbwd():
        torch.autograd.grad(attend(), (q, k, v), dout)

    t_fwd = median_seconds(torch, args.device, args.reps, fwd)
    t_fb = median_seconds(torch, args.device, args.reps, fwdbwd)
    sq = document_square_sum(s, args.doc_len)
    flop = 2.0 * b * np_ * hn * sq  # each document's causal half of QK^T and PV
    print("shape=%s impl=torch-flex device=%s dtype=%s dropout=%g doc_len=%d flop=masked flop_fraction=%.4f "
          "b=%d np=%d s=%d hn=%d backend=flex fwd_ms=%.4f fwd_tflops=%.4f fwdbwd_ms=%.4f fwdbwd_tflops=%.4f"
          % (name, args.device, args.dtype, args.dropout, args.doc_len, float(sq) / (s * s), b, np_, s, hn,
             t_fwd * 1e3, flop / t_fwd * 1e-12, t_fb * 1e3, 3.5 * flop / t_fb * 1e-12), flush=True)


def main_documents(torch, args, names):
    """--doc-len: the flex_attention line per shape, or why there is none."""
    why = flex_unavailable(torch, args)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print("# peer_torch_attention: torch %s, device %s (%s), dtype %s, causal within documents of %d tokens "
          "(flex_attention, compiled, document block mask); median of %d reps after %d warm-ups, synchronised "
          "wall time" % (torch.__version__, args.device, gpu, args.dtype, args.doc_len, args.reps, WARMUP))
    print("# layout: q, k, v, dout contiguous [b, np, s, hn]; FLOPs count the masked work only (flop=masked): "
          "each document's causal half, fwd = 2*b*np*hn*(sum of L*L over a sample's documents), "
          "fwd+bwd = 3.5 x fwd")
    if why is not None:
        print("# note: no flex_attention row: %s" % why)
    sys.stdout.flush()
    rc = 0
    for name in names:
        if why is not None:
            print('shape=%s impl=torch-flex doc_len=%d unavailable="%s"' % (name, args.doc_len, why.replace('"', "'")),
                  flush=True)
            continue
        try:
            run_flex(torch, args, name)
        except Exception as e:  # a compile failure or out of memory is this shape's error
            msg = str(e).splitlines()[0][:200].replace('"', "'") if str(e) else type(e).__name__
            print('shape=%s impl=torch-flex doc_len=%d error="%s"' % (name, args.doc_len, msg), flush=True)
            print("peer_torch_attention: %s torch-flex: %s" % (name, e), file=sys.stderr)
            rc = 1
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return rc


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--shape", default="all", choices=["all"] + list(SHAPES))
    p.add_argument("--no-cudnn", action="store_true", help="only the flash backend's row")
    p.add_argument("--dropout", type=float, default=0.0, help="attention dropout probability (dropout_p)")
    p.add_argument("--doc-len", type=int, default=0,
                   help="0: plain causal (SDPA); N > 0: documents of N tokens per sample (flex_attention)")
    args = p.parse_args()
    if args.reps <= 0:
        p.error("--reps must be positive")
    if not 0.0 <= args.dropout < 1.0:
        p.error("--dropout must be in [0, 1)")
    if args.doc_len < 0:
        p.error("--doc-len must be 0 (off) or a number of tokens")
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("peer_torch_attention: torch %s sees no CUDA device. HINT: --device cpu for a "
              "smoke run" % torch.__version__, file=sys.stderr)
        return 1
    names = [n for n in SHAPES if n != "tiny"] if args.shape == "all" else [args.shape]
    if args.doc_len > 0:
        return main_documents(torch, args, names)
    ctx_factory, backend_name = flash_context(torch)
    cudnn_factory, cudnn_why = (None, "--no-cudnn") if args.no_cudnn else cudnn_context(torch, args.device)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print("# peer_torch_attention: torch %s, device %s (%s), dtype %s, causal; median of %d reps "
          "after %d warm-ups, synchronised wall time" % (torch.__version__, args.device, gpu,
                                                        args.dtype, args.reps, WARMUP))
    print("# layout: q, k, v, dout contiguous [b, np, s, hn]; FLOPs count the causal half only: "
          "fwd = 2*b*np*s*s*hn, fwd+bwd = 3.5 x fwd")
    if ctx_factory is None:
        print("# note: %s; default dispatch" % backend_name)
    if cudnn_factory is None:
        print("# note: no cuDNN row: %s" % cudnn_why)
    sys.stdout.flush()
    rc = 0
    for name in names:
        peers = [("torch", ctx_factory, backend_name if ctx_factory else "default", True)]
        if cudnn_factory is not None:
            peers.append(("torch-cudnn", cudnn_factory, cudnn_why, False))
        for impl, factory, bname, fallback in peers:
            try:
                run_shape(torch, args, name, factory, bname, impl, fallback)
            except Exception as e:  # one shape's failure (out of memory) is its row's error
                msg = str(e).splitlines()[0][:200].replace('"', "'") if str(e) else type(e).__name__
                print('shape=%s impl=%s error="%s"' % (name, impl, msg), flush=True)
                print("peer_torch_attention: %s %s: %s" % (name, impl, e), file=sys.stderr)
                rc = 1
            if args.device == "cuda":
                torch.cuda.empty_cache()
        if cudnn_factory is None:
            print('shape=%s impl=torch-cudnn unavailable="%s"' % (name, cudnn_why), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
