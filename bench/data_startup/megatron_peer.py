#!/usr/bin/python3
"""Megatron-LM's own dataset start-up, the peer of build/app/prepare_cache in bench/data_startup.

Builds the train/valid/test datasets the way pretrain_gpt.py's train_valid_test_datasets_provider
does: BlendedMegatronDatasetBuilder(GPTDataset, [train, valid, test], is_built_on_rank,
GPTDatasetConfig(...)).build(), with torch.distributed not initialised (one process, the
builder's non-distributed path) and is_built_on_rank = lambda: True. The config fields are
those core_gpt_dataset_config_from_args fills, at pretrain_gpt.py's argument defaults
(num_dataset_builder_threads 1, mmap_bin_files True, mid_level_dataset_surplus 0.005,
create_attention_mask True, no fast cache load / deferred index mmap, which need per-split
blends or only move the loading to the first sample).
Megatron's code is only run, from the checkout given by --megatron (bench/data_startup/run.sh
extracts the mirror's HEAD there); nothing of it is copied here.

  /usr/bin/python3 megatron_peer.py --megatron DIR --data-path "w1 p1 w2 p2 ..." | PREFIX
      --cache DIR --train N --valid N --test N [--seq-length 2048] [--split 969,30,1]
      [--seed 1234] [--threads 1]
Prints "megatron_peer: import <s> s, build <s> s, samples train/valid/test <n>/<n>/<n>".

Import workaround (Debian's python3-torch 1.13 and numpy 1.24, the only ones here; current
Megatron wants torch >= 2): megatron/core/__init__.py imports the whole training stack
(tensor_parallel, distributed, dist_checkpointing, which needs torch.distributed.checkpoint,
absent from Debian's torch 1.13), and megatron/core/utils.py and safe_globals.py do the same
(safe_globals also needs numpy.dtypes, numpy >= 1.25). The dataset code uses none of it. So,
before importing megatron.core.datasets, three sys.modules entries are made:
  * megatron.core        an empty package whose __path__ is the real megatron/core folder, so its
                         submodules load from the checkout but its __init__.py is not executed;
  * megatron.core.utils  a module holding only log_single_rank, taken from Megatron's own
                         megatron.core._rank_utils (which megatron.core.utils re-exports);
  * megatron.core.safe_globals  a module holding only safe_numpy_load = numpy.load. The real one
                         is numpy.load under a lock with pickle.load patched to a restricted
                         unpickler; the index caches are plain integer .npy arrays, so pickle is
                         never reached and the result is the same (the patch costs microseconds).
Everything else (megatron.core.datasets.*, tokenizers, msc_utils, _rank_utils) is the real code,
including the compiled helpers_cpp extension (megatron/core/datasets/helpers.cpp), which run.sh
compiles once with `make` in the checkout before any timed run.
The tokenizer is a stand-in with GPT-2's vocab_size 50257, eod 50256 and a unique_identifiers
dict: the only attributes GPTDatasetConfig and GPTDataset read while building (pad falls back to
Megatron's default).
No BLAS call is on this path (numpy shuffles, cumsums and copies; the C++ helpers), so
OPENBLAS_CORETYPE does not matter here.
"""
import argparse
import os
import sys
import time
import types

T_START = time.perf_counter()


def load_megatron(root):
    sys.path.insert(0, root)
    import numpy

    import megatron  # a namespace package (no __init__.py)

    core = types.ModuleType("megatron.core")
    core.__path__ = [os.path.join(root, "megatron", "core")]
    sys.modules["megatron.core"] = core
    megatron.core = core

    from megatron.core import _rank_utils

    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = _rank_utils.log_single_rank
    sys.modules["megatron.core.utils"] = utils
    core.utils = utils

    safe = types.ModuleType("megatron.core.safe_globals")
    safe.safe_numpy_load = numpy.load
    sys.modules["megatron.core.safe_globals"] = safe
    core.safe_globals = safe

    from megatron.core.datasets import helpers  # noqa: F401  (the compiled extension must be there)
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    return BlendedMegatronDatasetBuilder, GPTDataset, GPTDatasetConfig


class StandInTokenizer:
    """What the dataset builder reads of pretrain_gpt.py's GPT-2 tokenizer: vocab_size, eod, and
    unique_identifiers (hashed into the cache file names, as a real tokenizer's are)."""

    vocab_size = 50257
    eod = 50256
    unique_identifiers = {"class": "bench.data_startup.StandInTokenizer", "vocab_size": 50257, "eod": 50256}


def parse_blend(text):
    """pretrain_gpt.py's --data-path: one prefix, or weight prefix pairs (get_blend_from_list)."""
    words = text.split()
    if len(words) == 1:
        return (words, None)
    assert len(words) % 2 == 0, "--data-path: weights and prefixes must alternate"
    return ([words[i + 1] for i in range(0, len(words), 2)], [float(words[i]) for i in range(0, len(words), 2)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True)
    ap.add_argument("--data-path", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--train", type=int, required=True)
    ap.add_argument("--valid", type=int, required=True)
    ap.add_argument("--test", type=int, required=True)
    ap.add_argument("--seq-length", type=int, default=2048)
    ap.add_argument("--split", default="969,30,1")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    Builder, GPTDataset, GPTDatasetConfig = load_megatron(os.path.abspath(a.megatron))
    t_import = time.perf_counter()

    tokenizer = StandInTokenizer()
    config = GPTDatasetConfig(
        random_seed=a.seed,
        sequence_length=a.seq_length,
        blend=parse_blend(a.data_path),
        blend_per_split=None,
        split=a.split,
        multiple_validation_sets=False,
        full_validation=False,
        num_dataset_builder_threads=a.threads,
        path_to_cache=a.cache,
        mmap_bin_files=True,
        tokenizer=tokenizer,
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        create_attention_mask=True,
        mid_level_dataset_surplus=0.005,
        allow_ambiguous_pad_tokens=False,
        fast_cache_load=False,
        defer_npy_index_mmap=False,
        data_parallel_size=1,
        sequence_parallel_size=0,
    )
    train, valid, test = Builder(GPTDataset, [a.train, a.valid, a.test], lambda: True, config).build()
    t_build = time.perf_counter()
    n = [len(d) if d is not None else 0 for d in (train, valid, test)]
    print(f"megatron_peer: import {t_import - T_START:.3f} s, build {t_build - t_import:.3f} s, "
          f"samples train/valid/test {n[0]}/{n[1]}/{n[2]}", flush=True)
    # Megatron's datasets hold numpy memmaps; exit without tearing the interpreter down slowly.
    os._exit(0)


if __name__ == "__main__":
    main()
