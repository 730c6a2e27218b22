#!/usr/bin/env python3
"""Generate the small sample checkpoints used by fp8conv's tests.

Usage:
    python3 testdata/gen_samples.py OUTDIR     # writes OUTDIR/llama-tiny and OUTDIR/deepseek-moe-tiny
    python3 testdata/gen_samples.py --verify DIR  # only re-check existing checkpoints under DIR

Needs the exact versions pinned in testdata/requirements.txt (numpy, ml_dtypes, safetensors):
numpy's Generator does not promise the same stream across numpy versions, so other versions may
produce other (equally valid) bytes.

The output is byte-identical on every run: every random draw comes from
numpy.random.default_rng([MODEL_SEED, zlib.crc32(tensor_name)]), so a tensor's values depend only on
the model seed and its own name (adding or removing a tensor never changes another one); there are no
timestamps; JSON is written with a fixed key order (sorted keys for the files transformers writes
with sort_keys=True), indent=2 and a trailing newline. Tensors are written with
safetensors.numpy.save_file(..., metadata={"format": "pt"}), i.e. by the reference writer.

bf16 values are produced as float64 -> float32 -> ml_dtypes.bfloat16 (round to nearest, ties to even).

What makes the weights "look real":
  * each Linear weight [out, in] is normal(0, 1/sqrt(in)) times a per-output-row scale drawn from a
    log-normal distribution (sigma 0.4) clipped to [0.3, 3.0], so row magnitudes differ by up to ~10x;
  * max(2, round(1e-4 * numel)) outliers per matrix (about 0.01 %), with magnitude uniform in
    [20, 100] x 1/sqrt(in) and alternating signs (both signs always present);
  * exactly one all-zero row per checkpoint (a "dead" output channel; see ZERO_ROWS);
  * RMSNorm weights 1 + normal(0, 0.05); DeepSeek's e_score_correction_bias is F32 normal(0, 0.02).
"""

import json
import os
import re
import struct
import sys
import zlib

import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16" dtype; safetensors' np reader needs it)
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

BF16 = ml_dtypes.bfloat16

LLAMA_SEED = 1001
DEEPSEEK_SEED = 2002

# (checkpoint dir, tensor name) -> row index that is all zeros
ZERO_ROWS = {
    ("llama-tiny", "model.layers.0.self_attn.o_proj.weight"): 130,
    ("deepseek-moe-tiny", "model.layers.1.mlp.experts.3.gate_proj.weight"): 7,
}

TRANSFORMERS_VERSION = "4.57.1"  # the string written into config files (as transformers would)


# --------------------------------------------------------------------------------------------
# value generators


def _rng(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def _to_bf16(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).astype(np.float32).astype(BF16))


def linear(seed, model, name, out_features, in_features):
    """A [out, in] weight that looks like a trained one (see module docstring)."""
    rng = _rng(seed, name)
    std = 1.0 / np.sqrt(in_features)
    w = rng.standard_normal((out_features, in_features)) * std
    row_scale = np.clip(np.exp(rng.normal(0.0, 0.4, out_features)), 0.3, 3.0)
    w *= row_scale[:, None]

    zero_row = ZERO_ROWS.get((model, name))
    allowed = np.arange(w.size)
    if zero_row is not None:
        w[zero_row, :] = 0.0
        allowed = allowed[(allowed // in_features) != zero_row]

    n_out = max(2, int(round(1e-4 * w.size)))
    pos = rng.choice(allowed, size=n_out, replace=False)
    mag = rng.uniform(20.0, 100.0, n_out) * std
    sign = np.where(np.arange(n_out) % 2 == 0, 1.0, -1.0)
    w.reshape(-1)[pos] = sign * mag
    return _to_bf16(w)


def rmsnorm(seed, name, n):
    rng = _rng(seed, name)
    return _to_bf16(1.0 + rng.normal(0.0, 0.05, n))


def f32_bias(seed, name, n):
    rng = _rng(seed, name)
    return np.ascontiguousarray(rng.normal(0.0, 0.02, n).astype(np.float32))


# --------------------------------------------------------------------------------------------
# output helpers


def write_json(path, obj, sort_keys=True):
    text = json.dumps(obj, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n"
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def save_shard(path, tensors):
    # safetensors.numpy.save_file passes arr.dtype.name ("bfloat16", "float32") to the Rust
    # serializer, which maps it to "BF16" / "F32"; layout and header are the reference writer's.
    save_file(tensors, path, metadata={"format": "pt"})


# --------------------------------------------------------------------------------------------
# tokenizer (tiny byte-level BPE, trained deterministically on the text below)

_TOKENIZER_TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "A checkpoint is a set of tensors; the weights of a linear layer are stored as a matrix "
    "with one row per output feature and one column per input feature. "
    "Quantization to eight bits stores each weight as a small floating point number and a scale. "
    "The scale of a block is the largest absolute value in the block divided by the largest "
    "number the format can represent. In the beginning there was the word, and the word was "
    "tokenized into bytes, and the bytes were merged into tokens, and the tokens were embedded. "
    "They said that the model would run on the server in the morning, and then it did. "
    "0123456789 10 100 1000 2024 2025 3.14159 2.71828"
)
_N_MERGES = 48
_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>"]


def _bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode mapping (same order as tokenizers uses)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def _train_bpe(text, n_merges, byte_map):
    words = {}
    for piece in re.findall(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+", text):
        sym = tuple(byte_map[b] for b in piece.encode("utf-8"))
        words[sym] = words.get(sym, 0) + 1
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + c
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))  # most frequent, ties: smallest pair
        merges.append(best)
        new_words = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + c
        words = new_words
    return merges


def tokenizer_files():
    pairs = _bytes_to_unicode()
    byte_map = dict(pairs)
    vocab = {}
    for s in _SPECIALS:
        vocab[s] = len(vocab)
    for _, ch in pairs:
        vocab[ch] = len(vocab)
    merges = _train_bpe(_TOKENIZER_TEXT, _N_MERGES, byte_map)
    for a, b in merges:
        assert a in vocab and b in vocab
        if a + b not in vocab:
            vocab[a + b] = len(vocab)

    added = [
        {
            "id": vocab[s],
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for s in _SPECIALS
    ]
    bos = _SPECIALS[0]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": bos, "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}},
        },
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [a + " " + b for a, b in merges],
        },
    }
    tokenizer_config = {
        "added_tokens_decoder": {
            str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added
        },
        "bos_token": _SPECIALS[0],
        "clean_up_tokenization_spaces": True,
        "eos_token": _SPECIALS[1],
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 2048,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    return tokenizer, tokenizer_config, vocab[_SPECIALS[0]], vocab[_SPECIALS[1]]


# --------------------------------------------------------------------------------------------
# llama-tiny: 2 shards + index


def llama_config(bos_id, eos_id):
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 192,
        "initializer_range": 0.02,
        "intermediate_size": 544,
        "max_position_embeddings": 2048,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": 3,
        "num_hidden_layers": 2,
        "num_key_value_heads": 1,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": 1000,
    }


def llama_tensors(cfg):
    """Returns a list of shards, each a dict name -> array, split as transformers would."""
    M, S = "llama-tiny", LLAMA_SEED
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    V = cfg["vocab_size"]

    def layer(i):
        p = f"model.layers.{i}."
        t = {}
        t[p + "input_layernorm.weight"] = rmsnorm(S, p + "input_layernorm.weight", h)
        t[p + "post_attention_layernorm.weight"] = rmsnorm(S, p + "post_attention_layernorm.weight", h)
        for n, o, i_ in (
            ("self_attn.q_proj", nh * hd, h),
            ("self_attn.k_proj", nkv * hd, h),
            ("self_attn.v_proj", nkv * hd, h),
            ("self_attn.o_proj", h, nh * hd),
            ("mlp.gate_proj", inter, h),
            ("mlp.up_proj", inter, h),
            ("mlp.down_proj", h, inter),
        ):
            name = p + n + ".weight"
            t[name] = linear(S, M, name, o, i_)
        return t

    shard1 = {"model.embed_tokens.weight": linear(S, M, "model.embed_tokens.weight", V, h)}
    shard1.update(layer(0))
    shard2 = layer(1)
    shard2["model.norm.weight"] = rmsnorm(S, "model.norm.weight", h)
    shard2["lm_head.weight"] = linear(S, M, "lm_head.weight", V, h)
    return [shard1, shard2]


def write_llama(outdir):
    d = os.path.join(outdir, "llama-tiny")
    os.makedirs(d, exist_ok=True)
    tok, tok_cfg, bos_id, eos_id = tokenizer_files()
    cfg = llama_config(bos_id, eos_id)
    shards = llama_tensors(cfg)
    n = len(shards)
    weight_map, total = {}, 0
    for k, tensors in enumerate(shards, 1):
        fname = f"model-{k:05d}-of-{n:05d}.safetensors"
        save_shard(os.path.join(d, fname), tensors)
        for name, arr in tensors.items():
            assert name not in weight_map
            weight_map[name] = fname
            total += arr.nbytes
    index = {
        "metadata": {"total_size": total},
        "weight_map": {k: weight_map[k] for k in sorted(weight_map)},
    }
    write_json(os.path.join(d, "model.safetensors.index.json"), index)
    write_json(os.path.join(d, "config.json"), cfg)
    write_json(
        os.path.join(d, "generation_config.json"),
        {
            "bos_token_id": bos_id,
            "do_sample": True,
            "eos_token_id": eos_id,
            "temperature": 0.6,
            "top_p": 0.9,
            "transformers_version": TRANSFORMERS_VERSION,
        },
    )
    # tokenizers writes tokenizer.json in its own fixed field order (not sorted).
    write_json(os.path.join(d, "tokenizer.json"), tok, sort_keys=False)
    write_json(os.path.join(d, "tokenizer_config.json"), tok_cfg)


# --------------------------------------------------------------------------------------------
# deepseek-moe-tiny: one model.safetensors, no index


def deepseek_config():
    return {
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
        "intermediate_size": 480,
        "kv_lora_rank": 64,
        "max_position_embeddings": 163840,
        "model_type": "deepseek_v3",
        "moe_intermediate_size": 96,
        "moe_layer_freq": 1,
        "n_group": 1,
        "n_routed_experts": 4,
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
        "seq_aux": True,
        "tie_word_embeddings": False,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "torch_dtype": "bfloat16",
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "v_head_dim": 32,
        "vocab_size": 1000,
    }


def deepseek_tensors(cfg):
    M, S = "deepseek-moe-tiny", DEEPSEEK_SEED
    h, V = cfg["hidden_size"], cfg["vocab_size"]
    nh = cfg["num_attention_heads"]
    qr, kvr = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    inter, moe = cfg["intermediate_size"], cfg["moe_intermediate_size"]
    E = cfg["n_routed_experts"]
    shared = moe * cfg["n_shared_experts"]

    t = {}

    def lin(name, o, i_):
        t[name] = linear(S, M, name, o, i_)

    def norm(name, n):
        t[name] = rmsnorm(S, name, n)

    def mlp(prefix, width):
        lin(prefix + "gate_proj.weight", width, h)
        lin(prefix + "up_proj.weight", width, h)
        lin(prefix + "down_proj.weight", h, width)

    lin("model.embed_tokens.weight", V, h)
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        norm(p + "input_layernorm.weight", h)
        norm(p + "post_attention_layernorm.weight", h)
        lin(p + "self_attn.q_a_proj.weight", qr, h)
        norm(p + "self_attn.q_a_layernorm.weight", qr)
        lin(p + "self_attn.q_b_proj.weight", nh * (nope + rope), qr)
        lin(p + "self_attn.kv_a_proj_with_mqa.weight", kvr + rope, h)
        norm(p + "self_attn.kv_a_layernorm.weight", kvr)
        lin(p + "self_attn.kv_b_proj.weight", nh * (nope + vd), kvr)
        lin(p + "self_attn.o_proj.weight", h, nh * vd)
        if L < cfg["first_k_dense_replace"]:
            mlp(p + "mlp.", inter)
        else:
            lin(p + "mlp.gate.weight", E, h)
            t[p + "mlp.gate.e_score_correction_bias"] = f32_bias(
                S, p + "mlp.gate.e_score_correction_bias", E
            )
            for e in range(E):
                mlp(p + f"mlp.experts.{e}.", moe)
            mlp(p + "mlp.shared_experts.", shared)
    norm("model.norm.weight", h)
    lin("lm_head.weight", V, h)
    return t


def write_deepseek(outdir):
    d = os.path.join(outdir, "deepseek-moe-tiny")
    os.makedirs(d, exist_ok=True)
    cfg = deepseek_config()
    save_shard(os.path.join(d, "model.safetensors"), deepseek_tensors(cfg))
    write_json(os.path.join(d, "config.json"), cfg)


# --------------------------------------------------------------------------------------------
# verification (safetensors' own reader + an independent look at the header)

_DTYPE_BYTES = {"BF16": 2, "F32": 4}


def _check_file(path):
    """Returns {name: (dtype, shape, nbytes)}; raises AssertionError on any problem."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, f"{path}: header length {n} not a multiple of 8"
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    assert list(header)[0] == "__metadata__", f"{path}: __metadata__ not first"
    assert header["__metadata__"] == {"format": "pt"}, f"{path}: bad __metadata__"
    buf_len = len(raw) - 8 - n
    end = 0
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert list(e) == ["dtype", "shape", "data_offsets"], f"{path}: {name}: key order"
        b, f = e["data_offsets"]
        assert b == end, f"{path}: {name}: gap or overlap"
        nbytes = int(np.prod(e["shape"], dtype=np.int64)) * _DTYPE_BYTES[e["dtype"]]
        assert f - b == nbytes, f"{path}: {name}: size mismatch"
        end = f
        out[name] = (e["dtype"], e["shape"], nbytes)
    assert end == buf_len, f"{path}: data buffer not covered exactly"

    with safe_open(path, framework="np") as sf:
        assert sf.metadata() == {"format": "pt"}
        assert sorted(sf.keys()) == sorted(out)
        for name in sf.keys():
            arr = sf.get_tensor(name)  # needs ml_dtypes imported for BF16
            sl = sf.get_slice(name)
            assert sl.get_dtype() == out[name][0], name
            assert list(arr.shape) == list(out[name][1]), name
            assert arr.nbytes == out[name][2], name
            assert np.all(np.isfinite(arr.astype(np.float32))), name
    return out


def verify(root):
    report = []
    for model in ("llama-tiny", "deepseek-moe-tiny"):
        d = os.path.join(root, model)
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        assert files, f"{d}: no .safetensors files"
        per_file = {f: _check_file(os.path.join(d, f)) for f in files}
        seen = {}
        for f, tensors in per_file.items():
            for name in tensors:
                assert name not in seen, f"{name} in both {seen[name]} and {f}"
                seen[name] = f
        total = sum(v[2] for t in per_file.values() for v in t.values())
        idx_path = os.path.join(d, "model.safetensors.index.json")
        if os.path.exists(idx_path):
            index = json.load(open(idx_path))
            assert index["metadata"]["total_size"] == total, "total_size mismatch"
            wm = index["weight_map"]
            assert list(wm) == sorted(wm), "weight_map not sorted"
            assert wm == seen, "index weight_map does not match the shards (both ways)"
        else:
            assert files == ["model.safetensors"], f"{d}: several files but no index"
        for j in sorted(f for f in os.listdir(d) if f.endswith(".json")):
            json.load(open(os.path.join(d, j), encoding="utf-8"))
        report.append(f"{model}: {len(seen)} tensors in {len(files)} file(s), {total} data bytes: OK")
    return report


# --------------------------------------------------------------------------------------------


def main(argv):
    if len(argv) == 3 and argv[1] == "--verify":
        for line in verify(argv[2]):
            print(line)
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print(f"usage: {argv[0]} OUTDIR | --verify DIR", file=sys.stderr)
        return 2
    out = argv[1]
    write_llama(out)
    write_deepseek(out)
    for line in verify(out):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
