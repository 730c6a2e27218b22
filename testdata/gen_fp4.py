"""The 2026 layouts (issue 25): tiny copies of DeepSeek-V4 (FP8 trunk + MXFP4 experts), gpt-oss
(MXFP4), NVFP4 as ModelOpt and compressed-tensors write it, and compressed-tensors MXFP4; plus three
copies with one planted defect each. Imported by gen_releases.py, which writes them beside the FP8
families (FAMILIES_FP4, DEFECTS); the facts below are cited where they are used, and listed again in
testdata/releases/README.md.

The expected export (EXPECT.json export_bf16_sha256) is computed here by an independent float64
oracle: the exact real value of each element (e2m1 x scale [x global | / global]), rounded ONCE to
bf16 by rne_bf16 below. ml_dtypes' float64 -> bfloat16 cast is not used for this: it goes through
float32 and so rounds twice (self_test shows a value where it does); rne_bf16 is checked against
ml_dtypes on float32-exact inputs, where a single rounding is all either can do.
"""

import hashlib
import zlib

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
F32 = np.float32

# E2M1 magnitudes of codes 0-7; codes 8-15 are their negatives (OCP MX spec; transformers
# integrations/mxfp4.py FP4_VALUES; ModelOpt qtensor/nvfp4_tensor.py e2m1_values; compressed-tensors
# compressors/nvfp4/helpers.py FLOAT_TO_E2M1). Code 8 is -0 in some tables, +0 in others: the
# generator never writes code 8 (a zero is written as code 0).
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


# --------------------------------------------------------------------------------------------
# numerics: the oracle and the producers' rules


def rne_bf16(x):
    """float64 -> bfloat16, one round to nearest even from the exact float64 value (8 significant
    bits; below 2^-126 the bf16 subnormal quantum 2^-133). Finite inputs within bf16's range."""
    x = np.asarray(x, np.float64)
    _, e = np.frexp(x)                       # x = m * 2^e, 0.5 <= |m| < 1
    q = np.exp2(np.maximum(e - 8, -133).astype(np.float64))
    r = np.rint(x / q) * q                   # x / q is exact (a power-of-two division)
    out = r.astype(F32)                      # exact: r has at most 8 significant bits
    assert np.all(np.isfinite(out))
    return out.astype(BF16)                  # exact too


def rne_bf16_quotient(num, den):
    """num / den (float64 arrays whose quotient is not exact) rounded once to bf16. The float64
    quotient q is within half a float64 ulp of the true one, so rounding q to bf16 can differ from
    rounding the true quotient only where q is itself a bf16 tie; there the true quotient's side of
    the tie is decided exactly with fractions."""
    from fractions import Fraction
    q = np.asarray(num, np.float64) / np.asarray(den, np.float64)
    out = rne_bf16(q)
    _, e = np.frexp(q)
    half = np.exp2(np.maximum(e - 8, -133).astype(np.float64)) / 2
    tie = (q != 0) & (np.mod(q, 2 * half) == half)
    for i in zip(*np.nonzero(tie)):
        exact = Fraction(float(np.asarray(num)[i])) / Fraction(float(np.asarray(den)[i]))
        if exact != Fraction(float(q[i])):   # off the tie: round toward the true side
            nudged = np.nextafter(q[i], np.inf if exact > Fraction(float(q[i])) else -np.inf)
            out[i] = rne_bf16(nudged)
    return out


def sha_bf16(values64):
    return hashlib.sha256(np.ascontiguousarray(rne_bf16(values64)).tobytes()).hexdigest()


def expect(r, name, values64, rounded=None):
    """Record what the export of `name` must be: the sha256 of its bf16 bytes (rounded: the bf16
    array when values64 is not exact in float64) and its shape."""
    r.sha[name] = (hashlib.sha256(np.ascontiguousarray(rounded).tobytes()).hexdigest()
                   if rounded is not None else sha_bf16(values64))
    if not hasattr(r, "shapes"):
        r.shapes = {}
    r.shapes[name] = list(np.shape(values64))


def self_test():
    """rne_bf16 agrees with ml_dtypes where no double rounding can happen (float32-exact inputs,
    normal and subnormal, ties included), and ml_dtypes' float64 cast does round twice."""
    rng = np.random.default_rng(25)
    bits = rng.integers(0, 0x7F7F0000, 200000, dtype=np.uint32)
    bits[:4096] = (np.arange(4096, dtype=np.uint32) << 15) | 0x8000          # exact ties
    for sign in (0, 0x80000000):
        f = (bits | np.uint32(sign)).view(F32)
        mine = rne_bf16(f.astype(np.float64)).view(np.uint16)
        theirs = f.astype(BF16).view(np.uint16)
        assert np.array_equal(mine, theirs), "rne_bf16 disagrees with ml_dtypes on float32 input"
    x = np.float64(1 + 2.0 ** -8 + 2.0 ** -30)     # float32 rounds it to the tie 1 + 2^-8
    assert float(rne_bf16(x)) == 1 + 2.0 ** -7
    assert float(np.array([x]).astype(BF16)[0]) == 1.0, "ml_dtypes float64->bf16 no longer rounds twice"
    # quotients whose float64 value is a bf16 tie but the true value is not: 33 / (33 / t) is just
    # above the tie t = 1 + 2^-8 (so up), 1 / (1 / t) just below t = 1 + 3 * 2^-8 (so down)
    for num, t, want in ((33.0, 1 + 2.0 ** -8, 1 + 2.0 ** -7), (1.0, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -7)):
        den = np.float64(num) / np.float64(t)
        assert np.float64(num) / den == t and float(rne_bf16(t)) != want
        assert float(rne_bf16_quotient(np.array([num]), np.array([den]))[0]) == want


def e2m1_encode(y):
    """Codes of y (already divided by its scale): round to nearest E2M1 value, ties to the even
    code (ModelOpt qtensor/nvfp4_tensor.py _cast_fp4: searchsorted on the midpoints, then ties at
    0.75/1.75/2.5 go to the even code; compressed-tensors' cast to FP4 rounds to nearest even too),
    saturating at 6. The sign is bit 3; a zero is code 0."""
    y = np.asarray(y, np.float64)
    a = np.minimum(np.abs(y), 6.0)
    d = np.abs(a[..., None] - E2M1)
    best = d.min(axis=-1, keepdims=True)
    ties = d == best
    # among equal distances take the even code (the one with a zero mantissa bit)
    # a tie is between two neighbouring codes, one of them even: take that one
    code = np.argmax(ties & (np.arange(8) % 2 == 0), axis=-1)
    code = np.where(ties.sum(axis=-1) > 1, code, np.argmax(ties, axis=-1)).astype(np.uint8)
    return np.where((y < 0) & (code != 0), code | 8, code).astype(np.uint8)


def e2m1_value(codes):
    v = E2M1[codes & 7]
    return np.where(codes & 8, -v, v)


def pack_e2m1(codes):
    """[..., 2n] codes -> [..., n] bytes, element 2i in the low nibble (gpt-oss
    gpt_oss/torch/weights.py and transformers integrations/mxfp4.py convert_moe_packed_tensors read
    blk & 0x0F into the even columns; compressed-tensors compressors/nvfp4/helpers.py
    pack_fp4_to_uint8 packs (odd << 4) | even; ModelOpt qtensor/nvfp4_tensor.py the same)."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def e8m0_byte(exponent):
    """E8M0: byte b means 2^(b-127); 0xFF is NaN (OCP MX spec; transformers convert_moe_packed_tensors
    subtracts 127; compressed-tensors "Use standard E8M0 scale format for MXFP4 (#538)")."""
    b = np.asarray(exponent) + 127
    assert b.min() >= 0 and b.max() < 255
    return b.astype(np.uint8)


def weights(rng, shape, std=0.02):
    """bf16 normals with rows of varied range, as float64."""
    w = rng.standard_normal(shape) * std
    w *= np.exp(rng.standard_normal(shape[:-1] + (1,)) * 0.5)
    return w.astype(F32).astype(BF16).astype(np.float64)


def groups(w, g):
    return w.reshape(w.shape[:-1] + (w.shape[-1] // g, g))


def mxfp4_roundup(w):
    """MXFP4 with the scale rounded up to a power of two: 2^ceil(log2(amax / 6)) per 32 elements,
    so no code saturates. gpt-oss: transformers integrations/mxfp4.py quantize_to_mxfp4 calls
    triton_kernels' downcast_to_mxfp_torch (numerics_details/mxfp.py), whose default scale rounding
    is ROUND_UP (recalled, not re-read here). DeepSeek-V4's experts: its scale_fmt ue8m0 rounds
    scales up to a power of two (DeepSeek inference kernel.py, recalled). Returns (codes, exponents)."""
    amax = np.abs(groups(w, 32)).max(axis=-1)
    amax = np.where(amax == 0, 6.0 * 2.0 ** -20, amax)
    ex = np.ceil(np.log2(amax / 6.0)).astype(np.int64)
    codes = e2m1_encode(groups(w, 32) / np.exp2(ex)[..., None]).reshape(w.shape)
    return codes, ex


def mxfp4_ct(w):
    """compressed-tensors MXFP4 (quantization/utils/mxfp_utils.py generate_mx_scales): amax rounded
    to a power of two by round_to_power_2 (add a quarter of the mantissa range, keep the exponent:
    a mantissa >= 1.75 goes up), then exponent = floor(log2(that)) - _MX_ELEM_OFFSET[4] (= 2,
    floor(log2(6))), stored with bias 127 since #538. Codes saturate at 6 when amax/2^e > 6."""
    amax = np.abs(groups(w, 32)).max(axis=-1).astype(F32)
    amax = np.where(amax == 0, F32(2.0 ** -20), amax).astype(F32)
    bits = amax.view(np.uint32)
    p2 = ((bits + np.uint32(1 << 21)) & np.uint32(0xFF800000)).view(F32).astype(np.float64)
    ex = np.floor(np.log2(p2)).astype(np.int64) - 2
    codes = e2m1_encode(groups(w, 32) / np.exp2(ex)[..., None]).reshape(w.shape)
    return codes, ex


NVFP4_AMAX = 21 * 2.0 ** -10      # 2688 * 2^-17: the tensor amax of every NVFP4 twin weight


def nvfp4(w):
    """NVFP4 by ModelOpt's rule (qtensor/nvfp4_tensor.py): weight_scale_2 = amax / (6 * 448)
    (get_weights_scaling_factor_2), per 16 elements scale = block_amax / (6 * weight_scale_2) cast to
    F8_E4M3 (get_weights_scaling_factor; 0 -> 1.0), codes = x / (scale * weight_scale_2) to E2M1.
    compressed-tensors' rule (quantization/utils/helpers.py generate_gparam: global = 6 * 448 /
    amax; calculate_qparams: scale = global * block_amax / 6 in F8_E4M3; codes = x / (scale /
    global)) gives the same bytes when the global scale is a power of two. So the twins pin each
    weight's amax at 2688 * 2^-17 (one element set to +-NVFP4_AMAX, the rest clipped below it):
    weight_scale_2 = 2^-17 and weight_global_scale = 2^17 exactly, by either producer's own rule.
    Returns (codes, weight_scale F8_E4M3 array, weight_scale_2 float)."""
    w = np.clip(w, -NVFP4_AMAX * 0.999, NVFP4_AMAX * 0.999)
    w = w.astype(F32).astype(BF16).astype(np.float64)
    w.flat[int(np.argmax(np.abs(w)))] = NVFP4_AMAX * np.sign(w.flat[int(np.argmax(np.abs(w)))])
    g2 = F32(np.abs(w).max()) / F32(6.0 * 448.0)
    assert float(g2) == 2.0 ** -17
    bamax = np.abs(groups(w, 16)).max(axis=-1).astype(F32)
    s = (bamax / (F32(6.0) * g2)).astype(F32)
    s = np.where(s == 0, F32(1.0), s).astype(E4M3)
    step = s.astype(np.float64) * float(g2)
    codes = e2m1_encode(groups(w, 16) / step[..., None]).reshape(w.shape)
    return codes, s, float(g2)


def nvfp4_amax(w, ct, amax=None):
    """NVFP4 with the global scale from the weight's own amax, as real exports have it (not a power
    of two): ModelOpt weight_scale_2 = fp32(amax) / fp32(6 * 448); compressed-tensors
    weight_global_scale = 6 * 448 / amax computed in bf16, stored F32 (SPEC §10: llm-compressor
    computes it in bf16; generate_gparam). Block scales and codes as in nvfp4 (fp32 arithmetic;
    the exact op order of each producer is approximated here: EXPECT.json depends only on the
    stored codes and scales). Returns (codes, weight_scale, global) with global g2 or G. amax: the
    fused layer's (see nvfp4_amax_linear), else the weight's own."""
    amax = F32(np.abs(w).max() if amax is None else amax)
    bamax = np.abs(groups(w, 16)).max(axis=-1).astype(F32)
    if ct:
        G = (F32(6.0 * 448.0) / amax).astype(BF16).astype(F32)
        s = (G * (bamax / F32(6.0))).astype(F32)
        s = np.where(s == 0, F32(1.0), s).astype(E4M3)
        step = (s.astype(F32) / G).astype(F32)
        glob = G
    else:
        g2 = (amax / F32(6.0 * 448.0)).astype(F32)
        s = (bamax / (F32(6.0) * g2)).astype(F32)
        s = np.where(s == 0, F32(1.0), s).astype(E4M3)
        step = (s.astype(F32) * g2).astype(F32)
        glob = g2
    codes = e2m1_encode(groups(w, 16) / step.astype(np.float64)[..., None]).reshape(w.shape)
    return codes, s, glob


def e4m3_block(w, out, inp):
    """FP8 128x128 with ue8m0 scales (DeepSeek-V4 trunk, scale_fmt ue8m0): 2^ceil(log2(amax/448))
    per tile, codes RNE(w / scale) in E4M3. Returns (codes, exponents [ceil(out/128), ceil(in/128)])."""
    rb, cb = -(-out // 128), -(-inp // 128)
    ex = np.zeros((rb, cb), np.int64)
    for i in range(rb):
        for j in range(cb):
            a = np.abs(w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]).max()
            ex[i, j] = int(np.ceil(np.log2(a / 448.0)))
    full = np.exp2(np.repeat(np.repeat(ex, 128, 0), 128, 1)[:out, :inp].astype(np.float64))
    codes = (w / full).astype(F32).astype(E4M3)
    return codes, ex, full


# --------------------------------------------------------------------------------------------
# the families; r is gen_releases.Release (add, bf16, norm, f32, rng, export, sha)


def v4_fp8(r, name, out, inp):
    w = weights(r.rng(name), (out, inp))
    codes, ex, full = e4m3_block(w, out, inp)
    r.add(name, "F8_E4M3", codes)
    # DeepSeek-V4: every scale is "<module>.scale", F8_E8M0 [ceil(out/128), ceil(in/128)] (SPEC §10;
    # vLLM vllm/models/deepseek_v4/; V4 fixtures name layers.4.attn.wq_a.scale etc.)
    r.add(name[:-len("weight")] + "scale", "F8_E8M0", e8m0_byte(ex).view(ml_dtypes.float8_e8m0fnu),
          exported=False)
    expect(r, name, codes.astype(np.float64) * full)


def v4_fp4(r, name, out, inp):
    w = weights(r.rng(name), (out, inp))
    codes, ex = mxfp4_roundup(w)
    # routed experts: I8 [out, in/2] packed E2M1, ".scale" F8_E8M0 [out, in/32] (SPEC §10; DeepSeek
    # inference/convert.py as quoted in radixark/miles tools/convert_mxfp4_to_fp8.py; vllm #51946)
    r.add(name, "I8", pack_e2m1(codes).view(np.int8))
    r.add(name[:-len("weight")] + "scale", "F8_E8M0", e8m0_byte(ex).view(ml_dtypes.float8_e8m0fnu),
          exported=False)
    expect(r, name, e2m1_value(codes) * np.repeat(np.exp2(ex.astype(np.float64)), 32, axis=-1))


V4H, V4E, V4MI = 160, 2, 128   # hidden 128 + 32 (a partial second FP8 block), 2 experts, expert inter
# 128: the shared expert (FP8 128x128, intermediate moe_intermediate_size) keeps its gate/up
# partition a multiple of 128, as vLLM needs at TP 1 (testdata/releases/README.md)


def fam_deepseek_v4(r):
    # DeepSeek-V4-Flash style (SPEC §10; vLLM vllm/models/deepseek_v4/): names without "model."
    # (embed.weight, head.weight, norm.weight, layers.L.attn.wq_a ...: the V4 tensor tables quoted by
    # V4 ports, e.g. attn.{wq_a,wq_b,wkv,wo_a,wo_b}, attn.{q_norm,kv_norm}, attn.attn_sink,
    # attn_norm, ffn_norm, ffn.gate.{weight,bias}, ffn.experts.E.w{1,2,3}, ffn.shared_experts.w{1,2,3},
    # hc_{attn,ffn}_{fn,base,scale}). wo_a is kept BF16 (a V4 fixture lists no wo_a.scale); the hc_*
    # shapes (hc_mult 4) are recalled, not established from a source. Dims scaled down.
    H, ql, hd, heads = V4H, 64, 64, 2
    qc = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
          "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
    c = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
         "expert_dtype": "fp4", "hidden_size": H, "num_hidden_layers": 1,
         "num_attention_heads": heads, "head_dim": hd, "q_lora_rank": ql, "o_lora_rank": 64,
         "o_groups": 1, "n_routed_experts": V4E, "n_shared_experts": 1, "num_experts_per_tok": 1,
         "moe_intermediate_size": V4MI, "hc_mult": 4, "norm_topk_prob": True,
         "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc",
         "swiglu_limit": 10, "rms_norm_eps": 1e-06, "vocab_size": 32, "torch_dtype": "bfloat16",
         "tie_word_embeddings": False, "quantization_config": qc, "transformers_version": "4.57.0"}
    V, hc = 32, 4
    r.bf16("embed.weight", (V, H))
    p = "layers.0."
    for nm in ("attn", "ffn"):   # hyper-connection mixers, F32 (SPEC §10: hc_* F32)
        r.f32(p + "hc_%s_fn" % nm, ((2 + hc) * hc, hc * H))
        r.f32(p + "hc_%s_base" % nm, ((2 + hc) * hc,))
        r.f32(p + "hc_%s_scale" % nm, (3,))
    r.norm(p + "attn_norm.weight", H)
    v4_fp8(r, p + "attn.wq_a.weight", ql, H)
    r.norm(p + "attn.q_norm.weight", ql)
    v4_fp8(r, p + "attn.wq_b.weight", heads * hd, ql)
    v4_fp8(r, p + "attn.wkv.weight", hd, H)
    r.norm(p + "attn.kv_norm.weight", hd)
    r.bf16(p + "attn.wo_a.weight", (64, heads * hd))
    v4_fp8(r, p + "attn.wo_b.weight", H, 64)
    r.f32(p + "attn.attn_sink", (heads,))          # F32 (SPEC §10)
    r.norm(p + "ffn_norm.weight", H)
    r.bf16(p + "ffn.gate.weight", (V4E, H))
    r.f32(p + "ffn.gate.bias", (V4E,))             # F32 (SPEC §10)
    for e in range(V4E):
        q = p + "ffn.experts.%d." % e
        v4_fp4(r, q + "w1.weight", V4MI, H)
        v4_fp4(r, q + "w2.weight", H, V4MI)
        v4_fp4(r, q + "w3.weight", V4MI, H)
    for w, (o, i) in (("w1", (V4MI, H)), ("w2", (H, V4MI)), ("w3", (V4MI, H))):
        v4_fp8(r, p + "ffn.shared_experts.%s.weight" % w, o, i)
    r.norm("norm.weight", H)
    r.bf16("head.weight", (V, H))
    return c, {}, ["--tp", "1"]


def fam_gpt_oss(r):
    # gpt-oss (SPEC §10): GptOssForCausalLM; experts mlp.experts.{gate_up,down}_proj_blocks U8
    # [E, rows, G, 16] and _scales U8 [E, rows, G] (rows the output dim, G = in/32), biases BF16
    # [E, rows]; attention q/k/v/o with biases and self_attn.sinks; router mlp.router.{weight,bias}
    # (transformers models/gpt_oss/modeling_gpt_oss.py GptOssExperts / GptOssTopKRouter; the
    # [E, 2I, H/32, 16] shapes as transformers integrations/mxfp4.py allocates them).
    H, I, E, heads, kv, hd, V = 64, 96, 2, 2, 1, 32, 32    # I != H: the orientation shows in the shapes
    c = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": H,
         "intermediate_size": I, "num_local_experts": E, "num_experts_per_tok": 1,
         "experts_per_token": 1, "num_hidden_layers": 1, "num_attention_heads": heads,
         "num_key_value_heads": kv, "head_dim": hd, "layer_types": ["sliding_attention"],
         "sliding_window": 128, "swiglu_limit": 7.0, "rms_norm_eps": 1e-05, "vocab_size": V,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.55.0",
         "rope_theta": 150000,
         # quant_method mxfp4 with modules_to_not_convert (transformers quantizers/quantizer_mxfp4.py,
         # Mxfp4Config; the release's list as transformers' gpt-oss docs quote it)
         "quantization_config": {"modules_to_not_convert": [
             "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
             "lm_head"], "quant_method": "mxfp4"}}
    r.bf16("model.embed_tokens.weight", (V, H))
    p = "model.layers.0."
    r.norm(p + "input_layernorm.weight", H)
    for nm, out in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
        r.bf16(p + "self_attn.%s.weight" % nm, (out, H))
        r.bf16(p + "self_attn.%s.bias" % nm, (out,))
    r.bf16(p + "self_attn.o_proj.weight", (H, heads * hd))
    r.bf16(p + "self_attn.o_proj.bias", (H,))
    r.bf16(p + "self_attn.sinks", (heads,))
    r.norm(p + "post_attention_layernorm.weight", H)
    r.bf16(p + "mlp.router.weight", (E, H))
    r.bf16(p + "mlp.router.bias", (E,))
    for nm, rows, inp, bf in (("gate_up_proj", 2 * I, H, "[E, H, 2I]"),
                              ("down_proj", H, I, "[E, I, H]")):
        w = weights(r.rng(p + nm), (E, rows, inp))
        codes, ex = mxfp4_roundup(w)
        blocks = pack_e2m1(codes).reshape(E, rows, inp // 32, 16)
        r.add(p + "mlp.experts.%s_blocks" % nm, "U8", blocks, exported=False)
        r.add(p + "mlp.experts.%s_scales" % nm, "U8", e8m0_byte(ex), exported=False)
        r.bf16(p + "mlp.experts.%s_bias" % nm, (E, rows))
        # the bf16 form transformers reads: convert_moe_packed_tensors returns
        # out.reshape(E, rows, in).transpose(1, 2), i.e. [E, in, rows]: gate_up_proj [E, H, 2I] with
        # gate and up interleaved in its columns (GptOssExperts: gate_up[..., ::2] is gate,
        # [..., 1::2] up: the stored row order, kept), down_proj [E, I, H]
        value = e2m1_value(codes) * np.repeat(np.exp2(ex.astype(np.float64)), 32, axis=-1)
        r.export.append(p + "mlp.experts." + nm)
        expect(r, p + "mlp.experts." + nm, np.transpose(value, (0, 2, 1)))
    r.norm("model.norm.weight", H)
    r.bf16("lm_head.weight", (V, H))
    return c, {}, ["--tp", "1"]


NH, NI, NHEADS, NKV, NHD = 96, 128, 2, 1, 48    # NVFP4/MXFP4 llama copies: K a multiple of 32


def fp4_llama(r, linear, twin=False):
    """A one-layer Llama (vllm models/llama.py names) whose seven linears `linear` writes. twin:
    the unquantized tensors (embeddings, norms, lm_head) are drawn keyed on "nvfp4-twin", not the
    family, so that nvfp4-modelopt and nvfp4-ct hold the same values throughout (`diff --dequant`
    of the two exits 0: check_releases.py's twin check)."""
    V = 32
    if twin:
        r.rng = lambda name: np.random.default_rng([2525, zlib.crc32(("nvfp4-twin/" + name).encode())])
    r.bf16("model.embed_tokens.weight", (V, NH))
    p = "model.layers.0."
    r.norm(p + "input_layernorm.weight", NH)
    r.norm(p + "post_attention_layernorm.weight", NH)
    linears = (("self_attn.q_proj", NHEADS * NHD, NH), ("self_attn.k_proj", NKV * NHD, NH),
               ("self_attn.v_proj", NKV * NHD, NH), ("self_attn.o_proj", NH, NHEADS * NHD),
               ("mlp.gate_proj", NI, NH), ("mlp.up_proj", NI, NH), ("mlp.down_proj", NH, NI))
    r.linears = {p + nm: (out, inp) for nm, out, inp in linears}
    for nm, out, inp in linears:
        linear(r, p + nm, out, inp)
    r.norm("model.norm.weight", NH)
    r.bf16("lm_head.weight", (V, NH))


def fp4_llama_config(qc):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": NH,
            "intermediate_size": NI, "num_hidden_layers": 1, "num_attention_heads": NHEADS,
            "num_key_value_heads": NKV, "head_dim": NHD, "hidden_act": "silu",
            "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32,
            "transformers_version": "4.51.0", "quantization_config": qc}


def nvfp4_linear(r, m, out, inp, ct):
    # the same draw for both twins: the rng is keyed on the module name, not the family
    w = weights(np.random.default_rng([2525, zlib.crc32(m.encode())]), (out, inp), std=0.004)
    codes, s, g2 = nvfp4(w)
    if ct:
        # compressed-tensors nvfp4-pack-quantized (the NVFP4 packed compressor's decompress_weight
        # reads weight_packed, weight_scale, weight_global_scale and calls
        # dequantize(x_q, scale, global_scale)): weight_packed U8 [N, K/2], weight_scale F8_E4M3
        # [N, K/16], weight_global_scale F32 [1], a divisor (value = e2m1 * weight_scale /
        # weight_global_scale: SPEC §10, lifecycle/forward_helpers.py; vLLM
        # compressed_tensors_w4a4_nvfp4.py takes its reciprocal), input_global_scale F32 [1]
        r.add(m + ".weight_packed", "U8", pack_e2m1(codes), exported=False)
        r.add(m + ".weight_scale", "F8_E4M3", s, exported=False)
        r.add(m + ".weight_global_scale", "F32", np.array([1.0 / g2], F32), exported=False)
        r.add(m + ".input_global_scale", "F32", np.array([2.0 ** 9], F32), exported=False)
    else:
        # ModelOpt NVFP4 (vllm quantization/modelopt.py ModelOptNvFp4LinearMethod.create_weights):
        # weight U8 [N, K/2], weight_scale F8_E4M3 [N, K/16], weight_scale_2 F32 [], input_scale
        # F32 []; value = e2m1 * weight_scale * weight_scale_2 (SPEC §10, export/unified_export_hf.py)
        r.add(m + ".weight", "U8", pack_e2m1(codes), exported=False)
        r.add(m + ".weight_scale", "F8_E4M3", s, exported=False)
        r.add(m + ".weight_scale_2", "F32", np.array(g2, F32), exported=False)
        r.add(m + ".input_scale", "F32", np.array(2.0 ** -9, F32), exported=False)
    r.export.append(m + ".weight")
    exact = e2m1_value(codes) * np.repeat(s.astype(np.float64), 16, axis=-1)
    expect(r, m + ".weight", exact / (1.0 / g2) if ct else exact * g2)


# the linears vLLM fuses into one (models/llama.py packed_modules_mapping: qkv_proj, gate_up_proj),
# which keeps one global scale for the fused weight (compressed_tensors_w4a4_nvfp4.py and
# modelopt.py process_weights_after_loading: weight_global_scale.max(), weight_scale_2.max());
# so the producers give the parts one amax: llm-compressor modifiers/utils/helpers.py
# update_fused_layer_weight_global_scales, ModelOpt export/quant_utils.py preprocess_linear_fusion
FUSED = (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("mlp.gate_proj", "mlp.up_proj"))


def fused_amax(r, m):
    """The largest amax of the parts of the fused layer `m` belongs to (its own when none)."""
    p, nm = m.rsplit(".", 2)[0] + ".", ".".join(m.rsplit(".", 2)[1:])
    parts = next((f for f in FUSED if nm in f), (nm,))
    return max(F32(np.abs(weights(r.rng(p + q), r.linears[p + q], std=0.004)).max()) for q in parts)


def nvfp4_amax_linear(r, m, out, inp, ct, shared=True):
    """An NVFP4 linear with a real (amax-derived) global scale: where exporting by a fp32 chain
    and exporting the exact value rounded once differ. EXPECT.json "fp32_chain_differs" counts
    the elements where the fp32 chain each producer's own dequantizer computes (ModelOpt:
    e2m1 * fp32(scale * scale_2); compressed-tensors: e2m1 * fp32(scale / global)) gives other
    bf16 bytes than the exact value. shared: the global scale from the fused layer's amax (FUSED),
    as both producers write it; else from the weight's own (defect-nvfp4-fused-global)."""
    w = weights(r.rng(m), (out, inp), std=0.004)
    codes, s, glob = nvfp4_amax(w, ct, fused_amax(r, m) if shared else None)
    e = e2m1_value(codes)
    sv = np.repeat(s.astype(np.float64), 16, axis=-1)
    if ct:
        r.add(m + ".weight_packed", "U8", pack_e2m1(codes), exported=False)
        r.add(m + ".weight_scale", "F8_E4M3", s, exported=False)
        r.add(m + ".weight_global_scale", "F32", np.array([glob], F32), exported=False)
        r.add(m + ".input_global_scale", "F32", np.array([2.0 ** 9], F32), exported=False)
        exact = rne_bf16_quotient(e * sv, np.full(e.shape, float(glob)))
        chain = (e.astype(F32) * (sv.astype(F32) / glob).astype(F32)).astype(F32).astype(BF16)
    else:
        r.add(m + ".weight", "U8", pack_e2m1(codes), exported=False)
        r.add(m + ".weight_scale", "F8_E4M3", s, exported=False)
        r.add(m + ".weight_scale_2", "F32", np.array(glob, F32), exported=False)
        r.add(m + ".input_scale", "F32", np.array(2.0 ** -9, F32), exported=False)
        exact = rne_bf16(e * sv * float(glob))     # 2 + 4 + 24 bits: exact in float64
        chain = (e.astype(F32) * (sv.astype(F32) * glob).astype(F32)).astype(F32).astype(BF16)
    r.export.append(m + ".weight")
    expect(r, m + ".weight", e, rounded=exact)
    if not hasattr(r, "chain"):
        r.chain = {}
    r.chain[m + ".weight"] = "%d of %d" % (int(np.sum(exact.view(np.uint16) != chain.view(np.uint16))),
                                           e.size)


MO_NVFP4 = {"exclude_modules": ["lm_head"], "group_size": 16, "kv_cache_quant_algo": None,
            "quant_algo": "NVFP4"}
MO_PRODUCER = {"name": "modelopt", "version": "0.37.0"}


def mo_nvfp4_config():
    """config.json's quantization_config as ModelOpt's HF export writes it: hf_quant_config.json's
    "quantization" converted to the llm-compressor shape (NVIDIA/TensorRT-Model-Optimizer
    modelopt/torch/export/convert_hf_config.py convert_hf_quant_config_format, called by
    unified_export_hf.py export_hf_checkpoint): config_groups.group_0 (weights and
    input_activations num_bits 4, type float, group_size 16, targets Linear), the exclude list
    renamed "ignore", quant_algo, producer, quant_method "modelopt"; no kv_cache_scheme when
    kv_cache_quant_algo is null, and no flat group_size or exclude_modules. vLLM reads this, not
    hf_quant_config.json, whenever config.json has a quantization_config
    (model_loader/weight_utils.py get_quant_config), and its flat branch takes the exclude list
    from "ignore" only (quantization/modelopt.py ModelOptQuantConfigBase.from_config): a flat
    "exclude_modules" there leaves lm_head quantized, and vLLM 0.32 then fails to load the bf16
    lm_head.weight [V, H] into the NVFP4 U8 [V, H/2] parameter (vocab_parallel_embedding.py
    weight_loader: "The size of tensor a (48) must match the size of tensor b (96)"), as the
    copies made before this fix did."""
    g = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": MO_NVFP4["group_size"]}
    return {"config_groups": {"group_0": {"input_activations": dict(g), "weights": dict(g),
                                          "targets": ["Linear"]}},
            "ignore": list(MO_NVFP4["exclude_modules"]), "quant_algo": MO_NVFP4["quant_algo"],
            "producer": MO_PRODUCER, "quant_method": "modelopt"}


def fam_nvfp4_modelopt(r):
    # quant_algo NVFP4, group_size 16 and exclude_modules nested under "quantization" in
    # hf_quant_config.json, and config.json's quantization_config in ModelOpt's converted shape
    # (mo_nvfp4_config: "ignore", config_groups; SPEC §10). kv_cache_quant_algo null (no FP8 KV
    # cache): ModelOptNvFp4Config.from_config in current vLLM takes a null as "auto"; older vLLM
    # (the same function, `if not (group_size and kv_cache_quant_algo and exclude_modules)`)
    # refused it in hf_quant_config.json, a loader-version difference this copy does not hide
    fp4_llama(r, lambda r, m, o, i: nvfp4_linear(r, m, o, i, False), twin=True)
    c = fp4_llama_config(mo_nvfp4_config())
    return c, {"hf_quant_config.json": {"producer": MO_PRODUCER, "quantization": MO_NVFP4}}, \
        ["--tp", "1"]


def fam_nvfp4_modelopt_amax(r):
    # as nvfp4-modelopt, with weight_scale_2 from each weight's own amax (not a twin)
    fp4_llama(r, lambda r, m, o, i: nvfp4_amax_linear(r, m, o, i, False))
    c = fp4_llama_config(mo_nvfp4_config())
    return c, {"hf_quant_config.json": {"producer": MO_PRODUCER, "quantization": MO_NVFP4}}, \
        ["--tp", "1"]


def ct_fp4_config(fmt, group, scale_dtype, acts, version=None):
    """compressed-tensors quantization_config for the NVFP4 / MXFP4A16 presets
    (quantization/quant_scheme.py NVFP4: weights num_bits 4, type float, strategy tensor_group,
    group_size 16, input activations the same, dynamic "local"; MXFP4A16: strategy group,
    group_size 32, scale_dtype uint8, weights only). version: the "version" key compressed-tensors
    writes beside quant_method (compressors/model_compressors/model_compressor.py update_config:
    COMPRESSION_VERSION_NAME, "version" in base.py, = compressed_tensors.__version__)."""
    w = {"actorder": None, "block_structure": None, "dynamic": False, "group_size": group,
         "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "scale_dtype": scale_dtype,
         "strategy": "tensor_group" if group == 16 else "group", "symmetric": True,
         "type": "float", "zp_dtype": None}
    a = dict(w, dynamic="local", observer="minmax") if acts else None
    return {"config_groups": {"group_0": {"input_activations": a, "output_activations": None,
                                          "targets": ["Linear"], "weights": w}},
            "format": fmt, "global_compression_ratio": None, "ignore": ["lm_head"],
            "kv_cache_scheme": None, "quant_method": "compressed-tensors",
            "quantization_status": "compressed", **({"version": version} if version else {})}


def fam_nvfp4_ct(r):
    fp4_llama(r, lambda r, m, o, i: nvfp4_linear(r, m, o, i, True), twin=True)
    return fp4_llama_config(ct_fp4_config("nvfp4-pack-quantized", 16, "torch.float8_e4m3fn", True)), \
        {}, ["--tp", "1"]


def fam_nvfp4_ct_amax(r):
    # as nvfp4-ct, with weight_global_scale = 6 * 448 / amax of each weight (not a twin)
    fp4_llama(r, lambda r, m, o, i: nvfp4_amax_linear(r, m, o, i, True))
    return fp4_llama_config(ct_fp4_config("nvfp4-pack-quantized", 16, "torch.float8_e4m3fn", True)), \
        {}, ["--tp", "1"]


def mxfp4_ct_linear(r, m, out, inp):
    w = weights(r.rng(m), (out, inp))
    codes, ex = mxfp4_ct(w)
    # compressed-tensors mxfp4-pack-quantized: weight_packed U8 [N, K/2] (MXFP4PackedCompressor
    # subclasses NVFP4PackedCompressor: the same packing), weight_scale U8 [N, K/32] holding E8M0
    # 127 + log2(scale) (compressors/mx_utils.py compress_mx_scale; scale_dtype torch.uint8 in
    # quantization/quant_scheme.py MXFP4A16; bias 127 since a333c877 "Use standard E8M0 scale format
    # for MXFP4 (#538)", first released in 0.14.0), no weight_global_scale
    # (compressors/mxfp4/base.py compression_param_names)
    r.add(m + ".weight_packed", "U8", pack_e2m1(codes), exported=False)
    r.add(m + ".weight_scale", "U8", e8m0_byte(ex), exported=False)
    r.export.append(m + ".weight")
    expect(r, m + ".weight", e2m1_value(codes) * np.repeat(np.exp2(ex.astype(np.float64)), 32, axis=-1))


def fam_mxfp4_ct(r):
    fp4_llama(r, mxfp4_ct_linear)
    # version 0.14.0: the first release with the bias-127 scales (#538)
    return fp4_llama_config(ct_fp4_config("mxfp4-pack-quantized", 32, "torch.uint8", False,
                                          "0.14.0")), {}, ["--tp", "1"]


FAMILIES_FP4 = [
    ("deepseek-v4", fam_deepseek_v4),
    ("gpt-oss", fam_gpt_oss),
    ("nvfp4-modelopt", fam_nvfp4_modelopt),
    ("nvfp4-ct", fam_nvfp4_ct),
    ("nvfp4-modelopt-amax", fam_nvfp4_modelopt_amax),
    ("nvfp4-ct-amax", fam_nvfp4_ct_amax),
    ("mxfp4-ct", fam_mxfp4_ct),
]


# --------------------------------------------------------------------------------------------
# planted defects: a valid copy with one thing broken; EXPECT.json "defect" names the finding
# verify must give (rule, tensor)


def tensor_index(r, name):
    return next(i for i, t in enumerate(r.tensors) if t[0] == name)


def defect_nan_e8m0(r):
    c, side, serve = fam_deepseek_v4(r)
    n = "layers.0.ffn.experts.1.w2.scale"
    i = tensor_index(r, n)
    s = r.tensors[i][2].view(np.uint8).copy()
    s[3, 1] = 0xFF                                   # E8M0 NaN
    r.tensors[i] = (n, "F8_E8M0", s.view(ml_dtypes.float8_e8m0fnu))
    return c, side, serve, {"rule": "bad-scale", "tensor": n}


def defect_no_scale_2(r):
    c, side, serve = fam_nvfp4_modelopt(r)
    n = "model.layers.0.mlp.up_proj.weight_scale_2"
    del r.tensors[tensor_index(r, n)]
    return c, side, serve, {"rule": "missing-scale", "tensor": "model.layers.0.mlp.up_proj.weight"}


def defect_scale_shape(r):
    c, side, serve = fam_nvfp4_modelopt(r)
    n = "model.layers.0.self_attn.o_proj.weight_scale"
    i = tensor_index(r, n)
    s = r.tensors[i][2]
    r.tensors[i] = (n, "F8_E4M3", np.ascontiguousarray(s[:, : s.shape[1] // 2]))   # [N, K/32]
    return c, side, serve, {"rule": "scale-shape", "tensor": n}


def defect_mxfp4_ct_old_bias(r):
    # mxfp4-ct as compressed-tensors 0.13.0 wrote it: MXFP4PackedCompressor.compress_scale stored
    # 127 + floor(log2(scale)) - 2, i.e. bias 125 (the line a333c877, "Use standard E8M0 scale
    # format for MXFP4 (#538)", first in 0.14.0, changed), and update_config wrote version 0.13.0.
    # The same weights: every weight_scale byte 2 less. Read with bias 127, as every loader does,
    # its values are 4 times too small; verify names the version (rule scale-bias) and
    # dequantize-for-export refuses it (exit 3)
    c, side, serve = fam_mxfp4_ct(r)
    for i, (n, dtype, arr) in enumerate(r.tensors):
        if n.endswith(".weight_scale"):
            assert arr.min() >= 2
            r.tensors[i] = (n, dtype, (arr - 2).astype(np.uint8))
    c["quantization_config"]["version"] = "0.13.0"
    return c, side, serve, {"rule": "scale-bias",
                            "tensor": "model.layers.0.mlp.down_proj.weight_packed"}


def defect_format_mismatch(r):
    # nvfp4-modelopt's tensors (X.weight U8, weight_scale, weight_scale_2) under nvfp4-ct's config
    # (quant_method compressed-tensors, format nvfp4-pack-quantized) and without
    # hf_quant_config.json: a config copied from the other producer's twin. vLLM dispatches on the
    # declaration (compressed-tensors' NVFP4 scheme creates weight_packed, weight_global_scale) and
    # finds none of them; verify names the mismatch (rule format-mismatch) on the first weight
    c, side, serve = fam_nvfp4_modelopt(r)
    c = fp4_llama_config(ct_fp4_config("nvfp4-pack-quantized", 16, "torch.float8_e4m3fn", True))
    return c, {}, serve, {"rule": "format-mismatch", "tensor": "model.layers.0.mlp.down_proj.weight"}


def defect_fused_global(r):
    # nvfp4-ct-amax with k_proj's global scale from its own amax, not q/k/v's largest: vLLM
    # replaces the fused layer's three by their largest (see FUSED) and computes other values than
    # the checkpoint's for k_proj (the FP4 loader judges measured such a copy:
    # tests/loaders/fp4_check.py); verify names k_proj (rule fused-global-scale)
    fp4_llama(r, lambda r, m, o, i: nvfp4_amax_linear(r, m, o, i, True,
                                                      shared=not m.endswith(".k_proj")))
    c = fp4_llama_config(ct_fp4_config("nvfp4-pack-quantized", 16, "torch.float8_e4m3fn", True))
    return c, {}, ["--tp", "1"], {"rule": "fused-global-scale",
                                  "tensor": "model.layers.0.self_attn.k_proj.weight_packed"}


DEFECTS = [
    ("defect-deepseek-v4-nan-e8m0", defect_nan_e8m0),
    ("defect-nvfp4-no-scale-2", defect_no_scale_2),
    ("defect-nvfp4-scale-shape", defect_scale_shape),
    ("defect-mxfp4-ct-old-bias", defect_mxfp4_ct_old_bias),
    ("defect-nvfp4-format-mismatch", defect_format_mismatch),
    ("defect-nvfp4-fused-global", defect_fused_global),
]
