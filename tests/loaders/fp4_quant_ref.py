#!/usr/bin/env python3
"""The named FP4 quantizer reference (issue 26 item 3): llm-compressor's model_free_ptq, its numpy
oracle, and fp8conv against both.

    python fp4_quant_ref.py --work DIR [--fp8conv BIN] [--site DIR]

The reference is llm-compressor 0.14.0.1's data-free `model_free_ptq(IN, OUT, scheme=S,
ignore=...)` (llmcompressor/entrypoints/model_free/), S = "NVFP4A16" or "MXFP4A16", on the CPU,
with the compressed-tensors it pins, 0.19.0. vLLM 0.32.0 pins compressed-tensors 0.17.0, and
model_free needs 0.19.0's compressed_tensors.entrypoints.convert (exec_jobs_dynamic,
TensorProfiler), so tests/loaders/setup.sh installs the pair (and the modules llmcompressor
imports at start: datasets, pyarrow, pandas, ...) with --no-deps into the directory --site
(default build/venv-loaders/llmc), which this script puts first on sys.path.

Seeded tiny inputs are written under WORK/in (safetensors written here from numpy bytes, no hub):
dense (llama-like: embed, q/k/v/o, gate/up/down, norms, lm_head; two shards, q_proj apart from
k/v), moe (Mixtral w1/w2/w3 experts, Qwen gate/up/down experts, routers, DeepSeek-V3 and V4 MLA
projections), moe-fused (transformers v5's 3-D experts gate_up_proj / down_proj) and adv
(adversarial classes: exact E2M1 ties, values next to the ties, -0.0, negatives rounding to 0,
zero groups, an all-zero tensor, subnormals, magnitudes up to the dtype's max, groups many
octaves below the tensor's absmax, float16 absmax below 2688/65504), each in bfloat16 and
float32 (dense and adv also float16).

(a) every tensor of llm-compressor's output must equal, byte for byte, what
    tests/oracle/fp4_quant.py (numpy + ml_dtypes, no torch) computes from the input: weight_packed,
    weight_scale, weight_global_scale of each quantized linear (the fused absmax taken over the
    fused set the oracle's own rule finds), every other tensor the input's bytes.
(b) with --fp8conv BIN, `BIN quantize --scheme nvfp4|mxfp4 --format compressed-tensors IN OUT` on
    the same inputs: every tensor (name, dtype, shape, bytes) and config.json's
    quantization_config against llm-compressor's, one line per tensor; the configs are compared
    after normalizing: config group names dropped, 'ignore' as a sorted list, keys whose value is
    null or {} the same as absent, 'version' not compared (printed).
(c) what model_free_ptq does with shapes it cannot quantize (K not a multiple of the group, a
    1-D or 3-D '.weight'), checked to be what fp8conv-formats(5), FP4 QUANTIZATION says.

(d) with --venv-ct, the venv's own compressed-tensors (0.17.0, vLLM's pin; its cast_to_fp4 is
    torch.compile'd) through the same steps on every adversarial tensor, against the oracle.

Prints 'N passed, N failed'; exit 1 when a check fails, 2 when the reference cannot be imported.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))

import numpy as np  # noqa: E402

SCHEMES = {"NVFP4A16": "nvfp4", "MXFP4A16": "mxfp4"}


# ---------------------------------------------------------------- safetensors from numpy bytes
def st_dtypes():
    import ml_dtypes
    return {"BF16": np.dtype(ml_dtypes.bfloat16), "F16": np.dtype(np.float16),
            "F32": np.dtype(np.float32), "U8": np.dtype(np.uint8),
            "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "I32": np.dtype(np.int32)}


def st_write(path, tensors):
    names = {v: k for k, v in st_dtypes().items()}
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[np.dtype(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            f.write(b)


def st_read(path):
    """{name: (dtype name, shape, raw bytes)}"""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, t = e["data_offsets"]
        out[name] = (e["dtype"], tuple(e["shape"]), data[b:t])
    return out


def read_dir(d):
    """Every tensor of a checkpoint directory (all *.safetensors)."""
    out = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            for k, v in st_read(os.path.join(d, fn)).items():
                if k in out:
                    raise ValueError(f"{d}: tensor {k} in two shards")
                out[k] = v
    return out


def as_array(entry):
    dt, shape, raw = entry
    return np.frombuffer(raw, dtype=st_dtypes()[dt]).reshape(shape)


# ---------------------------------------------------------------- inputs
def cast(x, dt):
    return np.asarray(x, dtype=np.float32).astype(st_dtypes()[dt])


class Model:
    def __init__(self, name, dt, shards, ignore, config):
        self.name, self.dt, self.shards, self.ignore, self.config = name, dt, shards, ignore, config


def model_dense(dt, rng):
    H, I, V, L = 64, 96, 128, 2
    s1, s2 = {}, {}
    s1["model.embed_tokens.weight"] = cast(rng.normal(0, 1, (V, H)), dt)
    for i in range(L):
        p = f"model.layers.{i}."
        # layer 1's q_proj in shard 1, its k/v in shard 2: the fused set crosses shards (two
        # q_proj in one shard without their k/v make model_free_ptq's validate_safetensors_index
        # raise "Matched ... twice before completing set": match_names_set_eager)
        s1[p + "self_attn.q_proj.weight"] = cast(rng.normal(0, 0.02, (H, H)), dt)
        (s1 if i == 0 else s2)[p + "self_attn.k_proj.weight"] = \
            cast(rng.normal(0, 0.05 + 0.1 * i, (32, H)), dt)
        (s1 if i == 0 else s2)[p + "self_attn.v_proj.weight"] = cast(rng.normal(0, 0.01, (32, H)), dt)
        s2[p + "self_attn.o_proj.weight"] = cast(rng.normal(0, 0.03, (H, H)), dt)
        s2[p + "mlp.gate_proj.weight"] = cast(rng.normal(0, 0.02, (I, H)), dt)
        s2[p + "mlp.up_proj.weight"] = cast(rng.normal(0, 0.04, (I, H)), dt)
        s2[p + "mlp.down_proj.weight"] = cast(rng.normal(0, 0.02, (H, I)), dt)
        s2[p + "input_layernorm.weight"] = cast(1 + rng.normal(0, 0.1, (H,)), dt)
        s2[p + "post_attention_layernorm.weight"] = cast(1 + rng.normal(0, 0.1, (H,)), dt)
    s2["model.norm.weight"] = cast(1 + rng.normal(0, 0.1, (H,)), dt)
    s2["lm_head.weight"] = cast(rng.normal(0, 0.02, (V, H)), dt)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
           "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": V, "torch_dtype": TORCH_DTYPE[dt]}
    return {"model-00001-of-00002.safetensors": s1, "model-00002-of-00002.safetensors": s2}, \
        ["lm_head", "model.embed_tokens"], cfg


def model_moe(dt, rng):
    H, I, E, V = 64, 32, 4, 96
    t = {"model.embed_tokens.weight": cast(rng.normal(0, 1, (V, H)), dt)}
    ign = ["lm_head", "model.embed_tokens"]
    # layer 0: Mixtral experts w1/w2/w3 (w1/w3 fused) and its router block_sparse_moe.gate
    p = "model.layers.0."
    t[p + "block_sparse_moe.gate.weight"] = cast(rng.normal(0, 0.1, (E, H)), dt)
    ign.append(p + "block_sparse_moe.gate")
    for e in range(E):
        q = f"{p}block_sparse_moe.experts.{e}."
        t[q + "w1.weight"] = cast(rng.normal(0, 0.02 * (e + 1), (I, H)), dt)
        t[q + "w2.weight"] = cast(rng.normal(0, 0.02, (H, I)), dt)
        t[q + "w3.weight"] = cast(rng.normal(0, 0.03, (I, H)), dt)
    # DeepSeek-V3 MLA names (q_a_proj / kv_a_proj_with_mqa) and V4's (wq_a / wkv_a_with_mqa)
    t[p + "self_attn.q_a_proj.weight"] = cast(rng.normal(0, 0.02, (32, H)), dt)
    t[p + "self_attn.kv_a_proj_with_mqa.weight"] = cast(rng.normal(0, 0.05, (32, H)), dt)
    t[p + "self_attn.o_proj.weight"] = cast(rng.normal(0, 0.02, (H, H)), dt)
    t[p + "input_layernorm.weight"] = cast(1 + rng.normal(0, 0.1, (H,)), dt)
    # layer 1: Qwen-style experts gate/up/down, a shared expert, router mlp.gate
    p = "model.layers.1."
    t[p + "mlp.gate.weight"] = cast(rng.normal(0, 0.1, (E, H)), dt)
    ign.append(p + "mlp.gate")
    for e in range(E):
        q = f"{p}mlp.experts.{e}."
        t[q + "gate_proj.weight"] = cast(rng.normal(0, 0.01 * (e + 1), (I, H)), dt)
        t[q + "up_proj.weight"] = cast(rng.normal(0, 0.03, (I, H)), dt)
        t[q + "down_proj.weight"] = cast(rng.normal(0, 0.02, (H, I)), dt)
    t[p + "mlp.shared_expert.gate_proj.weight"] = cast(rng.normal(0, 0.02, (I, H)), dt)
    t[p + "mlp.shared_expert.up_proj.weight"] = cast(rng.normal(0, 0.05, (I, H)), dt)
    t[p + "mlp.shared_expert.down_proj.weight"] = cast(rng.normal(0, 0.02, (H, I)), dt)
    # Llama-4's feed_forward.gate_proj / up_proj: model_free loads them together
    # (DEFAULT_FUSED_MAPPINGS) but does not fuse them (_DEFAULT_FUSED_MAPPINGS_LIST: mlp. only)
    t[p + "feed_forward.gate_proj.weight"] = cast(rng.normal(0, 0.02, (I, H)), dt)
    t[p + "feed_forward.up_proj.weight"] = cast(rng.normal(0, 0.06, (I, H)), dt)
    t[p + "attn.wq_a.weight"] = cast(rng.normal(0, 0.02, (32, H)), dt)
    t[p + "attn.wkv_a_with_mqa.weight"] = cast(rng.normal(0, 0.07, (32, H)), dt)
    t[p + "post_attention_layernorm.weight"] = cast(1 + rng.normal(0, 0.1, (H,)), dt)
    t["model.norm.weight"] = cast(1 + rng.normal(0, 0.1, (H,)), dt)
    t["lm_head.weight"] = cast(rng.normal(0, 0.02, (V, H)), dt)
    cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": H,
           "intermediate_size": I, "num_local_experts": E, "num_hidden_layers": 2,
           "vocab_size": V, "torch_dtype": TORCH_DTYPE[dt]}
    return {"model.safetensors": t}, sorted(ign), cfg


def model_moe_fused(dt, rng):
    H, I, E, V = 64, 32, 4, 96
    p = "model.layers.0."
    t = {"model.embed_tokens.weight": cast(rng.normal(0, 1, (V, H)), dt),
         p + "mlp.gate.weight": cast(rng.normal(0, 0.1, (E, H)), dt),
         # transformers v5 Qwen3-MoE: [E, 2I, H] and [E, H, I] ([E, out, in])
         p + "mlp.experts.gate_up_proj": cast(rng.normal(0, 0.02, (E, 2 * I, H)), dt),
         p + "mlp.experts.down_proj": cast(rng.normal(0, 0.02, (E, H, I)), dt),
         p + "self_attn.q_proj.weight": cast(rng.normal(0, 0.02, (H, H)), dt),
         p + "self_attn.k_proj.weight": cast(rng.normal(0, 0.02, (32, H)), dt),
         p + "self_attn.v_proj.weight": cast(rng.normal(0, 0.02, (32, H)), dt),
         p + "self_attn.o_proj.weight": cast(rng.normal(0, 0.02, (H, H)), dt),
         p + "input_layernorm.weight": cast(1 + rng.normal(0, 0.1, (H,)), dt),
         "model.norm.weight": cast(1 + rng.normal(0, 0.1, (H,)), dt),
         "lm_head.weight": cast(rng.normal(0, 0.02, (V, H)), dt)}
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": H,
           "moe_intermediate_size": I, "num_experts": E, "num_hidden_layers": 1,
           "vocab_size": V, "torch_dtype": TORCH_DTYPE[dt]}
    return {"model.safetensors": t}, ["lm_head", "model.embed_tokens", p + "mlp.gate"], cfg


def model_llama4_fused(dt, rng):
    """Llama-4's text model with its experts fused [E, in, out]: transformers'
    Llama4TextExperts holds gate_up_proj [E, H, 2I] and down_proj [E, I, H], and vLLM's
    models/llama4.py load_moe_expert_weights splits gate_up_proj with chunk(2, dim=-1) and
    transposes each weight with transpose(-1, -2) (fp8conv-formats(5), FP4 QUANTIZATION). 2I = H,
    so only the model type tells the axes of gate_up_proj apart."""
    H, I, E, V = 64, 32, 4, 96
    p = "language_model.model.layers.0."
    t = {"language_model.model.embed_tokens.weight": cast(rng.normal(0, 1, (V, H)), dt),
         p + "feed_forward.router.weight": cast(rng.normal(0, 0.1, (E, H)), dt),
         p + "feed_forward.experts.gate_up_proj": cast(rng.normal(0, 0.02, (E, H, 2 * I)), dt),
         p + "feed_forward.experts.down_proj": cast(rng.normal(0, 0.02, (E, I, H)), dt),
         p + "feed_forward.shared_expert.gate_proj.weight": cast(rng.normal(0, 0.02, (I, H)), dt),
         p + "feed_forward.shared_expert.up_proj.weight": cast(rng.normal(0, 0.02, (I, H)), dt),
         p + "feed_forward.shared_expert.down_proj.weight": cast(rng.normal(0, 0.02, (H, I)), dt),
         p + "self_attn.q_proj.weight": cast(rng.normal(0, 0.02, (H, H)), dt),
         p + "self_attn.o_proj.weight": cast(rng.normal(0, 0.02, (H, H)), dt),
         p + "input_layernorm.weight": cast(1 + rng.normal(0, 0.1, (H,)), dt),
         "language_model.model.norm.weight": cast(1 + rng.normal(0, 0.1, (H,)), dt),
         "language_model.lm_head.weight": cast(rng.normal(0, 0.02, (V, H)), dt)}
    tc = {"model_type": "llama4_text", "hidden_size": H, "intermediate_size": I,
          "intermediate_size_mlp": 2 * I, "num_local_experts": E, "num_hidden_layers": 1,
          "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16, "vocab_size": V}
    cfg = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
           "text_config": tc, "torch_dtype": TORCH_DTYPE[dt]}
    return ({"model.safetensors": t},
            ["language_model.lm_head", "language_model.model.embed_tokens",
             p + "feed_forward.router"], cfg)


# Models whose fused experts are [E, in, out]: llm-compressor's model_free_ptq splits every fused
# tensor on axis 1 as if [E, out, in] (converter.py split_fused_moe_experts), which for these is
# the input axis; fp8conv reads the transpose, as vLLM does. Held to the oracle alone.
TRANSPOSED = {"llama4-fused"}


def adv_ties(dt, i):
    """Rows whose every 16-group holds 6 * 2^i (so the group scale is 2^i under both schemes:
    NVFP4 with a global of 2^12, MXFP4 exactly) and values x * 2^i at and next to each E2M1
    threshold x (the next value of D below and above), -0.0, and negatives that round to 0."""
    mant = {"BF16": 7, "F16": 10, "F32": 23}[dt]
    thr = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    lo, hi = [], []
    for x in thr:
        e = np.floor(np.log2(x))
        ulp = 2.0 ** (e - mant)
        hi.append(x + ulp)
        lo.append(x - (ulp / 2 if x == 2.0 ** e else ulp))
    rows = [[6.0] + thr + [-x for x in thr] + [-0.0],
            [6.0, -0.0, -0.1, -0.2, -0.25, 0.1, 0.0, -1e-3] + thr + [-0.2499],
            [6.0] + lo + [-x for x in lo] + [-6.0],
            [-6.0] + hi + [-x for x in hi] + [6.0],
            [6.0] + [-v for v in lo] + hi + [0.0]]
    rows = [r + rows[(j + 1) % len(rows)] for j, r in enumerate(rows)]   # 32 a row
    return cast(np.array(rows, dtype=np.float64) * 2.0 ** i, dt)


def model_adv(dt, rng):
    d = st_dtypes()[dt]
    fmax = float(np.finfo(np.float32).max) if dt != "F16" else 65504.0
    if dt == "BF16":
        fmax = float(np.array([3.3895313892515355e38], dtype=np.float32)[0])
    tiny = {"BF16": 2.0 ** -126, "F16": 2.0 ** -14, "F32": 2.0 ** -126}[dt]
    sub = {"BF16": 2.0 ** -133, "F16": 2.0 ** -24, "F32": 2.0 ** -149}[dt]
    t = {}

    def put(cls, a):
        t[f"adv.{cls}.down_proj.weight"] = cast(a, dt)

    # ties: tensor absmax 2688 / 2^12 = 0.65625 (global 4096), groups of absmax 6 * 2^-4
    ties = adv_ties(dt, -4).astype(np.float32)
    ties = np.concatenate([ties, np.full((1, 32), 0.65625, np.float32)], axis=0)
    put("ties", ties)
    put("ties_mx_only", adv_ties(dt, 3).astype(np.float32))
    z = rng.normal(0, 0.02, (8, 64)).astype(np.float32)
    z[2, :] = 0
    z[5, 16:48] = 0
    z[6, 32:] = -0.0
    put("zero_groups", z)
    put("all_zero", np.zeros((4, 64), np.float32))
    put("all_negzero", np.full((4, 64), -0.0, np.float32))
    put("random", rng.normal(0, 1, (16, 64)) * np.exp2(rng.integers(-12, 4, (16, 1))))
    # groups spanning many octaves below the tensor absmax: E4M3 subnormal group scales,
    # group scales that round to 0 (-> 0.125), and saturation at 448
    wide = rng.normal(0, 1, (32, 64)) * np.exp2(-np.arange(32)[:, None] * 0.75)
    wide[0, 0] = 100.0
    put("octaves", wide)
    # random exponents element by element
    put("exponents", rng.choice([-1, 1], (8, 64)) * np.exp2(rng.uniform(-30, 10, (8, 64))))
    # subnormals of D, normal/subnormal boundary, and a tensor of subnormals only
    sb = rng.choice([-1, 1], (4, 64)) * sub * rng.integers(0, 64, (4, 64))
    sb[0, :32] = tiny * rng.uniform(0.5, 2, 32)
    sb[1, :] = sub
    put("subnormal", sb)
    put("subnormal_only", rng.choice([-1, 1], (2, 64)) * sub * rng.integers(1, 5, (2, 64)))
    # up to the dtype's max: MXFP4 group absmax rounding up to inf (scale inf, byte 127),
    # NVFP4 reciprocal of the absmax subnormal
    hg = rng.normal(0, 1, (4, 64)) * fmax / 8
    hg[0, 0] = fmax
    hg[1, :32] = fmax * 0.875
    hg[2, :32] = fmax * 0.5
    put("huge", np.clip(hg, -fmax, fmax))
    # mantissa .75 boundaries of round_to_power_2 (MXFP4)
    mx = np.tile(np.array([1.0, 1.5, 1.75, 1.875, 1.9921875, 1.25, 1.7421875, 1.0078125]), (1, 8)) \
        * np.exp2(rng.integers(-10, 10, (8, 1)))
    put("pow2_edges", mx)
    if dt == "F16":
        # absmax below 2688 / 65504: the global overflows float16 and becomes 1.0
        put("f16_small", rng.normal(0, 0.005, (8, 64)))
        put("f16_edge", np.concatenate([rng.normal(0, 0.01, (7, 64)),
                                        np.full((1, 64), 0.041015625)], axis=0))
        put("f16_edge2", np.concatenate([rng.normal(0, 0.01, (7, 64)),
                                         np.full((1, 64), 0.0410461)], axis=0))
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "torch_dtype": TORCH_DTYPE[dt]}
    return {"model.safetensors": t}, [], cfg


TORCH_DTYPE = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}
MODELS = [("dense", model_dense, ["BF16", "F32", "F16"]), ("moe", model_moe, ["BF16", "F32"]),
          ("moe-fused", model_moe_fused, ["BF16", "F32"]),
          ("llama4-fused", model_llama4_fused, ["BF16", "F32"]),
          ("adv", model_adv, ["BF16", "F32", "F16"])]


def write_model(root, name, dt, seed):
    fn = dict((m, f) for m, f, _ in MODELS)[name]
    shards, ignore, cfg = fn(dt, np.random.default_rng(seed))
    d = os.path.join(root, f"{name}-{dt.lower()}")
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    wm = {}
    for fn_, ts in shards.items():
        st_write(os.path.join(d, fn_), ts)
        wm.update({k: fn_ for k in ts})
    if len(shards) > 1:
        total = sum(a.nbytes for ts in shards.values() for a in ts.values())
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return d, ignore


# ---------------------------------------------------------------- the oracle's side
FUSED_RULES = [
    # --fused-sets model_free: llmcompressor/entrypoints/model_free/microscale.py
    # _DEFAULT_FUSED_MAPPINGS_LIST (used by converter.py _process_microscale): names end in these,
    # the part before the last component the same; only complete sets share a global scale
    (r"^(.*(?:attn|attention))\.(q_proj|k_proj|v_proj)\.weight$", ("q_proj", "k_proj", "v_proj")),
    (r"^(.*(?:attn|attention))\.(wq_a|wkv_a_with_mqa)\.weight$", ("wq_a", "wkv_a_with_mqa")),
    (r"^(.*mlp)\.(gate_proj|up_proj)\.weight$", ("gate_proj", "up_proj")),
    (r"^(.*)\.?(w1|w3)\.weight$", ("w1", "w3")),
]


# --fused-sets siblings: llm-compressor's oneshot fuses sibling modules by attribute name
# (observers/helpers.py FUSED_LAYER_NAMES, fuse_weight_observers), which is what vLLM loads as one
# layer (q/k/v and gate/up of every parent, experts and shared experts included). model_free's
# own list leaves per-expert and shared-expert gate/up, feed_forward gate/up and q_a_proj /
# kv_a_proj_with_mqa unfused, which fp8conv verify calls fused-global-scale. This mode runs
# model_free_ptq with its list replaced by these sibling patterns, oneshot's sets plus
# model_free's wq_a / wkv_a_with_mqa (pairs form in name order, complete sets only, as
# match_names_set_eager does), and the oracle with the same rule.
ONESHOT_RULES = [
    (r"^(.*)\.(q_proj|k_proj|v_proj)\.weight$", ("q_proj", "k_proj", "v_proj")),
    (r"^(.*)\.(q_a_proj|kv_a_proj_with_mqa)\.weight$", ("q_a_proj", "kv_a_proj_with_mqa")),
    (r"^(.*)\.(wq_a|wkv_a_with_mqa)\.weight$", ("wq_a", "wkv_a_with_mqa")),
    (r"^(.*)\.(gate_proj|up_proj)\.weight$", ("gate_proj", "up_proj")),
    (r"^(.*)\.(w1|w3)\.weight$", ("w1", "w3")),
]
ONESHOT_LIST = [[f"re:.*\\.{p}\\.weight$" for p in parts] for _, parts in ONESHOT_RULES]


def fused_sets(names, rules=None):
    """{name: tuple of the names sharing its global scale}"""
    rules = rules or FUSED_RULES
    groups = {}
    for n in names:
        for i, (rx, parts) in enumerate(rules):
            m = re.match(rx, n)
            if m:
                groups.setdefault((i, m.group(1)), {})[m.group(2)] = n
                break
    out = {}
    for (i, _), members in groups.items():
        if set(members) == set(rules[i][1]):
            for n in members.values():
                out[n] = tuple(sorted(members.values()))
    return out


def split_fused_experts(tensors, transposed=False):
    """llmcompressor/entrypoints/model_free/converter.py split_fused_moe_experts: a 3-D tensor
    whose name holds gate_up_proj ([E, 2I, H]: rows [0, I) gate, [I, 2I) up) or down_proj becomes
    one 2-D tensor per expert, named NAME with gate_up_proj -> E.gate_proj / E.up_proj and
    down_proj -> E.down_proj, '.weight' appended."""
    out = {}
    for name, a in tensors.items():
        key = "gate_up_proj" if "gate_up_proj" in name else ("down_proj" if "down_proj" in name else None)
        if key and a.ndim == 3:
            parts = ["gate_proj", "up_proj"] if key == "gate_up_proj" else ["down_proj"]
            n = a.shape[2 if transposed else 1] // len(parts)
            for e in range(a.shape[0]):
                for j, p in enumerate(parts):
                    k = name.replace(key, f"{e}.{p}")
                    if not k.endswith(".weight"):
                        k += ".weight"
                    # [E, in, out]: the weight is the transpose of its columns
                    out[k] = (a[e, :, j * n:(j + 1) * n].T if transposed
                              else a[e, j * n:(j + 1) * n])
        else:
            out[name] = a
    return out


def quantized(name, a, ignore):
    """compressed_tensors utils/match.py match_quantizable_tensors with targets ["Linear"]: every
    '*.weight' whose module does not end in 'norm' and is not ignored."""
    mod, _, param = name.rpartition(".")
    return param == "weight" and not mod.endswith("norm") and mod not in ignore


def oracle_output(in_dir, scheme, ignore, rules=None, transposed=False):
    import fp4_quant as O
    raw = read_dir(in_dir)
    arrays = split_fused_experts({k: as_array(v) for k, v in raw.items()}, transposed)
    names = [k for k, a in arrays.items() if quantized(k, a, ignore)]
    fused = fused_sets(names, rules) if scheme == "NVFP4A16" else {}
    out = {}
    for k, a in arrays.items():
        if k not in names:
            out[k] = raw[k]
            continue
        mod = k[: -len(".weight")]
        if scheme == "NVFP4A16":
            fa = None
            if k in fused:
                fa = max(O.absmax(arrays[p]) for p in fused[k])
            packed, scale, g = O.nvfp4_quantize(a, fa)
            out[mod + ".weight_global_scale"] = ("F32", (1,), g.tobytes())
            out[mod + ".weight_scale"] = ("F8_E4M3", scale.shape, scale.tobytes())
        else:
            packed, scale = O.mxfp4_quantize(a)
            out[mod + ".weight_scale"] = ("U8", scale.shape, scale.tobytes())
        out[mod + ".weight_packed"] = ("U8", packed.shape, packed.tobytes())
    return out, fused


# ---------------------------------------------------------------- checks
class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"  {'ok  ' if ok else 'FAIL'} {what}{(': ' + detail) if detail else ''}", flush=True)
        return ok


def run_reference(in_dir, out_dir, scheme, ignore, fused_list=None):
    from llmcompressor.entrypoints.model_free import model_free_ptq
    from llmcompressor.entrypoints.model_free import microscale
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    saved = microscale._DEFAULT_FUSED_MAPPINGS_LIST
    if fused_list is not None:
        microscale._DEFAULT_FUSED_MAPPINGS_LIST = fused_list
    try:
        model_free_ptq(in_dir, out_dir, scheme=scheme, ignore=list(ignore), device="cpu")
    finally:
        microscale._DEFAULT_FUSED_MAPPINGS_LIST = saved


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def describe_diff(name, want, got):
    wdt, wsh, wb = want
    gdt, gsh, gb = got
    if (wdt, wsh) != (gdt, gsh):
        return f"{gdt}{list(gsh)} where {wdt}{list(wsh)}"
    n = sum(1 for x, y in zip(wb, gb) if x != y)
    i = first_diff(wb, gb)
    return f"{n} of {len(wb)} bytes differ, first at byte {i} ({gb[i]:#04x} where {wb[i]:#04x})"


def compare_tensors(T, label, want, got, kinds=None):
    """One line per tensor; want is the reference."""
    bad = 0
    for k in sorted(set(want) | set(got)):
        if k not in got:
            T.check(False, f"{label} {k}", "missing")
            bad += 1
        elif k not in want:
            T.check(False, f"{label} {k}", "not in the reference")
            bad += 1
        elif want[k] == got[k]:
            T.check(True, f"{label} {k}", f"{want[k][0]}{list(want[k][1])}")
        else:
            T.check(False, f"{label} {k}", describe_diff(k, want[k], got[k]))
            bad += 1
    return bad


def normalize_qconfig(q):
    def norm(v):
        if isinstance(v, dict):
            return {k: norm(x) for k, x in sorted(v.items()) if x is not None and x != {}}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v
    q = dict(q or {})
    q.pop("version", None)
    if isinstance(q.get("config_groups"), dict):
        q["config_groups"] = sorted((norm(g) for g in q["config_groups"].values()),
                                    key=lambda g: json.dumps(g, sort_keys=True))
    if isinstance(q.get("ignore"), list):
        q["ignore"] = sorted(q["ignore"])
    return norm(q)


def compare_config(T, label, ref_dir, got_dir):
    rq = json.load(open(os.path.join(ref_dir, "config.json"))).get("quantization_config")
    gq = json.load(open(os.path.join(got_dir, "config.json"))).get("quantization_config")
    rn, gn = normalize_qconfig(rq), normalize_qconfig(gq)
    print(f"  note {label} config version: reference {rq.get('version')!r}, "
          f"fp8conv {(gq or {}).get('version')!r}")
    diffs = []
    for k in sorted(set(rn) | set(gn)):
        if rn.get(k) != gn.get(k):
            diffs.append(f"{k}: {json.dumps(gn.get(k), sort_keys=True)} where "
                         f"{json.dumps(rn.get(k), sort_keys=True)}")
    T.check(not diffs, f"{label} config.json quantization_config", "; ".join(diffs))


def behaviour(T, work):
    """(c): what model_free_ptq does with tensors it cannot quantize, and with the 1-D tensors it
    leaves alone (a '*norm.weight', a bias)."""
    cases = [("k_not_multiple_nvfp4", "NVFP4A16", {"x.down_proj.weight": (8, 40)}, None),
             ("k_not_multiple_mxfp4", "MXFP4A16", {"x.down_proj.weight": (8, 48)}, None),
             ("one_d_weight", "NVFP4A16", {"x.scale_proj.weight": (64,)}, None),
             ("three_d_weight", "NVFP4A16", {"x.experts.weight": (2, 8, 64)}, None),
             ("one_d_norm", "NVFP4A16", {"x.q_norm.weight": (64,), "x.o_proj.weight": (8, 64)},
              "x.q_norm.weight"),
             ("bias", "MXFP4A16", {"x.o_proj.bias": (8,), "x.o_proj.weight": (8, 64)},
              "x.o_proj.bias")]
    rng = np.random.default_rng(7)
    for name, scheme, shapes, keep in cases:
        d = os.path.join(work, "in", "shape-" + name)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        st_write(os.path.join(d, "model.safetensors"),
                 {k: cast(rng.normal(0, 0.02, s), "BF16") for k, s in shapes.items()})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"]}, f)
        out = os.path.join(work, "ref", "shape-" + name)
        try:
            run_reference(d, out, scheme, [])
            o, i = read_dir(out), read_dir(d)
            got = "kept" if keep and o.get(keep) == i[keep] else "quantized"
            detail = "no error"
        except Exception as e:  # noqa: BLE001 - the reference's own error is the result
            got, detail = "raises", f"{type(e).__name__}: {str(e).splitlines()[0][:140]}"
        want = "kept" if keep else "raises"
        T.check(got == want, f"model_free_ptq {scheme} {name} {shapes}", f"{got} ({detail})")


def venv_ct_check(work):
    """(d) in a child process with --site last on sys.path: the venv's own compressed-tensors (0.17.0, vLLM's pin,
    whose cast_to_fp4 is torch.compile'd) through the same steps model_free_ptq takes (per-group
    amin/amax, generate_gparam of the tensor's absmax, calculate_qparams, the scale copied into a
    parameter of the weight's dtype, quantize, pack_fp4_to_uint8, compress_mx_scale) on every
    adversarial tensor; prints one line per tensor and scheme that differs from the oracle, then
    'venv-ct: N equal, N differ'."""
    import torch  # noqa: F401  (the child's imports: torch and the venv's compressed_tensors)
    import torch._dynamo
    import compressed_tensors as ct
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8
    from compressed_tensors.compressors.mx_utils import compress_mx_scale
    import fp4_quant as O
    torch._dynamo.config.recompile_limit = 1 << 20   # keep every call compiled
    td = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    e4m3 = torch.float8_e4m3fn
    nv = QuantizationArgs(num_bits=4, type="float", strategy="tensor_group", symmetric=True,
                          dynamic=False, group_size=16, scale_dtype=e4m3, zp_dtype=e4m3)
    mx = QuantizationArgs(num_bits=4, type="float", strategy="group", symmetric=True,
                          dynamic=False, group_size=32, scale_dtype=torch.uint8, zp_dtype=torch.uint8)
    print(f"venv-ct: compressed-tensors {ct.__version__} ({os.path.dirname(ct.__file__)})")
    equal = differ = 0
    for dt in ("BF16", "F32", "F16"):
        for k, e in sorted(read_dir(os.path.join(work, "in", f"adv-{dt.lower()}")).items()):
            a = as_array(e)
            w = torch.from_numpy(a.astype(np.float32)).to(td[dt])
            for name, qa, g in (("NVFP4", nv, 16), ("MXFP4", mx, 32)):
                x = w.unflatten(-1, (-1, g))
                mn, mxv = torch.amin(x, -1), torch.amax(x, -1)
                gs = None
                if name == "NVFP4":
                    A = torch.max(mxv.max(), -mn.min())
                    gs = generate_gparam(-A.reshape(1), A.reshape(1))
                s, _ = calculate_qparams(mn, mxv, qa, global_scale=gs)
                sp = torch.empty(s.shape, dtype=td[dt])
                sp.copy_(s)
                packed = pack_fp4_to_uint8(quantize(w, sp, None, qa, global_scale=gs)).numpy()
                if name == "NVFP4":
                    p2, s2, g2 = O.nvfp4_quantize(a)
                    ok = (packed.tobytes() == p2.tobytes() and gs.numpy().tobytes() == g2.tobytes()
                          and sp.to(e4m3).view(torch.uint8).numpy().tobytes() == s2.tobytes())
                else:
                    p2, b2 = O.mxfp4_quantize(a)
                    ok = (packed.tobytes() == p2.tobytes()
                          and compress_mx_scale(sp, torch.uint8).numpy().tobytes() == b2.tobytes())
                equal += ok
                differ += not ok
                if not ok:
                    print(f"venv-ct: {dt} {k} {name} differs from the oracle")
    print(f"venv-ct: {equal} equal, {differ} differ")
    return 1 if differ else 0


# What fp8conv refuses by design where the reference writes something
# (fp8conv-formats(5), FP4 QUANTIZATION; its "What fp8conv writes"):
# (why, a regex its message must match), or None.
def expected_refusal(model, dt, scheme):
    if dt == "F16":
        return ("F16 weights: the reference's F16 global scale overflows", r"not f16")
    if model == "adv" and scheme == "MXFP4A16":
        return ("adv.huge: an MX scale past E8M0's range", r"adv\.huge.*E8M0")
    return None


def without(in_dir, out_dir, drop):
    """A copy of checkpoint in_dir without tensor `drop` (one shard)."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    shutil.copytree(in_dir, out_dir)
    t = st_read(os.path.join(in_dir, "model.safetensors"))
    st_write(os.path.join(out_dir, "model.safetensors"),
             {k: as_array(v) for k, v in t.items() if k != drop})


def run_fp8conv(binary, scheme, in_dir, out_dir):
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    cmd = [binary, "quantize", "--scheme", SCHEMES[scheme], "--format", "compressed-tensors",
           in_dir, out_dir]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r, cmd


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--fp8conv")
    ap.add_argument("--site", default=os.path.join(ROOT, "build", "venv-loaders", "llmc"))
    ap.add_argument("--models", default=",".join(m for m, _, _ in MODELS))
    ap.add_argument("--fused-sets", choices=("model_free", "siblings"), default="model_free",
                    help="which parts share an NVFP4 global scale (see ONESHOT_RULES)")
    ap.add_argument("--venv-ct", action="store_true",
                    help="also hold the venv's own compressed-tensors (vLLM's pin) to the oracle")
    ap.add_argument("--venv-ct-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.venv_ct_child:
        # --site last: the venv's compressed_tensors first, ml_dtypes (for the oracle) from --site
        sys.path.append(os.path.abspath(args.site))
        return venv_ct_check(args.work)
    sys.path.insert(0, os.path.abspath(args.site))
    try:
        import compressed_tensors
        import llmcompressor.entrypoints.model_free  # noqa: F401
        import llmcompressor
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        print(f"fp4_quant_ref: cannot import llmcompressor from {args.site} (make check-fp4-quant "
              "installs it with tests/loaders/setup.sh)", file=sys.stderr)
        return 2
    print(f"reference: llmcompressor {llmcompressor.__version__} model_free_ptq, compressed-tensors "
          f"{compressed_tensors.__version__} ({os.path.dirname(compressed_tensors.__file__)}), "
          f"fused sets: {args.fused_sets}")
    os.makedirs(args.work, exist_ok=True)
    T = Tally()
    want_models = set(args.models.split(","))
    fp8conv_missing = {}   # scheme -> why fp8conv cannot write it
    seed = 26
    for mname, _, dts in MODELS:
        if mname not in want_models:
            continue
        for dt in dts:
            seed += 1
            in_dir, ignore = write_model(os.path.join(args.work, "in"), mname, dt, seed)
            for scheme in SCHEMES:
                label = f"{mname}-{dt.lower()} {scheme}"
                oneshot = args.fused_sets == "siblings"
                if mname in TRANSPOSED:
                    want, _ = oracle_output(in_dir, scheme, ignore,
                                            ONESHOT_RULES if oneshot else None, transposed=True)
                    print(f"{label}: the oracle, each expert's weight transposed", flush=True)
                    if not args.fp8conv:
                        continue
                    out_dir = os.path.join(args.work, "fp8conv", f"{mname}-{dt.lower()}-{scheme}")
                    r, cmd = run_fp8conv(args.fp8conv, scheme, in_dir, out_dir)
                    if T.check(r.returncode == 0, f"{label} fp8conv",
                               f"{' '.join(cmd)} exit {r.returncode}: {r.stderr[-300:]}"):
                        compare_tensors(T, f"{label} fp8conv vs the oracle", want,
                                        read_dir(out_dir))
                    continue
                print(f"{label}: model_free_ptq(ignore={ignore})", flush=True)
                ref_dir = os.path.join(args.work, "ref", f"{mname}-{dt.lower()}-{scheme}")
                run_reference(in_dir, ref_dir, scheme, ignore, ONESHOT_LIST if oneshot else None)
                ref = read_dir(ref_dir)
                want, fused = oracle_output(in_dir, scheme, ignore, ONESHOT_RULES if oneshot else None)
                compare_tensors(T, f"{label} oracle", ref, want)
                if args.fp8conv and scheme == "NVFP4A16":
                    # what fp8conv's own verify says of the reference's fused sets (a note)
                    r = subprocess.run([args.fp8conv, "verify", ref_dir], capture_output=True,
                                       text=True)
                    n = (r.stdout + r.stderr).count("[fused-global-scale]")
                    print(f"  note {label}: fp8conv verify on the reference output: {n} "
                          f"fused-global-scale error(s) (--fused-sets {args.fused_sets})")
                if not args.fp8conv or scheme in fp8conv_missing:
                    continue
                out_dir = os.path.join(args.work, "fp8conv", f"{mname}-{dt.lower()}-{scheme}")
                r, cmd = run_fp8conv(args.fp8conv, scheme, in_dir, out_dir)
                refusal = expected_refusal(mname, dt, scheme)
                if refusal:
                    err = (r.stderr or r.stdout).strip()
                    ok = r.returncode == 3 and re.search(refusal[1], err) and \
                        not os.path.exists(out_dir)
                    T.check(bool(ok), f"{label} fp8conv", f"refused by design ({refusal[0]})"
                            if ok else f"exit {r.returncode}, want 3 ({refusal[0]}): {err[-300:]}")
                    if mname == "adv" and dt != "F16":
                        # the other adversarial tensors, compared without adv.huge
                        in2 = os.path.join(args.work, "in", f"adv-{dt.lower()}-no-huge")
                        without(in_dir, in2, "adv.huge.down_proj.weight")
                        r, cmd = run_fp8conv(args.fp8conv, scheme, in2, out_dir)
                        if r.returncode != 0:
                            T.check(False, f"{label} fp8conv (no adv.huge)",
                                    f"{' '.join(cmd)} exit {r.returncode}: {r.stderr[-300:]}")
                        else:
                            got = read_dir(out_dir)
                            compare_tensors(T, f"{label} fp8conv (no adv.huge)",
                                            {k: v for k, v in ref.items()
                                             if not k.startswith("adv.huge.")}, got)
                    continue
                if r.returncode != 0:
                    err = (r.stderr or r.stdout).strip().splitlines()
                    if re.search(r"scheme|invalid|unknown|usage", " ".join(err[:3]), re.I) and \
                            not os.path.exists(out_dir):
                        fp8conv_missing[scheme] = f"fp8conv does not know --scheme {SCHEMES[scheme]}"
                        T.check(False, f"{label} fp8conv", f"{fp8conv_missing[scheme]} (exit "
                                f"{r.returncode}: {err[0] if err else ''})")
                    else:
                        T.check(False, f"{label} fp8conv", f"{' '.join(cmd)} exit {r.returncode}: "
                                f"{' | '.join(err[-3:])}")
                    continue
                compare_tensors(T, f"{label} fp8conv", ref, read_dir(out_dir))
                compare_config(T, f"{label} fp8conv", ref_dir, out_dir)
    behaviour(T, args.work)
    if args.venv_ct and "adv" in want_models:
        # a child process: compressed_tensors 0.19.0 from --site is already imported here
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--work", args.work,
                            "--site", args.site, "--venv-ct-child"], capture_output=True, text=True)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("venv-ct:")]
        print("\n".join("  " + ln for ln in lines) or r.stderr[-2000:])
        T.check(r.returncode == 0 and bool(lines) and lines[-1].endswith(" 0 differ"),
                "the venv's own compressed-tensors (vLLM's pin) agrees with the oracle on adv",
                lines[-1] if lines else f"exit {r.returncode}")
    for why in fp8conv_missing.values():
        print(f"fp4_quant_ref: {why}: its fp8conv comparisons were not run")
    print(f"{T.passed} passed, {T.failed} failed")
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
