#!/usr/bin/python3
"""Synthetic Megatron indexed datasets for bench/data_startup (run with Debian's /usr/bin/python3 + numpy).

Writes the format directly (what megatron/core/datasets/indexed_dataset.py reads and what
lib/data/indexed_dataset.cpp accepts):
  .idx: b"MMIDIDX\\x00\\x00", uint64 version 1, uint8 dtype code 8 (uint16), uint64 sequence
        count S, uint64 document-index count D (= documents + 1), int32 lengths[S],
        int64 byte pointers[S], int64 document indices[D] (0, 1, ..., S: one sequence per document);
  .bin: the raw little-endian uint16 tokens.
Document lengths are lognormal (mean ~600 tokens, sigma 1, at least 1, at most 100k); tokens are
uniform in [0, 50255] and each document ends with EOD 50256. The .bin is written in chunks of
about 16M tokens, so memory stays bounded (~100 MB for 2 billion tokens, mostly the .idx arrays).

  make_datasets.py OUT blend  COUNT MIN_TOKENS MAX_TOKENS SEED   -> OUT/blend-.../ds000 ... ds<COUNT-1>
  make_datasets.py OUT single TOKENS SEED                         -> OUT/single-.../big
Prints two lines on stdout: the total token count, then the --data-path string (blend:
"w0 prefix0 w1 prefix1 ...", explicit weights drawn from the same seed; single: the prefix). A workload whose
folder holds a stamp with the same parameters is reused, not rewritten.
"""
import json
import os
import sys
import time

import numpy as np

EOD = 50256
MEAN_DOC = 600.0
SIGMA = 1.0
MAX_DOC = 100_000
CHUNK_TOKENS = 16 << 20
FORMAT_VERSION = 1  # bump when the generator changes, so old stamps stop matching


def doc_lengths(rng, total):
    """Lognormal document lengths summing to exactly `total` tokens."""
    mu = np.log(MEAN_DOC) - SIGMA * SIGMA / 2
    parts, have = [], 0
    while have < total:
        n = max(1024, int((total - have) / MEAN_DOC * 1.05))
        lens = np.clip(np.rint(rng.lognormal(mu, SIGMA, n)), 1, MAX_DOC).astype(np.int64)
        cum = np.cumsum(lens) + have
        k = int(np.searchsorted(cum, total))  # first document reaching total
        if k < n:
            lens = lens[: k + 1]
            lens[-1] -= int(cum[k] - total)  # trim the last one to land on total exactly
            lens = lens[lens > 0]
        parts.append(lens)
        have += int(lens.sum())
    out = np.concatenate(parts)
    assert int(out.sum()) == total and out.min() >= 1
    return out.astype(np.int32)


def write_dataset(prefix, total, seed):
    rng = np.random.default_rng(seed)
    lens = doc_lengths(rng, total)
    S = len(lens)
    tmp_bin, tmp_idx = prefix + ".bin.tmp", prefix + ".idx.tmp"
    with open(tmp_bin, "wb") as f:
        ends = np.cumsum(lens, dtype=np.int64)  # exclusive end of each document, in tokens
        start_tok, doc = 0, 0
        while start_tok < total:
            stop_tok = min(total, start_tok + CHUNK_TOKENS)
            toks = rng.integers(0, EOD, size=stop_tok - start_tok, dtype=np.uint16)
            d_end = int(np.searchsorted(ends, stop_tok, side="right"))
            toks[ends[doc:d_end] - 1 - start_tok] = EOD  # the last token of each document ending here
            toks.astype("<u2", copy=False).tofile(f)
            doc, start_tok = d_end, stop_tok
        f.flush()
        os.fsync(f.fileno())
    pointers = np.zeros(S, dtype="<i8")
    np.cumsum(lens[:-1].astype(np.int64) * 2, out=pointers[1:])
    with open(tmp_idx, "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(np.array([1], dtype="<u8").tobytes())
        f.write(np.array([8], dtype="<u1").tobytes())
        f.write(np.array([S, S + 1], dtype="<u8").tobytes())
        f.write(lens.astype("<i4", copy=False).tobytes())
        f.write(pointers.tobytes())
        f.write(np.arange(S + 1, dtype="<i8").tobytes())
    os.replace(tmp_bin, prefix + ".bin")
    os.replace(tmp_idx, prefix + ".idx")
    return S


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, kind = sys.argv[1], sys.argv[2]
    if kind == "blend":
        count, lo, hi, seed = (int(float(x)) for x in sys.argv[3:7])
        folder = os.path.join(out, f"blend-{count}x{lo}-{hi}-s{seed}")
        rng = np.random.default_rng(seed)
        sizes = rng.integers(lo, hi + 1, size=count)
        weights = rng.uniform(0.1, 1.0, size=count)
        weights = weights / weights.sum()
        names = [os.path.join(folder, f"ds{i:03d}") for i in range(count)]
        params = {"v": FORMAT_VERSION, "sizes": sizes.tolist(), "seed": seed}
        path = " ".join(f"{w:.6f} {p}" for w, p in zip(weights, names))
    elif kind == "single":
        total, seed = int(float(sys.argv[3])), int(sys.argv[4])
        folder = os.path.join(out, f"single-{total}-s{seed}")
        sizes = np.array([total])
        names = [os.path.join(folder, "big")]
        params = {"v": FORMAT_VERSION, "sizes": [total], "seed": seed}
        path = names[0]
    else:
        sys.exit(__doc__)
    stamp = os.path.join(folder, "stamp.json")
    try:
        with open(stamp) as f:
            fresh = json.load(f) == params and all(
                os.path.exists(n + ".bin") and os.path.exists(n + ".idx") for n in names)
    except (OSError, ValueError):
        fresh = False
    if not fresh:
        os.makedirs(folder, exist_ok=True)
        if os.path.exists(stamp):
            os.remove(stamp)
        t0 = time.time()
        for i, (n, size) in enumerate(zip(names, sizes)):
            write_dataset(n, int(size), seed * 1000 + i + 1)
        with open(stamp, "w") as f:
            json.dump(params, f)
        print(f"make_datasets: wrote {len(names)} dataset(s), {int(sizes.sum())} tokens, in {folder} "
              f"({time.time() - t0:.1f} s)", file=sys.stderr)
    print(int(sizes.sum()))
    print(path)


if __name__ == "__main__":
    main()
