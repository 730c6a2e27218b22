"""The kind of script fp8conv replaces: a DeepSeek-style FP8 block quantizer
in PyTorch.  One shard at a time in memory; every 2-D `.weight` except the
embeddings, norms and lm_head becomes E4M3 codes with one fp32 scale per
128 x 128 block (amax / 448, stored as `weight_scale_inv`); the rest is
copied; config.json gets the `fp8` quantization_config.

usage: torch_block.py SRC DST
"""
import json
import os
import shutil
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file

B = 128


def quantize(w):
    m, n = w.shape
    x = torch.nn.functional.pad(w.float(), (0, -n % B, 0, -m % B))
    blocks = x.view(x.shape[0] // B, B, x.shape[1] // B, B)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / 448.0
    q = (blocks / scale[:, None, :, None]).view(x.shape)[:m, :n]
    return q.to(torch.float8_e4m3fn).contiguous(), scale


def quantized(name, t):
    return (t.dim() == 2 and name.endswith(".weight")
            and not any(k in name for k in ("embed", "norm", "lm_head")))


def main(src, dst):
    torch.set_num_threads(os.cpu_count())
    os.makedirs(dst)
    weight_map = {}
    for f in sorted(os.listdir(src)):
        if not f.endswith(".safetensors"):
            if f not in ("config.json", "model.safetensors.index.json"):
                shutil.copy(os.path.join(src, f), dst)
            continue
        out = {}
        with safe_open(os.path.join(src, f), "pt") as shard:
            for name in shard.keys():
                t = shard.get_tensor(name)
                if quantized(name, t):
                    out[name], out[name + "_scale_inv"] = quantize(t)
                else:
                    out[name] = t
        save_file(out, os.path.join(dst, f), metadata={"format": "pt"})
        weight_map.update({name: f for name in out})
    if os.path.exists(os.path.join(src, "model.safetensors.index.json")):
        with open(os.path.join(dst, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {}, "weight_map": weight_map}, fh, indent=2)
    with open(os.path.join(src, "config.json")) as fh:
        config = json.load(fh)
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                     "activation_scheme": "dynamic",
                                     "weight_block_size": [B, B]}
    with open(os.path.join(dst, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)


if __name__ == "__main__":
    main(*sys.argv[1:3])
