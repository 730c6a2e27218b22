#!/usr/bin/env python3
"""The engines' own quantizers on a CUDA GPU against `fp8conv quantize --profile` (issue 47).

fp8conv-formats(5), PROFILES, transcribes each engine's arithmetic with GPU semantics, but some
steps only a GPU can settle: Triton's fp32 division (div.full.f32, approximate), sgl-kernel's
-use_fast_math build for Hopper, CUDA's log2f on powers of two (SGLang's UE8M0 rounding), and
torch's CUDA idioms (`t / 448.0` as t * fl(1/448), `448.0 / t` as fl(1/t) * 448).  On a machine
with a CUDA GPU and torch, this script:

  1. checks those torch idioms and torch.log2 / torch.ceil on every bf16 amax (torch only);
  2. runs each engine's own quantizer that is importable here on CUDA tensors of bf16 weights
     (realistic ones, and edge tiles: all zero, under each amax floor, E4M3 midpoints under amax
     448, huge values) and compares its codes and scales byte for byte with what `fp8conv
     quantize --profile NAME` writes for the same weights on the CPU:
       vllm     vllm.utils.deep_gemm per_block_cast_to_fp8 (block), vllm._custom_ops
                scaled_fp8_quant (tensor, and per token: channel)
       deepgemm deep_gemm.utils.math per_block_cast_to_fp8(use_ue8m0=True)
       sglang   sglang_per_token_group_quant_fp8 (--block 1x128), and fp8_utils'
                per_block_cast_to_fp8 (UE8M0 by log2 / ceil: --profile deepgemm)
       slime    slime.utils.fp8_kernel blockwise_cast_to_fp8_triton (Triton)
       prime-rl prime_rl.trainer.models.fp8 quantize_to_fp8_blockwise
       te       TransformerEngine's Float8BlockQuantizer (FP32 scales) and
                Float8CurrentScalingQuantizer (tensor)
     An engine that is not importable, or whose call fails (another version's API), is
     skipped with the reason printed; that is not a failure.

usage: engines_cuda.py [FP8CONV]   (default: $FP8CONV, else ./fp8conv (the GPU kit's root,
                                    where its run.sh runs it), else build/fp8conv)
Exit 0: everything that ran gave the same bytes; 1: a difference (printed with counts);
3: "torch: not available (why)" (no torch, or no CUDA device).  ENGINES_DEVICE=cpu runs it on
CPU tensors instead: a smoke test of the script, not of the rows.  Python 3, torch; nothing else
needed.  It has not run on a GPU yet: its first run on one is its test.
"""
import importlib
import json
import os
import struct
import subprocess
import sys
import tempfile

results = {"ok": 0, "failed": 0, "skipped": 0}
# ENGINES_DEVICE=cpu: the same steps on CPU tensors, to try this script where there is no GPU
# (torch on a CPU divides where CUDA multiplies: its differences say nothing about the rows)
DEVICE = os.environ.get("ENGINES_DEVICE", "cuda")


def say(kind, name, detail=""):
    results[kind] += 1
    tag = {"ok": "ok      ", "failed": "FAILED  ", "skipped": "skipped "}[kind]
    print("%s%s%s" % (tag, name, ("  " + detail) if detail else ""), flush=True)


# ---------------------------------------------------------------- safetensors, by hand

def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return {k: blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in header.items()}


def raw(torch, t):
    t = t.detach().contiguous().cpu()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


# ---------------------------------------------------------------- weights

def weights(torch):
    """bf16 CPU tensors: realistic (normal 0.02, 0.2% outliers), and one with an edge tile
    per class; every dimension a multiple of 128 but one partial matrix."""
    g = torch.Generator().manual_seed(47)

    def realistic(m, n):
        w = torch.randn(m, n, generator=g) * 0.02
        out = torch.rand(m, n, generator=g) < 0.002
        w[out] *= 10 + 40 * torch.rand(int(out.sum()), generator=g)
        return w

    edge = realistic(384, 640)
    tiles = [torch.zeros(128, 128),                                       # all zero
             (torch.rand(128, 128, generator=g) - 0.5) * 1e-4,            # under vLLM's 1e-4
             (torch.rand(128, 128, generator=g) - 0.5) * 1e-10,           # under 1e-10
             (torch.rand(128, 128, generator=g) - 0.5) * 2e-10]           # prime-rl's 1e-12
    for k, t in enumerate(tiles):
        edge[0:128, 128 * k:128 * (k + 1)] = t
    e4 = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    mids = (e4[1:126] + e4[2:127]) / 2
    idx = torch.arange(128 * 128) % 125
    sign = torch.where(torch.arange(128 * 128) % 3 == 0, -1.0, 1.0)
    mid = (mids[idx] * sign).view(128, 128)
    mid[0, 0] = 448.0
    edge[128:256, 0:128] = mid                                            # midpoints, amax 448
    edge[128:256, 128:256] = torch.where(torch.rand(128, 128, generator=g) < 0.5, 3e38, -2e38)
    edge[128:256, 256:384] = (torch.rand(128, 128, generator=g) - 0.5) * 2e30
    return {"model.layers.0.mlp.down_proj.weight": realistic(512, 768).bfloat16(),
            "model.layers.0.mlp.up_proj.weight": realistic(200, 300).bfloat16(),
            "model.layers.0.self_attn.o_proj.weight": edge.bfloat16()}


# ---------------------------------------------------------------- 1. torch's own idioms

def torch_idioms(torch):
    """torch on CUDA: t / 448.0 == t * fl(1/448); 448.0 / t == fl(1/t) * 448 (Tensor.__rdiv__);
    ceil(log2(s)) of s = a * fl(1/448) == the exponent rounded up by its bits, on every bf16
    amax a (and 1e-4): the rows' assumptions."""
    bits = torch.arange(1, 0x7F80, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    a = torch.cat([bits.float(), torch.tensor([1e-4])]).to(DEVICE)
    r448 = torch.tensor(1 / 448, dtype=torch.float32).item()
    got, want = a / 448.0, a * torch.tensor(r448, device=DEVICE)
    say("ok" if torch.equal(got, want) else "failed", "torch CUDA: t / 448.0 is t * fl(1/448)",
        "%d of %d differ" % (int((got != want).sum()), a.numel()))
    got, want = 448.0 / a, torch.reciprocal(a) * 448.0
    fin = torch.isfinite(want)
    say("ok" if torch.equal(got[fin], want[fin]) else "failed",
        "torch CUDA: 448.0 / t is fl(1/t) * 448", "%d differ" % int((got[fin] != want[fin]).sum()))
    s = a.clamp(min=1e-4) * torch.tensor(r448, device=DEVICE)
    by_log = torch.pow(2.0, torch.ceil(torch.log2(s)))
    u = s.view(torch.int32)
    e = (u >> 23) + ((u & 0x7FFFFF) != 0).int()
    by_bits = (e.clamp(1, 254) << 23).view(torch.float32)
    pw = (u & 0x7FFFFF) == 0
    say("ok" if torch.equal(by_log, by_bits) else "failed",
        "torch CUDA: pow(2, ceil(log2 s)) is the bits' round-up (%d powers of two among %d)"
        % (int(pw.sum()), s.numel()),
        "%d differ, %d of them powers of two" % (int((by_log != by_bits).sum()),
                                                 int(((by_log != by_bits) & pw).sum())))


# ---------------------------------------------------------------- 2. the engines

def first_import(*names):
    err = None
    for n in names:
        mod, _, attr = n.rpartition(".")
        try:
            return getattr(importlib.import_module(mod), attr)
        except Exception as e:  # ImportError, AttributeError, a CUDA init error
            err = "%s: %s: %s" % (n, e.__class__.__name__, e)
    raise ImportError(err)


def call_any(fn, *tries):
    """fn with the first of the argument sets (args, kwargs) it takes."""
    err = None
    for args, kw in tries:
        try:
            return fn(*args, **kw)
        except TypeError as e:
            err = e
    raise err


def engines(torch):
    """(name, profile args, fn(x cuda bf16) -> (codes, scales), shape filter)."""
    out = []

    def vllm_block(x):
        f = first_import("vllm.utils.deep_gemm.per_block_cast_to_fp8")
        return call_any(f, ((x,), {"use_ue8m0": False}), ((x, [128, 128]), {"use_ue8m0": False}))

    def vllm_tensor(x):
        f = first_import("vllm._custom_ops.scaled_fp8_quant")
        return f(x)

    def vllm_token(x):
        f = first_import("vllm._custom_ops.scaled_fp8_quant")
        return f(x, use_per_token_if_dynamic=True)

    def deepgemm(x):
        f = first_import("deep_gemm.utils.math.per_block_cast_to_fp8",
                         "deep_gemm.utils.per_block_cast_to_fp8")
        return call_any(f, ((x,), {"use_ue8m0": True}), ((x, True), {}))

    def sglang_group(x):
        f = first_import("sglang.srt.layers.quantization.fp8_kernel.sglang_per_token_group_quant_fp8",
                         "sglang.kernels.ops.quantization.fp8_kernel.sglang_per_token_group_quant_fp8")
        return call_any(f, ((x, 128), {}), ((x, 128), {"eps": 1e-10}))

    def sglang_ue8m0(x):
        f = first_import("sglang.srt.layers.quantization.fp8_utils.per_block_cast_to_fp8")
        return call_any(f, ((x,), {}), ((x, True), {}))

    def slime(x):
        f = first_import("slime.utils.fp8_kernel.blockwise_cast_to_fp8_triton",
                         "slime.backends.megatron_utils.kernels.fp8_kernel.blockwise_cast_to_fp8_triton")
        return call_any(f, ((x,), {}), ((x, [128, 128]), {}))

    def prime_rl(x):
        f = first_import("prime_rl.trainer.models.fp8.quantize_to_fp8_blockwise")
        return call_any(f, ((x,), {}), ((x, 128), {}))

    def te_block(x):
        q = first_import("transformer_engine.pytorch.tensor.float8_blockwise_tensor.Float8BlockQuantizer")
        tex = importlib.import_module("transformer_engine_torch")
        t = q(fp8_dtype=tex.DType.kFloat8E4M3, rowwise=True, columnwise=False, amax_epsilon=0.0,
              force_pow_2_scales=False, block_scaling_dim=2)(x)
        m, n = x.shape
        return t._rowwise_data, t._rowwise_scale_inv[:(m + 127) // 128, :(n + 127) // 128]

    def te_tensor(x):
        q = first_import("transformer_engine.pytorch.tensor.float8_tensor.Float8CurrentScalingQuantizer")
        tex = importlib.import_module("transformer_engine_torch")
        t = q(tex.DType.kFloat8E4M3, device=x.device)(x)
        return t._data, t._scale_inv

    every = lambda m, n: True  # noqa: E731
    whole = lambda m, n: m % 128 == 0 and n % 128 == 0  # noqa: E731
    out += [("vllm block", ["--profile", "vllm"], vllm_block, every),
            ("vllm tensor", ["--profile", "vllm", "--scheme", "tensor"], vllm_tensor, every),
            ("vllm per-token", ["--profile", "vllm", "--scheme", "channel", "--format", "modelopt"],
             vllm_token, every),
            ("deepgemm ue8m0", ["--profile", "deepgemm"], deepgemm, every),
            ("sglang per_token_group_quant_8bit", ["--profile", "sglang", "--block", "1x128"],
             sglang_group, lambda m, n: n % 128 == 0),
            ("sglang per_block_cast_to_fp8 (log2, ceil)", ["--profile", "deepgemm"], sglang_ue8m0, every),
            ("slime (Triton)", ["--profile", "slime"], slime, every),
            ("prime-rl", ["--profile", "prime-rl"], prime_rl, whole),
            ("te block (FP32 scales)", ["--profile", "te"], te_block, whole),
            ("te current scaling", ["--profile", "te", "--scheme", "tensor"], te_tensor, every)]
    return out


def main():
    try:
        import torch
    except Exception as e:
        print("torch: not available (import torch: %s: %s)" % (e.__class__.__name__, e))
        return 3
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("torch: not available (torch %s sees no CUDA device)" % torch.__version__)
        return 3
    binary = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FP8CONV") or
              next((p for p in ("./fp8conv", "build/fp8conv") if os.path.exists(p)), "fp8conv"))
    print("torch %s, %s; %s" % (torch.__version__, torch.cuda.get_device_name(0) if DEVICE == "cuda"
                                else "the CPU (a smoke test of this script: torch divides there, "
                                "differences are expected)", binary), flush=True)
    torch_idioms(torch)
    ws = weights(torch)
    with tempfile.TemporaryDirectory(prefix="engines_cuda.") as tmp:
        src = os.path.join(tmp, "in.safetensors")
        write_st(src, {n: ("BF16", list(w.shape), raw(torch, w)) for n, w in ws.items()})
        for k, (name, args, fn, takes) in enumerate(engines(torch)):
            out = os.path.join(tmp, "out-%d.safetensors" % k)
            outs = {}
            try:
                for n, w in ws.items():
                    if takes(*w.shape):
                        q, s = fn(w.to(DEVICE))
                        if DEVICE == "cuda":
                            torch.cuda.synchronize()
                        outs[n] = (raw(torch, q), raw(torch, s.float()))
            except Exception as e:
                say("skipped", name, "%s: %s" % (e.__class__.__name__, str(e).splitlines()[0][:300]
                                                 if str(e) else ""))
                continue
            p = subprocess.run([binary, "quantize", "-q"] + args + [src, out], capture_output=True,
                               text=True)
            if p.returncode != 0:
                say("failed", name, "fp8conv quantize %s: exit %d %s" % (" ".join(args), p.returncode,
                                                                        p.stderr.strip()))
                continue
            got = read_st(out)
            for n, (q, s) in outs.items():
                mine = got[n]
                ms = got.get(n + "_scale_inv") or got.get(n + "_scale")
                codes = sum(x != y for x, y in zip(mine, q)) + abs(len(mine) - len(q))
                scales = sum(ms[i:i + 4] != s[i:i + 4] for i in range(0, max(len(ms), len(s)), 4))
                say("ok" if codes == 0 and scales == 0 else "failed", "%s: %s" % (name, n),
                    "%d of %d codes and %d of %d scales differ from fp8conv quantize %s"
                    % (codes, len(q), scales, len(s) // 4, " ".join(args)))
    print("engines-cuda: %d equal, %d differ, %d skipped" % (results["ok"], results["failed"],
                                                             results["skipped"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
