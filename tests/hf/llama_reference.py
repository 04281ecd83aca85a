"""An independent Llama forward written from Hugging Face's conventions (transformers'
modeling_llama.py: nn.Linear weights [out, in] without biases, q_proj/k_proj/v_proj with
num_key_value_heads K/V heads shared by repeat_kv, rotate_half rope with inv_freq =
rope_theta^(-2i/head_dim) and cos/sin of cat(freqs, freqs), RMSNorm x rsqrt(mean(x^2) + eps) w,
SwiGLU down(silu(gate(x)) * up(x)), model.norm, lm_head or the tied embed_tokens), reading
the exported folder itself (config.json; model.safetensors through struct/json/numpy),
compared with our model's logits from `convert_checkpoint --dump-logits` (the training
forward, or with --kv-cache the generation path's cached steps: there rope is a GEMM with
the position's rotation matrix, two nonzero fp32 products per element, within the same
elementwise stage below).

usage: llama_reference.py HF_DIR OUR_LOGITS TOKENS(comma-separated)

Tolerance (error analysis, not a fit), as in gpt2_reference.py: our side computes in fp32,
the reference in float64; a length-k fp32 dot product errs by at most gamma_k sum|a_i b_i|,
gamma_k = k u / (1 - k u), u = 2^-24 (Higham 3.1). Per layer: 6 reductions (qkv, q.k, p.v,
o_proj, gate/up, down), the RMSNorm statistic, plus two elementwise stages whose relative
error is a few u (<= gamma_k): rope (fp32 angle pos * inv_freq and its cos/sin, k >= tokens
+ 3 covers the angle's pos-proportional error) and silu(gate) * up. With the final norm and
the head: N = 9 L + 2 stages over k = max(hidden, ffn, tokens). RMSNorm keeps errors relative
to each stage's sum|a b|; at the head that is M[t, v] = sum_i |x_t,i| |head_v,i|. Bound:
|ours - ref| <= N gamma_k M[t, v]; the script prints the largest observed error / bound.
"""
import json
import math
import sys

import torch

from logits_bound import check_logits
from safetensors_read import read_safetensors


def head_weight(cfg, w):
    return w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]


def forward(cfg, w, tokens, dtype):
    def p(name):
        return w[name].to(dtype)

    h, heads, kvh = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = h // heads
    eps = cfg["rms_norm_eps"]
    n = len(tokens)

    def rms(x, name):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * p(name)

    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=dtype) / hd))
    freqs = torch.outer(torch.arange(n, dtype=dtype), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()  # (n, hd)

    def rotate_half(x):
        return torch.cat((-x[..., hd // 2:], x[..., :hd // 2]), dim=-1)

    def rope(x):  # (heads, n, hd)
        return x * cos + rotate_half(x) * sin

    x = p("model.embed_tokens.weight")[torch.tensor(tokens)]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for i in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % i
        a = rms(x, pre + "input_layernorm.weight")
        q = (a @ p(pre + "self_attn.q_proj.weight").T).reshape(n, heads, hd).transpose(0, 1)
        k = (a @ p(pre + "self_attn.k_proj.weight").T).reshape(n, kvh, hd).transpose(0, 1)
        v = (a @ p(pre + "self_attn.v_proj.weight").T).reshape(n, kvh, hd).transpose(0, 1)
        q, k = rope(q), rope(k)
        k = k.repeat_interleave(heads // kvh, dim=0)  # repeat_kv: query head j uses K/V head j // (heads/kvh)
        v = v.repeat_interleave(heads // kvh, dim=0)
        s = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        s = s.masked_fill(~mask, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(n, h)
        x = x + ctx @ p(pre + "self_attn.o_proj.weight").T
        m = rms(x, pre + "post_attention_layernorm.weight")
        g = m @ p(pre + "mlp.gate_proj.weight").T
        f = g * torch.sigmoid(g) * (m @ p(pre + "mlp.up_proj.weight").T)
        x = x + f @ p(pre + "mlp.down_proj.weight").T
    xf = rms(x, "model.norm.weight")
    return xf @ head_weight(cfg, w).to(dtype).T, xf


def main():
    hf_dir, ours_path, tokens_text = sys.argv[1:4]
    tokens = [int(t) for t in tokens_text.split(",")]
    with open(hf_dir + "/config.json") as f:
        cfg = json.load(f)
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["hidden_act"] == "silu"
    assert not cfg["attention_bias"] and not cfg["mlp_bias"] and cfg["rope_scaling"] is None
    header, w = read_safetensors(hf_dir + "/model.safetensors")
    assert header["__metadata__"] == {"format": "pt"}, header["__metadata__"]
    assert ("lm_head.weight" in w) != cfg["tie_word_embeddings"]
    V, h = cfg["vocab_size"], cfg["hidden_size"]
    assert tuple(w["model.embed_tokens.weight"].shape) == (V, h)
    check_logits(ours_path, tokens, V, forward, cfg, w, head_weight(cfg, w), stages=9 * cfg["num_hidden_layers"] + 2,
                 k=max(h, cfg["intermediate_size"], len(tokens) + 3))


main()
