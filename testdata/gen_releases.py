#!/usr/bin/env python3
"""Generate testdata/releases/<family>/: a tiny copy of each public FP8 release family.

Usage (from the repository root, in the oracle venv: numpy 2.4.6, ml_dtypes 0.5.4, safetensors 0.8.0):
    /work/main/build/venv-oracle/bin/python testdata/gen_releases.py [OUTDIR]   # default testdata/releases

Each copy keeps what a loader reads of the release: the tensor names, dtypes, the scale tensors' names,
shapes and dtypes, the config.json keys it dispatches on (architectures, model_type, the dimension keys,
quantization_config) and the side files it opens (hf_quant_config.json). Dimensions are scaled down:
the hidden size is 136 (or 160) so that 128x128 block scales have two blocks along it, the second
partial; block-scaled families keep every fused partition (q/k/v parts, gate/up, expert intermediate)
a multiple of 128, as the real ones are, since vLLM refuses anything else. What each family copies,
and from which source: testdata/releases/README.md; every layout fact is also cited where it is used.

Deterministic: every random draw comes from numpy.random.default_rng([SEED, zlib.crc32(family/name)]).
Weights are bf16 normals quantized with the release's own rule (scale = amax / 448 over the scale's
group, rounded to the scale's dtype, or up to a power of two for ue8m0; codes = RNE(w / scale) clipped
to +-448), so every value is plausible. EXPECT.json per family holds what
`fp8conv dequantize-for-export` must write: the tensor names, and for each FP8 weight the sha256 of
the bf16 bytes of RNE_bf16(fp32(code) * fp32(scale)), the one-multiply contract of fp8conv-formats(5).
The 2026 FP4 layouts of issue 25 (DeepSeek-V4, gpt-oss, NVFP4 ModelOpt / compressed-tensors,
compressed-tensors MXFP4) and three planted-defect copies come from testdata/gen_fp4.py, with their
own float64 oracle (the exact value rounded once to bf16); it is imported here and written the same way.
Shards are written by the reference writer (safetensors.serialize_file, metadata {"format": "pt"}).
"""

import ctypes
import hashlib
import json
import os
import shutil
import sys
import zlib

import ml_dtypes
import numpy as np
from safetensors import TensorSpec, serialize_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_fp4   # noqa: E402  the 2026 FP4 layouts (issue 25), with their own oracle

SEED = 2424
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
F32 = np.float32
NP = {"BF16": BF16, "F16": np.float16, "F32": np.float32}
BINDING = {"F8_E4M3": "float8_e4m3fn", "F32": "float32", "BF16": "bfloat16", "F16": "float16",
           "U8": "uint8", "I8": "int8", "F8_E8M0": "float8_e8m0fnu", "I32": "int32", "I64": "int64"}
H = 136      # hidden size: 128 + 8, a partial second block
V = 32       # vocabulary (the corpus stays under 4 MB)
SHARD_BYTES = 160 * 1024   # shard size, so that the bigger copies have two shards and an index


class Release:
    """The tensors of one tiny release, in the order they are written, and what its export holds."""

    def __init__(self, family):
        self.family = family
        self.tensors = []          # (name, dtype, array)
        self.export = []           # names dequantize-for-export must write
        self.sha = {}              # FP8 weight -> sha256 of its bf16 export

    def rng(self, name):
        return np.random.default_rng([SEED, zlib.crc32((self.family + "/" + name).encode())])

    def add(self, name, dtype, arr, exported=True):
        self.tensors.append((name, dtype, arr))
        if exported:
            self.export.append(name)

    def bf16(self, name, shape, std=0.02):
        self.add(name, "BF16", (self.rng(name).standard_normal(shape) * std).astype(F32).astype(BF16))

    def norm(self, name, n):
        self.add(name, "BF16", (1.0 + 0.05 * self.rng(name).standard_normal(n)).astype(F32).astype(BF16))

    def f32(self, name, shape, std=0.01):
        self.add(name, "F32", (self.rng(name).standard_normal(shape) * std).astype(F32))

    def static_scale(self, name, shape, dtype="F32"):
        """An activation or KV-cache scale: positive, about amax / 448 of a unit-range input."""
        v = (0.5 + self.rng(name).random(shape)) / 448.0
        self.add(name, dtype, v.astype(F32).astype(NP[dtype]), exported=False)

    def fp8(self, name, out, inp, q):
        """An FP8 weight [out, inp] and its scale, by the rule q describes:
        q["group"]: "block" (128x128), "channel" ([out, 1]) or "tensor" ([] or [1]);
        q["scale"]: the scale tensor's name suffix; q["dtype"]: its dtype; q["ue8m0"]: powers of two."""
        w = (self.rng(name).standard_normal((out, inp)) * 0.02)
        w *= np.exp(self.rng(name + "#rows").standard_normal((out, 1)) * 0.5)   # rows of varied range
        w = w.astype(F32).astype(BF16).astype(F32)
        if q["group"] == "block":
            rb, cb = -(-out // 128), -(-inp // 128)
            amax = np.zeros((rb, cb), F32)
            for i in range(rb):
                for j in range(cb):
                    amax[i, j] = np.abs(w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]).max()
        elif q["group"] == "channel":
            amax = np.abs(w).max(axis=1, keepdims=True)
        else:
            amax = np.array(np.abs(w).max(), F32).reshape(q.get("shape", ()))
        s = amax.astype(F32) / F32(448.0)
        if q.get("ue8m0"):
            s = np.exp2(np.ceil(np.log2(s.astype(np.float64)))).astype(F32)
        stored = s.astype(NP[q["dtype"]])
        s32 = stored.astype(F32)
        if q["group"] == "block":
            full = np.repeat(np.repeat(s32, 128, axis=0), 128, axis=1)[:out, :inp]
        else:
            full = np.broadcast_to(s32.reshape(-1, 1) if q["group"] == "channel" else s32.reshape(()),
                                   (out, inp))
        codes = np.clip(w / full, -448.0, 448.0).astype(F32).astype(E4M3)
        self.add(name, "F8_E4M3", codes)
        self.add(name[: -len("weight")] + q["scale"], q["dtype"], stored, exported=False)
        value = (codes.astype(F32) * full.astype(F32)).astype(F32).astype(BF16)
        self.sha[name] = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()

    def int4(self, name, out, inp, group):
        """A symmetric INT4 weight as compressed-tensors pack-quantized writes it (fp8conv-formats(5),
        INT4 WEIGHT ONLY, from compressors/pack_quantized/helpers.py pack_to_int32): weight_packed
        I32 [out, inp/8], code q + 8 in bits 4(k mod 8) of word k/8; weight_scale in the weight's
        dtype (BF16) [out, inp/group], amax / 7.5 of the group (quantization/utils/helpers.py
        calculate_qparams: max(|min|, |max|) / ((q_max - q_min) / 2)); weight_shape I64 [2]."""
        w = (self.rng(name).standard_normal((out, inp)) * 0.02).astype(F32).astype(BF16).astype(F32)
        g = w.reshape(out, inp // group, group)
        s = (np.abs(g).max(axis=2) / F32(7.5)).astype(F32).astype(BF16)
        full = np.repeat(s.astype(F32), group, axis=1)
        q = np.clip(np.rint(w / full), -8, 7).astype(np.int64)
        nib = (q + 8).reshape(out, inp // 8, 8)
        packed = np.zeros((out, inp // 8), np.uint32)
        for k in range(8):
            packed |= (nib[:, :, k].astype(np.uint32) << np.uint32(4 * k))
        base = name[: -len(".weight")]
        self.add(base + ".weight_packed", "I32", packed.view(np.int32), exported=False)
        self.add(base + ".weight_scale", "BF16", s, exported=False)
        self.add(base + ".weight_shape", "I64", np.array([out, inp], np.int64), exported=False)
        self.export.append(name)
        gen_fp4.expect(self, name, q.astype(np.float64) * full.astype(np.float64))

    def linear(self, name, out, inp, q):
        if q is None:
            self.bf16(name, (out, inp))
        elif q.get("int4"):
            self.int4(name, out, inp, q["int4"])
        else:
            self.fp8(name, out, inp, q)


# --------------------------------------------------------------------------------------------
# quantization rules and configs of the families


# DeepSeek-V3's config.json quantization_config, as the issue-24 brief gives it; vLLM's
# Fp8Config.from_config (vllm/model_executor/layers/quantization/fp8.py) reads quant_method,
# activation_scheme and weight_block_size from it (SPEC §10 quotes DeepSeek-V4's, the same keys plus
# scale_fmt). Qwen3-*-FP8 and Kimi-K2 are taken to ship the same dict (recalled, not re-read here);
# MiniMax-M2 differs in fmt (see fam_minimax_m2).
HF_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
          "weight_block_size": [128, 128]}
# hf-fp8 block scales: "<module>.weight_scale_inv" [ceil(out/128), ceil(in/128)], a multiplier
# (vllm fp8.py Fp8LinearMethod.create_weights registers weight_scale_inv for block quant). F32 in
# DeepSeek/Kimi/MiniMax; BF16 in Qwen3-*-FP8 and F16 in Qwen3-4B-Instruct-2507-FP8 (SPEC §10, vLLM
# fp8_utils.py create_fp8_scale_parameter copies them into an F32 parameter).
BLOCK_F32 = {"group": "block", "scale": "weight_scale_inv", "dtype": "F32"}
BLOCK_BF16 = {"group": "block", "scale": "weight_scale_inv", "dtype": "BF16"}
BLOCK_F16 = {"group": "block", "scale": "weight_scale_inv", "dtype": "F16"}
# DeepSeek-V3.1 declares scale_fmt "ue8m0" (the issue-24 brief; loaders read it from
# quantization_config, e.g. the DeepSeek-V3.2 indexer of a deepseek_v2 port falls back to
# quantization_config.get("scale_fmt")): its F32 block scales are powers of two.
BLOCK_UE8M0 = {"group": "block", "scale": "weight_scale_inv", "dtype": "F32", "ue8m0": True}
# compressed-tensors (llm-compressor): "<module>.weight_scale", in the weight's dtype (BF16):
# channel [out, 1], block [ceil(out/128), ceil(in/128)] (compressed_tensors
# quantization/utils/helpers.py calculate_qparams keeps the observer's dtype; vLLM
# compressed_tensors_w8a8_fp8.py create_weights: channel scale [out, 1], block scale per tile).
CT_CHANNEL = {"group": "channel", "scale": "weight_scale", "dtype": "BF16"}
CT_BLOCK = {"group": "block", "scale": "weight_scale", "dtype": "BF16"}
# ModelOpt FP8: per-tensor F32 "weight_scale" [] plus a static F32 "input_scale" []
# (vllm/model_executor/layers/quantization/modelopt.py ModelOptFp8LinearMethod.create_weights).
MO_TENSOR = {"group": "tensor", "scale": "weight_scale", "dtype": "F32", "input": "input_scale"}
# Mistral's FP8 (Ministral-3, Devstral-2): per-tensor F32 "weight_scale_inv" [] plus a static
# "activation_scale" [] (SPEC §10; vLLM models/mistral3.py maps them to weight_scale / input_scale).
# fbgemm FP8 (Llama-3.1-405B-Instruct-FP8): F32 "weight_scale" [out, 1] (see fam_fbgemm_fp8).
FBGEMM_CHANNEL = {"group": "channel", "scale": "weight_scale", "dtype": "F32"}
MISTRAL_TENSOR = {"group": "tensor", "scale": "weight_scale_inv", "dtype": "F32",
                  "input": "activation_scale"}


def ct_config(strategy, kv=False, ignore=("lm_head",)):
    """A compressed-tensors quantization_config as llm-compressor writes it (compressed_tensors
    config/base.py QuantizationConfig fields; vLLM compressed_tensors.py from_config reads
    config_groups, format, ignore, kv_cache_scheme)."""
    weights = {"actorder": None, "block_structure": None, "dynamic": False, "group_size": None,
               "num_bits": 8, "observer": "minmax", "observer_kwargs": {}, "strategy": strategy,
               "symmetric": True, "type": "float"}
    acts = {"actorder": None, "block_structure": None, "dynamic": True, "group_size": None,
            "num_bits": 8, "observer": None, "observer_kwargs": {}, "strategy": "token",
            "symmetric": True, "type": "float"}
    if strategy == "block":
        # FP8_BLOCK preset (compressed_tensors quantization/quant_scheme.py): 128x128 weight
        # blocks, activations dynamic per group of 128
        weights["block_structure"] = [128, 128]
        acts["strategy"], acts["group_size"] = "group", 128
    cfg = {"config_groups": {"group_0": {"input_activations": acts, "output_activations": None,
                                         "targets": ["Linear"], "weights": weights}},
           "format": "float-quantized", "global_compression_ratio": None, "ignore": list(ignore),
           "kv_cache_scheme": None, "quant_method": "compressed-tensors",
           "quantization_status": "compressed"}
    if kv:
        # kv_cache_scheme: static per-tensor FP8 (compressed_tensors quantization/quant_args.py;
        # vLLM compressed_tensors.py CompressedTensorsKVCacheMethod reads self_attn.k_scale/v_scale)
        cfg["kv_cache_scheme"] = {"dynamic": False, "num_bits": 8, "strategy": "tensor",
                                  "symmetric": True, "type": "float"}
    return cfg


MODELOPT_PRODUCER = {"name": "modelopt", "version": "0.37.0"}


def modelopt_quant(flat):
    """ModelOpt's FP8 declaration with FP8 KV cache: quant_algo, kv_cache_quant_algo,
    exclude_modules, nested under "quantization" in hf_quant_config.json (vllm modelopt.py
    ModelOptFp8Config: get_config_filenames ["hf_quant_config.json"], from_config), flat beside
    quant_method "modelopt" in config.json's quantization_config (the same file's
    override_quantization_method: quant_method modelopt, then a nested "quantization" or a flat
    quant_algo). config.json's is the nested one as ModelOpt's export converts it
    (NVIDIA/TensorRT-Model-Optimizer modelopt/torch/export/convert_hf_config.py
    convert_hf_quant_config_format, called by unified_export_hf.py): config_groups (FP8 weights
    and input activations, targets Linear), the exclude list as "ignore", quant_algo, the KV
    cache as kv_cache_scheme {dynamic false, num_bits 8, type float}, producer, quant_method
    modelopt. vLLM reads config.json's alone when there is one (model_loader/weight_utils.py
    get_quant_config), and in that flat form the exclude list from "ignore" and the KV-cache
    algorithm from kv_cache_scheme only (ModelOptQuantConfigBase.from_config; SGLang
    modelopt_quant.py reads "ignore" alike): the flat exclude_modules / kv_cache_quant_algo this
    copy once had left lm_head quantized (vLLM's probe found lm_head under ModelOptLinearMethod)."""
    body = {"exclude_modules": ["lm_head"], "kv_cache_quant_algo": "FP8", "quant_algo": "FP8"}
    if flat:
        f8 = {"dynamic": False, "num_bits": 8, "type": "float"}
        return {"config_groups": {"group_0": {"input_activations": dict(f8), "weights": dict(f8),
                                              "targets": ["Linear"]}},
                "ignore": list(body["exclude_modules"]), "quant_algo": body["quant_algo"],
                "kv_cache_scheme": dict(f8), "producer": MODELOPT_PRODUCER,
                "quant_method": "modelopt"}
    return {"producer": MODELOPT_PRODUCER, "quantization": body}


# --------------------------------------------------------------------------------------------
# model bodies


def llama_attn(r, p, heads, kv, hd, hidden, q, bias=False, qk_norm=False):
    """q/k/v/o projections (vllm models/llama.py, qwen3.py, glm4_moe.py load the unfused names)."""
    for nm, out in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
        r.linear(p + "self_attn.%s.weight" % nm, out, hidden, q)
        if q and q.get("input"):
            r.static_scale(p + "self_attn.%s.%s" % (nm, q["input"]), q.get("shape", ()))
        if bias:   # GLM-4.5: attention_bias true, BF16 q/k/v biases
            r.bf16(p + "self_attn.%s.bias" % nm, (out,))
    r.linear(p + "self_attn.o_proj.weight", hidden, heads * hd, q)
    if q and q.get("input"):
        r.static_scale(p + "self_attn.o_proj." + q["input"], q.get("shape", ()))
    if qk_norm:   # Qwen3 q_norm/k_norm over head_dim (vllm models/qwen3.py Qwen3Attention)
        r.norm(p + "self_attn.q_norm.weight", hd)
        r.norm(p + "self_attn.k_norm.weight", hd)


def mlp(r, p, hidden, inter, q, names=("gate_proj", "up_proj", "down_proj")):
    g, u, d = names
    r.linear(p + g + ".weight", inter, hidden, q)
    r.linear(p + u + ".weight", inter, hidden, q)
    r.linear(p + d + ".weight", hidden, inter, q)
    if q and q.get("input"):
        for nm in names:
            r.static_scale(p + nm + "." + q["input"], q.get("shape", ()))


def norms(r, p, hidden):
    r.norm(p + "input_layernorm.weight", hidden)
    r.norm(p + "post_attention_layernorm.weight", hidden)


def mla_attn(r, p, c, q):
    """DeepSeek MLA (vllm models/deepseek_v2.py DeepseekV2MLAAttention: q_a_proj, q_a_layernorm,
    q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj)."""
    heads, qh = c["num_attention_heads"], c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    r.linear(p + "self_attn.q_a_proj.weight", c["q_lora_rank"], c["hidden_size"], q)
    r.norm(p + "self_attn.q_a_layernorm.weight", c["q_lora_rank"])
    r.linear(p + "self_attn.q_b_proj.weight", heads * qh, c["q_lora_rank"], q)
    r.linear(p + "self_attn.kv_a_proj_with_mqa.weight", c["kv_lora_rank"] + c["qk_rope_head_dim"],
             c["hidden_size"], q)
    r.norm(p + "self_attn.kv_a_layernorm.weight", c["kv_lora_rank"])
    r.linear(p + "self_attn.kv_b_proj.weight", heads * (c["qk_nope_head_dim"] + c["v_head_dim"]),
             c["kv_lora_rank"], q)
    r.linear(p + "self_attn.o_proj.weight", c["hidden_size"], heads * c["v_head_dim"], q)


def deepseek_moe(r, p, c, q, experts_q="same"):
    """DeepSeek-V3 MoE: router mlp.gate.weight BF16 and mlp.gate.e_score_correction_bias F32 (vllm
    deepseek_v2.py DeepseekV2MoE: the gate is a ReplicatedLinear with quant_config None), routed
    experts mlp.experts.E.{gate,up,down}_proj, shared experts mlp.shared_experts.*."""
    hs, mi = c["hidden_size"], c["moe_intermediate_size"]
    r.bf16(p + "mlp.gate.weight", (c["n_routed_experts"], hs))
    r.f32(p + "mlp.gate.e_score_correction_bias", (c["n_routed_experts"],))
    for e in range(c["n_routed_experts"]):
        mlp(r, p + "mlp.experts.%d." % e, hs, mi, q if experts_q == "same" else experts_q)
    mlp(r, p + "mlp.shared_experts.", hs, mi * c["n_shared_experts"], q)


def mtp_extras(r, p, hidden):
    """The MTP layer's own tensors (vllm models/deepseek_mtp.py DeepSeekMultiTokenPredictorLayer and
    SharedHead; glm4_moe_mtp.py the same): embed_tokens, enorm, hnorm, eh_proj, shared_head.norm,
    shared_head.head. All BF16 in the releases (SPEC §10: shared_head.head is built unquantized)."""
    r.bf16(p + "embed_tokens.weight", (V, hidden))
    r.norm(p + "enorm.weight", hidden)
    r.norm(p + "hnorm.weight", hidden)
    r.bf16(p + "eh_proj.weight", (hidden, 2 * hidden))
    r.norm(p + "shared_head.norm.weight", hidden)
    r.bf16(p + "shared_head.head.weight", (V, hidden))


# DeepSeek-V3 config.json keys (vllm deepseek_v2.py and transformers configuration_deepseek_v3.py
# read these), with tiny numbers: 4 heads, 2 routed experts (EP 2), 1 shared; MLA ranks 128,
# whole 128-row blocks as the releases' q_lora_rank 1536 and kv_lora_rank 512 are (with 64 vLLM
# merges q_a_proj and kv_a_proj_with_mqa into fused_qkv_a_proj with kv_a's first rows under
# q_a's block scale, which verify reports: fp8conv-formats(5), DeepSeek-V3.2-Exp).
def deepseek_config(model_type="deepseek_v3", layers=1, mtp=1, qc=None):
    return {
        "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
        "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": H,
        "initializer_range": 0.02, "intermediate_size": 128, "kv_lora_rank": 128,
        "max_position_embeddings": 4096, "model_type": model_type, "moe_intermediate_size": 128,
        "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 2, "n_shared_experts": 1,
        "norm_topk_prob": True, "num_attention_heads": 4, "num_experts_per_tok": 1,
        "num_hidden_layers": layers, "num_key_value_heads": 4, "num_nextn_predict_layers": mtp,
        "q_lora_rank": 128, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
        "quantization_config": qc, "rms_norm_eps": 1e-06, "rope_theta": 10000,
        "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
        "topk_group": 1, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
        "transformers_version": "4.46.3", "use_cache": True, "v_head_dim": 32,
        "vocab_size": V,
    }


def deepseek_body(r, c, q, experts_q="same"):
    r.bf16("model.embed_tokens.weight", (V, c["hidden_size"]))
    n = c["num_hidden_layers"]
    for i in range(n + c["num_nextn_predict_layers"]):
        p = "model.layers.%d." % i
        norms(r, p, c["hidden_size"])
        mla_attn(r, p, c, q)
        if i < c["first_k_dense_replace"]:
            mlp(r, p + "mlp.", c["hidden_size"], c["intermediate_size"], q)
        else:
            deepseek_moe(r, p, c, q, experts_q)
        if i >= n:   # the MTP layer: index num_hidden_layers (61 in DeepSeek-V3)
            mtp_extras(r, p, c["hidden_size"])
    r.norm("model.norm.weight", c["hidden_size"])
    r.bf16("lm_head.weight", (V, c["hidden_size"]))


def fam_deepseek_v3(r):
    c = deepseek_config(qc=dict(HF_FP8))
    deepseek_body(r, c, BLOCK_F32)
    return c, {}, ["--tp", "1", "--ep", "2"]


def fam_deepseek_v31(r):
    # DeepSeek-V3.1: quantization_config gains "scale_fmt": "ue8m0" (see BLOCK_UE8M0); the block
    # scales stay F32, powers of two
    c = deepseek_config(qc=dict(HF_FP8, scale_fmt="ue8m0"))
    deepseek_body(r, c, BLOCK_UE8M0)
    return c, {}, ["--tp", "1", "--ep", "2"]


def fam_kimi_k2(r):
    # Kimi-K2: DeepseekV3ForCausalLM with model_type kimi_k2, no MTP layer shipped, n_group 1
    # (vllm registry maps it onto deepseek_v2.py; config_kimi_k2 keys as DeepSeek-V3's)
    c = deepseek_config(model_type="kimi_k2", layers=2, mtp=0, qc=dict(HF_FP8))
    deepseek_body(r, c, BLOCK_F32)
    return c, {}, ["--tp", "1", "--ep", "2"]


# Kimi-K2-Thinking (moonshotai): Kimi-K2's model (fam_kimi_k2) with only the routed experts INT4,
# compressed-tensors pack-quantized, symmetric, group 32; attention, shared experts, the dense layer
# and lm_head BF16 by its ignore list. The quantization_config is testdata/int4/kimi-k2-thinking's
# (fp8conv-formats(5), INT4 WEIGHT ONLY, gives its sources); vLLM loads the experts with
# compressed_tensors_moe.py CompressedTensorsWNA16MoEMethod. Hidden 64 and expert width 32 (every
# K a multiple of the group 32, as Kimi's 7168 and 2048 are), MLA ranks 32.
def fam_kimi_k2_thinking(r):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "int4", "kimi-k2-thinking", "config.json"), encoding="utf-8") as f:
        qc = json.load(f)["quantization_config"]
    c = deepseek_config(model_type="kimi_k2", layers=2, mtp=0, qc=qc)
    c.update(hidden_size=64, intermediate_size=64, moe_intermediate_size=32, q_lora_rank=32,
             kv_lora_rank=32)
    deepseek_body(r, c, None, {"int4": 32})
    return c, {}, ["--tp", "1", "--ep", "2"]


# DeepSeek-V3.2-Exp: DeepSeek-V3 with a sparse-attention indexer per layer,
# self_attn.indexer.{wq_b, wk, k_norm, weights_proj}. vLLM models/deepseek_v2.py Indexer builds wq_b
# and wk with the model's quant_config (ReplicatedLinear), k_norm a LayerNorm (weight and bias) and
# weights_proj a ReplicatedLinear with quant_config None; SGLang layers/attention/nsa/nsa_indexer.py
# the same ("weight_proj is not quantized"). Config keys index_n_heads, index_head_dim, index_topk
# (the same Indexer reads them), architectures DeepseekV32ForCausalLM, model_type deepseek_v32.
# NOT established from the release's files: k_norm's dtype (BF16 here) and the wq_b/wk scales
# (F32 128x128 as the rest of the model). One dense layer, no MoE or MTP layer (the corpus stays
# under 6 MB: deepseek-v3 covers those); index_n_heads 2, index_head_dim 128. Hidden size 128, one
# whole block, not H: vLLM dequantizes the FP8 indexer wk [index_head_dim, hidden] at load with a
# block it derives from the shapes (models/deepseek_v2.py _try_load_fp8_indexer_wk: 128x68 at 136,
# a wrong weight), which the release's 7168 (56 blocks) does not hit; verify's indexer-wk-block
# names it (tests/check_verify.c plants 136).
def fam_deepseek_v32_exp(r):
    c = deepseek_config(model_type="deepseek_v32", layers=1, mtp=0, qc=dict(HF_FP8))
    c.update(architectures=["DeepseekV32ForCausalLM"], index_head_dim=128, index_n_heads=2,
             index_topk=16, hidden_size=128)
    hs = c["hidden_size"]
    r.bf16("model.embed_tokens.weight", (V, hs))
    p = "model.layers.0."
    norms(r, p, hs)
    mla_attn(r, p, c, BLOCK_F32)
    ip = p + "self_attn.indexer."
    r.linear(ip + "wq_b.weight", c["index_n_heads"] * c["index_head_dim"], c["q_lora_rank"],
             BLOCK_F32)
    r.linear(ip + "wk.weight", c["index_head_dim"], hs, BLOCK_F32)
    r.norm(ip + "k_norm.weight", c["index_head_dim"])
    r.bf16(ip + "k_norm.bias", (c["index_head_dim"],))
    r.bf16(ip + "weights_proj.weight", (c["index_n_heads"], hs))
    mlp(r, p + "mlp.", hs, c["intermediate_size"], BLOCK_F32)
    r.norm("model.norm.weight", hs)
    r.bf16("lm_head.weight", (V, hs))
    return c, {}, ["--tp", "1"]


def qwen3_config(arch, mt, heads, kv, hd, inter, tie, qc, **extra):
    c = {"architectures": [arch], "attention_bias": False, "attention_dropout": 0.0,
         "bos_token_id": 0, "eos_token_id": 1, "head_dim": hd, "hidden_act": "silu",
         "hidden_size": H, "initializer_range": 0.02, "intermediate_size": inter,
         "max_position_embeddings": 4096, "max_window_layers": 1, "model_type": mt,
         "num_attention_heads": heads, "num_hidden_layers": 1, "num_key_value_heads": kv,
         "quantization_config": qc, "rms_norm_eps": 1e-06, "rope_scaling": None,
         "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": tie,
         "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
         "use_sliding_window": False, "vocab_size": V}
    c.update(extra)
    return c


def qwen3_dense(r, c, q):
    r.bf16("model.embed_tokens.weight", (V, H))
    p = "model.layers.0."
    norms(r, p, H)
    llama_attn(r, p, c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], H, q,
               qk_norm=True)
    if "num_experts" in c:
        # Qwen3-MoE: router mlp.gate.weight BF16, experts mlp.experts.E.* (vllm qwen3_moe.py)
        r.bf16(p + "mlp.gate.weight", (c["num_experts"], H))
        for e in range(c["num_experts"]):
            mlp(r, p + "mlp.experts.%d." % e, H, c["moe_intermediate_size"], q)
    else:
        mlp(r, p + "mlp.", H, c["intermediate_size"], q)
    r.norm("model.norm.weight", H)
    if not c["tie_word_embeddings"]:
        r.bf16("lm_head.weight", (V, H))


# Qwen3 keeps head_dim 128 (its config.json), so 2 heads / 1 KV head give 128-multiple q/k/v parts.
def fam_qwen3(r):
    c = qwen3_config("Qwen3ForCausalLM", "qwen3", 2, 1, 128, 128, False, dict(HF_FP8))
    qwen3_dense(r, c, BLOCK_BF16)
    return c, {}, ["--tp", "1"]


def fam_qwen3_4b_2507(r):
    # Qwen3-4B-Instruct-2507-FP8: F16 block scales (SPEC §10), tied embeddings (no lm_head)
    c = qwen3_config("Qwen3ForCausalLM", "qwen3", 2, 1, 128, 128, True, dict(HF_FP8))
    qwen3_dense(r, c, BLOCK_F16)
    return c, {}, ["--tp", "1"]


def fam_qwen3_moe(r):
    c = qwen3_config("Qwen3MoeForCausalLM", "qwen3_moe", 2, 1, 128, 256, False, dict(HF_FP8),
                     decoder_sparse_step=1, mlp_only_layers=[], moe_intermediate_size=128,
                     norm_topk_prob=True, num_experts=2, num_experts_per_tok=1,
                     output_router_logits=False, router_aux_loss_coef=0.001)
    qwen3_dense(r, c, BLOCK_BF16)
    return c, {}, ["--tp", "1", "--ep", "2"]


# Llama-3.1 layout (vllm models/llama.py), served at TP 8: 8 heads, 2 KV heads (replicated over
# 4 ranks each), head_dim 20, intermediate 144 (= 8 x 18); hidden 160.
LH, LHEADS, LKV, LHD, LINTER = 160, 8, 2, 20, 144


def llama_config(qc, arch="LlamaForCausalLM", mt="llama", hidden=LH, inter=LINTER):
    c = {"architectures": [arch], "attention_bias": False, "attention_dropout": 0.0,
         "bos_token_id": 0, "eos_token_id": 1, "head_dim": LHD, "hidden_act": "silu",
         "hidden_size": hidden, "initializer_range": 0.02, "intermediate_size": inter,
         "max_position_embeddings": 4096, "mlp_bias": False, "model_type": mt,
         "num_attention_heads": LHEADS, "num_hidden_layers": 1, "num_key_value_heads": LKV,
         "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": "4.51.0", "use_cache": True, "vocab_size": V}
    if qc is not None:
        c["quantization_config"] = qc
    return c


def llama_body(r, c, q, prefix="model.", head="lm_head.weight", kv=None):
    hs, hd = c["hidden_size"], c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    r.bf16(prefix + "embed_tokens.weight", (V, hs))
    p = prefix + "layers.0."
    norms(r, p, hs)
    llama_attn(r, p, c["num_attention_heads"], c["num_key_value_heads"], hd, hs, q)
    if kv == "modelopt":
        # ModelOpt KV-cache scales: self_attn.k_proj.k_scale / v_proj.v_scale, F32 [] (SPEC §10;
        # vllm model_loader/weight_utils.py maybe_remap_kv_scale_name maps them)
        r.static_scale(p + "self_attn.k_proj.k_scale", ())
        r.static_scale(p + "self_attn.v_proj.v_scale", ())
    elif kv == "llm-compressor":
        # llm-compressor KV-cache scales: self_attn.k_scale / v_scale [1] (SPEC §10), BF16 like its
        # other scales
        r.static_scale(p + "self_attn.k_scale", (1,), "BF16")
        r.static_scale(p + "self_attn.v_scale", (1,), "BF16")
    mlp(r, p + "mlp.", hs, c["intermediate_size"], q)
    r.norm(prefix + "norm.weight", hs)
    r.bf16(head, (V, hs))


def fam_redhat_fp8_dynamic(r):
    # RedHatAI/*-FP8-dynamic (llm-compressor FP8_DYNAMIC): channel weight scales, dynamic per-token
    # activations, ignore ["lm_head"]; this copy also carries an FP8 KV cache (kv_cache_scheme with
    # self_attn.k_scale/v_scale), as llm-compressor writes when a recipe asks for one.
    c = llama_config(ct_config("channel", kv=True))
    llama_body(r, c, CT_CHANNEL, kv="llm-compressor")
    return c, {}, ["--tp", "8"]


def fam_redhat_fp8_block(r):
    # RedHatAI/*-FP8-BLOCK (llm-compressor FP8_BLOCK): 128x128 weight_scale; Llama-3 keeps head_dim
    # 128, so 2 heads / 1 KV head, intermediate 128, to keep every fused part a multiple of 128.
    c = llama_config(ct_config("block"), hidden=H, inter=128)
    c.update(head_dim=128, num_attention_heads=2, num_key_value_heads=1)
    llama_body(r, c, CT_BLOCK)
    return c, {}, ["--tp", "1"]


def fam_modelopt_new(r):
    # nvidia/*-FP8 from ModelOpt >= 0.31: quantization_config with quant_method modelopt in
    # config.json, and hf_quant_config.json beside it
    c = llama_config(modelopt_quant(True))
    llama_body(r, c, MO_TENSOR, kv="modelopt")
    return c, {"hf_quant_config.json": modelopt_quant(False)}, ["--tp", "8"]


def fam_modelopt_old(r):
    # nvidia/*-FP8 from ModelOpt <= 0.29: quantization declared only in hf_quant_config.json, which
    # vLLM reads when config.json has no quantization_config (SPEC §10; vllm
    # transformers_utils/config.py get_hf_file_to_dict("hf_quant_config.json"))
    c = llama_config(None)
    llama_body(r, c, MO_TENSOR, kv="modelopt")
    hq = modelopt_quant(False)
    hq["producer"] = {"name": "modelopt", "version": "0.27.0"}
    return c, {"hf_quant_config.json": hq}, ["--tp", "8"]


def fam_glm45(r):
    # GLM-4.5-FP8 (zai-org): Glm4MoeForCausalLM (vllm models/glm4_moe.py: attention with q/k/v bias,
    # partial rotary, DeepSeek-style router with e_score_correction_bias, shared experts, one MTP
    # layer at index num_hidden_layers, glm4_moe_mtp.py). Block FP8 (128x128 weight_scale_inv,
    # quant_method fp8): sglang PR #8647 (issues) launches GLM-4.5-fp8 through sglang's block
    # Fp8 path and hits "The output_size of gate's and up's weight = 192 is not divisible by weight
    # quantization block_n = 128" at TP 8. The exact quantization_config keys and the scale dtype
    # (F32 here) are assumed to be DeepSeek-V3's, not read from the release. head_dim 128 as in the
    # release, so 2 heads / 1 KV head keep the q/k/v parts multiples of 128.
    hs, heads, kv, hd = H, 2, 1, 128
    n, mtp = 1, 1
    c = {"architectures": ["Glm4MoeForCausalLM"], "attention_bias": True,
         "attention_dropout": 0.0, "eos_token_id": [1], "first_k_dense_replace": 1,
         "head_dim": hd, "hidden_act": "silu", "hidden_size": hs, "initializer_range": 0.02,
         "intermediate_size": 128, "max_position_embeddings": 4096, "model_type": "glm4_moe",
         "moe_intermediate_size": 128, "n_group": 1, "n_routed_experts": 2, "n_shared_experts": 1,
         "norm_topk_prob": True, "num_attention_heads": heads, "num_experts_per_tok": 1,
         "num_hidden_layers": n, "num_key_value_heads": kv, "num_nextn_predict_layers": mtp,
         "partial_rotary_factor": 0.5, "quantization_config": dict(HF_FP8),
         "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 1000000,
         "routed_scaling_factor": 2.5, "tie_word_embeddings": False, "topk_group": 1,
         "torch_dtype": "bfloat16", "transformers_version": "4.54.0", "use_cache": True,
         "use_qk_norm": False, "vocab_size": V}
    q = BLOCK_F32
    r.bf16("model.embed_tokens.weight", (V, hs))
    for i in range(n + mtp):
        p = "model.layers.%d." % i
        norms(r, p, hs)
        llama_attn(r, p, heads, kv, hd, hs, q, bias=True)
        if i < c["first_k_dense_replace"]:
            mlp(r, p + "mlp.", hs, c["intermediate_size"], q)
        else:
            r.bf16(p + "mlp.gate.weight", (c["n_routed_experts"], hs))
            r.f32(p + "mlp.gate.e_score_correction_bias", (c["n_routed_experts"],))
            for e in range(c["n_routed_experts"]):
                mlp(r, p + "mlp.experts.%d." % e, hs, c["moe_intermediate_size"], q)
            mlp(r, p + "mlp.shared_experts.", hs, c["moe_intermediate_size"], q)
        if i >= n:
            mtp_extras(r, p, hs)
    r.norm("model.norm.weight", hs)
    r.bf16("lm_head.weight", (V, hs))
    return c, {}, ["--tp", "1", "--ep", "2"]


def fam_minimax_m2(r):
    # MiniMax-M2: MiniMaxM2ForCausalLM (vllm models/minimax_m2.py: experts
    # block_sparse_moe.experts.E.w1/w2/w3, router block_sparse_moe.gate, e_score_correction_bias,
    # q_norm/k_norm over all heads), hf-fp8 128x128 F32 block scales. Its quantization_config
    # (fmt "float8_e4m3fn", modules_to_not_convert with the bare names "gate" and
    # "e_score_correction_bias") and use_qk_norm / shared_intermediate_size 0 are as quoted from
    # the release's config.json in loader ports' tests and checkpoint validators (find_string
    # '"e_score_correction_bias", "lm_head"'); the same sources say its router weight and
    # correction bias are F32.
    hd, heads, kv, ne, mi = 128, 2, 1, 2, 128
    qc = dict(HF_FP8, fmt="float8_e4m3fn",
              modules_to_not_convert=["gate", "e_score_correction_bias", "lm_head"])
    c = {"architectures": ["MiniMaxM2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 0,
         "eos_token_id": 1, "head_dim": hd, "hidden_act": "silu", "hidden_size": H,
         "intermediate_size": mi, "max_position_embeddings": 4096, "model_type": "minimax_m2",
         "num_attention_heads": heads, "num_experts_per_tok": 1, "num_hidden_layers": 1,
         "num_key_value_heads": kv, "num_local_experts": ne, "qk_norm_type": "per_layer",
         "quantization_config": qc, "rms_norm_eps": 1e-06, "rope_theta": 5000000,
         "rotary_dim": 64, "scoring_func": "sigmoid", "shared_intermediate_size": 0,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": "4.46.1", "use_qk_norm": True, "use_routing_bias": True,
         "vocab_size": V}
    q = BLOCK_F32
    r.bf16("model.embed_tokens.weight", (V, H))
    p = "model.layers.0."
    norms(r, p, H)
    llama_attn(r, p, heads, kv, hd, H, q)
    r.norm(p + "self_attn.q_norm.weight", heads * hd)
    r.norm(p + "self_attn.k_norm.weight", kv * hd)
    r.f32(p + "block_sparse_moe.gate.weight", (ne, H))
    r.f32(p + "block_sparse_moe.e_score_correction_bias", (ne,))
    for e in range(ne):
        mlp(r, p + "block_sparse_moe.experts.%d." % e, H, mi, q, names=("w1", "w3", "w2"))
    r.norm("model.norm.weight", H)
    r.bf16("lm_head.weight", (V, H))
    return c, {}, ["--tp", "1", "--ep", "2"]


def fam_mistral_fp8(r):
    # Ministral-3 / Devstral-2 FP8 (HF format): Mistral3ForConditionalGeneration, the text model's
    # dimensions nested under text_config (SPEC §10), quantization_config quant_method fp8 with
    # static activations and weight_block_size null (transformers FineGrainedFP8, SPEC §10),
    # per-tensor weight_scale_inv + activation_scale. Only the language model is copied: the
    # vision tower and projector (BF16, unquantized) are left out.
    tc = llama_config(None, arch="MistralForCausalLM", mt="ministral3")
    for k in ("architectures", "torch_dtype", "transformers_version", "tie_word_embeddings"):
        tc.pop(k)
    qc = {"activation_scheme": "static", "dequantize": False, "modules_to_not_convert": [
        "multi_modal_projector", "vision_tower", "lm_head"], "quant_method": "fp8",
        "weight_block_size": None}
    c = {"architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10,
         "model_type": "mistral3", "multimodal_projector_bias": False,
         "projector_hidden_act": "gelu", "quantization_config": qc, "spatial_merge_size": 2,
         "text_config": tc, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": "4.57.0", "vision_feature_layer": -1}
    llama_body(r, tc, MISTRAL_TENSOR, prefix="language_model.model.",
               head="language_model.lm_head.weight")
    return c, {}, ["--tp", "8"]


# Llama-4 Maverick FP8 (meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8). What the sources say:
# - quant_method compressed-tensors: SGLang loads it through its compressed-tensors schemes (the
#   W8A8 / W8A16 FP8 scheme classes; sgl-project/sglang issue 5134, "--model-path
#   meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8" failing in CompressedTensorsW8A16Fp8).
# - names: everything under "language_model." (tpu-inference models/jax/llama4.py
#   Llama4WeightLoader: language_model.model.embed_tokens / norm, language_model.lm_head,
#   layers.L.self_attn.{q,k,v,o}_proj, feed_forward.router, feed_forward.shared_expert.*,
#   dense layers' feed_forward.{gate,up,down}_proj); with a quantization_config the routed
#   experts are unfused, feed_forward.experts.E.{gate,up,down}_proj.weight with a ".weight_scale"
#   each (its EXPERT_MAPPINGS_UNFUSED; vLLM models/llama4.py Llama4Model.load_weights takes the
#   per-expert names through FusedMoE.make_expert_params_mapping when no fused
#   "experts.gate_up_proj" is present). Only those expert tensors carry a scale there, and
#   intel/auto-round run_llama4_quant.sh keeps router, shared_expert, the dense feed_forward and
#   q/k/v/o in high precision for the same model: only the routed experts are FP8.
# - layer L is MoE iff (L + 1) % interleave_moe_layer_step == 0, dense layers use
#   intermediate_size_mlp (vLLM models/llama4.py Llama4DecoderLayer); dimensions under text_config
#   (tpu-inference reads hf_config.text_config.interleave_moe_layer_step; SPEC §10).
# NOT established from a source (kept as llm-compressor's FP8_DYNAMIC writes it, as in
# redhat-fp8-dynamic): the scale strategy "channel" ([out, 1]), its dtype BF16, dynamic per-token
# activations, and the spelling of the ignore list. The vision tower and projector (BF16) are
# left out, as in mistral-fp8. Served at TP 8: hidden 80, 8 heads of 10, 2 KV heads; expert
# intermediate 48, dense 64 (both multiples of 8), 2 experts, 2 layers (0 dense, 1 MoE).
def fam_llama4_maverick(r):
    hs, heads, kv, hd, inter, inter_mlp, ne = 80, 8, 2, 10, 48, 64, 2
    tc = {"attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0,
          "bos_token_id": 0, "eos_token_id": 1, "head_dim": hd, "hidden_act": "silu",
          "hidden_size": hs, "initializer_range": 0.02, "interleave_moe_layer_step": 2,
          "intermediate_size": inter, "intermediate_size_mlp": inter_mlp,
          "max_position_embeddings": 4096, "model_type": "llama4_text", "no_rope_layers": [],
          "num_attention_heads": heads, "num_experts_per_tok": 1, "num_hidden_layers": 2,
          "num_key_value_heads": kv, "num_local_experts": ne, "rms_norm_eps": 1e-05,
          "rope_scaling": None, "rope_theta": 500000.0, "use_qk_norm": False, "vocab_size": V}
    ignore = ["re:.*self_attn.*", "re:.*router.*", "re:.*shared_expert.*",
              "re:.*feed_forward\\.(gate|up|down)_proj", "re:.*vision_model.*",
              "re:.*multi_modal_projector.*", "language_model.lm_head"]
    c = {"architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 2,
         "eoi_token_index": 3, "image_token_index": 4, "model_type": "llama4",
         "quantization_config": ct_config("channel", ignore=ignore), "text_config": tc,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16",
         "transformers_version": "4.51.0"}
    pre = "language_model.model."
    r.bf16(pre + "embed_tokens.weight", (V, hs))
    for layer in range(2):
        p = pre + "layers.%d." % layer
        norms(r, p, hs)
        llama_attn(r, p, heads, kv, hd, hs, None)
        if (layer + 1) % tc["interleave_moe_layer_step"]:
            mlp(r, p + "feed_forward.", hs, inter_mlp, None)
            continue
        r.bf16(p + "feed_forward.router.weight", (ne, hs))
        mlp(r, p + "feed_forward.shared_expert.", hs, inter, None)
        for e in range(ne):
            mlp(r, p + "feed_forward.experts.%d." % e, hs, inter, CT_CHANNEL)
    r.norm(pre + "norm.weight", hs)
    r.bf16("language_model.lm_head.weight", (V, hs))
    return c, {}, ["--tp", "8"]


# Llama-3.1-405B-Instruct-FP8 (meta-llama), quant_method fbgemm_fp8. What the sources say:
# - vLLM quantization/fbgemm_fp8.py FBGEMMFp8Config.from_config takes "modules_to_not_convert"
#   and "activation_scale_ub" (get_from_keys: both required); get_quant_method gives every
#   LinearBase not skipped by is_layer_skipped(prefix, modules_to_not_convert) the FP8 method,
#   whose create_weights registers "weight" F8_E4M3 [out, in] and "weight_scale" F32 [out, 1]
#   (ChannelQuantScaleParameter, output_dim 0: split with the rows under TP); activations are
#   quantized per row at run time, bounded by activation_scale_ub (no input scale tensor).
# - transformers integrations/fbgemm_fp8.py FbgemmFp8Linear: "weight_scale" F32 [out, 1], the
#   bound a non-persistent buffer (not in the checkpoint); quantizers/quantizer_fbgemm_fp8.py
#   needs fbgemm-gpu on a CUDA GPU of capability 9.0.
# - a config with activation_scale_ub 1200.0 beside quant_method fbgemm_fp8 (a test of another
#   project quotes the pair); the value is kept.
# NOT established from a source read here: which modules the release lists in
# modules_to_not_convert (this copy lists layer 0's MLP, every attention projection and lm_head,
# as the Llama 3 paper's FP8 section describes: FFN layers only, first and last layer kept;
# recalled), and the checkpoint's scale dtype (F32 as both loaders' parameters). Served at TP 8:
# hidden 80, 8 heads of 10, 2 KV heads, intermediate 48 (the corpus stays under 6 MB).
def fam_fbgemm_fp8(r):
    skip = ["model.layers.%d.self_attn.%s" % (L, m) for L in range(2)
            for m in ("q_proj", "k_proj", "v_proj", "o_proj")]
    skip += ["model.layers.0.mlp.%s" % m for m in ("gate_proj", "up_proj", "down_proj")]
    c = llama_config({"activation_scale_ub": 1200.0, "modules_to_not_convert": skip + ["lm_head"],
                      "quant_method": "fbgemm_fp8"}, hidden=80, inter=48)
    c.update(num_hidden_layers=2, head_dim=10)   # 8 heads of 10, as llama4-maverick-fp8
    hs, hd = c["hidden_size"], c["head_dim"]
    r.bf16("model.embed_tokens.weight", (V, hs))
    for layer, q in ((0, None), (1, FBGEMM_CHANNEL)):
        p = "model.layers.%d." % layer
        norms(r, p, hs)
        llama_attn(r, p, LHEADS, LKV, hd, hs, None)
        mlp(r, p + "mlp.", hs, c["intermediate_size"], q)
    r.norm("model.norm.weight", hs)
    r.bf16("lm_head.weight", (V, hs))
    return c, {}, ["--tp", "8"]


# Mistral's native format (consolidated.safetensors + params.json), as vLLM reads it with
# --load-format mistral: models/llama.py MistralForCausalLM.mistral_mapping renames layers.L.attention.wq
# / wk / wv / wo, feed_forward.w1 / w2 / w3, attention_norm, ffn_norm, tok_embeddings, output, norm, and
# qscale_weight -> weight_scale, qscale_act -> input_scale; transformers_utils/configs/mistral.py
# _remap_mistral_quantization_args reads params.json "quantization": qformat_weight "fp8_e4m3" and
# qscheme_act "TENSOR" (static) or "NO_SCALES" (dynamic) as quant_method fp8, per tensor. params.json
# keys dim, n_layers, head_dim, hidden_dim, n_heads, n_kv_heads, norm_eps, vocab_size, rope_theta
# (the same file's config mapping). NOT established: the scales' dtype and shape (F32 [] here, as the
# HF-format mistral-fp8). fp8conv refuses the format (fp8conv-formats(5), Mistral native format).
def fam_mistral_native(r):
    params = {"dim": LH, "head_dim": LHD, "hidden_dim": LINTER, "n_heads": LHEADS,
              "n_kv_heads": LKV, "n_layers": 1, "norm_eps": 1e-05, "rope_theta": 1000000.0,
              "vocab_size": V, "quantization": {"qformat_weight": "fp8_e4m3", "qscheme_act": "TENSOR"}}
    q = {"group": "tensor", "scale": "qscale_weight", "dtype": "F32"}
    r.bf16("tok_embeddings.weight", (V, LH))
    p = "layers.0."
    r.norm(p + "attention_norm.weight", LH)
    for nm, out, inp in (("wq", LHEADS * LHD, LH), ("wk", LKV * LHD, LH), ("wv", LKV * LHD, LH),
                         ("wo", LH, LHEADS * LHD)):
        r.fp8(p + "attention.%s.weight" % nm, out, inp, q)
        r.static_scale(p + "attention.%s.qscale_act" % nm, ())
    r.norm(p + "ffn_norm.weight", LH)
    for nm, out, inp in (("w1", LINTER, LH), ("w3", LINTER, LH), ("w2", LH, LINTER)):
        r.fp8(p + "feed_forward.%s.weight" % nm, out, inp, q)
        r.static_scale(p + "feed_forward.%s.qscale_act" % nm, ())
    r.norm("norm.weight", LH)
    r.bf16("output.weight", (V, LH))
    r.single_name = "consolidated.safetensors"
    return None, {"params.json": params}, ["--tp", "8"]


# ModelOpt MIXED_PRECISION (vLLM quantization/modelopt.py ModelOptMixedPrecisionConfig: quant_algo
# MIXED_PRECISION, the per-layer algorithm in quantized_layers, config.json's quantization_config
# preferred over hf_quant_config.json; SGLang modelopt_quant.py ModelOptMixedPrecisionConfig). Here
# attention FP8 per tensor (weight_scale + input_scale F32 [], as ModelOpt FP8), the MLP NVFP4 (as
# nvfp4-modelopt), an FP8 KV cache (k_proj.k_scale / v_proj.v_scale). NOT established from a
# release: the exact key set of each quantized_layers entry beyond quant_algo (group_size for NVFP4
# taken from ModelOpt's NVFP4 declaration) and the flat shape of config.json's declaration.
def fam_modelopt_mixed(r):
    layers = {}
    def linear(r, m, out, inp):
        if ".mlp." in m:
            gen_fp4.nvfp4_linear(r, m, out, inp, False)
            layers[m] = {"group_size": 16, "quant_algo": "NVFP4"}
        else:
            r.fp8(m + ".weight", out, inp, MO_TENSOR)
            r.static_scale(m + ".input_scale", ())
            layers[m] = {"quant_algo": "FP8"}
    gen_fp4.fp4_llama(r, linear)
    p = "model.layers.0.self_attn."
    r.static_scale(p + "k_proj.k_scale", ())
    r.static_scale(p + "v_proj.v_scale", ())
    body = {"exclude_modules": ["lm_head"], "kv_cache_quant_algo": "FP8",
            "quant_algo": "MIXED_PRECISION", "quantized_layers": dict(sorted(layers.items()))}
    # config.json's quantization_config as ModelOpt's export converts hf_quant_config.json's
    # (NVIDIA/Model-Optimizer modelopt/torch/export/convert_hf_config.py,
    # convert_hf_quant_config_format, MIXED_PRECISION: one config group per distinct layer entry,
    # in quantized_layers' order, targets its sorted layer names, _quant_algo_to_group_config's
    # args; quantized_layers kept; exclude_modules as "ignore"; kv_cache_quant_algo FP8 as
    # kv_cache_scheme {dynamic false, num_bits 8, type float}, the key vLLM's
    # ModelOptQuantConfigBase.from_config reads in this form). Before issue 44 (s53) the copy
    # had the flat hf_quant_config keys here (kv_cache_quant_algo), which vLLM 0.32 ignores.
    def group_args(e):
        if e["quant_algo"] == "FP8":
            a = {"dynamic": False, "num_bits": 8, "type": "float"}
            return {"input_activations": dict(a), "weights": dict(a)}
        a = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": e["group_size"]}
        return {"input_activations": dict(a), "weights": dict(a)}
    groups = {}
    for m, e in body["quantized_layers"].items():
        groups.setdefault(tuple(sorted(e.items())), []).append(m)
    qc = {"config_groups": {"group_%d" % i: dict(group_args(dict(k)), targets=sorted(ms))
                            for i, (k, ms) in enumerate(groups.items())},
          "quantized_layers": body["quantized_layers"], "ignore": ["lm_head"],
          "quant_algo": "MIXED_PRECISION",
          "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
          "producer": gen_fp4.MO_PRODUCER, "quant_method": "modelopt"}
    return gen_fp4.fp4_llama_config(qc), {"hf_quant_config.json": {
        "producer": gen_fp4.MO_PRODUCER, "quantization": body}}, ["--tp", "1"]


# planted defects of the FP8 families (each a valid copy with one thing broken; EXPECT.json
# "defect": the finding verify must give), written with gen_fp4.DEFECTS
def defect_fbgemm_no_scale(r):
    # a weight_scale lost: vLLM's FBGEMMFp8LinearMethod leaves the parameter at its fill
    # (torch.finfo(float32).min) and computes garbage; verify names the weight (missing-scale)
    c, side, serve = fam_fbgemm_fp8(r)
    del r.tensors[gen_fp4.tensor_index(r, "model.layers.1.mlp.up_proj.weight_scale")]
    return c, side, serve, {"rule": "missing-scale", "tensor": "model.layers.1.mlp.up_proj.weight"}


def defect_int4_no_scale(r):
    # kimi-k2-thinking with one expert's INT4 weight_scale lost: vLLM's WNA16 MoE method leaves
    # that expert's scales unset; verify names the packed weight (missing-scale)
    c, side, serve = fam_kimi_k2_thinking(r)
    del r.tensors[gen_fp4.tensor_index(r, "model.layers.1.mlp.experts.1.up_proj.weight_scale")]
    return c, side, serve, {"rule": "missing-scale",
                            "tensor": "model.layers.1.mlp.experts.1.up_proj.weight_packed"}


DEFECTS_FP8 = [
    ("defect-fbgemm-no-scale", defect_fbgemm_no_scale),
    ("defect-kimi-int4-no-scale", defect_int4_no_scale),
]


FAMILIES = [
    ("deepseek-v3", fam_deepseek_v3),
    ("deepseek-v3.1", fam_deepseek_v31),
    ("kimi-k2", fam_kimi_k2),
    ("deepseek-v3.2-exp", fam_deepseek_v32_exp),
    ("qwen3-fp8", fam_qwen3),
    ("qwen3-4b-instruct-2507-fp8", fam_qwen3_4b_2507),
    ("qwen3-moe-fp8", fam_qwen3_moe),
    ("redhat-fp8-dynamic", fam_redhat_fp8_dynamic),
    ("redhat-fp8-block", fam_redhat_fp8_block),
    ("modelopt-fp8", fam_modelopt_new),
    ("modelopt-fp8-old", fam_modelopt_old),
    ("glm-4.5-fp8", fam_glm45),
    ("minimax-m2", fam_minimax_m2),
    ("mistral-fp8", fam_mistral_fp8),
    ("llama4-maverick-fp8", fam_llama4_maverick),
    ("fbgemm-fp8", fam_fbgemm_fp8),
    ("kimi-k2-thinking", fam_kimi_k2_thinking),
    ("mistral-native-fp8", fam_mistral_native),
    ("modelopt-mixed", fam_modelopt_mixed),
]


# --------------------------------------------------------------------------------------------
# writing


def write_shard(path, items):
    keep, specs = [], {}
    for name, dtype, arr in items:
        data = np.ascontiguousarray(arr).tobytes()
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        keep.append(buf)
        specs[name] = TensorSpec(dtype=BINDING[dtype], shape=list(arr.shape),
                                 data_ptr=ctypes.addressof(buf), data_len=len(data))
        assert specs[name].dtype == dtype, (name, specs[name].dtype)
    serialize_file(specs, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)   # safetensors >= 0.8 writes through a 0600 temp file


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def write_release(outdir, family, build):
    r = Release(family)
    config, side, serve, *defect = build(r)
    d = os.path.join(outdir, family)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    # shards in tensor order, each closed once it passes SHARD_BYTES; one that ends on an FP8
    # weight leaves its scale, the next tensor, to the next shard, as DeepSeek-V3's own release
    # does for some weights (a reader must look scales up across shards)
    shards, cur, size = [], [], 0
    for t in r.tensors:
        cur.append(t)
        size += t[2].nbytes
        if size >= SHARD_BYTES:
            shards.append(cur)
            cur, size = [], 0
    if cur:
        shards.append(cur)
    if len(shards) == 1:
        write_shard(os.path.join(d, getattr(r, "single_name", "model.safetensors")), shards[0])
    else:
        wmap = {}
        for i, items in enumerate(shards):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
            write_shard(os.path.join(d, fn), items)
            wmap.update({name: fn for name, _, _ in items})
        total = sum(t[2].nbytes for t in r.tensors)
        write_json(os.path.join(d, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))})
    if config is not None:   # Mistral's native format has params.json instead
        write_json(os.path.join(d, "config.json"), config)
    for fn, obj in side.items():
        write_json(os.path.join(d, fn), obj)
    expect = {"export_tensors": sorted(r.export), "export_bf16_sha256": dict(sorted(r.sha.items())),
              "serve": serve}
    if hasattr(r, "shapes"):   # the FP4 families: each exported weight's shape too
        expect["export_shapes"] = dict(sorted(r.shapes.items()))
    if hasattr(r, "chain"):    # NVFP4 with real global scales: where an fp32 chain is off
        expect["fp32_chain_differs"] = dict(sorted(r.chain.items()))
    if defect:
        expect["defect"] = defect[0]
    write_json(os.path.join(d, "EXPECT.json"), expect)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "releases")
    gen_fp4.self_test()
    for family, build in FAMILIES + gen_fp4.FAMILIES_FP4 + gen_fp4.DEFECTS + DEFECTS_FP8:
        write_release(outdir, family, build)


if __name__ == "__main__":
    main()
