"""Test-only proof that h5py reads a gpt-pretrain checkpoint written by ckpt_probe (iteration 100)."""
import sys

import h5py
import numpy as np

path = sys.argv[1]
it = 100


def expected(tensor_id, shape):
    flat = np.arange(int(np.prod(shape)), dtype=np.int64)
    return (((flat * 7 + tensor_id * 13 + it) % 61) / 4.0).astype(np.float32).reshape(shape)


with h5py.File(path, "r") as f:
    assert f["_checkpoint"].attrs["complete"] == 1
    assert f["_checkpoint"].attrs["iteration"] == it
    assert f.attrs["consumed_samples"] == it * 32
    assert f.attrs["config"].startswith("[model]")
    names = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and not n.startswith("_") else None)
    assert sorted(names) == sorted([
        "language_model/embedding/word_embeddings/weight",
        "language_model/encoder/layers.0/mlp/dense_h_to_4h/weight",
        "language_model/encoder/layers.0/self_attention/query_key_value/weight",
    ]), names
    qkv = f["language_model/encoder/layers.0/self_attention/query_key_value/weight"]
    assert qkv.dtype == np.float16 and qkv.shape == (96, 32), (qkv.dtype, qkv.shape)
    assert np.array_equal(qkv[...].astype(np.float32), expected(2, (96, 32)))
    emb = f["language_model/embedding/word_embeddings/weight"]
    # bf16 has no numpy type: HDF5 converts it to float32; the dtype attribute says what it is.
    assert emb.attrs["dtype"] == "bf16" and emb.shape == (100, 64)
    assert np.array_equal(emb[...].astype(np.float32), expected(1, (100, 64)))
    mlp = f["language_model/encoder/layers.0/mlp/dense_h_to_4h/weight"]
    assert mlp.dtype == np.float32 and np.array_equal(mlp[...], expected(0, (256, 1024)))
    manifest = f["_checkpoint/manifest"][()].decode()
    assert "query_key_value/weight\tfp16\t96,32\t" in manifest, manifest
    offsets = f["_checkpoint/rank_blobs/rng_state/offsets"][...]
    blob = f["_checkpoint/rank_blobs/rng_state/bytes"][...].tobytes()
    assert blob[offsets[1]:offsets[2]] == b"rng-state-of-rank-1-at-100", blob
print("h5py read", len(names), "tensors OK")
