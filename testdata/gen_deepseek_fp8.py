#!/usr/bin/env python3
"""Generate testdata/deepseek-fp8-tiny: a tiny checkpoint in the official DeepSeek-V3 FP8 layout,
input of `fp8conv dequantize-for-export`.

Usage (from the repository root, in the oracle venv, which has the exact pins):
    build/venv-oracle/bin/python testdata/gen_deepseek_fp8.py [OUTDIR]   # default testdata/deepseek-fp8-tiny

Writes OUTDIR/config.json (with the official DeepSeek-V3 quantization_config, no
modules_to_not_convert), two shards model-0000{1,2}-of-00002.safetensors,
model.safetensors.index.json (total_size = sum of the tensor data bytes), tokenizer_config.json and
generation_config.json. Deterministic: every random draw comes from
numpy.random.default_rng([SEED, zlib.crc32(tensor name)]) (numpy pinned in
tests/oracle/requirements.txt); shards are written by the reference writer
(safetensors.serialize_file with TensorSpec, metadata {"format": "pt"}).

Weights are F8_E4M3 codes (random bytes, never the NaN codes 0x7F/0xFF) with an F32
W + "_scale_inv" tensor of shape [ceil(M/128), ceil(N/128)] (rank 3: [E, ...]), a multiplier:
W = decode(q) * scale_inv. Scales are positive finite F32 of varied magnitude: 1.0, powers of two,
2^-149 (the smallest fp32 subnormal), a random fp32 subnormal, 2^-126, values just below 128, and
two scales chosen so that fp32(q * s) lands exactly on a bf16 (resp. f16) rounding midpoint that q * s
itself is not on (double rounding: the contract's one-fp32-multiply-then-RNE result differs from
rounding the exact product once). Every scale is below 128, so 448 * s stays finite in f16 as well.
Three weights have their scale in the other shard (official DeepSeek-V3 does this too; a converter
must look scales up by name across the checkpoint). What each tensor exercises: testdata/README.md.
"""

import ctypes
import json
import os
import sys
import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
from safetensors import TensorSpec, serialize_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle"))
import quant_oracle  # noqa: E402  (exact_rne)

SEED = 4004
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
F32 = np.float32
SHARD1 = "model-00001-of-00002.safetensors"
SHARD2 = "model-00002-of-00002.safetensors"
INDEX = "model.safetensors.index.json"

# The official DeepSeek-V3 config.json layout (keys sorted, quantization_config in the middle),
# with the small dimensions of testdata/deepseek-moe-tiny. The tensor shapes below are chosen for
# the converter (partial 128x128 blocks), not to match these dimensions: not a loadable model.
CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "ep_size": 1,
    "first_k_dense_replace": 1,
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 300,
    "kv_lora_rank": 64,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 136,
    "moe_layer_freq": 1,
    "n_group": 1,
    "n_routed_experts": 3,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 4,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 4,
    "num_nextn_predict_layers": 0,
    "q_lora_rank": 96,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 1,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "transformers_version": "4.46.3",
    "use_cache": True,
    "v_head_dim": 24,
    "vocab_size": 160,
}

GENERATION_CONFIG = {
    "_from_model_config": True,
    "bos_token_id": 0,
    "do_sample": True,
    "eos_token_id": 1,
    "temperature": 0.6,
    "top_p": 0.95,
    "transformers_version": "4.46.3",
}

# Non-ASCII on purpose (the real DeepSeek special tokens use U+FF5C and U+2581): copied byte for byte.
TOKENIZER_CONFIG = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": {"__type": "AddedToken", "content": "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
                  "lstrip": False, "normalized": True, "rstrip": False, "single_word": False},
    "clean_up_tokenization_spaces": False,
    "eos_token": {"__type": "AddedToken", "content": "<\uff5cend\u2581of\u2581sentence\uff5c>",
                  "lstrip": False, "normalized": True, "rstrip": False, "single_word": False},
    "legacy": True,
    "model_max_length": 16384,
    "pad_token": {"__type": "AddedToken", "content": "<\uff5cend\u2581of\u2581sentence\uff5c>",
                  "lstrip": False, "normalized": True, "rstrip": False, "single_word": False},
    "sp_model_kwargs": {},
    "unk_token": None,
    "tokenizer_class": "LlamaTokenizerFast",
}

# safetensors header code -> name the Python binding takes
BINDING = {"F8_E4M3": "float8_e4m3fn", "F32": "float32", "BF16": "bfloat16"}


# --------------------------------------------------------------------------------------------
# helpers


def rng_for(name):
    return np.random.default_rng([SEED, zlib.crc32(name.encode("utf-8"))])


def bf16(x):
    return np.asarray(x, dtype=np.float64).astype(F32).astype(BF16)


def codes(name, shape):
    """Random E4M3 codes, uniform over the 254 non-NaN bytes (0x00..0x7E, 0x80..0xFE)."""
    r = rng_for(name).integers(0, 254, shape)
    return (r + (r >= 0x7F)).astype(np.uint8)


def all_codes_cycled(name, shape):
    """The 254 non-NaN codes in order, repeated over the whole tensor (row-major)."""
    r = np.arange(int(np.prod(shape))) % 254
    return (r + (r >= 0x7F)).astype(np.uint8).reshape(shape)


def rand_scales(name, shape, lo, hi):
    """F32 scales m * 2^k, m uniform in [1, 2) with a full 24-bit mantissa, k uniform in [lo, hi]."""
    rng = rng_for(name)
    m = rng.uniform(1.0, 2.0, shape).astype(F32)
    k = rng.integers(lo, hi + 1, shape)
    return np.ldexp(m, k).astype(F32)


def f32_from_bits(bits):
    return np.array([bits], dtype=np.uint32).view(F32)[0]


def rne(x, p, emin):
    """Exact RNE of the Fraction x to p significant bits, minimum normal exponent emin."""
    return quant_oracle.exact_rne(x, p, emin)


FMT = {"f32": (24, -126), "bf16": (8, -126), "f16": (11, -14)}


def double_rounding_scale(q, fmt, start):
    """Smallest-k F32 scale s (k >= start) with fp32(q * s) on an fmt midpoint M = 1 + (2k+1) * 2^-p
    while q * s != M, and RNE(fp32(q * s)) != RNE(q * s) in fmt (the exact product lies on the
    other side of M than the even neighbour)."""
    p = FMT[fmt][0]
    half_ulp = Fraction(1, 2 ** p)
    for k in range(start, 2 ** (p - 1)):
        mid = 1 + (2 * k + 1) * half_ulp
        s = F32(float(mid / q))
        exact = q * Fraction(float(s))
        in32 = rne(exact, *FMT["f32"])
        if in32 == mid and exact != mid and rne(in32, *FMT[fmt]) != rne(exact, *FMT[fmt]):
            assert Fraction(float(F32(float(q)) * s)) == mid  # numpy agrees: fp32 product is M
            return s
    raise AssertionError("no double-rounding scale for %s" % fmt)


# --------------------------------------------------------------------------------------------
# tensors: (shard, name, dtype, array)


def fp8_weight(shard, scale_shard, name, shape, scales, codes_fn=codes):
    q = codes_fn(name, shape)
    exp_shape = tuple(shape[:-2]) + (-(-shape[-2] // 128), -(-shape[-1] // 128))
    scales = np.ascontiguousarray(scales, dtype=F32)
    assert scales.shape == exp_shape, (name, scales.shape, exp_shape)
    assert np.all(np.isfinite(scales)) and np.all(scales > 0) and np.all(scales < 128), name
    assert not np.any((q == 0x7F) | (q == 0xFF)), name
    return [(shard, name, "F8_E4M3", q), (scale_shard, name + "_scale_inv", "F32", scales)]


def tensors():
    out = []
    p0 = "model.layers.0."
    p1 = "model.layers.1."

    def normal(name, shape, std, mean=0.0):
        return bf16(mean + rng_for(name).standard_normal(shape) * std)

    # ---- shard 1: embeddings, layer 0
    out.append((SHARD1, "model.embed_tokens.weight", "BF16", normal("model.embed_tokens.weight", (160, 256), 0.02)))
    for n, d in (("input_layernorm", 256), ("post_attention_layernorm", 256),
                 ("self_attn.q_a_layernorm", 96), ("self_attn.kv_a_layernorm", 64)):
        name = p0 + n + ".weight"
        out.append((SHARD1, name, "BF16", normal(name, (d,), 0.05, 1.0)))
    # q_a_proj [96, 256]: typical DeepSeek-V3 magnitudes (2^-12 .. 2^-9)
    name = p0 + "self_attn.q_a_proj.weight"
    out += fp8_weight(SHARD1, SHARD1, name, (96, 256), rand_scales(name, (1, 2), -12, -9))
    # q_b_proj [192, 96]: scale in the OTHER shard
    name = p0 + "self_attn.q_b_proj.weight"
    out += fp8_weight(SHARD1, SHARD2, name, (192, 96), rand_scales(name, (2, 1), -10, -6))
    # kv_a_proj_with_mqa [80, 256]: the two double-rounding scales (code 0x39 = 1.125)
    name = p0 + "self_attn.kv_a_proj_with_mqa.weight"
    s = [double_rounding_scale(Fraction(9, 8), "bf16", 0), double_rounding_scale(Fraction(9, 8), "f16", 0)]
    out += fp8_weight(SHARD1, SHARD1, name, (80, 256), np.array([s], dtype=F32))
    # o_proj [256, 96]: scale exactly 1.0 and a power of two (ue8m0-like)
    name = p0 + "self_attn.o_proj.weight"
    out += fp8_weight(SHARD1, SHARD1, name, (256, 96), np.array([[1.0], [2.0 ** -7]], dtype=F32))
    # gate_proj [300, 200]: wide range 2^-40 .. 2^6, one random fp32 subnormal, one 1.0
    name = p0 + "mlp.gate_proj.weight"
    sc = rand_scales(name, (3, 2), -40, 6)
    sc[0, 1] = f32_from_bits(0x00012345)   # 74565 * 2^-149, fp32 subnormal
    sc[2, 0] = 1.0
    out += fp8_weight(SHARD1, SHARD1, name, (300, 200), sc)
    # up_proj [300, 200]: scale in the OTHER shard
    name = p0 + "mlp.up_proj.weight"
    out += fp8_weight(SHARD1, SHARD2, name, (300, 200), rand_scales(name, (3, 2), -20, 0))
    # down_proj [129, 257]: every non-NaN code in order (cycled); scales 2^-149, 2^-126,
    # largest fp32 below 128, random
    name = p0 + "mlp.down_proj.weight"
    sc = rand_scales(name, (2, 3), -16, 4)
    sc[0, 0] = 2.0 ** -149
    sc[0, 2] = 2.0 ** -126
    sc[1, 1] = np.nextafter(F32(128.0), F32(0.0))
    out += fp8_weight(SHARD1, SHARD1, name, (129, 257), sc, codes_fn=all_codes_cycled)
    # dropped by dequantize-for-export (static activation / KV-cache scales of other tools)
    out.append((SHARD1, p0 + "self_attn.k_scale", "F32", np.array(0.0234375, dtype=F32)))
    out.append((SHARD1, p0 + "mlp.down_proj.input_scale", "F32", np.array(0.0771484375, dtype=F32)))

    # ---- shard 2: layer 1 (MoE), final norm, lm_head
    for n in ("input_layernorm", "post_attention_layernorm"):
        name = p1 + n + ".weight"
        out.append((SHARD2, name, "BF16", normal(name, (256,), 0.05, 1.0)))
    name = p1 + "mlp.gate.weight"           # router stays BF16 in DeepSeek-V3
    out.append((SHARD2, name, "BF16", normal(name, (3, 256), 0.05)))
    name = p1 + "mlp.gate.e_score_correction_bias"
    out.append((SHARD2, name, "F32", (rng_for(name).standard_normal(3) * 0.02).astype(F32)))
    # rank-3 fused experts [3, 136, 160], scale [3, 2, 2] in the OTHER shard; expert e ~ 2^(8e-16)
    name = p1 + "mlp.experts.gate_up_proj"
    sc = np.stack([rand_scales(name + str(e), (2, 2), 8 * e - 17, 8 * e - 15) for e in range(3)])
    out += fp8_weight(SHARD2, SHARD1, name, (3, 136, 160), sc)
    name = p1 + "mlp.shared_experts.down_proj.weight"
    out += fp8_weight(SHARD2, SHARD2, name, (256, 96), rand_scales(name, (2, 1), -14, -8))
    name = "model.norm.weight"
    out.append((SHARD2, name, "BF16", normal(name, (256,), 0.05, 1.0)))
    out.append((SHARD2, "lm_head.weight", "BF16", normal("lm_head.weight", (160, 256), 0.02)))
    return out


# --------------------------------------------------------------------------------------------
# writing


def write_shard(path, items):
    keep, specs = [], {}
    for _, name, dtype, arr in items:
        data = np.ascontiguousarray(arr).tobytes()
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        keep.append(buf)
        specs[name] = TensorSpec(dtype=BINDING[dtype], shape=list(arr.shape),
                                 data_ptr=ctypes.addressof(buf), data_len=len(data))
        assert specs[name].dtype == dtype, (name, specs[name].dtype)
    if os.path.exists(path):
        os.remove(path)
    serialize_file(specs, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)  # safetensors >= 0.8 writes through a 0600 temp file


def write_json(path, obj, ensure_ascii=True):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(obj, indent=2, ensure_ascii=ensure_ascii) + "\n")


def main():
    if sys.byteorder != "little":
        sys.exit("gen_deepseek_fp8: needs a little-endian host")
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "deepseek-fp8-tiny")
    os.makedirs(outdir, exist_ok=True)
    items = tensors()
    names = [t[1] for t in items]
    assert len(set(names)) == len(names)
    weight_map, total = {}, 0
    for shard in (SHARD1, SHARD2):
        mine = [t for t in items if t[0] == shard]
        write_shard(os.path.join(outdir, shard), mine)
        for _, name, _, arr in mine:
            weight_map[name] = shard
            total += arr.nbytes
    write_json(os.path.join(outdir, INDEX),
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    write_json(os.path.join(outdir, "config.json"), CONFIG)
    write_json(os.path.join(outdir, "generation_config.json"), GENERATION_CONFIG)
    write_json(os.path.join(outdir, "tokenizer_config.json"), TOKENIZER_CONFIG, ensure_ascii=False)
    size = sum(os.path.getsize(os.path.join(outdir, f)) for f in os.listdir(outdir))
    print("gen_deepseek_fp8: wrote %s (%d tensors, total_size %d, %d bytes on disk)"
          % (outdir, len(items), total, size))


if __name__ == "__main__":
    main()
