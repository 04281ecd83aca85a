#!/usr/bin/python3
"""Markdown table for bench/data_startup/run.sh from its results file.

Input lines (tab-separated): workload state tool run wall_s own_s rss_kb [import_s]
  wall_s  whole process, high-resolution clock around it (interpreter start and imports included)
  own_s   the tool's own figure: prepare_cache's "ready in <s> s", the peer's builder seconds
Each row: median (min-max) over the runs; the Megatron rows add Megatron/ours, the median
(min-max) of the per-run ratios (run r of Megatron over run r of ours, same workload and state).
"""
import statistics
import sys
from collections import defaultdict


def fmt(xs, digits=3):
    return f"{statistics.median(xs):.{digits}f} ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


def main():
    rows = defaultdict(dict)  # (workload, state, tool) -> {run: (wall, own, rss_mb, import)}
    for line in open(sys.argv[1]):
        f = line.rstrip("\n").split("\t")
        if len(f) < 7:
            continue
        imp = float(f[7]) if len(f) > 7 and f[7] else None
        rows[(f[0], f[1], f[2])][int(f[3])] = (float(f[4]), float(f[5]), float(f[6]) / 1024.0, imp)
    print("| workload | index cache | tool | whole process s | own s | peak RSS MB | Megatron/ours whole | Megatron/ours own |")
    print("|---|---|---|---|---|---|---|---|")
    keys = sorted({(w, s) for (w, s, _) in rows}, key=lambda k: (k[0], k[1] != "cold"))
    for w, s in keys:
        ours, meg = rows.get((w, s, "ours"), {}), rows.get((w, s, "megatron"), {})
        for tool, runs in (("ours", ours), ("megatron", meg)):
            if not runs:
                continue
            v = list(runs.values())
            wall, own, rss = [x[0] for x in v], [x[1] for x in v], [x[2] for x in v]
            name = "gpt-pretrain prepare_cache" if tool == "ours" else "Megatron-LM builder (python)"
            own_txt = fmt(own)
            if tool == "megatron" and v[0][3] is not None:
                own_txt += f"; imports {fmt([x[3] for x in v])}"
            r_wall = r_own = "-"
            if tool == "megatron" and ours:
                common = sorted(set(runs) & set(ours))
                if common:
                    r_wall = fmt([runs[r][0] / ours[r][0] for r in common], 2) + "x"
                    r_own = fmt([runs[r][1] / max(ours[r][1], 1e-4) for r in common], 2) + "x"
            print(f"| {w} | {s} | {name} | {fmt(wall)} | {own_txt} | {fmt(rss, 0)} | {r_wall} | {r_own} |")


if __name__ == "__main__":
    main()
