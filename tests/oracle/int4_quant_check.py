#!/usr/bin/env python3
"""fp8conv quantize --scheme int4 judged by compressed-tensors' own code (issue 42 item 5).

For bf16, f16 and f32 models and --group 128 and 32: fp8conv writes the
checkpoint; compressed-tensors 0.19.0 quantizes the same weights as
llm-compressor's W4A16 preset does (per-group amin/amax, calculate_qparams,
PackedQuantizationCompressor.compress) and must give the same bytes
(weight_packed, weight_scale, weight_shape); its decompressor reads
fp8conv's tensors into the bytes it decompresses from its own; the
quantization_config parses as QuantizationConfig and ModelCompressor takes it.
A weight whose K is not a multiple of G stays unquantized (with a warning).

usage: build/venv-int4/bin/python tests/oracle/int4_quant_check.py FP8CONV WORKDIR
"""
import json
import os
import subprocess
import sys

import torch
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.config import CompressionFormat
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
from compressed_tensors.quantization import QuantizationConfig
from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme
from compressed_tensors.quantization.utils.helpers import calculate_qparams
from safetensors.torch import load_file, save_file

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def scheme(group):
    s = preset_name_to_scheme("W4A16", ["Linear"])
    s.weights.group_size = group
    return s


def ct_compress(x, group):
    sch = scheme(group)
    rows, cols = x.shape
    xg = x.reshape(rows, cols // group, group)
    scale, zp = calculate_qparams(torch.amin(xg, dim=-1), torch.amax(xg, dim=-1), sch.weights)
    return PackedQuantizationCompressor.compress(
        {"weight": x, "weight_scale": scale, "weight_zero_point": zp}, sch), sch


def raw(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def main():
    fp8conv, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    g = torch.Generator().manual_seed(4242)
    for dtype, dname in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16"),
                         (torch.float32, "float32")):
        model = os.path.join(work, f"in-{dname}")
        os.makedirs(model, exist_ok=True)
        w = {}
        for i, (n, k) in enumerate(((256, 512), (128, 256), (64, 384))):
            x = torch.randn(n, k, generator=g) * 0.02
            x[:, 5] *= 30
            x[1, :] = 0  # all-zero groups: the dtype's eps
            w[f"model.layers.0.mlp.p{i}.weight"] = x.to(dtype)
        w["model.layers.0.mlp.odd.weight"] = (torch.randn(64, 96, generator=g)).to(dtype)
        w["model.norm.weight"] = torch.ones(64, dtype=dtype)
        save_file(w, os.path.join(model, "model.safetensors"))
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                       "torch_dtype": dname, "hidden_size": 64}, f)
        for group in (128, 32):
            out = os.path.join(work, f"out-{dname}-{group}")
            cmd = [fp8conv, "quantize", "--scheme", "int4", "--force", "-q", model, out]
            if group != 128:
                cmd[2:2] = ["--group", str(group)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            check(r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode} {r.stderr}")
            if r.returncode:
                continue
            got = load_file(os.path.join(out, "model.safetensors"))
            deq = out + "-deq"
            short = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}[dname]
            r = subprocess.run([fp8conv, "dequantize-for-export", "--force", "-q", "--dtype", short,
                                out, deq], capture_output=True, text=True)
            check(r.returncode == 0, f"dequantize-for-export {out}: exit {r.returncode} {r.stderr}")
            back = load_file(os.path.join(deq, "model.safetensors")) if r.returncode == 0 else {}
            check(sorted(back) == sorted(w) or not back, f"{deq}: tensors {sorted(back)}")
            r = subprocess.run([fp8conv, "verify", out], capture_output=True, text=True)
            check(r.returncode == 0, f"verify {out}: exit {r.returncode} {r.stdout} {r.stderr}")
            cfg = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
            qc = QuantizationConfig.model_validate(cfg)
            wa = qc.config_groups["group_0"].weights
            check(qc.format == "pack-quantized" and wa.group_size == group and
                  wa.num_bits == 4 and wa.type == "int" and wa.symmetric and
                  wa.strategy == "group" and not wa.dynamic, f"{out}: config {cfg}")
            ModelCompressor(quantization_config=qc)  # takes it, as transformers' loader does
            check(CompressionFormat(qc.format) == CompressionFormat.pack_quantized and
                  CompressionFormat(qc.config_groups["group_0"].format) ==
                  CompressionFormat.pack_quantized, f"{out}: format {qc.format}")
            for name, x in w.items():
                stem = name[: -len(".weight")]
                if x.dim() != 2 or x.shape[1] % group or "norm" in name:
                    check(name in got and raw(got[name]) == raw(x), f"{out}: {name} kept")
                    continue
                comp, sch = ct_compress(x, group)
                for key in ("weight_packed", "weight_scale", "weight_shape"):
                    t = got.get(f"{stem}.{key}")
                    check(t is not None and t.dtype == comp[key].dtype and
                          t.shape == comp[key].shape and raw(t) == raw(comp[key]),
                          f"{out}: {stem}.{key} differs from compressed-tensors'")
                mine = {k: got[f"{stem}.{k}"] for k in ("weight_packed", "weight_scale",
                                                         "weight_shape")}
                dec = PackedQuantizationCompressor.decompress(mine, sch)["weight"]
                ref = PackedQuantizationCompressor.decompress(comp, sch)["weight"]
                check(dec.dtype == x.dtype and raw(dec) == raw(ref),
                      f"{out}: {stem} decompressed differs")
                check(name in back and raw(back[name]) == raw(ref),
                      f"{out}: {name} dequantize-for-export differs from the decompressor's")
    # convert refuses INT4 (lossy), exit 3; --version says INT4 runs on the CPU only
    src = os.path.join(work, "out-bfloat16-32")
    r = subprocess.run([fp8conv, "convert", "--force", src, os.path.join(work, "conv")],
                       capture_output=True, text=True)
    check(r.returncode == 3 and "lossy" in r.stderr, f"convert {src}: {r.returncode} {r.stderr}")
    r = subprocess.run([fp8conv, "--version"], capture_output=True, text=True)
    check("int4: cpu only" in r.stdout, f"--version: {r.stdout}")
    # verify's structure rules on damaged copies of one output
    import shutil
    src = os.path.join(work, "out-bfloat16-32")
    stem = "model.layers.0.mlp.p0"
    for what, value, rule in (("nan", float("nan"), "bad-scale"), ("zero", 0.0, "bad-scale"),
                              ("neg", -1.0, "bad-scale"), ("inf", float("inf"), "bad-scale"),
                              ("shape", None, "weight_shape")):
        bad = os.path.join(work, f"bad-{what}")
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(src, bad)
        t = load_file(os.path.join(bad, "model.safetensors"))
        if value is None:
            t[f"{stem}.weight_shape"] = torch.tensor([256, 513])
        else:
            t[f"{stem}.weight_scale"][3, 1] = value
        save_file(t, os.path.join(bad, "model.safetensors"))
        r = subprocess.run([fp8conv, "verify", bad], capture_output=True, text=True)
        check(r.returncode != 0 and rule in r.stdout + r.stderr,
              f"verify {bad}: exit {r.returncode}, wanted {rule}: {r.stdout} {r.stderr}")
        r = subprocess.run([fp8conv, "dequantize-for-export", "--force", "-q", bad, bad + "-deq"],
                           capture_output=True, text=True)
        check(r.returncode != 0, f"dequantize-for-export {bad}: exit {r.returncode}")
    print(f"int4-quant: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
