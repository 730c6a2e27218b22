#!/usr/bin/env python3
"""The release corpus (testdata/releases, issue 24), end to end through the built fp8conv.

For each tiny copy of a public FP8 release family (testdata/gen_releases.py writes them, with
EXPECT.json), every check below is run and counted once:

    inspect        `inspect` exits 0
    inspect-json   `inspect --json` exits 0 and prints one JSON document
    verify         `verify` exits 0
    verify-strict  `verify --strict` exits 0
    verify-tp      `verify` with the TP (and EP) the family is served at (EXPECT.json "serve") exits 0
    export         `dequantize-for-export` exits 0, writes exactly EXPECT.json's tensors (no weight
                   scales, no activation/input scales, no KV-cache scales), each FP8 weight's bf16
                   bytes have EXPECT.json's sha256, and its config.json holds no quantization_config
    convert-F      `convert --format F` to each other format the release's scheme is written in,
                   then back to the release's own format when fp8conv writes that (else the one-way
                   result): the scheme's scale shapes are kept, as many KV-cache scales, the
                   round trip's scale_fmt and weight_block_size, and every value (`diff --dequant`
                   of the release and the result exits 0)
    like           `quantize --like REL` of the export, then `verify --like REL` of that, exit 0
    like-trip      `convert --like BASE` of BASE converted to another format (the first convert-F
                   target) gives back BASE: every safetensors file byte-identical (tensor names, the
                   scales' names, dtypes and shapes included: Mistral's per-tensor weight_scale_inv,
                   Qwen3's BF16 and F16 scales, a ue8m0 declaration, ModelOpt's KV-cache scale
                   names), and `verify --like BASE` of it exits 0. BASE is the release, or where
                   `convert --like` refuses the release (LIKE_BASE: static activations, a layout
                   read and not written) the release as `convert` writes it in its own format;
                   then `quantize --like BASE` of the release's export passes `verify --like BASE`

The 2026 FP4 layouts of issue 25 (FP4 below: DeepSeek-V4, gpt-oss, NVFP4 as ModelOpt and as
compressed-tensors write it, compressed-tensors MXFP4; made by testdata/gen_fp4.py) get inspect,
inspect-json, verify, verify-strict and

    export         as above, and each weight's shape is EXPECT.json's export_shapes (gpt-oss in
                   transformers' orientation), its bf16 bytes the exact value rounded once, and
                   config.json holds no expert_dtype either
    twin           (nvfp4-ct) `diff --dequant` of nvfp4-modelopt and nvfp4-ct exits 0: the two hold
                   the same values, the compressed-tensors global scale being the exact reciprocal
    cast           (CASTS below) `convert --exact` to the family's other layout (DeepSeek-V4: its
                   MXFP4 experts to FP8; compressed-tensors MXFP4: to NVFP4), and the output
                   verifies clean, equals the input under
                   `diff --dequant` and exports the same bytes

The INT4 copy of issue 44 (kimi-k2-thinking: compressed-tensors pack-quantized experts) is checked as
the FP4 ones, and `like` too (LIKE_4BIT).

A layout fp8conv refuses by design (REFUSED: Mistral's native format) gets one check per command:
inspect, inspect-json, verify (exit 1, that one error), export, convert-compressed-tensors, like
(quantize --like it) and twin (diff --dequant of it), each refusing with one message (exit 3).

and the planted-defect copies (DEFECT below: one broken thing each) inspect, inspect-json and

    defect         `verify` exits 1 with exactly one error, of EXPECT.json's rule, naming its tensor

and, planted at run time in a scratch copy (CONFIG_DEFECTS, TENSOR_DEFECTS), defect-missing-layer,
defect-wrong-algo (modelopt-mixed) and defect-no-scale (nvfp4-ct, mxfp4-ct: up_proj's weight_scale
dropped; verify as `defect`, and dequantize-for-export exits 3 naming the weight, writing nothing)

and Granite-4.0-H, planted at run time (granite_checks: a bf16 model quantized; granite_release_checks:
an FP8 copy in llm-compressor's documented layout, `release-*`: verify, --strict, a bit-exact export,
quantize --like + verify --like, convert --format modelopt refused, the transformers note)

and, once for the corpus, that its files stay under 6.5 MB. The FP8 families with a REAL_DIMS row
(the release's real config numbers, each row citing its source) also get

    tp-real@N[/epE]  a scratch copy with the real numbers in config.json: `verify --json --no-values
                   --tp N [--ep E]` says TP N loads (N in tp_sizes_that_load, no [tp]/[ep] finding)
                   exactly when vllm_loads(), a model of vLLM's partition rules written here from
                   vLLM's source, says so; one check per layout the release is served at
    tp-real@1-64   tp_sizes_that_load (without EP) is the list vllm_loads() gives for TP 1..64

judging the TP answer only (not verify's exit status, which the copies' other errors set).
Today's fp8conv fails some of these (issue 24). EXPECTED, below, is the one table of outcomes: 0
for a check that passes; for one that fails today, the exit status its first failing step gives
("values" when the steps exit 0 but a value or name is wrong) and a note "issue 24 item N: what
is wrong". Such a check is printed KNOWN and counted apart; the run fails when a passing check
fails, or when a KNOWN one passes (then flip its entry to 0). A KNOWN check that fails in another
way is still KNOWN, with a note.
DESIGNED, below, holds the checks whose failure is fp8conv's documented choice, not a bug: (outcome,
phrase, why). Such a check is printed DESIGNED and counted apart; it fails the run unless it fails
with exactly that outcome and its message holds the phrase.

usage: check_releases.py BUILD    (BUILD/fp8conv is the binary: make's build dir)
Python 3 standard library only: safetensors headers are read here with json.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

TIMEOUT = 120          # seconds for one fp8conv run on a copy of a few hundred KB
CORPUS_LIMIT = 6500000  # the corpus stays under 6.5 MB: bytes of every file under testdata/releases
FORMATS = ["hf-fp8", "compressed-tensors", "modelopt"]
CHECKS = ["inspect", "inspect-json", "verify", "verify-strict", "verify-tp", "export",
          "convert-hf-fp8", "convert-compressed-tensors", "convert-modelopt", "like",
          "like-trip", "twin",
          "defect", "defect-missing-layer", "defect-wrong-algo", "defect-no-scale"]

# family -> its own layout (format, scheme), as fp8conv names them
OWN = {
    "deepseek-v3": ("hf-fp8", "block"), "deepseek-v3.1": ("hf-fp8", "block"),
    "kimi-k2": ("hf-fp8", "block"), "qwen3-fp8": ("hf-fp8", "block"),
    "deepseek-v3.2-exp": ("hf-fp8", "block"),
    "qwen3-4b-instruct-2507-fp8": ("hf-fp8", "block"), "qwen3-moe-fp8": ("hf-fp8", "block"),
    "minimax-m2": ("hf-fp8", "block"), "mistral-fp8": ("hf-fp8", "tensor"),
    "redhat-fp8-dynamic": ("compressed-tensors", "channel"),
    "llama4-maverick-fp8": ("compressed-tensors", "channel"),
    "redhat-fp8-block": ("compressed-tensors", "block"),
    "glm-4.5-fp8": ("hf-fp8", "block"),
    "modelopt-fp8": ("modelopt", "tensor"), "modelopt-fp8-old": ("modelopt", "tensor"),
    # read, not written (fp8conv-formats(5), fbgemm FP8): converted one way
    "fbgemm-fp8": ("fbgemm-fp8", "channel"),
}
# the 2026 FP4 families (issue 25): family -> its layout, in words
FP4 = {
    "deepseek-v4": "FP8 128x128 trunk with F8_E8M0 .scale, MXFP4 experts (I8 + F8_E8M0 .scale)",
    "gpt-oss": "MXFP4 experts: U8 _blocks [E, rows, G, 16] + U8 _scales [E, rows, G]",
    "nvfp4-modelopt": "NVFP4: U8 weight, F8_E4M3 weight_scale, F32 weight_scale_2 [] (a multiplier)",
    "nvfp4-ct": "NVFP4 nvfp4-pack-quantized: weight_packed, weight_global_scale F32 [1] (a divisor)",
    "nvfp4-modelopt-amax": "as nvfp4-modelopt, weight_scale_2 = amax / 2688 (not a power of two)",
    "nvfp4-ct-amax": "as nvfp4-ct, weight_global_scale = 2688 / amax in bf16 (not a power of two)",
    "mxfp4-ct": "MXFP4 mxfp4-pack-quantized: weight_packed, U8 E8M0 weight_scale (bias 127)",
    # issue 44: not FP4, but a packed 4-bit layout checked the same way
    "kimi-k2-thinking": "INT4 pack-quantized routed experts: weight_packed I32, BF16 weight_scale "
                        "[N, K/32], weight_shape I64; the rest BF16 by the ignore list",
}
# the 4-bit families whose layout quantize --like writes: `like` as for the FP8 families
LIKE_4BIT = {"kimi-k2-thinking"}
FP4["modelopt-mixed"] = ("ModelOpt MIXED_PRECISION: attention FP8 per tensor, MLP NVFP4, "
                         "quantized_layers per layer, FP8 KV cache")


def drop_layer(qc, module):
    del qc["quantized_layers"][module]


def set_algo(qc, module, algo):
    qc["quantized_layers"][module] = {"quant_algo": algo}


# config defects planted at run time in a scratch copy (a whole copy each would cost the corpus
# its size): family -> [(check, edit of quantization_config, rule, tensor)]; `defect` as above
CONFIG_DEFECTS = {"modelopt-mixed": [
    ("defect-missing-layer", lambda qc: drop_layer(qc, "model.layers.0.self_attn.o_proj"),
     "quantized-layers", "model.layers.0.self_attn.o_proj.weight"),
    ("defect-wrong-algo", lambda qc: set_algo(qc, "model.layers.0.mlp.down_proj", "FP8"),
     "quantized-layers", "model.layers.0.mlp.down_proj.weight"),
]}


def config_defect(fp8conv, rel, tmp, name, edit, rule, tensor):
    d = os.path.join(tmp, name)
    shutil.copytree(rel, d)
    path = os.path.join(d, "config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    edit(cfg["quantization_config"])
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    check_defect(fp8conv, d, {"rule": rule, "tensor": tensor})
# tensor defects planted at run time the same way: family -> [(check, tensor dropped, rule, tensor
# named)]. A compressed-tensors FP4 weight_packed (U8) whose scale is lost is packed all the same:
# verify names it [missing-scale] and dequantize-for-export refuses it (exit 3, writing nothing)
# instead of passing it as a plain uint8 tensor (issue 44, as for INT4)
UP = "model.layers.0.mlp.up_proj."
TENSOR_DEFECTS = {fam: [("defect-no-scale", UP + "weight_scale", "missing-scale",
                         UP + "weight_packed")] for fam in ("nvfp4-ct", "mxfp4-ct")}


def drop_tensor(directory, drop):
    """Rewrite directory/model.safetensors without tensor drop."""
    path = os.path.join(directory, "model.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out, body = {}, b""
    if "__metadata__" in header:
        out["__metadata__"] = header.pop("__metadata__")
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if name != drop:
            a, b = e["data_offsets"]
            out[name] = dict(e, data_offsets=[len(body), len(body) + b - a])
            body += data[a:b]
    h = json.dumps(out).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)


def tensor_defect(fp8conv, rel, tmp, name, drop, rule, tensor):
    d = os.path.join(tmp, name)
    shutil.copytree(rel, d)
    drop_tensor(d, drop)
    check_defect(fp8conv, d, {"rule": rule, "tensor": tensor})
    out = os.path.join(tmp, name + "-export")
    expect_refusal(fp8conv, ["dequantize-for-export", "-q", d, out], out, 3, tensor)


# Granite-4.0-H (hybrid Mamba2 + attention + MoE), planted at run time as a bf16 model (no FP8
# copy fits the corpus): its routed experts are fused 3-D tensors named .weight,
# block_sparse_moe.input_linear [E, 2I, H] and output_linear [E, H, I]; vLLM
# models/granitemoehybrid.py load_weights splits them and their channel weight_scale [E, N, 1] per
# expert (chunk(2, dim=0)); mamba.conv1d.weight is 3-D too and is not an expert. Checks: quantize
# --scheme channel makes the experts FP8 with [E, N, 1] scales and keeps conv1d; quantize --like
# that does the same; convert --format modelopt refuses it (exit 3, naming an expert, writing
# nothing), as vLLM's ModelOptFp8MoEMethod takes per-tensor expert scales only.
GRANITE = "granite-4.0-h (planted)"
GRANITE_EXPERT = "block_sparse_moe.input_linear.weight"


def granite_bf16(d, h=64, inter=32, experts=4, vocab=32):
    shapes = {"model.embed_tokens.weight": [vocab, h], "lm_head.weight": [vocab, h],
              "model.norm.weight": [h]}
    for layer in (0, 1):
        p = "model.layers.%d." % layer
        shapes.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                       p + "block_sparse_moe.router.layer.weight": [experts, h],
                       p + "block_sparse_moe.input_linear.weight": [experts, 2 * inter, h],
                       p + "block_sparse_moe.output_linear.weight": [experts, h, inter],
                       p + "shared_mlp.input_linear.weight": [2 * inter, h],
                       p + "shared_mlp.output_linear.weight": [h, inter]})
        if layer == 0:
            shapes.update({p + "mamba.in_proj.weight": [2 * h + 36, h],
                           p + "mamba.out_proj.weight": [h, 2 * h],
                           p + "mamba.conv1d.weight": [2 * h + 32, 1, 4], p + "mamba.A_log": [4]})
        else:
            shapes.update({p + "self_attn.%s.weight" % n: [o, h] for n, o in
                           (("q_proj", h), ("k_proj", 32), ("v_proj", 32), ("o_proj", h))})
    header, body = {}, b""
    for i, (name, shape) in enumerate(sorted(shapes.items())):
        n = 1
        for x in shape:
            n *= x
        # bf16 values in (-0.06, 0.06), deterministic: sign, exponent 0x3b..0x3d, a mantissa
        data = b"".join(struct.pack("<H", ((k * 7 + i) % 2) << 15 | (0x3b + (k + i) % 3) << 7 |
                                    (k * 37 + i) % 128) for k in range(n))
        header[name] = {"dtype": "BF16", "shape": shape,
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    os.makedirs(d)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + body)
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"architectures": ["GraniteMoeHybridForCausalLM"], "model_type":
                   "granitemoehybrid", "hidden_size": h, "intermediate_size": inter,
                   "num_local_experts": experts, "num_experts_per_tok": 2, "num_hidden_layers": 2,
                   "layer_types": ["mamba", "attention"], "vocab_size": vocab}, f)


def granite_fp8_experts(d):
    t = st_tensors(d)
    for layer in (0, 1):
        for n, rows in (("input_linear", 64), ("output_linear", 64)):
            w = "model.layers.%d.block_sparse_moe.%s.weight" % (layer, n)
            if t[w][0] != "F8_E4M3" or t.get(w + "_scale", (0, 0))[1] != [4, rows, 1]:
                raise Failed("values", "%s is %s, scale %s: FP8 with [E, N, 1] scales wanted"
                             % (w, t[w][0], t.get(w + "_scale", (0, "none"))[1]))
    if t["model.layers.0.mamba.conv1d.weight"][0] != "BF16":
        raise Failed("values", "mamba.conv1d.weight was quantized")


# Granite-4.0-H FP8 as its release is documented, planted at run time (the corpus is at its size
# limit): compressed-tensors FP8_DYNAMIC from llm-compressor's Granite-4 flow (vllm-project/
# llm-compressor examples/quantization_w8a8_fp8/granite4_example.py and README_granite4.md:
# targets Linear and GraniteMoeHybridParallelExpertsLinear, ignore lm_head and
# re:.*block_sparse_moe.router; src/llmcompressor/modeling/granite4.py to_3d_expert: the fused
# experts saved [E, out, in] with weight_scale [E, out, 1]); per-channel weight scales in the
# model's dtype (BF16), per-token dynamic activations. The Mamba layer's shapes are transformers'
# GraniteMoeHybrid Mamba layer (in_proj out = d_inner + conv_dim + n_heads, conv_dim = d_inner +
# 2 * n_groups * d_state; conv1d a Conv1d, not Linear: BF16). Not read: the released
# ibm-granite/granite-4.0-h-*-FP8 files themselves (their config.json, whether the saved ignore list
# is the recipe's two entries or expanded to module names, the real dimensions: no tp-real row).
def e4m3_value(b):
    sign = -1.0 if b & 0x80 else 1.0
    e, m = (b >> 3) & 0xF, b & 7
    return sign * (m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))


def bf16_value(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


def bf16_round(x):  # round to nearest even; x is exact in binary64 here (a 4-bit times an 8-bit)
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def granite_release(d, h=64, inter=32, shared=32, experts=4, vocab=32):
    """Write the copy; return (export tensors, {FP8 weight: sha256 of its bf16 export})."""
    d_inner, d_head, groups, d_state = 2 * h, 16, 1, 16
    n_heads, conv_dim = d_inner // d_head, d_inner + 2 * groups * d_state
    fp8 = {}   # FP8 weights: name -> shape
    bf16 = {"model.embed_tokens.weight": [vocab, h], "lm_head.weight": [vocab, h],
            "model.norm.weight": [h]}
    for layer, kind in ((0, "mamba"), (1, "attention")):
        p = "model.layers.%d." % layer
        bf16.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                     p + "block_sparse_moe.router.layer.weight": [experts, h]})
        fp8.update({p + "block_sparse_moe.input_linear.weight": [experts, 2 * inter, h],
                    p + "block_sparse_moe.output_linear.weight": [experts, h, inter],
                    p + "shared_mlp.input_linear.weight": [2 * shared, h],
                    p + "shared_mlp.output_linear.weight": [h, shared]})
        if kind == "mamba":
            fp8.update({p + "mamba.in_proj.weight": [d_inner + conv_dim + n_heads, h],
                        p + "mamba.out_proj.weight": [h, d_inner]})
            bf16.update({p + "mamba.conv1d.weight": [conv_dim, 1, 4], p + "mamba.conv1d.bias":
                         [conv_dim], p + "mamba.A_log": [n_heads], p + "mamba.D": [n_heads],
                         p + "mamba.dt_bias": [n_heads], p + "mamba.norm.weight": [d_inner]})
        else:
            fp8.update({p + "self_attn.%s.weight" % n: [o, h] for n, o in
                        (("q_proj", h), ("k_proj", h // 2), ("v_proj", h // 2))})
            fp8[p + "self_attn.o_proj.weight"] = [h, h]
    tensors, sha = {}, {}
    for i, name in enumerate(sorted(fp8)):
        shape = fp8[name]
        rows, cols = shape[-2], shape[-1]
        lead = shape[0] if len(shape) == 3 else 1
        codes = bytes(((k * 37 + i) % 0x7E) | (0x80 if (k * 7 + i) % 2 else 0)
                      for k in range(lead * rows * cols))
        scales = [0x3B80 + (r * 5 + i) % 64 for r in range(lead * rows)]  # BF16 ~ 0.004
        tensors[name] = ("F8_E4M3", shape, codes)
        tensors[name + "_scale"] = ("BF16", shape[:-1] + [1],
                                    b"".join(struct.pack("<H", v) for v in scales))
        out = b"".join(struct.pack("<H", bf16_round(e4m3_value(codes[k]) * bf16_value(scales[k // cols])))
                       for k in range(len(codes)))
        sha[name] = hashlib.sha256(out).hexdigest()
    for i, (name, shape) in enumerate(sorted(bf16.items())):
        n = 1
        for x in shape:
            n *= x
        tensors[name] = ("BF16", shape, b"".join(
            struct.pack("<H", ((k * 7 + i) % 2) << 15 | (0x3B + (k + i) % 3) << 7 | (k * 37 + i) % 128)
            for k in range(n)))
    header, body = {"__metadata__": {"format": "pt"}}, b""  # as transformers' save_pretrained
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    os.makedirs(d)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + body)
    args = lambda dynamic, strategy: {"num_bits": 8, "type": "float", "symmetric": True,
                                      "dynamic": dynamic, "strategy": strategy}
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
                   "hidden_size": h, "intermediate_size": inter, "shared_intermediate_size": shared,
                   "num_local_experts": experts, "num_experts_per_tok": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
                   "layer_types": ["mamba", "attention"], "mamba_expand": 2,
                   "mamba_n_heads": n_heads, "mamba_d_head": d_head, "mamba_n_groups": groups,
                   "mamba_d_state": d_state, "mamba_d_conv": 4, "vocab_size": vocab,
                   "torch_dtype": "bfloat16",
                   "quantization_config": {
                       "quant_method": "compressed-tensors", "format": "float-quantized",
                       "quantization_status": "compressed",
                       "config_groups": {"group_0": {
                           "targets": ["Linear", "GraniteMoeHybridParallelExpertsLinear"],
                           "weights": args(False, "channel"),
                           "input_activations": args(True, "token")}},
                       "ignore": ["lm_head", "re:.*block_sparse_moe.router"],
                       "kv_cache_scheme": None}}, f)
    return sorted(bf16) + sorted(fp8), sha


# vLLM's partition rules for Granite-4.0-H, written here from vLLM's source: models/granitemoehybrid.py
# GraniteMoeHybridAttention (heads % TP; KV heads % TP, or TP % KV heads when fewer),
# layers/mamba/mamba2/mamba_mixer2.py MambaMixer2.__init__ (mamba_n_heads % TP; mamba_n_groups % TP
# or 1), models/granitemoeshared.py GraniteMoeSharedMLP (merged column-parallel input_linear and
# row-parallel output_linear of shared_intermediate_size), GraniteMoeMoE's FusedMoE (the experts'
# intermediate_size split by TP). Channel scales: no block constraint.
def granite_tp_loads(cfg):
    def ok(tp):
        kv = cfg["num_key_value_heads"]
        return (cfg["num_attention_heads"] % tp == 0 and (kv % tp == 0 if kv >= tp else tp % kv == 0)
                and cfg["mamba_n_heads"] % tp == 0
                and (cfg["mamba_n_groups"] == 1 or cfg["mamba_n_groups"] % tp == 0)
                and cfg["shared_intermediate_size"] % tp == 0 and cfg["intermediate_size"] % tp == 0)
    return [tp for tp in range(1, 65) if ok(tp)]


def granite_tp_check(fp8conv, rel, tmp):
    """verify --tp on the copy and on variants of its config, against granite_tp_loads()."""
    for key, value in ((None, None), ("mamba_n_heads", 6), ("mamba_n_groups", 2),
                       ("shared_intermediate_size", 6), ("num_key_value_heads", 4)):
        d = os.path.join(tmp, "rel-tp-%s" % key)
        shutil.copytree(rel, d)
        path = os.path.join(d, "config.json")
        cfg = json.load(open(path, encoding="utf-8"))
        if key:
            cfg[key] = value
            json.dump(cfg, open(path, "w", encoding="utf-8"))
        got, _ = verify_tp(fp8conv, d, 1, 1)
        if got != granite_tp_loads(cfg):
            raise Failed("values", "verify --tp: %s=%s: TP sizes %s, vLLM's rules give %s"
                         % (key, value, got, granite_tp_loads(cfg)))


def granite_release_checks(fp8conv, tmp):
    rel, export = os.path.join(tmp, "rel"), os.path.join(tmp, "rel-export")
    names, sha = granite_release(rel)
    expect = {"export_tensors": names, "export_bf16_sha256": sha}
    def modelopt():
        out = os.path.join(tmp, "rel-mo")
        expect_refusal(fp8conv, ["convert", "-q", "--format", "modelopt", rel, out], out, 3,
                       GRANITE_EXPERT)
    def like():
        os.makedirs(os.path.join(tmp, "rel-like"))
        check_like(fp8conv, rel, export, os.path.join(tmp, "rel-like"))
        granite_fp8_experts(os.path.join(tmp, "rel-like", "like"))
    def transformers_note():  # llm-compressor README_granite4.md: hf fails on the experts' scale
        rc, out, err = run([fp8conv, "verify", rel])
        if rc != 0 or "transformers no" not in out or "README_granite4.md" not in out + err:
            raise Failed(rc if rc else "values", "verify: transformers' Granite experts rule not "
                         "said: " + last_line(out))
    record(GRANITE, [("release-verify", lambda: step(fp8conv, "verify", "verify", rel)),
                     ("release-strict", lambda: step(fp8conv, "verify --strict", "verify",
                                                     "--strict", rel)),
                     ("release-export", lambda: check_export(fp8conv, rel, expect, export)),
                     ("release-like", like), ("release-modelopt", modelopt),
                     ("release-tp", lambda: granite_tp_check(fp8conv, rel, tmp)),
                     ("release-transformers", transformers_note)])


def granite_checks(fp8conv, tmp):
    bf, ct, like, mo = (os.path.join(tmp, n) for n in ("bf16", "ct", "like", "mo"))
    granite_bf16(bf)
    todo = [("quantize", lambda: (step(fp8conv, "quantize", "quantize", "-q", "--scheme",
                                       "channel", "--format", "compressed-tensors", bf, ct),
                                  granite_fp8_experts(ct))),
            ("like", lambda: (step(fp8conv, "quantize --like", "quantize", "-q", "--like", ct, bf,
                                   like), granite_fp8_experts(like),
                              step(fp8conv, "verify --like", "verify", "--like", ct, like)))]
    def modelopt():
        expect_refusal(fp8conv, ["convert", "-q", "--format", "modelopt", ct, mo], mo, 3,
                       GRANITE_EXPERT)
    todo.append(("convert-modelopt", modelopt))
    def hf_fp8():  # the default format names the scale weight_scale_inv: experts kept, said
        out = os.path.join(tmp, "hf")
        rc, _, err = run([fp8conv, "quantize", bf, out])
        t = st_tensors(out) if rc == 0 else {}
        w = "model.layers.0.block_sparse_moe.input_linear.weight"
        if rc != 0 or t[w][0] != "BF16" or "granitemoehybrid.py" not in err:
            raise Failed(rc if rc else "values", "quantize (hf-fp8): exit %s, %s %s: kept bf16 "
                         "with a warning wanted: %s" % (rc, w, t.get(w, ("none",))[0], last_line(err)))
    todo.append(("hf-fp8-kept", hf_fp8))
    record(GRANITE, todo)


# the planted-defect copies: each is a valid FP4 copy with one thing broken (EXPECT.json "defect")
DEFECT = {"defect-deepseek-v4-nan-e8m0", "defect-nvfp4-no-scale-2", "defect-nvfp4-scale-shape",
          # compressed-tensors 0.13.0's MXFP4 scales, bias 125 (version 0.13.0): [scale-bias]
          "defect-mxfp4-ct-old-bias",
          # nvfp4-modelopt's tensors under nvfp4-ct's config: [format-mismatch]
          "defect-nvfp4-format-mismatch",
          # k_proj's NVFP4 global scale not q/k/v's shared one: [fused-global-scale]
          "defect-nvfp4-fused-global",
          # fbgemm-fp8 with one weight_scale lost: [missing-scale] on its weight
          "defect-fbgemm-no-scale",
          # kimi-k2-thinking with one expert's INT4 weight_scale lost: [missing-scale]
          "defect-kimi-int4-no-scale"}
TWIN = ("nvfp4-modelopt", "nvfp4-ct")
# layouts fp8conv refuses, by design (issue 44): family -> the phrase every command's one message
# holds. Each command is a check: verify exits 1 with that one error, every other command exits 3
# with it (inspect, inspect --json, export, convert, quantize --like it, verify --like it, diff)
REFUSED = {"mistral-native-fp8": "Mistral's native format"}

# The (scheme, format) pairs fp8conv writes (fp8conv-formats(5); `convert` names them when asked
# for another). A family is converted to each other format its scheme pairs with, and back to its
# own when that pair is written too; otherwise the one-way result is compared. Not written, by
# design: block as modelopt, channel as hf-fp8, and channel as modelopt for MoE experts (vLLM's
# ModelOptFp8MoEMethod takes per-tensor expert scales only: llama4-maverick-fp8, in NOT_WRITTEN):
# those checks are "-". Tensor as modelopt (vLLM needs calibrated input scales) is written from
# an input with static activation scales, which every per-tensor release here has (issue 44).
WRITES = {("block", "hf-fp8"), ("block", "compressed-tensors"), ("channel", "compressed-tensors"),
          ("channel", "modelopt"), ("tensor", "hf-fp8"), ("tensor", "compressed-tensors"),
          ("tensor", "modelopt")}
# (family, format) -> why not, for a pair WRITES has that a family cannot take
NOT_WRITTEN = {
    ("llama4-maverick-fp8", "modelopt"): "channel-scaled MoE experts: `convert --format modelopt` "
    "refuses them (exit 3), as vLLM's ModelOptFp8MoEMethod takes per-tensor expert scales only",
}

I7 = "issue 24 item 7: --like does not reproduce the release"
# The checks that fail by design (see the docstring): (outcome, phrase its message must hold, why).
# fp8conv has no calibration data, and a release with static activations is computed with its
# calibrated input scales (vLLM's Fp8Config with activation_scheme static, ModelOpt FP8): quantize
# --like refuses it, exit 3 (fp8conv(1), quantize --like).
STATIC = "its activations are static"
DESIGNED = {
    "mistral-fp8": {
        "like": (3, STATIC, "static activation_scale: --like refuses (issue 24 item 7)"),
    },
    "modelopt-fp8": {
        "like": (3, STATIC, "ModelOpt FP8 static input_scale: --like refuses (issue 24 item 7)"),
    },
    "fbgemm-fp8": {
        "like": (3, "is not written", "fbgemm_fp8 is read, not written: --like refuses and "
                 "names compressed-tensors channel (issue 44)"),
    },
    "modelopt-fp8-old": {
        "like": (3, STATIC, "ModelOpt FP8 (hf_quant_config.json only), static input_scale: "
                 "--like refuses (issue 24 item 7)"),
    },
}
# The expected outcome of every check as of today (see the docstring): a check not listed here
# is expected to pass (0). (outcome, note): outcome is the exit status of the first failing step,
# or "values" for a wrong name or value with every step exiting 0.
EXPECTED = {
    # qwen3-fp8, qwen3-4b-instruct-2507-fp8, qwen3-moe-fp8: item 1 (BF16/F16 block scales
    # load) made verify, verify-strict, verify-tp and like pass
    # glm-4.5-fp8+air tp-real: GLM-4.5-Air's dense layer 0 has intermediate_size 10944 = 85.5
    # blocks. vLLM 0.32 skips validate_fp8_block_shape for that merged gate_up (PR #30836) and then
    # fails to load it at TP 1 (the up part's scales overrun the merged scale: vllm_loads() above,
    # tests/loaders/matrix.py OFF_BLOCK_CASES); TP 2 and up fail on down_proj's input and the
    # experts' 1408/TP. verify's "no TP size loads" is right: both checks pass.
    # issue 25 ("part N" is its "What to build" item), every entry passing now:
    # nvfp4-ct twin: issue 25 part 4 (diff --dequant reads the FP4 layouts) made it pass
    # mxfp4-ct: verify, verify-strict and export pass (fp4.c's compressed-tensors mxfp4 row)
}

checks = {}   # (family, check) -> (outcome, detail); outcome 0 = passed


def run(args):
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "timeout", "", "no answer in %d s" % TIMEOUT
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


class Failed(Exception):
    def __init__(self, outcome, detail):
        super().__init__(detail)
        self.outcome, self.detail = outcome, detail


def step(fp8conv, what, *args):
    """Run fp8conv; a non-zero exit fails the check with that status."""
    rc, out, err = run([fp8conv] + list(args))
    if rc != 0:
        raise Failed(rc, "%s exit %s: %s" % (what, rc, last_line(err) or last_line(out)))
    return out


def expect_refusal(fp8conv, args, out, want_rc, names):
    """fp8conv ARGS exits want_rc, its message naming `names`, and writes nothing at out."""
    rc, _, err = run([fp8conv] + args)
    if rc != want_rc or names not in err or os.path.exists(out):
        raise Failed(rc if rc else "values", "%s exit %s (%d wanted, naming %s, writing "
                     "nothing): %s" % (args[0], rc, want_rc, names, last_line(err)))


def record(family, todo):
    """Runs each (name, check) of todo, its outcome recorded in checks[(family, name)]."""
    for name, fn in todo:
        try:
            fn()
            checks[(family, name)] = (0, "")
        except Failed as e:
            checks[(family, name)] = (e.outcome, e.detail)


def st_tensors(directory):
    """name -> (dtype, shape, bytes) of every tensor in a checkpoint directory."""
    out = {}
    for fn in sorted(os.listdir(directory)):
        if not fn.endswith(".safetensors"):
            continue
        with open(os.path.join(directory, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            base = 8 + n
            for name, e in header.items():
                if name == "__metadata__":
                    continue
                f.seek(base + e["data_offsets"][0])
                out[name] = (e["dtype"], e["shape"], f.read(e["data_offsets"][1] - e["data_offsets"][0]))
    return out


def check_export(fp8conv, rel, expect, out):
    step(fp8conv, "dequantize-for-export", "dequantize-for-export", "-q", rel, out)
    got = st_tensors(out)
    want = set(expect["export_tensors"])
    extra, missing = sorted(set(got) - want), sorted(want - set(got))
    if extra or missing:
        raise Failed("values", "export holds %s%s" % (
            ("extra " + ", ".join(extra[:3]) + ("..." if len(extra) > 3 else "") + " ") if extra else "",
            ("lacks " + ", ".join(missing[:3])) if missing else ""))
    rule = ("the exact value rounded once" if "export_shapes" in expect
            else "round_bf16(fp32(q) * fp32(scale))")
    for name, shape in sorted(expect.get("export_shapes", {}).items()):
        if got[name][1] != shape:
            raise Failed("values", "export: %s is %s, not %s" % (name, got[name][1], shape))
    for name, sha in sorted(expect["export_bf16_sha256"].items()):
        dtype, _, data = got[name]
        if dtype != "BF16" or hashlib.sha256(data).hexdigest() != sha:
            raise Failed("values", "export: %s (%s) is not %s" % (name, dtype, rule))
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if "quantization_config" in cfg or "quantization_config" in cfg.get("text_config", {}):
        raise Failed("values", "export: config.json still holds a quantization_config")
    if "expert_dtype" in cfg:
        raise Failed("values", "export: config.json still holds expert_dtype")
    if os.path.exists(os.path.join(out, "hf_quant_config.json")):
        raise Failed("values", "export: hf_quant_config.json is still there")


def scale_mismatch(directory, scheme):
    """The first FP8 weight whose scale shape does not fit `scheme` (tensor: [] or [1]; channel:
    [out, 1], or [out] as ModelOpt writes it; block: [ceil(out/128), ceil(in/128)]), or None."""
    tensors = st_tensors(directory)
    for name, (dtype, shape, _) in sorted(tensors.items()):
        if dtype != "F8_E4M3" or not name.endswith(".weight"):
            continue
        scale = tensors.get(name + "_scale") or tensors.get(name + "_scale_inv")
        if scale is None:
            return "%s has no weight_scale or weight_scale_inv" % name
        out, inp = shape[-2], shape[-1]
        fits = {"tensor": scale[1] in ([], [1]), "channel": scale[1] in ([out, 1], [out]),
                "block": scale[1] == [-(-out // 128), -(-inp // 128)]}
        if not fits[scheme]:
            return "%s: scale shape %s is not %s scaling" % (name, scale[1], scheme)
    return None


def check_convert(fp8conv, rel, own, scheme, fmt, tmp):
    a, b = os.path.join(tmp, "to-" + fmt), os.path.join(tmp, "back-" + fmt)
    step(fp8conv, "convert --format " + fmt, "convert", "-q", "--format", fmt, rel, a)
    if (scheme, own) in WRITES:
        step(fp8conv, "convert back --format " + own, "convert", "-q", "--format", own, a, b)
    else:
        b = a
    # the layout keeps the release's granularity: no re-quantization into another scheme
    wrong = scale_mismatch(b, scheme)
    if wrong:
        raise Failed("values", "convert: the release's scheme is not kept: " + wrong)
    # KV-cache scales (ModelOpt k_proj.k_scale / v_proj.v_scale, llm-compressor self_attn.k_scale /
    # v_scale) are read by the loaders of every format: a conversion must carry them, renamed
    kv = lambda d: sorted(n for n in st_tensors(d) if n.endswith((".k_scale", ".v_scale")))
    if len(kv(b)) != len(kv(rel)):
        raise Failed("values", "convert: %d KV-cache scales in the release, %d in the result"
                     % (len(kv(rel)), len(kv(b))))
    # static activation scales (input_scale, Mistral's activation_scale): a per-tensor target
    # declares them static and carries their bytes (by layer: a plain convert names them
    # input_scale, --like the release's own names, like-trip)
    act = lambda d: {n.rsplit(".", 1)[0]: t[2] for n, t in st_tensors(d).items()
                     if n.endswith((".input_scale", ".activation_scale"))}
    if scheme == "tensor" and (len(act(a)) != len(act(rel)) or
                               (b != a and act(b) != act(rel))):
        raise Failed("values", "convert: %d activation scales in the release, %d converted, "
                     "%s back" % (len(act(rel)), len(act(a)),
                                  "the same" if act(b) == act(rel) else "others"))
    # back in the release's own format, its block scale format is declared as it was
    if b != a:
        qc = lambda d: json.load(open(os.path.join(d, "config.json"), encoding="utf-8")).get(
            "quantization_config") or {}
        for key in ("scale_fmt", "weight_block_size"):
            if qc(rel).get(key) != qc(b).get(key):
                raise Failed("values", "convert: quantization_config.%s is %s after the round trip, "
                             "%s in the release" % (key, json.dumps(qc(b).get(key)),
                                                    json.dumps(qc(rel).get(key))))
    step(fp8conv, "diff --dequant", "diff", "-q", "--dequant", rel, b)


# like-trip: the families whose release `convert --like` refuses as a reference (exit 3), and why;
# their BASE is the release as `convert` writes it (format given where its own is not written)
# STATIC_TRIP: the release's static activation scales come back: `convert --like REL` of the
# other format writes REL's own tensors (convert carries the input's calibrated scales; quantize
# --like the base still refuses, having none)
STATIC_TRIP = {"mistral-fp8", "modelopt-fp8", "modelopt-fp8-old"}
LIKE_BASE = {
    "mistral-fp8": ("hf-fp8", "its config.json has keys fp8conv does not write (dequantize): "
                    "the base is convert's, static activation_scale and weight_scale_inv kept"),
    "modelopt-fp8": ("hf-fp8", "its config.json is ModelOpt's converted form (config_groups, "
                     "producer), which fp8conv does not write: its KV-cache scales keep "
                     "ModelOpt's k_proj.k_scale names"),
    "modelopt-fp8-old": ("hf-fp8", "as modelopt-fp8"),
    "fbgemm-fp8": ("compressed-tensors", "fbgemm_fp8 is read, not written"),
}


def check_like_trip(fp8conv, family, rel, own, scheme, tmp):
    base = rel
    if family in LIKE_BASE:
        base = os.path.join(tmp, "trip-base")
        step(fp8conv, "convert", "convert", "-q", "--format", LIKE_BASE[family][0], rel, base)
        own = LIKE_BASE[family][0]
    other = [f for f in FORMATS if f != own and (scheme, f) in WRITES and
             (family, f) not in NOT_WRITTEN][0]
    mid, back = os.path.join(tmp, "trip-" + other), os.path.join(tmp, "trip-back")
    step(fp8conv, "convert --format " + other, "convert", "-q", "--format", other, base, mid)
    if family in STATIC_TRIP:  # the release's own tensors, its static activation scales too
        own_back = os.path.join(tmp, "trip-release")
        step(fp8conv, "convert --like the release", "convert", "-q", "--like", rel, mid, own_back)
        tr, tb = st_tensors(rel), st_tensors(own_back)
        if tr != tb:
            raise Failed("values", "convert --like the release: %s differ" % ", ".join(
                sorted(n for n in set(tr) | set(tb) if tr.get(n) != tb.get(n))[:3]))
    step(fp8conv, "convert --like", "convert", "-q", "--like", base, mid, back)
    for fn in sorted(f for f in os.listdir(base) if f.endswith(".safetensors")):
        with open(os.path.join(base, fn), "rb") as a:
            want = a.read()
        path = os.path.join(back, fn)
        got = open(path, "rb").read() if os.path.exists(path) else None
        if got != want:
            tb, tg = st_tensors(base), st_tensors(back) if got is not None else {}
            names = sorted(n for n in set(tb) | set(tg) if tb.get(n) != tg.get(n))
            raise Failed("values", "convert --like: %s differs from the base's (%s)"
                         % (fn, ", ".join(names[:3]) or "same tensors, other bytes"))
    step(fp8conv, "verify --like", "verify", "--like", base, back)
    if base != rel and family in STATIC_TRIP:  # a static base: quantize (no calibration) refuses
        out = os.path.join(tmp, "trip-quantized")
        rc, _, err = run([fp8conv, "quantize", "-q", "--like", base, os.path.join(tmp, "export"),
                          out])
        if rc != 3 or STATIC not in err or os.path.exists(out):
            raise Failed(rc if rc else "values", "quantize --like the static base: exit %s (3 "
                         "wanted, %r): %s" % (rc, STATIC, last_line(err)))
    elif base != rel:  # and quantize --like BASE of the release's export (the like check's) names so
        out = os.path.join(tmp, "trip-quantized")
        step(fp8conv, "quantize --like", "quantize", "-q", "--like", base,
             os.path.join(tmp, "export"), out)
        step(fp8conv, "verify --like", "verify", "--like", base, out)


def check_like(fp8conv, rel, export, tmp):
    if not os.path.isdir(export):
        raise Failed("export", "no bf16 export to quantize (the export check failed)")
    out = os.path.join(tmp, "like")
    step(fp8conv, "quantize --like", "quantize", "-q", "--like", rel, export, out)
    step(fp8conv, "verify --like", "verify", "-q", "--like", rel, out)


def check_defect(fp8conv, rel, want):
    """verify finds exactly the planted defect: exit 1, one error, of want["rule"], naming
    want["tensor"]."""
    rc, out, err = run([fp8conv, "verify", rel])
    errors = [ln for ln in (out + err).splitlines() if ln.startswith("error [")]
    hit = [ln for ln in errors if ln.startswith("error [%s]" % want["rule"]) and
           (want["tensor"] + ":") in ln]
    if rc != 1 or not hit or len(errors) != 1:
        raise Failed(rc if rc not in (0, 1) else "values",
                     "verify exit %s, %d errors, %s [%s] on %s: first error: %s" % (
                         rc, len(errors), "with" if hit else "none", want["rule"], want["tensor"],
                         (errors[0] if errors else "none")[:160]))


# convert's exact casts of issue 25 item 3 (fp8conv(1) convert, fp8conv-formats(5) Casts), per FP4
# family: the options; the cast's output must verify clean, export the input's export's bytes and
# be identical to the input under `diff --dequant`. The NVFP4 twins' global scales are powers of
# two, so the reciprocal is exact; the -amax copies' are not (convert --exact refuses them).
# mxfp4-ct to ModelOpt NVFP4 (the compressed-tensors target is check_casts.c's too): every group of
# a fused layer within 17 exponents of its largest, so each E4M3 scale 2^(k - m) is exact.
CASTS = {"deepseek-v4": [], "nvfp4-modelopt": ["--format", "compressed-tensors"],
         "nvfp4-ct": ["--format", "modelopt"], "mxfp4-ct": ["--format", "modelopt"]}


def check_cast(fp8conv, rel, opts, tmp):
    out, a, b = (os.path.join(tmp, n) for n in ("cast", "cast-export-in", "cast-export-out"))
    step(fp8conv, "convert --exact " + " ".join(opts), "convert", "-q", "--exact", *opts, rel, out)
    step(fp8conv, "verify (of the cast)", "verify", out)
    step(fp8conv, "diff --dequant (input, cast)", "diff", "-q", "--dequant", rel, out)
    step(fp8conv, "dequantize-for-export", "dequantize-for-export", "-q", rel, a)
    step(fp8conv, "dequantize-for-export (of the cast)", "dequantize-for-export", "-q", out, b)
    x, y = st_tensors(a), st_tensors(b)
    if x != y:
        diff = sorted(n for n in set(x) | set(y) if x.get(n) != y.get(n))
        raise Failed("values", "the cast's export differs from the input's: " + ", ".join(diff[:3]))


def fp4_checks(fp8conv, family, rel, tmp):
    """The checks of an FP4 family or a planted-defect copy (see the docstring)."""
    with open(os.path.join(rel, "EXPECT.json"), encoding="utf-8") as f:
        expect = json.load(f)
    def inspect_json():
        json.loads(step(fp8conv, "inspect --json", "inspect", "--json", rel))
    todo = [
        ("inspect", lambda: step(fp8conv, "inspect", "inspect", rel)),
        ("inspect-json", inspect_json),
    ]
    if family in DEFECT:
        todo.append(("defect", lambda: check_defect(fp8conv, rel, expect["defect"])))
    else:
        todo += [
            ("verify", lambda: step(fp8conv, "verify", "verify", rel)),
            ("verify-strict", lambda: step(fp8conv, "verify --strict", "verify", "--strict", rel)),
            ("export", lambda: check_export(fp8conv, rel, expect, os.path.join(tmp, "export"))),
        ]
    if family in CASTS:
        todo.append(("cast", lambda: check_cast(fp8conv, rel, CASTS[family], tmp)))
    for name, edit, rule, tensor in CONFIG_DEFECTS.get(family, []):
        todo.append((name, lambda a=(name, edit, rule, tensor): config_defect(fp8conv, rel, tmp, *a)))
    for name, drop, rule, tensor in TENSOR_DEFECTS.get(family, []):
        todo.append((name, lambda a=(name, drop, rule, tensor): tensor_defect(fp8conv, rel, tmp, *a)))
    if family in LIKE_4BIT:
        todo.append(("like", lambda: check_like(fp8conv, rel, os.path.join(tmp, "export"), tmp)))
    if family == TWIN[1]:
        twin = os.path.join(os.path.dirname(rel), TWIN[0])
        todo.append(("twin", lambda: step(fp8conv, "diff --dequant " + TWIN[0], "diff", "-q",
                                          "--dequant", twin, rel)))
    record(family, todo)


def refused_checks(fp8conv, family, rel, tmp):
    """Every command refuses the layout with one message holding REFUSED[family]."""
    phrase, sample = REFUSED[family], "testdata/llama-tiny"
    def refused(want_rc, *args):
        rc, out, err = run([fp8conv] + list(args))
        if "--json" in args: # the report, or the failure object, on stdout; text on stderr
            failure = json.loads(out) if rc > 1 else {}
            if rc > 1 and (failure.get("exit_code") != rc or phrase not in failure["message"]):
                raise Failed("values", "%s --json: %s" % (args[0], out[-300:]))
            out = ""
        lines = [ln for ln in (out + err).splitlines() if phrase in ln]
        errors = [ln for ln in (out + err).splitlines() if ln.startswith("error [")]
        if rc != want_rc or len(lines) != 1 or (want_rc == 1 and len(errors) != 1):
            raise Failed(rc if rc != want_rc else "values", "%s: exit %s, %d lines with '%s': %s"
                         % (args[0], rc, len(lines), phrase, last_line(err or out)))
    todo = [
        ("inspect", lambda: refused(3, "inspect", rel)),
        ("inspect-json", lambda: refused(3, "inspect", "--json", rel)),
        ("verify", lambda: refused(1, "verify", rel)),
        ("export", lambda: refused(3, "dequantize-for-export", rel, os.path.join(tmp, "e"))),
        ("convert-compressed-tensors", lambda: refused(3, "convert", "--format",
                                                       "compressed-tensors", rel,
                                                       os.path.join(tmp, "c"))),
        ("like", lambda: refused(3, "quantize", "--like", rel, sample, os.path.join(tmp, "l"))),
        ("twin", lambda: refused(3, "diff", "--dequant", rel, rel)),
    ]
    record(family, todo)


def family_checks(fp8conv, family, rel, tmp):
    with open(os.path.join(rel, "EXPECT.json"), encoding="utf-8") as f:
        expect = json.load(f)
    export = os.path.join(tmp, "export")
    own, scheme = OWN[family]
    def inspect_json():
        json.loads(step(fp8conv, "inspect --json", "inspect", "--json", rel))
    todo = [
        ("inspect", lambda: step(fp8conv, "inspect", "inspect", rel)),
        ("inspect-json", inspect_json),
        ("verify", lambda: step(fp8conv, "verify", "verify", rel)),
        ("verify-strict", lambda: step(fp8conv, "verify --strict", "verify", "--strict", rel)),
        ("verify-tp", lambda: step(fp8conv, "verify " + " ".join(expect["serve"]), "verify",
                                   *expect["serve"], rel)),
        ("export", lambda: check_export(fp8conv, rel, expect, export)),
    ]
    for fmt in FORMATS:
        if fmt != own and (scheme, fmt) in WRITES and (family, fmt) not in NOT_WRITTEN:
            todo.append(("convert-" + fmt,
                         lambda fmt=fmt: check_convert(fp8conv, rel, own, scheme, fmt, tmp)))
    todo.append(("like", lambda: check_like(fp8conv, rel, export, tmp)))
    if [f for f in FORMATS if f != LIKE_BASE.get(family, (own,))[0] and (scheme, f) in WRITES
            and (family, f) not in NOT_WRITTEN]:
        todo.append(("like-trip",
                     lambda: check_like_trip(fp8conv, family, rel, own, scheme, tmp)))
    record(family, todo)

# ---------------------------------------------------------------- conditions
# A loader that loads a family only under a condition no tensor shows (issue 44): verify's
# loaders line and --json name it (loaders[].condition), and give a note [loader-condition] with
# the source (fp8conv-formats(5), LOADER CONDITIONS). family -> {loader: the condition}; every
# other family and loader: none. Sources, each read for this table: vLLM 0.32.0
# model_executor/layers/quantization/__init__.py DEPRECATED_QUANTIZATION_METHODS and
# config/model.py (fbgemm_fp8 refused without allow_deprecated_quantization); transformers 5.19
# quantizers/quantizer_fbgemm_fp8.py validate_environment ("requires a GPU or XPU") and
# models/auto/configuration_auto.py (no kimi_k2); Moonshot's repositories ship
# configuration_deepseek.py (huggingface.co moonshotai/Kimi-K2-Thinking, its first commit's files).
# tests/loaders/matrix.py LOADER_CONDITIONS holds the loaders themselves to these.
FBGEMM_CONDITIONS = {"vllm": "with --allow-deprecated-quantization",
                     "transformers": "on a CUDA GPU with fbgemm-gpu, or an XPU"}
KIMI_CONDITIONS = {"transformers": "with trust_remote_code=True"}
CONDITIONS = {"fbgemm-fp8": FBGEMM_CONDITIONS, "defect-fbgemm-no-scale": FBGEMM_CONDITIONS,
              "kimi-k2": KIMI_CONDITIONS, "kimi-k2-thinking": KIMI_CONDITIONS,
              "defect-kimi-int4-no-scale": KIMI_CONDITIONS}


def conditions_check(fp8conv, family, rel):
    rc, out, err = run([fp8conv, "verify", "--json", "--no-values", rel])
    if rc not in (0, 1):
        raise Failed(rc, "verify --json exit %s: %s" % (rc, last_line(err)))
    doc = json.loads(out)
    got = {l["name"]: l["condition"] for l in doc["loaders"] if "condition" in l}
    want = CONDITIONS.get(family, {})
    notes = sum(1 for f in doc["findings"] if f["rule"] == "loader-condition")
    if got != want or notes != len(want):
        raise Failed(1, "verify names the conditions %s (%d notes), the table %s" % (got, notes, want))


# ---------------------------------------------------------------- tp-real
# The copies' dimensions are tiny (the README), so `verify-tp` above runs the block-scaled families
# at TP 1. `tp-real` puts each release's real partition-relevant config numbers into a scratch copy
# of its config.json (under text_config for Mistral, where the release has them) and asks
# `verify --json --no-values --tp N [--ep E]` which TP sizes load, for each layout the release is
# served at; the answer is compared with vllm_loads() below, a model of vLLM's partition rules
# written here from vLLM's source, independent of fp8conv's lib/layout/parallel.c. Only the TP
# answer is judged ("tp_sizes_that_load" and the [tp]/[ep] findings), not verify's exit status:
# the copies' other errors (BF16/F16 block scales, Mistral's scale names) are other checks' matter.
#
# REAL_DIMS: family -> (model, dims, layouts, source). dims are config.json keys and values (None:
# the key is removed, so that loader and verify both take their default); layouts are (tp, ep)
# pairs, ep 1 meaning no expert parallelism. Every number is quoted from the source named
# (V3.1's MoE numbers are V3's, as its row says); none is recalled. Families without a row:
# testdata/releases/README.md ("tp-real").
NODE = ((1, 1), (2, 1), (4, 1), (8, 1))  # one 8-GPU node's TP sizes (no serving layout read)
LLAMA_8B = {  # testdata/tp-configs/llama-3-8b.json (commit 6053c35: "real configs"); no
    # head_dim key: loaders take hidden_size / num_attention_heads = 128 (`getattr(config,
    # "head_dim", None) or hidden_size // num_attention_heads`, as ports quote it), as verify does
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": None}
DEEPSEEK_V3 = {  # testdata/tp-configs/deepseek-v3.json (commit 6053c35: "real configs"); its
    # hidden, moe_intermediate, heads and experts also in a kernel benchmark's
    # MoEModelConfigs["DeepSeek-V3"], which cites the release's config.json on modelscope
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "n_routed_experts": 256, "n_shared_experts": 1, "first_k_dense_replace": 3}
REAL_DIMS = {
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3", DEEPSEEK_V3, NODE + ((16, 1),),
                    "dims: testdata/tp-configs/deepseek-v3.json; layouts: one node, and TP 16 "
                    "(two nodes), not read from a recipe"),
    "deepseek-v3.1": ("deepseek-ai/DeepSeek-V3.1", DEEPSEEK_V3, NODE + ((16, 1),),
                      "MLA dims: a public notes table quoting DeepSeek-V3.1's config.json (hidden "
                      "7168, 128 heads and KV heads, q_lora 1536, kv_lora 512, qk_nope 128, "
                      "qk_rope 64, v_head 128: the same as V3); MoE dims: V3's, as a public "
                      "write-up says V3.1 keeps V3's architecture (expert width 2.57x hidden "
                      "= 9 x 2048 / 7168), not read from V3.1's config itself"),
    "kimi-k2": ("moonshotai/Kimi-K2-Instruct", {
        # a Swift port's Kimi-K2.5 text_config (model_type kimi_k2), the K2 backbone; another
        # project's model table quotes Kimi-K2 itself with the same hidden 7168, 64 heads,
        # kv_lora 512, qk_rope 64 (find_string queries: testdata/releases/README.md)
        "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "n_routed_experts": 384, "n_shared_experts": 1, "first_k_dense_replace": 1},
        NODE + ((16, 1),), "dims: Kimi-K2.5 text_config as a port quotes it, cross-checked with "
        "Kimi-K2's heads/hidden/MLA ranks in another port's table; layouts: one node and TP 16"),
    "qwen3-fp8": ("Qwen/Qwen3-32B-FP8", {
        # Qwen3-32B's config.json, quoted whole in a public write-up (head_dim 128, not
        # hidden/heads = 80) and in a tensor-parallel tutorial that checks it at TP 2
        "hidden_size": 5120, "intermediate_size": 25600, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 128},
        NODE + ((16, 1),), "dims: Qwen3-32B config.json as quoted (two sources); layouts: one "
        "node (the tutorial serves it at TP 2), and TP 16 past it"),
    "qwen3-4b-instruct-2507-fp8": ("Qwen/Qwen3-4B-Instruct-2507-FP8", {
        # Qwen3-4B: a pinned-snapshot check of "the exact Qwen3-4B architecture" and an
        # adapter-size test's QWEN3_4B_SHAPE (both head_dim 128); one other test expects
        # head_dim 80 (hidden/heads) for the 2507 release: not taken, two pins say 128
        "hidden_size": 2560, "intermediate_size": 9728, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128},
        NODE, "dims: Qwen3-4B config as two ports pin it; layouts: one node"),
    "qwen3-moe-fp8": ("Qwen/Qwen3-30B-A3B-FP8", {
        # testdata/tp-configs/qwen3-30b-a3b.json (commit 6053c35)
        "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
        "mlp_only_layers": []},
        NODE, "dims: testdata/tp-configs/qwen3-30b-a3b.json; layouts: one node"),
    "redhat-fp8-dynamic": ("RedHatAI/*-FP8-dynamic of Llama-3.1-8B", LLAMA_8B, NODE,
                           "dims: testdata/tp-configs/llama-3-8b.json (Llama-3 and 3.1 8B share "
                           "them); layouts: one node (the copy's own serve is TP 8)"),
    "redhat-fp8-block": ("RedHatAI/*-FP8-BLOCK of Llama-3.1-8B", LLAMA_8B, NODE,
                         "dims: testdata/tp-configs/llama-3-8b.json; layouts: one node"),
    "modelopt-fp8": ("nvidia/*-FP8 of Llama-3.1-8B", LLAMA_8B, NODE,
                     "dims: testdata/tp-configs/llama-3-8b.json; layouts: one node"),
    "modelopt-fp8-old": ("nvidia/*-FP8 of Llama-3.1-8B (ModelOpt <= 0.29)", LLAMA_8B, NODE,
                         "dims: testdata/tp-configs/llama-3-8b.json; layouts: one node"),
    "glm-4.5-fp8": ("zai-org/GLM-4.5-FP8", {
        # GLM-4.5 (355B): a model-bridge test's glm45_355b_config (the same numbers as another
        # project's GLM_47_CONFIG, and a third's table for hidden, heads, KV heads, head_dim)
        "hidden_size": 5120, "intermediate_size": 12288, "moe_intermediate_size": 1536,
        "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
        "n_routed_experts": 160, "n_shared_experts": 1, "first_k_dense_replace": 3},
        NODE, "dims: GLM-4.5 355B config as a model-bridge test mocks it; layouts: one node"),
    # the Air release, on the same copy (family+variant: the folder is the part before '+')
    "glm-4.5-fp8+air": ("zai-org/GLM-4.5-Air-FP8", {
        # GLM-4.5-Air's config: the same bridge test's glm45_air_106b_config, and two
        # Glm4MoeForCausalLM converters' CONFIG ("original 100B configuration")
        "hidden_size": 4096, "intermediate_size": 10944, "moe_intermediate_size": 1408,
        "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
        "n_routed_experts": 128, "n_shared_experts": 1, "first_k_dense_replace": 1},
        NODE, "dims: GLM-4.5-Air config (bridge test and two converters); layouts: one node"),
    "minimax-m2": ("MiniMaxAI/MiniMax-M2", {
        # a Go port's MiniMax-M2 fixture config.json; another port's table has the same heads
        # for M2.1. No moe_intermediate_size: the experts are intermediate_size wide
        "hidden_size": 3072, "intermediate_size": 1536, "num_attention_heads": 48,
        "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 256},
        ((4, 1), (8, 8), (8, 1)), "dims: MiniMax-M2 fixture config; layouts: MiniMaxAI/MiniMax-M2 "
        "docs/vllm_deploy_guide_cn.md: --tensor-parallel-size 4, and 8 only with "
        "--enable_expert_parallel (EP 8); TP 8 without EP is checked as a layout that must not "
        "load"),
    "fbgemm-fp8": ("meta-llama/Llama-3.1-405B-Instruct-FP8", {
        # Llama-3.1-405B: four independent model tables quote the same numbers (hidden 16384,
        # intermediate 53248, 128 heads, 8 KV heads, head_dim 128; find_string query
        # "intermediate_size": 53248); per-row scales: no block constraint
        "hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128,
        "num_key_value_heads": 8, "head_dim": 128},
        NODE + ((16, 1),), "dims: Llama-3.1-405B as four model tables quote it; layouts: one node "
        "and two"),
    "mistral-fp8": ("mistralai/Ministral-3-3B-Instruct-2512", {
        # Ministral-3-3B text_config as a benchmark's MODEL_CONFIG_SIGNATURES pins it; head_dim
        # not quoted there (removed: per-tensor scales make it irrelevant to loading)
        "hidden_size": 3072, "intermediate_size": 9216, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": None},
        NODE, "dims: Ministral-3-3B text_config as pinned by a benchmark; layouts: one node"),
}
BLOCK = (128, 128)  # weight_block_size of every block-scaled release here (config.json), and
                    # compressed-tensors FP8_BLOCK's 128x128 (quantization/quant_scheme.py)


def vllm_loads(d, scheme, tp, ep):
    """None when vLLM loads a checkpoint with config numbers d and this scheme at TP tp (EP ep),
    else why not. Written from vLLM's source, not from fp8conv's:
      linear.py QKVParallelLinear: num_heads = divide(total_num_heads, tp); KV heads:
        tp >= total_num_kv_heads: one per rank, divide(tp, total) replicas; else divide(total, tp)
      linear.py ColumnParallelLinear / RowParallelLinear: divide(output_size or input_size, tp)
      quantization/utils/fp8_utils.py validate_fp8_block_shape (block scheme only): a row-parallel
        layer's input_size_per_partition % block_k when TP-split; a column-parallel layer's output
        partitions % block_n when TP-split (output_size // sum(partitions) == tp) or merged, a
        merged one that is not TP-split exempting its last partition. Since PR #30836 vLLM skips
        this for a merged layer (qkv, gate_up) with any partition off the block (linear.py
        LinearBase._maybe_allow_fp8_block_shape_mismatch), but it then does not compute right:
        the merged scale has ceil(sum(parts)/block_n) rows (fp8_utils.py
        create_fp8_scale_parameter) and MergedColumnParallelLinear.weight_loader_v2 puts part j's
        scales at ceil(offset_j/block_n) (linear.py adjust_block_scale_shard), so a part after one
        that ends mid-block either overruns the parameter (parameter.py load_merged_column_weight:
        "start (86) + length (86) exceeds dimension size (171)" for GLM-4.5-Air's 10944) or is
        scaled on the wrong rows; seen in vLLM 0.32 by tests/loaders/matrix.py OFF_BLOCK_CASES
        (I = 192: that load error; I = 200: it loads, and up rows 0-55 and 128-183 have another
        block's scale). The check is modelled without the skip: where it would fail, vLLM does not
        compute right, with or without it (SGLang's copy of the function has no skip)
      quantization/fp8.py Fp8MoEMethod.create_weights: intermediate_size_per_partition % block_n,
        and % block_k when tp > 1; fused_moe/layer.py FusedMoE: intermediate split by TP, or by 1
        with expert parallelism, the experts then divided over EP ranks
      models/deepseek_v2.py (MLA): q_b_proj and kv_b_proj column-parallel, o_proj row-parallel,
        fused_qkv_a_proj merged [q_lora_rank, kv_lora_rank + qk_rope_head_dim] and replicated;
      models/llama.py, qwen3.py, qwen3_moe.py, glm4_moe.py, minimax_m2.py: qkv, gate_up merged
        column-parallel, o_proj and down_proj row-parallel"""
    g = lambda k, dflt=0: d.get(k) if d.get(k) is not None else dflt
    heads, hidden = g("num_attention_heads"), g("hidden_size")
    kv = g("num_key_value_heads", heads)
    hd = g("head_dim", hidden // heads)
    bn, bk = BLOCK
    block = scheme == "block"

    def check(name, out_size, parts, in_size, in_part, layer_tp):
        # the validation as written, with no PR #30836 skip: where it fails and vLLM skips it,
        # vLLM fails to load or mis-scales the later parts (see above)
        if not block:
            return None
        if layer_tp > 1 and in_size // in_part == layer_tp and in_part % bk:
            return "%s: input_size_per_partition %d %% block_k %d" % (name, in_part, bk)
        split = layer_tp > 1 and out_size // sum(parts) == layer_tp
        if split or len(parts) > 1:
            for p in (parts if split else parts[:-1]):
                if p % bn:
                    return "%s: output_partition_size %d %% block_n %d" % (name, p, bn)
        return None

    if heads % tp:
        return "num_attention_heads %d %% TP %d" % (heads, tp)
    why = []
    if g("kv_lora_rank"):
        nope, rope, v = g("qk_nope_head_dim"), g("qk_rope_head_dim"), g("v_head_dim")
        q_lora, kv_lora = g("q_lora_rank"), g("kv_lora_rank")
        if q_lora:
            why.append(check("fused_qkv_a_proj", q_lora + kv_lora + rope,
                             [q_lora, kv_lora + rope], hidden, hidden, 1))
        why.append(check("q_b_proj", heads * (nope + rope), [heads * (nope + rope) // tp],
                         q_lora or hidden, q_lora or hidden, tp))
        why.append(check("kv_b_proj", heads * (nope + v), [heads * (nope + v) // tp], kv_lora,
                         kv_lora, tp))
        why.append(check("o_proj", hidden, [hidden], heads * v, heads * v // tp, tp))
    else:
        if (tp >= kv and tp % kv) or (tp < kv and kv % tp):
            return "num_key_value_heads %d and TP %d" % (kv, tp)
        kv_rank = max(kv // tp, 1)
        why.append(check("qkv_proj", (heads + 2 * kv) * hd,
                         [heads // tp * hd, kv_rank * hd, kv_rank * hd], hidden, hidden, tp))
        why.append(check("o_proj", hidden, [hidden], heads * hd, heads * hd // tp, tp))
    experts = g("n_routed_experts") or g("num_experts") or g("num_local_experts")
    inter = g("intermediate_size")
    dense = not experts or g("first_k_dense_replace") > 0 or len(g("mlp_only_layers", [])) > 0
    mlps = []
    if dense:
        mlps.append(("mlp", inter))
    if experts and g("n_shared_experts"):
        mlps.append(("shared_experts", g("n_shared_experts") * g("moe_intermediate_size", inter)))
    for name, width in mlps:
        if width % tp:
            return "%s intermediate %d %% TP %d" % (name, width, tp)
        why.append(check(name + ".gate_up_proj", 2 * width, [width // tp] * 2, hidden, hidden, tp))
        why.append(check(name + ".down_proj", hidden, [hidden], width, width // tp, tp))
    if experts:
        moe = g("moe_intermediate_size", inter)
        moe_tp = 1 if ep > 1 else tp
        if ep > 1 and experts % ep:
            return "%d experts over EP %d" % (experts, ep)
        if moe % moe_tp:
            return "moe_intermediate_size %d %% TP %d" % (moe, moe_tp)
        per = moe // moe_tp
        if block and (per % bn or (tp > 1 and per % bk)):
            why.append("experts: intermediate_size_per_partition %d %% block %d" % (per, bn))
    why = [w for w in why if w]
    return why[0] if why else None


def real_config(rel, out, dims):
    """A copy of the release folder with dims put into config.json (text_config where the
    release keeps its dimensions there)."""
    shutil.copytree(rel, out)
    path = os.path.join(out, "config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    target = cfg["text_config"] if "text_config" in cfg else cfg
    for key, value in dims.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)


def verify_tp(fp8conv, path, tp, ep):
    """(the TP sizes verify says load, or None; its [tp]/[ep] findings at tp) from --json."""
    args = [fp8conv, "verify", "--json", "--no-values", "--tp", str(tp)]
    if ep > 1:
        args += ["--ep", str(ep)]
    rc, out, err = run(args + [path])
    try:
        doc = json.loads(out)
    except ValueError:
        raise Failed(rc, "verify --json printed no JSON (exit %s): %s" % (rc, last_line(err)))
    findings = [r for ld in doc.get("loaders", []) for r in ld.get("reasons", [])
                if r.get("rule") in ("tp", "ep")]
    findings += [t for t in doc.get("findings", []) if t.get("rule") in ("tp", "ep")]
    return doc.get("tp_sizes_that_load"), findings


real_verdict = {}  # (family, tp-real check) -> "load" or "no": what vLLM's rules say


def tp_real_checks(fp8conv, family, rel, tmp):
    """family: a REAL_DIMS key (folder, or folder+variant); rel: the folder."""
    model, dims, layouts, _ = REAL_DIMS[family]
    scheme = OWN[family.split("+")[0]][1]
    real = os.path.join(tmp, "real-" + family)
    real_config(rel, real, dims)
    for tp, ep in layouts:
        name = "tp-real@%d" % tp + ("/ep%d" % ep if ep > 1 else "")
        want = [t for t in range(1, 65) if vllm_loads(dims, scheme, t, ep) is None]
        why = vllm_loads(dims, scheme, tp, ep)
        real_verdict[(family, name)] = "load" if why is None else "no"
        try:
            sizes, findings = verify_tp(fp8conv, real, tp, ep)
        except Failed as e:
            checks[(family, name)] = (e.outcome, e.detail)
            continue
        says = sizes is not None and tp in sizes and not findings
        listed = tp in (sizes or [])
        if says == listed == (why is None):
            checks[(family, name)] = (0, "")
        else:
            checks[(family, name)] = ("values", "%s %s: verify says %s (loads at TP %s%s), "
                                      "vLLM's rules %s (at TP %s)" % (
                model, name, "loads" if says else "does not load",
                " ".join(map(str, sizes)) if sizes else "none",
                ("; " + findings[0]["message"].split(": ", 1)[-1][:120]) if findings else "",
                "load" if why is None else "do not: " + why, " ".join(map(str, want)) or "none"))
        # once per family, without EP: every TP size from 1 to 64 (the list verify prints)
        if ep == 1 and (family, "tp-real@1-64") not in checks:
            real_verdict[(family, "tp-real@1-64")] = "=" if sizes == want else "!="
            checks[(family, "tp-real@1-64")] = (0, "") if sizes == want else (
                "values", "%s: verify says TP %s load, vLLM's rules TP %s" % (
                    model, " ".join(map(str, sizes or [])) or "none",
                    " ".join(map(str, want)) or "none"))

def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    fp8conv = os.path.abspath(os.path.join(sys.argv[1], "fp8conv"))
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    root = "testdata/releases"
    families = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    unknown = sorted(set(families) ^ (set(OWN) | set(FP4) | DEFECT | set(REFUSED)))
    passed = failed = known = designed = 0
    if unknown:
        print("check-releases: FAIL: families not in the driver's table, or missing: " + ", ".join(unknown))
        failed += 1
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    if size >= CORPUS_LIMIT:
        print("check-releases: FAIL: testdata/releases holds %d bytes, over %d" % (size, CORPUS_LIMIT))
        failed += 1
    else:
        passed += 1
    for family in families:
        if family not in OWN and family not in FP4 and family not in DEFECT and \
                family not in REFUSED:
            continue
        tmp = tempfile.mkdtemp(prefix="check_releases.")
        try:
            (family_checks if family in OWN else refused_checks if family in REFUSED
             else fp4_checks)(fp8conv, family, os.path.join(root, family), tmp)
            if family not in REFUSED:
                try:
                    conditions_check(fp8conv, family, os.path.join(root, family))
                    checks[(family, "conditions")] = (0, "")
                except Failed as e:
                    checks[(family, "conditions")] = (e.outcome, e.detail)
            for row in sorted(r for r in REAL_DIMS if r.split("+")[0] == family):
                tp_real_checks(fp8conv, row, os.path.join(root, family), tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix="check_releases.")
    try:
        granite_checks(fp8conv, tmp)
        granite_release_checks(fp8conv, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record = "--record" in os.environ.get("CHECK_RELEASES", "")
    matrix = {}
    for (family, name), (outcome, detail) in sorted(checks.items()):
        want = EXPECTED.get(family, {}).get(name, (0, ""))
        by_design = DESIGNED.get(family, {}).get(name)
        if by_design and (outcome, True) == (by_design[0], by_design[1] in detail):
            designed += 1
            mark = "DESIGN"
        elif by_design:
            failed += 1
            mark = "FAIL"
            print("check-releases: FAIL: %s %s: wanted exit %s saying \"%s\" by design (%s), got: %s"
                  % (family, name, by_design[0], by_design[1], by_design[2], detail))
        elif outcome == 0 and want[0] == 0:
            passed += 1
            mark = "ok"
        elif outcome == 0:
            failed += 1
            mark = "FIXED"
            print("check-releases: FAIL: %s %s passes now; it was KNOWN (%s): flip its EXPECTED entry to 0"
                  % (family, name, want[1]))
        elif want[0] == 0:
            failed += 1
            mark = "FAIL"
            print("check-releases: FAIL: %s %s: %s" % (family, name, detail))
        else:
            known += 1
            mark = "KNOWN"
            if outcome != want[0]:
                print("check-releases: note: %s %s fails otherwise now (%s, was %s): %s"
                      % (family, name, outcome, want[0], detail))
        if record:
            print("RECORD %s %s %s %s" % (family, name, outcome, detail))
        matrix.setdefault(family, {})[name] = mark
    print()
    width = max(len(f) for f in families)
    short = ["insp", "json", "vrfy", "strict", "tp", "export", "->hf", "->ct", "->mo", "like",
             "trip", "twin", "defect"]
    print("%-*s  %s" % (width, "release", " ".join("%-6s" % s for s in short)))
    for family in families:
        row = matrix.get(family, {})
        print("%-*s  %s" % (width, family, " ".join("%-6s" % row.get(c, "-") for c in CHECKS)))
    print()
    real = sorted(n for (_, n) in checks if n.startswith("tp-real@"))
    real = sorted(set(real), key=lambda n: [int(x) for x in
                                            n[8:].replace("/ep", " ").replace("1-64", "99")
                                            .split()])
    print("%-*s  %s" % (width, "tp-real (vLLM)", " ".join("%-9s" % n[8:] for n in real)))
    for family in sorted(REAL_DIMS):
        row = matrix.get(family, {})
        print("%-*s  %s" % (width, family, " ".join(
            "%-9s" % ("%s %s" % (row[n], real_verdict[(family, n)]) if n in row else "-")
            for n in real)))
    print()
    for (family, name), (outcome, detail) in sorted(checks.items()):
        want = EXPECTED.get(family, {}).get(name, (0, ""))
        if name in DESIGNED.get(family, {}):
            print("DESIGNED %s %s: %s" % (family, name, DESIGNED[family][name][2]))
        elif want[0] != 0 and outcome != 0:
            print("KNOWN %s %s: %s" % (family, name, want[1]))
    print("check-releases end to end: %d passed, %d failed, %d known (issues 24, 25), %d by design"
          % (passed, failed, known, designed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
