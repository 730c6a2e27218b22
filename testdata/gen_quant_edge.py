#!/usr/bin/env python3
"""Generate testdata/quant-edge: a small checkpoint of numerical edge cases for `fp8conv quantize`.

Usage (from the repository root, in the oracle venv, which has the exact pins):
    build/venv-oracle/bin/python testdata/gen_quant_edge.py [OUTDIR]   # default testdata/quant-edge

Writes OUTDIR/config.json and OUTDIR/model.safetensors (one shard, no index). Deterministic: every
random draw comes from numpy.random.default_rng([SEED, zlib.crc32(tensor name)]) (numpy pinned in
tests/oracle/requirements.txt), the hand-built rows are fixed, and the file is written by the
reference writer (safetensors.serialize_file with TensorSpec, as tests/oracle/make_goldens.py does)
with metadata {"format": "pt"}. bf16 values are float64 -> float32 -> ml_dtypes.bfloat16 (RNE);
f16 values float64 -> float32 -> numpy float16 (RNE). No NaN or infinity anywhere.

What each tensor exercises is listed in testdata/README.md ("quant-edge").
"""

import ctypes
import json
import os
import sys
import zlib

import ml_dtypes
import numpy as np
from safetensors import TensorSpec, serialize_file

SEED = 3003
BF16 = ml_dtypes.bfloat16
BF16_MIN_SUB = 2.0 ** -133          # smallest positive bf16 (subnormal)
F16_MIN_SUB = 2.0 ** -24            # smallest positive f16 (subnormal)
F32_MIN_SUB = 2.0 ** -149           # smallest positive f32 (subnormal)

CONFIG = {
    "architectures": ["EdgeForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "torch_dtype": "bfloat16",
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0,
}

# numpy dtype -> (safetensors header code, name the Python binding takes)
DTYPES = {
    np.dtype(BF16): ("BF16", "bfloat16"),
    np.dtype("<f2"): ("F16", "float16"),
    np.dtype("<f4"): ("F32", "float32"),
    np.dtype("<i8"): ("I64", "int64"),
}


# --------------------------------------------------------------------------------------------
# helpers


def rng_for(name):
    return np.random.default_rng([SEED, zlib.crc32(name.encode("utf-8"))])


def bf16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(BF16)


def f16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float16)


def e4m3_positive_values():
    """Every finite E4M3 (OCP fn) value >= 0, ascending, computed from the format definition:
    0, subnormals k*2^-9 (k = 1..7), normals (1 + m/8) * 2^(e-7) for e = 1..15, except
    e = 15, m = 7 (NaN). 127 values, the last is 448."""
    vals = [0.0] + [k * 2.0 ** -9 for k in range(1, 8)]
    for e in range(1, 16):
        for m in range(8):
            if e == 15 and m == 7:
                continue
            vals.append((1 + m / 8) * 2.0 ** (e - 7))
    assert len(vals) == 127 and vals[-1] == 448.0
    return vals


def tie_values():
    """Values x with x / 1 on E4M3 rounding ties and around them, all exact in bf16:
    the 126 midpoints between consecutive E4M3 values, each midpoint +- one bf16 ulp,
    and the exact E4M3 values; both signs; +0 and -0 included."""
    pos = e4m3_positive_values()
    mids = [(a + b) / 2 for a, b in zip(pos, pos[1:])]
    seq = []
    for m in mids:
        ulp = 2.0 ** (int(np.frexp(m)[1]) - 1 - 7)  # bf16 ulp at m (7 stored mantissa bits)
        seq += [m, -m, m + ulp, -(m - ulp)]
    seq += [v for p in pos for v in (p, -p)]  # includes 0.0 and -0.0
    vals = np.array(seq, dtype=np.float64)
    assert np.all(bf16(vals).astype(np.float64) == vals), "tie values must be exact in bf16"
    return vals


# --------------------------------------------------------------------------------------------
# tensors


def down_proj(name):
    """[129, 257] normal * 0.02 with 6 outliers up to ~5 (alternating signs)."""
    rng = rng_for(name)
    w = rng.standard_normal((129, 257)) * 0.02
    pos = rng.choice(w.size, size=6, replace=False)
    mags = np.array([1.0, 2.5, 3.25, 4.0, 4.5, 4.96875])
    w.flat[pos] = mags * np.array([1, -1, 1, -1, 1, -1])
    return bf16(w)


def gate_proj(name):
    """[300, 200] random; rows 0..127 x cols 128..199 (one whole 128x128 block) and row 200 zero."""
    w = rng_for(name).standard_normal((300, 200)) * 0.02
    w[0:128, 128:200] = 0.0
    w[200, :] = 0.0
    return bf16(w)


def fill_groups(seq, lead, rows, cols=256, group=32):
    """rows x cols matrix: element 0 of every `group`-wide group is +-lead (alternating), the
    other slots take `seq` in order (cycled)."""
    out = np.zeros((rows, cols))
    k = 0
    for r in range(rows):
        for c in range(cols):
            if c % group == 0:
                out[r, c] = lead if (r * cols + c) // group % 2 == 0 else -lead
            else:
                out[r, c] = seq[k % len(seq)]
                k += 1
    return out


def q_proj(name):
    """[64, 256]: hand-built rows (see README), rows 16..63 random normal * 0.05.

    row 0       random bf16 subnormals m * 2^-133, |m| <= 127 (~1e-39)
    row 1       +-k * 2^-133, k in 1..3: amax/448 rounds to 0 in bf16 (compressed-tensors scale
                underflow -> 2^-133) and is an fp32 subnormal for float scales
    rows 2..9   E4M3 ties: every 32-group holds +-448, so amax = 448 and s = 1 for every scheme;
                the other slots are the tie sequence (midpoints, +-1 ulp, exact values, +-0)
    rows 10..11 the tie sequence times 2^-7 with +-3.5 in every group (s = 2^-7 for channel/mxfp8)
    row 12      +0 and -0 alternating (all-zero row: scale 1, mxfp8 byte 0, -0 -> 0x80)
    row 13      2^-10, 3*2^-10, 0.0068359375, 1.0625, 1.1875, 17.0 and negatives, 448 per group
    rows 14..15 random values in [-448, 448]
    """
    rng = rng_for(name)
    w = rng.standard_normal((64, 256)) * 0.05
    w[0] = rng.integers(-127, 128, 256) * BF16_MIN_SUB
    w[1] = rng.integers(1, 4, 256) * np.where(rng.integers(0, 2, 256) == 0, 1.0, -1.0) * BF16_MIN_SUB
    ties = tie_values()
    w[2:10] = fill_groups(ties, 448.0, 8)
    w[10:12] = fill_groups(ties * 2.0 ** -7, 3.5, 2)
    w[12] = np.where(np.arange(256) % 2 == 0, 0.0, -0.0)
    named = [2.0 ** -10, 3 * 2.0 ** -10, 0.0068359375, 1.0625, 1.1875, 17.0]
    w[13] = fill_groups(named + [-v for v in named], 448.0, 1)
    w[14:16] = rng.uniform(-448.0, 448.0, (2, 256))
    out = bf16(w)
    assert float(np.max(np.abs(out.astype(np.float32)))) == 448.0
    assert np.signbit(out[12, 1].astype(np.float32)) and out[12, 1] == 0
    return out


def k_proj(name):
    """[96, 256]: rows 0..31 have every 32-group's amax = +-m * 2^k with mantissa m in
    {1.7578125, 1.8125, 1.875, 1.8984375, 1.9921875} (> 1.75: --mx-rounding floor saturates it) or
    m in {1.75, 1.0} (no saturation), k in -12..3; the other slots are random below amax.
    Rows 32..95 random normal * 0.02."""
    rng = rng_for(name)
    w = rng.standard_normal((96, 256)) * 0.02
    mants = [1.7578125, 1.8125, 1.875, 1.8984375, 1.9921875, 1.75, 1.0]
    for r in range(32):
        for g in range(8):
            amax = mants[(r * 8 + g) % len(mants)] * 2.0 ** (int(rng.integers(-12, 4)))
            grp = rng.uniform(-amax, amax, 32)
            # keep every other slot strictly below amax after bf16 rounding
            grp = np.clip(grp, -amax * 0.98, amax * 0.98)
            grp[int(rng.integers(0, 32))] = amax if (r + g) % 2 == 0 else -amax
            w[r, g * 32:(g + 1) * 32] = grp
    return bf16(w)


def v_proj(name):
    """[136, 160] F16 random normal * 0.05 with f16 subnormals: row 0 all subnormals (+-k * 2^-24,
    k <= 1023), row 1 +-k * 2^-24 with k in 1..3 (the f16 compressed-tensors scale underflows to 0
    -> 2^-24), and about 1 % of the other elements replaced by random subnormals."""
    rng = rng_for(name)
    w = rng.standard_normal((136, 160)) * 0.05
    w[0] = rng.integers(-1023, 1024, 160) * F16_MIN_SUB
    w[1] = rng.integers(1, 4, 160) * np.where(rng.integers(0, 2, 160) == 0, 1.0, -1.0) * F16_MIN_SUB
    pos = rng.choice(np.arange(2 * 160, w.size), size=w.size // 100, replace=False)
    w.flat[pos] = rng.integers(-1023, 1024, pos.size) * F16_MIN_SUB
    out = f16(w)
    assert np.all(out[0].astype(np.float64) == w[0]) and np.all(out[1].astype(np.float64) == w[1])
    return out


def o_proj(name):
    """[128, 96] F32 random normal * 0.05, none bf16-representable (low 16 bits never all zero);
    row 0 is +-k * 2^-149, k in 1..7 (amax/448 underflows fp32 to 0 -> scale 2^-149),
    row 1 random fp32 subnormals."""
    rng = rng_for(name)
    w = (rng.standard_normal((128, 96)) * 0.05).astype(np.float32)
    bits = w.view(np.uint32)
    bits[(bits & 0xFFFF) == 0] |= 1
    w[0] = (rng.integers(1, 8, 96) * np.where(rng.integers(0, 2, 96) == 0, 1.0, -1.0) * F32_MIN_SUB)
    w[1] = (rng.integers(-(2 ** 23 - 1), 2 ** 23, 96) * F32_MIN_SUB)
    assert np.all(w[0] != 0) and np.all(np.abs(w[1]) < 2.0 ** -126)
    return np.ascontiguousarray(w, dtype="<f4")


def experts_gate_up(name):
    """[3, 300, 200] random; expert e has magnitude 0.02 * 10^(e-1) (different per-expert scales)."""
    w = rng_for(name).standard_normal((3, 300, 200)) * 0.02
    w *= np.array([0.1, 1.0, 10.0])[:, None, None]
    return bf16(w)


def experts_down(name):
    """[3, 136, 160] random normal * 0.02; expert 2 rows 0..7 all zero."""
    w = rng_for(name).standard_normal((3, 136, 160)) * 0.02
    w[2, 0:8, :] = 0.0
    return bf16(w)


def normal_bf16(shape, std, mean=0.0):
    def make(name):
        return bf16(mean + rng_for(name).standard_normal(shape) * std)
    return make


def tensors():
    makers = {
        "model.layers.0.mlp.down_proj.weight": down_proj,
        "model.layers.0.mlp.up_proj.weight": lambda name: bf16([[0.7]]),
        "model.layers.0.mlp.gate_proj.weight": gate_proj,
        "model.layers.0.self_attn.q_proj.weight": q_proj,
        "model.layers.0.self_attn.k_proj.weight": k_proj,
        "model.layers.0.self_attn.v_proj.weight": v_proj,
        "model.layers.0.self_attn.o_proj.weight": o_proj,
        "model.layers.0.mlp.experts.gate_up_proj": experts_gate_up,
        "model.layers.0.mlp.experts.down_proj": experts_down,
        "model.norm.weight": normal_bf16((256,), 0.05, 1.0),
        "model.embed_tokens.weight": normal_bf16((50, 64), 0.02),
        "lm_head.weight": normal_bf16((50, 64), 0.02),
        "model.layers.0.mlp.gate.weight": normal_bf16((4, 64), 0.05),
        "model.layers.0.self_attn.q_proj.bias": normal_bf16((64,), 0.01),
        "model.layers.0.mlp.gate.e_score_correction_bias":
            lambda name: (rng_for(name).standard_normal(4) * 0.02).astype("<f4"),
        "model.layers.0.mtp.eh_proj.weight": normal_bf16((64, 128), 0.02),
        "model.position_ids": lambda name: np.arange(16, dtype="<i8"),
    }
    out = {}
    for name, make in makers.items():
        arr = np.ascontiguousarray(make(name))
        if arr.dtype.kind == "f" or arr.dtype == np.dtype(BF16):
            assert np.all(np.isfinite(arr.astype(np.float32))), name
        out[name] = arr
    return out


# --------------------------------------------------------------------------------------------
# writing


def write_safetensors(path, arrays):
    keep, specs = [], {}
    for name, arr in arrays.items():
        code, binding = DTYPES[arr.dtype]
        data = arr.tobytes()
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        keep.append(buf)
        specs[name] = TensorSpec(dtype=binding, shape=list(arr.shape),
                                 data_ptr=ctypes.addressof(buf), data_len=len(data))
        assert specs[name].dtype == code, (name, specs[name].dtype)
    if os.path.exists(path):
        os.remove(path)
    serialize_file(specs, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)  # safetensors >= 0.8 writes through a 0600 temp file


def main():
    if sys.byteorder != "little":
        sys.exit("gen_quant_edge: needs a little-endian host")
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "quant-edge")
    os.makedirs(outdir, exist_ok=True)
    arrays = tensors()
    write_safetensors(os.path.join(outdir, "model.safetensors"), arrays)
    with open(os.path.join(outdir, "config.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(CONFIG, indent=2) + "\n")
    size = os.path.getsize(os.path.join(outdir, "model.safetensors"))
    print("gen_quant_edge: wrote %s (%d tensors, model.safetensors %d bytes)" % (outdir, len(arrays), size))


if __name__ == "__main__":
    main()
