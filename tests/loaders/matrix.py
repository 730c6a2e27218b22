#!/usr/bin/env python3
"""make check-loaders: every scheme x format pair fp8conv writes, for every test model, judged by
the programs that load it (vLLM's CPU build, transformers, compressed-tensors,
sentence-transformers), and verify's prediction held against what they did.

Usage: python tests/loaders/matrix.py [--fp8conv build/fp8conv] [--work build/loaders]
                                      [--models llama,...] [--pairs block/hf-fp8,...]
                                      [--no-tp] [--no-convert] [--releases qwen3-fp8,...]
                                      [--off-block llama-i192,...]
                                      [--readme README.md [--update-readme]]
Environment: FP8CHECK_AMX=auto|off|on, which of vLLM's CPU FP8 kernels run (vllm_check.py).

For each model (tests/loaders/make_models.py) and pair:
  1. fp8conv quantize --json; a refusal must be exit 2 or 3 with a message naming the loader rule;
  2. fp8conv verify --json: which loaders it says load the output;
  3. fp8conv dequantize-for-export: the bf16 export, the weights fp8conv means;
  4. vllm_check.py (weights vLLM loads and computes with vs the export, prompt logprobs vs the
     export's) and hf_check.py (transformers default load, transformers dequantizing,
     compressed-tensors' own decompression, sentence-transformers on MiniLM);
  5. each cell gets one verdict (see VERDICTS); the run fails on any cell where fp8conv wrote a
     checkpoint that verify passes and a loader fails or computes other weights, and on any
     cell where verify's prediction for vLLM or transformers differs from what they did.
Then the negative controls (NEGATIVE_CASES: a doubled scale must fail), the tensor-parallel
cases (TP_CASES): vLLM at TP=2 against verify --tp 2; and
fp8conv convert's outputs (CONVERT_CASES), each judged like a cell (and at TP=2 where given),
the exact ones also required to keep every value (diff --dequant against their source).
Then the merged-parts-off-the-block cases (OFF_BLOCK_CASES): llama with an MLP width off the
128-row block, block/hf-fp8, at TP 1: verify must refuse it, and vLLM must be seen to fail it the
way its loader does (a load error, or exactly the up rows it mis-scales).
Then the release stage (RELEASE_CASES): copies of the release corpus (testdata/releases), layouts
fp8conv reads but does not write (Qwen3's BF16 and F16 block scales, Mistral's per-tensor
weight_scale_inv + activation_scale, ModelOpt declared only in hf_quant_config.json, ModelOpt
with KV-cache scales), each copied as it is to WORK/releases and judged like a cell: verify --json,
dequantize-for-export, vllm_check.py and hf_check.py, judge(); the copies with KV-cache scales must
also have them in vLLM's attention layers, as loaded and as computed with (kv_scale_problems).
A loader condition verify names (LOADER_CONDITIONS: a vLLM option, a GPU, remote code) is applied
or recognised, not counted against verify.
Then the INT4 cases (INT4_CASES): quantize --scheme int4 --group G, judged like a cell, with a
negative control (its o_proj weight_scale x2).
--models '' --no-tp --no-convert --off-block '' runs the release stage alone; --models ''
--no-tp --no-convert --releases '' the off-block cases alone; --releases '' leaves it out;
--models llama --pairs '' --no-tp --no-convert --releases '' --off-block '' the INT4 cases alone.
The matrix is written to WORK/matrix.md (and .json); with --readme, a README copy (between the
loaders-matrix markers) that differs is said (not failed), or rewritten with --update-readme.
Exit 0 when every cell is consistent, 1 otherwise, 2 on a harness error."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable
sys.path.insert(0, HERE)
import forkserver  # noqa: E402
import vllm_check  # noqa: E402  (its criteria and known kernel bugs; vLLM is not imported)

PAIRS = [("block", "hf-fp8"), ("block", "compressed-tensors"), ("channel", "compressed-tensors"),
         ("channel", "modelopt"), ("tensor", "hf-fp8"), ("tensor", "compressed-tensors"),
         ("tensor", "modelopt"), ("mxfp8", "compressed-tensors"), ("mxfp8", "modelopt")]
MODELS = ["llama", "qwen3moe", "mixtral", "deepseek", "minilm"]
# (model, scheme, format, tp): llama's 2 KV heads of 64 give k/v partitions of 64 rows at TP=2,
# which 128-row blocks cannot tile; qwen3moe's 4 KV heads give 128.
TP_CASES = [("llama", "block", "hf-fp8", 2), ("qwen3moe", "block", "hf-fp8", 2),
            ("llama", "channel", "compressed-tensors", 2)]

# (model, the cell converted, convert's options, tp): re-blocking 128x128 to 64x64 makes
# qwen3moe's 64-row partitions at TP=2 tileable; relabelling is exact; a scheme change goes
# through the values.
CONVERT_CASES = [("qwen3moe", ("block", "hf-fp8"), ["--exact", "--block", "64x64"], 2),
                 ("llama", ("block", "hf-fp8"), ["--exact", "--block", "64x64"], 2),
                 ("llama", ("block", "hf-fp8"), ["--exact", "--format", "compressed-tensors"], None),
                 ("llama", ("channel", "compressed-tensors"), ["--exact", "--format", "modelopt"], None),
                 ("llama", ("block", "hf-fp8"), ["--scheme", "channel"], None)]

# INT4 weight-only (issue 42 item 5: compressed-tensors pack-quantized, W4A16, as
# `quantize --scheme int4 --group G` writes it): (model, group), each a cell named
# "int4-gG/compressed-tensors", judged as the pairs are. vLLM 0.32's CPU build runs it:
# compressed_tensors_wNa16.py CompressedTensorsWNA16 takes choose_mp_linear_kernel's
# CPUWNA16LinearKernel (kernels/linear/mixed_precision/cpu.py: uint4b8, an even group, both
# partition sizes multiples of 32; cpu_gemm_wna16, no AMX needed), and vllm_check.py's
# Probe.int4_linear decodes the loaded weight_packed / weight_scale with compressed-tensors'
# own unpacker. MoE experts (Kimi-K2-Thinking's INT4 layout: routed experts, group 32): vLLM
# refuses them on this CPU ("No WNA16 MoE backend supports the deployment configuration.",
# fused_moe/oracle/int_wna16.py select_wna16_moe_backend): its CPU backends are ZEN_CPU
# (ZentorchExpertsInt4: AMD's zentorch ops) and CPU (CPUExpertsInt4, fused_moe/experts/cpu_moe.py:
# x86 with AMX tiles, and QuantKey kInt4Static only, which compressed_tensors_moe_wna16.py gives
# every group but 32: group 32 is kInt4Static32). vllm_check.py's stand-in run lifts those two
# gates of CPUExpertsInt4 and checks what vLLM's weight loaders put in the experts (and, where its
# kernel then runs, the generation): the cell says "no kernel here" with both. qwen3moe without
# the transformers checks (vLLM is the judge here; ~45 s). About 25 s a llama cell.
INT4_CASES = [("llama", 32, True), ("llama", 128, True), ("qwen3moe", 32, False)]
INT4_MOE_GATES = ("vLLM's CPU INT4 MoE backends are CPUExpertsInt4 (x86 with AMX tiles only; "
                  "QuantKey kInt4Static only, group 32 being kInt4Static32) and "
                  "ZentorchExpertsInt4 (AMD's zentorch ops)")

# Negative controls: (model, cell): the cell's checkpoint with layer 0's o_proj scale x2
# (vllm_check.py --break-scale), judged against the export of the unbroken one. vLLM must be
# judged "fails" with that layer bad, whatever kernels this CPU has: the known kernel bugs the
# judgement forgives (vllm_check.AMX_DECODE_BUG) must not hide a wrong scale.
NEGATIVE_CASES = [("llama", ("block", "hf-fp8")), ("llama", ("int4-g32", "compressed-tensors"))]

# Merged parts off the block (issue 24, GLM-4.5-Air-FP8's dense layer 0: intermediate_size 10944 =
# 85.5 blocks of 128): (model, what vLLM 0.32 must be seen to do). The model (make_models.py) is
# llama with an MLP width off the block, quantized block/hf-fp8 (128x128; quantize writes it with a
# warning), judged at TP 1 by vllm_check.py alone (no transformers; ~20 s and ~45 s here).
# vLLM no longer refuses it up front: linear.py LinearBase._maybe_allow_fp8_block_shape_mismatch
# sets allow_fp8_block_shape_mismatch for a merged layer with any part off block_n, and
# fp8_utils.py validate_fp8_block_shape then returns without checking. The merged block-scale
# parameter has ceil(sum(parts)/128) rows (fp8_utils.py create_fp8_scale_parameter), and
# MergedColumnParallelLinear.weight_loader_v2 puts part j's scale rows at
# adjust_block_scale_shard's ceil(offset_j/128), ceil(part_j/128) (linear.py), while the kernel
# applies merged scale row r to merged weight rows [128r, 128r+128). So:
#  * "error": I = 192 (GLM's half block): 3 scale rows, up's 2 rows go at row 2: the load fails
#    in parameter.py _ColumnvLLMParameter.load_merged_column_weight (narrow out of range). GLM-4.5-
#    Air at TP 1 the same: 171 rows, up's 86 at row 86.
#  * "rows": I = 200: 4 scale rows, up's at rows 2-3: it loads, and up's rows 0-55 (merged
#    200-255) get gate's second block scale, its rows 128-183 (merged 328-383) up's first one.
# verify refuses both (rule tp), and must: the case fails when vLLM stops doing this.
OFF_BLOCK_CASES = [
    ("llama-i192", {"error": "exceeds dimension size"}),
    ("llama-i200", {"rows": "200-255,328-383"}),
]

# The release corpus (testdata/releases, testdata/gen_releases.py): tiny copies of public FP8
# releases, in layouts fp8conv reads but does not write. (family, what it exercises, options):
# "kv": the copy has KV-cache scales, which vLLM must load into its attention layers;
# "text": a multimodal architecture without its vision tower, served as a text model (vLLM's
# language_model_only; its multimodal processor wants a tokenizer the copy does not keep), and not
# given to hf_check.py: transformers builds Mistral3ForConditionalGeneration whole, with a
# default-size Pixtral vision tower and projector that the copy (and so the export) lacks,
# randomly initialized (about 100 s here), and its verdicts are then about those tensors. (Run
# once by hand, transformers 5.19: every language_model tensor of both its loads, default and
# FineGrainedFP8Config(dequantize=True), was bit-equal to the export; only the vision tower and
# projector differed.)
RELEASE_CASES = [
    ("qwen3-fp8", "hf-fp8 128x128, BF16 weight_scale_inv", ()),
    ("qwen3-4b-instruct-2507-fp8", "hf-fp8 128x128, F16 weight_scale_inv, tied embeddings", ()),
    ("mistral-fp8", "quant_method fp8 per-tensor: weight_scale_inv [] + activation_scale [], "
                    "under language_model.", ("text",)),
    ("modelopt-fp8-old", "ModelOpt, declared only in hf_quant_config.json, with KV-cache scales",
     ("kv",)),
    ("modelopt-fp8", "ModelOpt with KV-cache scales k_proj.k_scale / v_proj.v_scale", ("kv",)),
    # Issue 44's families. None has a kernel in vLLM's CPU build: each is judged "kernel" (weights
    # ok, no kernel here) when vLLM's own loaders, with vllm_check.py's stand-ins for what this CPU
    # lacks (STAND_INS: the kernel and vLLM's reason), fill every layer bit-exact to the export.
    # verify's conditions (LOADER_CONDITIONS) are applied and judged. About 20 s, 10 s and 11 s
    # here. deepseek-v3.2-exp (about 17 s): its q_lora_rank and kv_lora_rank are 128 (multiples of
    # the block, as the release's 1536 and 512; with q_lora_rank 64 vLLM mis-scales
    # fused_qkv_a_proj rows 64-127, which verify names: fp8conv-formats(5), DeepSeek-V3.2-Exp),
    # and so is its hidden size (128; it was 136: vLLM 0.32 dequantizes an FP8 indexer.wk with a
    # group it derives as shape // scale shape, models/deepseek_v2.py _try_load_fp8_indexer_wk,
    # there 128 x 68, 109 ulp off the export; verify names that, indexer-wk-block). Its stand-ins:
    # the sparse attention backend and the indexer's KV-cache block size (STAND_INS); vLLM's
    # fused, unquantized indexer.wk_weights_proj (wk's rows, then weights_proj's) is compared with
    # the export's two weights stacked so (vllm_check.py Probe.packed). No KV-cache scales.
    # Not cases: mistral-native-fp8, which fp8conv refuses, and Granite-4.0-H, planted at run
    # time by check_releases.py. modelopt-mixed's KV-cache
    # scales ("kv") were not loaded by vLLM 0.32 from the copy's former flat config.json
    # (kv_cache_quant_algo); its config.json has ModelOpt's kv_cache_scheme since (s53, as
    # ModelOpt's export writes it: fp8conv-formats(5), ModelOpt mixed precision), and vLLM loads
    # them (run by hand 2026-11-29: k_scale/v_scale equal the checkpoint's, 22 s).
    ("fbgemm-fp8", "fbgemm_fp8: per-row F32 weight_scale [out, 1], modules_to_not_convert", ()),
    ("modelopt-mixed", "ModelOpt MIXED_PRECISION: FP8 attention, NVFP4 MLP, FP8 KV cache", ("kv",)),
    ("kimi-k2-thinking", "compressed-tensors INT4 pack-quantized routed experts, kimi_k2", ()),
    ("deepseek-v3.2-exp", "hf-fp8 128x128 MLA with the sparse-attention indexer (wq_b, wk FP8; "
                          "weights_proj bf16)", ()),
]
RELEASES = os.path.join(ROOT, "testdata", "releases")


def markers(block):
    return "<!-- %s:begin -->" % block, "<!-- %s:end -->" % block


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def first_line(text):
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[0].strip() if lines else ""


def short_error(err):
    """The exception's type and first line: what a user would search for."""
    return first_line(err)[:240]


class Cell:
    def __init__(self, model, scheme, fmt):
        self.model, self.scheme, self.fmt = model, scheme, fmt
        self.quantize = None      # "written" | "refused"
        self.message = ""         # fp8conv's refusal, or its warnings
        self.verify = {}          # loader -> bool
        self.conditions = {}      # loader -> the condition verify names (LOADER_CONDITIONS)
        self.verify_errors = 0
        self.vllm = None          # verdict, see judge_vllm
        self.vllm_note = ""
        self.hf = {}              # check -> "ok" | "fail: ..." | None
        self.problems = []
        self.converted = None     # convert cells: "from scheme/format with options"
        self.release = False      # a release copy (RELEASE_CASES): fmt says its layout
        self.options = None       # quantize's layout options, when not --scheme S --format F

    def key(self):
        if self.release:
            return "release %s" % self.model
        return "%s %s/%s" % (self.model, self.scheme, self.fmt)


def decode_bug_note(w):
    """The note for layers whose only difference is vLLM's AMX kernel's E4M3 decoding."""
    c = w.get("kernel_decode_bug_counts") or {}
    return ("loader bug, %s: %d layers, %d elements (%d subnormal codes, %d zeros; codes %s), "
            "every other element exact" % (
                vllm_check.AMX_DECODE_BUG, len(w["kernel_decode_bug"]), c.get("elements", 0),
                c.get("subnormal_elements", 0), c.get("zero_elements", 0),
                ", ".join(sorted(c.get("codes", {})))))


def judge_vllm(r):
    """-> (verdict, note). Verdicts: "ok" (loads, weights equal the export, generation agrees),
    "loader-bug" (ok, but for layers whose kernel computes with other values than the weights it
    loaded bit-exact, exactly where a known kernel bug says: vllm_check.AMX_DECODE_BUG),
    "kernel" (the CPU build lacks a kernel, or has one that cannot run the model, named by its
    exact error; the weights it loaded were checked and are right),
    "fails" (refuses the checkpoint, or computes other weights)."""
    w = r.get("weights") or {}
    weights_ok = bool(w.get("layers")) and not w.get("bad")
    err = r.get("missing_kernel") or r.get("error")
    if r.get("ok"):
        return ("loader-bug", decode_bug_note(w)) if w.get("kernel_decode_bug") else ("ok", "")
    if w.get("bad"):  # it loaded (perhaps with stand-in kernels) and holds other weights
        return "fails", "weights differ: %s" % json.dumps(
            {k: w.get(k) for k in ("layers", "exact", "max_ulp", "bad")})
    past = r.get("refused_past_missing_kernel")
    if past:  # with stand-ins for the kernels this CPU lacks, vLLM still refused
        return "fails", short_error(past.get("error"))
    if (r.get("kernel_unavailable") or r.get("missing_kernel")) and weights_ok:
        # what stood in for what this CPU lacks, with vLLM's own reason (vllm_check.py STAND_INS)
        si = (r.get("emulated") or {}).get("stand_ins") or []
        si = "; stand-ins: " + "; ".join("%s (vLLM: %s)" % (x["kernel"], x["why"]) for x in si) \
            if si else ""
        si = ("; " + r["kernel_why"] if r.get("kernel_why") else "") + si
        if r.get("kernel_limit"):
            return "kernel", "the kernel cannot run it: " + short_error(r["kernel_limit"]) + si
        return "kernel", short_error(err) + si
    return "fails", short_error(err) or "weights or generation differ: %s" % json.dumps(
        {"weights": {k: w.get(k) for k in ("layers", "exact", "max_ulp", "bad")},
         "generation": (r.get("generation") or {}).get("pass")})


# sentence-transformers 6.2 calls the model's forward directly, skipping the pre-hook in which
# compressed-tensors decompresses (hf_check.py: known_library_issue): every compressed-tensors
# checkpoint fails there as is, and encodes right with CompressedTensorsConfig(dequantize=True).
ST_WORKAROUND_COS = 0.999


def st_workaround(c):
    m = c.get("model") or {}
    cos = (c.get("cos_model_dequantize_no_act_quant_export") or {}).get("min")
    if m.get("known_library_issue") and cos is not None and float(cos) >= ST_WORKAROUND_COS:
        return "library bug: %s; with model_kwargs quantization_config=" \
               "CompressedTensorsConfig(dequantize=True) it encodes as the export does" % short_error(
                   m.get("error"))
    return None


def hf_verdicts(r):
    out = {}
    for name, c in (r.get("checks") or {}).items():
        if c is None:
            continue
        if c.get("ok"):
            out[name] = "ok"
        elif name == "sentence_transformers" and st_workaround(c):
            out[name] = "workaround: " + st_workaround(c)
        elif c.get("applicable") is False:  # no such load to ask for (hf_check.py): not judged
            out[name] = "not applicable: " + short_error(c.get("error"))
        else:
            out[name] = "fail: " + short_error(c.get("error") or json.dumps(c)[:200])
    return out


def quantize_cell(a, cell, src, q):
    shutil.rmtree(q, ignore_errors=True)
    opts = cell.options or ["--scheme", cell.scheme, "--format", cell.fmt]
    r = run([a.fp8conv, "quantize", "--json"] + opts + [src, q])
    if r.returncode != 0:
        cell.quantize = "refused"
        cell.message = first_line(r.stderr).replace("fp8conv: ", "", 1)
        if r.returncode not in (2, 3) or "vLLM" not in r.stderr:
            cell.problems.append("refused with exit %d without naming the loader rule: %s"
                                 % (r.returncode, r.stderr.strip()))
        return False
    cell.quantize = "written"
    cell.message = "; ".join(json.loads(r.stdout).get("warnings", []))
    return True


def verify_cell(a, cell, q, tp=None):
    cmd = [a.fp8conv, "verify", "--json"] + (["--tp", str(tp)] if tp else []) + [q]
    r = run(cmd)
    if r.returncode not in (0, 1):
        raise SystemExit("harness: %s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr))
    v = json.loads(r.stdout)
    return {l["name"]: l["loads"] for l in v["loaders"]}, v["errors"], v


def export(a, q, e):
    shutil.rmtree(e, ignore_errors=True)
    r = run([a.fp8conv, "dequantize-for-export", "-q", q, e])
    if r.returncode != 0:
        raise SystemExit("harness: dequantize-for-export %s: %s" % (q, r.stderr))


JUDGES = {}  # script: forkserver.Judge


def checker(script, args, out):
    judge = JUDGES.setdefault(script, forkserver.Judge(os.path.join(HERE, script)))
    log = out + ".log"
    rc = judge.run(args + ["--json", out], log)
    if rc != 0 or not os.path.exists(out):
        raise SystemExit("harness: %s %s failed (%s):\n%s" % (script, " ".join(args), rc,
                                                               forkserver.tail(log)))
    with open(out) as f:
        return json.load(f)


AMX_SEEN = set()  # what the vLLM runs said of vllm_check.amx_path()


def cpu_line():
    """The CPU the verdicts were taken on, and which of vLLM's FP8 kernels ran."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == "model name" and model == "unknown CPU":
                    model = v.strip()
                elif k.strip() == "flags" and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    has = ", ".join("%s %s" % (f, "yes" if f in flags else "no")
                    for f in ("amx_tile", "amx_bf16", "avx512_bf16", "avx512f"))
    mode = os.environ.get("FP8CHECK_AMX", "auto")
    took = {frozenset([True]): "AMX W8A16 FP8 linear kernels (fp8_scaled_mm_cpu)",
            frozenset([False]): "no AMX kernel", frozenset([True, False]): "both, in different runs"}
    return "CPU: %s (%s); FP8CHECK_AMX=%s: vLLM took %s" % (
        model, has, mode, took.get(frozenset(AMX_SEEN), "no vLLM run"))


# verify's loader conditions (fp8conv-formats(5), LOADER CONDITIONS), as the harness meets them:
# (loader, text in verify's condition, what the harness does). vLLM: its LLM() option is set, so
# that vLLM is judged under the condition verify names. transformers: the default load is run as
# is, on this CPU without remote code; failing with exactly the condition's error it is judged
# "condition" (verify right), not "refuses"; with hf_args, hf_check.py also loads it with the
# gate lifted (check_gates_lifted: the tensors mapped and equal to the export), which must pass.
LOADER_CONDITIONS = [
    ("vllm", "--allow-deprecated-quantization", {"vllm_args": ["--allow-deprecated-quantization"]}),
    ("transformers", "on a CUDA GPU", {"hf_error": "requires a GPU or XPU",
                                       "hf_args": ["--gates-lifted"]}),
    ("transformers", "trust_remote_code", {"hf_error": "does not recognize this architecture"}),
]


def condition_of(cell, loader, key):
    """The LOADER_CONDITIONS action `key` for what verify names for loader, or None."""
    said = cell.conditions.get(loader) or ""
    for l, text, act in LOADER_CONDITIONS:
        if l == loader and text in said and key in act:
            return act[key]
    return None


def judge_written(a, cell, src, q, e, tag, vllm_args=(), hf=True):
    """verify's prediction, the export, and what the loaders do with checkpoint q (hf: and the
    Hugging Face checks). -> vLLM's report"""
    cell.verify, cell.verify_errors, v = verify_cell(a, cell, q)
    cell.conditions = {l["name"]: l["condition"] for l in v["loaders"] if l.get("condition")}
    vllm_args = list(vllm_args) + (condition_of(cell, "vllm", "vllm_args") or [])
    export(a, q, e)
    rv = checker("vllm_check.py", ["--model", q, "--export", e] + list(vllm_args),
                 os.path.join(a.work, "r", tag + ".vllm.json"))
    cell.vllm, cell.vllm_note = judge_vllm(rv)
    if rv.get("amx") is not None:
        AMX_SEEN.add(bool(rv["amx"]))
    if hf:
        extra = ["--sentence-transformers", "--original", src] if cell.model == "minilm" else []
        extra += condition_of(cell, "transformers", "hf_args") or []
        rh = checker("hf_check.py", ["--model", q, "--export", e] + extra,
                     os.path.join(a.work, "r", tag + ".hf.json"))
        cell.hf = hf_verdicts(rh)
    judge(cell)
    return rv


def checkpoint_kv_scales(q):
    """{attention module prefix: {"k_scale": v, "v_scale": v}} of checkpoint q's KV-cache scales,
    under the names vLLM's maybe_remap_kv_scale_name (model_loader/weight_utils.py) maps onto the
    attention layer: ModelOpt's self_attn.k_proj.k_scale / v_proj.v_scale, compressed-tensors'
    self_attn.k_scale / v_scale. The prefix is the attention block's (model.layers.N.self_attn)."""
    from safetensors import safe_open
    want = {}
    for fn in sorted(os.listdir(q)):
        if not fn.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(q, fn), "pt") as f:
            for name in f.keys():
                head, _, kind = name.rpartition(".")
                if kind not in ("k_scale", "v_scale"):
                    continue
                if head.endswith(("k_proj", "v_proj")):
                    head = head.rpartition(".")[0]
                want.setdefault(head, {})[kind] = [float(x) for x in f.get_tensor(name).float().flatten()]
    return want


def kv_scale_problems(q, rv):
    """-> (note, problems): vLLM's attention layers' k_scale/v_scale as its weight loader filled
    them (vllm_check.py Probe.kv_scales; a scale never filled stays -1.0 and vLLM then computes
    with 1.0) against the checkpoint's, exactly (F32 into an F32 parameter)."""
    import torch
    want = checkpoint_kv_scales(q)
    rows = [r for r in ((rv.get("weights") or {}).get("per_layer") or []) if "kv_scales" in r]
    got = {r["name"].rpartition(".")[0]: r for r in rows}  # model.layers.N.self_attn.attn
    # after processing: from the first run, or else from the run with stand-in kernels (the
    # stand-ins replace linear kernels and the static quant op, not the KV-cache scale handling)
    for src in (rv, rv.get("emulated") or {}):
        for r in ((src.get("weights") or {}).get("per_layer") or []):
            g = got.get(r["name"].rpartition(".")[0])
            if g is not None and r.get("kv_scales_processed") and not g.get("kv_scales_processed"):
                g["kv_scales_processed"], g["kv_cache_dtype"] = r["kv_scales_processed"], r.get(
                    "kv_cache_dtype")
    problems = []
    if not want:
        problems.append("the copy has no KV-cache scales: the case checks nothing")
    for head, scales in sorted(want.items()):
        row = got.get(head) or got.get("model." + head) or got.get(head.split("model.", 1)[-1])
        if row is None:
            problems.append("%s: vLLM has no attention layer with KV-cache scales (%s)" % (
                head, ", ".join(sorted(got)) or "none captured"))
            continue
        for kind, v in sorted(scales.items()):
            have = row["kv_scales"].get(kind)
            # vLLM's parameter is created in the model's dtype (bf16 here): the F32 scale is
            # rounded into it once (KVCacheScaleParameter.weight_loader copies)
            dt = (row.get("kv_scales_dtype") or {}).get(kind, "float32")
            v = [float(x) for x in torch.tensor(v, dtype=torch.float32).to(getattr(torch, dt)).float()]
            if have != v:
                problems.append("%s.%s: checkpoint %s, vLLM's attention layer %s holds %s" % (
                    head, kind, v, row["name"], have))
            done = (row.get("kv_scales_processed") or {}).get(kind)
            # judged where vLLM computes with it: an FP8 cache (not "auto", nor the bf16 cache
            # of vllm_check.py's stand-in run on a CPU without an FP8 KV-cache kernel)
            if done is not None and str(row.get("kv_cache_dtype")).startswith("fp8") and [done] != v:
                problems.append("%s.%s: checkpoint %s, vLLM's attention layer %s computes with "
                                "%s (kv_cache_dtype %s)" % (head, kind, v, row["name"], done,
                                                            row.get("kv_cache_dtype")))
    proc = ["%s %s" % (r["name"], json.dumps(r["kv_scales_processed"], sort_keys=True))
            for r in rows if r.get("kv_scales_processed")]
    note = "KV-cache scales: %d attention layers, k_scale/v_scale as loaded (%s) %s the " \
           "checkpoint's rounded to that dtype%s" % (
        len(want), ", ".join(sorted({d for r in rows for d in (r.get("kv_scales_dtype") or {}).values()}))
        or "dtype not recorded", "equal" if not problems else "differ from",
        "; after processing (kv_cache_dtype %s) vLLM computes with %s" % (
            ", ".join(sorted({str(r.get("kv_cache_dtype")) for r in rows})), ", ".join(proc))
        if proc else "; the scales after processing were not read (no run got that far)")
    return note, problems


def release_case(a, family, what, opts):
    """One release copy (RELEASE_CASES) loaded as it is: copied to WORK/releases/FAMILY (vLLM
    writes nothing there, but a scratch copy keeps testdata/releases untouched whatever a
    loader does), then judged like a written cell."""
    src = os.path.join(RELEASES, family)
    q = os.path.join(a.work, "releases", family)
    shutil.rmtree(q, ignore_errors=True)
    shutil.copytree(src, q, ignore=shutil.ignore_patterns("EXPECT.json"))
    cell = Cell(family, "release", what)
    cell.release = True
    cell.quantize = "written"
    tag = "release-" + family
    e = os.path.join(a.work, "e", tag)
    rv = judge_written(a, cell, src, q, e, tag,
                       ["--language-model-only"] if "text" in opts else [], hf="text" not in opts)
    if "text" in opts:
        cell.message = ("served as a text model, LLM(language_model_only=True); transformers not "
                        "run (it would build a vision tower the copy lacks)")
    if "kv" in opts:
        note, problems = kv_scale_problems(q, rv)
        cell.message = "; ".join(x for x in (cell.message, note) if x)
        cell.problems += problems
    return cell


def said(cell, t1):
    print("loaders: %-40s %-8s vllm=%-6s hf=%s %s(%.0f s)" % (
        cell.key() + (" (convert)" if cell.converted else ""),
        "verify=%s" % yes(cell.verify.get("vllm")) if cell.release else cell.quantize, cell.vllm or "-",
        ",".join("%s:%s" % (k, v[:4]) for k, v in cell.hf.items()) or "-",
        "PROBLEM: " + "; ".join(cell.problems) + " " if cell.problems else "",
        time.time() - t1), flush=True)


def judge(cell):
    """Holds verify's prediction against the loaders."""
    if cell.quantize != "written":
        return
    vllm_loads = cell.vllm in LOADS
    if cell.verify.get("vllm") != vllm_loads:
        cell.problems.append("verify says vLLM %s it; vLLM %s (%s)" % (
            "loads" if cell.verify.get("vllm") else "refuses",
            {"ok": "loads it", "loader-bug": "loads it (its kernel mis-decodes some codes)",
             "kernel": "loads it (no kernel on this CPU runs it)", "fails": "fails"}[cell.vllm],
            cell.vllm_note))
    d = cell.hf.get("default")
    want = condition_of(cell, "transformers", "hf_error")
    if d is not None and want and want in d and cell.verify.get("transformers"):
        cell.hf["default"] = d = "condition: %s (verify: %s)" % (d[6:], cell.conditions[
            "transformers"])
        for name in ("dequantize",):  # the same load with a quantization_config: the same refusal
            if (cell.hf.get(name) or "").startswith("fail") and want in cell.hf[name]:
                cell.hf[name] = "condition: " + cell.hf[name][6:]
    elif d is not None and cell.verify.get("transformers") != (d == "ok"):
        cell.problems.append("verify says transformers %s it; transformers: %s" % (
            "loads" if cell.verify.get("transformers") else "refuses", d))
    for name in ("dequantize", "ct_decompress", "sentence_transformers", "gates_lifted"):
        v = cell.hf.get(name)
        if v is not None and v.startswith("fail") and (cell.verify.get("transformers") or
                                                       name == "gates_lifted"):
            cell.problems.append("%s: %s" % (name, v))


# vLLM verdicts that mean "vLLM loads this checkpoint with the weights fp8conv meant".
LOADS = ("ok", "loader-bug", "kernel")


def yes(b):
    return "loads" if b else "refuses"


def negative_control(a, model, cell_pair):
    """-> (row, problem or None); see NEGATIVE_CASES."""
    tag = "%s-%s-%s" % ((model,) + cell_pair)
    q, e = os.path.join(a.work, "q", tag), os.path.join(a.work, "e", tag)
    bad = os.path.join(a.work, "q", tag + "-scale-x2")
    r = run([PY, os.path.join(HERE, "vllm_check.py"), "--break-scale", q, bad])
    if r.returncode != 0:
        raise SystemExit("harness: --break-scale %s: %s%s" % (q, r.stdout, r.stderr))
    broken = r.stdout.split(": ")[2].split(" x")[0]  # "break-scale: OUT: NAME x2.0 (shard)"
    layer = broken.rsplit(".", 1)[0]
    rv = checker("vllm_check.py", ["--model", bad, "--export", e],
                 os.path.join(a.work, "r", tag + "-scale-x2.vllm.json"))
    verdict, why = judge_vllm(rv)
    bad_layers = (rv.get("weights") or {}).get("bad") or []
    caught = verdict == "fails" and any(layer.split("model.", 1)[-1] in b for b in bad_layers)
    row = "%s %s/%s with %s x2: vLLM %s%s" % (
        model, cell_pair[0], cell_pair[1], broken, verdict,
        " (bad: %s)" % ", ".join(bad_layers) if bad_layers else "")
    return row, None if caught else ("negative control not caught: " + row)


def off_block_case(a, mdir, model, expect):
    """One OFF_BLOCK_CASES model: written (with a warning naming vLLM), verify says vLLM does not
    load it, and vLLM at TP 1 fails exactly as expect says. -> the cell"""
    cell = Cell(model, "block", "hf-fp8")
    tag = "%s-block-hf-fp8" % model
    q, e = os.path.join(a.work, "q", tag), os.path.join(a.work, "e", tag)
    if not quantize_cell(a, cell, os.path.join(mdir, model), q):
        cell.problems.append("quantize refused it: %s" % cell.message)
        return cell
    if "vLLM" not in cell.message:
        cell.problems.append("quantize wrote it without a warning naming vLLM")
    cell.verify, cell.verify_errors, v = verify_cell(a, cell, q)
    rules = {f.get("rule") for f in v.get("findings", []) if f.get("severity") == "error"}
    if "tp" not in rules:
        cell.problems.append("verify has no [tp] error (errors: %s)" % ", ".join(sorted(rules)))
    export(a, q, e)
    rv = checker("vllm_check.py", ["--model", q, "--export", e, "--prompts", "1"],
                 os.path.join(a.work, "r", tag + ".vllm.json"))
    cell.vllm, cell.vllm_note = judge_vllm(rv)
    if rv.get("amx") is not None:
        AMX_SEEN.add(bool(rv["amx"]))
    errors = [x for x in (rv.get("error"), (rv.get("refused_past_missing_kernel") or {}).get(
        "error")) if x]
    w = rv.get("weights") or {}
    rows = sorted({(x.get("loaded") or {}).get("rows_over_tol") for x in w.get("per_layer") or []
                   if x.get("name") in (w.get("bad") or [])} - {None})
    if "error" in expect:
        seen = any(expect["error"] in x for x in errors)
        what = "the load fails: " + short_error(next((x for x in errors if expect["error"] in x),
                                                      "; ".join(errors)))
    else:
        bad = w.get("bad") or []
        seen = bool(bad) and all(b.endswith("mlp.gate_up_proj") for b in bad) and rows == [
            expect["rows"]]
        what = "it loads; %s compute with other weights, rows %s off" % (
            ", ".join(bad) or "no layer", " / ".join(rows) or "none")
    if not seen:
        cell.problems.append("vLLM was expected to show %s; it did: %s (%s)" % (
            json.dumps(expect), what, cell.vllm_note))
    cell.message = "; ".join(x for x in (cell.message, "vLLM 0.32 at TP 1: " + what) if x)
    judge(cell)
    return cell


def matrix_md(cells, tp_rows, versions, cpu="", negatives=()):
    out = ["Tested with %s. %s. `make check-loaders` writes this table; each cell is one model "
           "quantized with one pair, loaded by each program." % (versions, cpu), "",
           "| model | scheme / format | fp8conv | verify (vLLM, transformers) | vLLM | transformers "
           "| transformers dequantize | compressed-tensors | sentence-transformers |",
           "|---|---|---|---|---|---|---|---|---|"]
    notes = {}

    def note(text):
        if not text:
            return ""
        if text not in notes:
            notes[text] = len(notes) + 1
        return " [%d]" % notes[text]

    def hf(v):
        if v is None:
            return "—"
        if v.startswith("condition: "):
            return "not here, as verify says" + note(v[len("condition: "):])
        if v.startswith("workaround: "):
            return "ok with a workaround" + note(v[len("workaround: "):])
        if v.startswith("not applicable: "):
            return "fails" + note(v[len("not applicable: "):])
        return "ok" if v == "ok" else "fails" + note(v[6:])

    for c in cells:
        if c.quantize == "refused":
            row = ["refused" + note(c.message)] + ["—"] * 6
        else:
            vl = {"ok": "ok", "loader-bug": "weights ok, kernel bug" + note(c.vllm_note),
                  "kernel": "weights ok, no kernel here" + note(c.vllm_note),
                  "fails": "fails" + note(c.vllm_note)}[c.vllm]
            row = ["written" + note(c.message),
                   "%s, %s" % (yes(c.verify.get("vllm")), yes(c.verify.get("transformers"))), vl,
                   hf(c.hf.get("default")), hf(c.hf.get("dequantize")),
                   hf(c.hf.get("ct_decompress")), hf(c.hf.get("sentence_transformers"))]
        model = c.model + (" converted from %s" % c.converted if c.converted else "")
        if c.release:
            row[0] = "as released" + note(c.message)
            out.append("| release copy %s | %s | %s |" % (c.model, c.fmt, " | ".join(row)))
            continue
        out.append("| %s | %s/%s | %s |" % (model, c.scheme, c.fmt, " | ".join(row)))
    if tp_rows:
        out += ["", "| tensor parallel | verify --tp | vLLM |", "|---|---|---|"]
        for t in tp_rows:
            out.append("| %s %s/%s%s TP=%d | %s | %s |" % (
                t["model"], t["scheme"], t["format"], " (converted)" if t.get("converted") else "",
                t["tp"], yes(t["verify"]),
                {"ok": "loads", "loader-bug": "loads, kernel bug" + note(t["note"]),
                 "kernel": "loads, no kernel here" + note(t["note"]),
                 "fails": "refuses" + note(t["note"])}[t["vllm"]]))
    if negatives:
        out += [""] + ["Negative control: %s." % r for r in negatives]
    out.append("")
    for text, n in notes.items():
        out.append("[%d] %s  " % (n, text.replace("|", "\\|")))
    return "\n".join(out).rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp8conv", default=os.path.join(ROOT, "build", "fp8conv"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "loaders"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--pairs", default=",".join("%s/%s" % p for p in PAIRS))
    ap.add_argument("--no-tp", action="store_true")
    ap.add_argument("--no-convert", action="store_true", help="no CONVERT_CASES")
    ap.add_argument("--releases", default=",".join(c[0] for c in RELEASE_CASES),
                    help="RELEASE_CASES to run ('' for none)")
    ap.add_argument("--off-block", default=",".join(c[0] for c in OFF_BLOCK_CASES),
                    help="OFF_BLOCK_CASES to run ('' for none)")
    ap.add_argument("--int4", default=",".join("%s/%d" % c[:2] for c in INT4_CASES),
                    help="INT4_CASES to run, model/group ('' for none; a model not in --models "
                         "is left out)")
    ap.add_argument("--readme")
    ap.add_argument("--readme-block", default="loaders-matrix",
                    help="the README's block between <!-- NAME:begin --> and <!-- NAME:end -->")
    ap.add_argument("--update-readme", action="store_true")
    a = ap.parse_args()
    a.fp8conv = os.path.abspath(a.fp8conv)
    models = [m for m in a.models.split(",") if m]
    releases = [c for c in RELEASE_CASES if c[0] in a.releases.split(",")]
    if len(releases) != len([f for f in a.releases.split(",") if f]):
        raise SystemExit("harness: --releases %s: known: %s" % (
            a.releases, ",".join(c[0] for c in RELEASE_CASES)))
    pairs = [tuple(p.split("/")) for p in a.pairs.split(",") if p]
    t0 = time.time()
    for sub in ("q", "e", "r"):
        os.makedirs(os.path.join(a.work, sub), exist_ok=True)
    mdir = os.path.join(a.work, "models")
    off_block = [c for c in OFF_BLOCK_CASES if c[0] in a.off_block.split(",")]
    if len(off_block) != len([m for m in a.off_block.split(",") if m]):
        raise SystemExit("harness: --off-block %s: known: %s" % (
            a.off_block, ",".join(c[0] for c in OFF_BLOCK_CASES)))
    want = models + [c[0] for c in off_block]
    r = run([PY, os.path.join(HERE, "make_models.py"), mdir] + want) if want else None
    if r is not None and r.returncode != 0:
        raise SystemExit("harness: make_models.py: %s%s" % (r.stdout, r.stderr))
    cells, tp_rows = [], []
    for model in models:
        src = os.path.join(mdir, model)
        for scheme, fmt in pairs:
            cell = Cell(model, scheme, fmt)
            cells.append(cell)
            tag = "%s-%s-%s" % (model, scheme, fmt)
            q, e = os.path.join(a.work, "q", tag), os.path.join(a.work, "e", tag)
            t1 = time.time()
            if quantize_cell(a, cell, src, q):
                judge_written(a, cell, src, q, e, tag)
            said(cell, t1)
    tp_cases = [] if a.no_tp else list(TP_CASES)
    for model, (scheme, fmt), opts, tp in ([] if a.no_convert else CONVERT_CASES):
        tag = "%s-%s-%s" % (model, scheme, fmt)
        q = os.path.join(a.work, "q", tag)
        if model not in models or not os.path.isdir(q):
            continue
        cell = Cell(model, scheme, fmt)  # convert's report names what it wrote
        cell.converted = "%s/%s, `%s`" % (scheme, fmt, " ".join(opts))
        cells.append(cell)
        ctag = "%s-convert-%d" % (tag, CONVERT_CASES.index((model, (scheme, fmt), opts, tp)))
        c, e = os.path.join(a.work, "q", ctag), os.path.join(a.work, "e", ctag)
        t1 = time.time()
        shutil.rmtree(c, ignore_errors=True)
        r = run([a.fp8conv, "convert", "--json"] + opts + [q, c])
        cell.quantize = "written" if r.returncode == 0 else "refused"
        if r.returncode != 0:
            cell.message = first_line(r.stderr).replace("fp8conv: ", "", 1)
            cell.problems.append("convert %s failed (exit %d): %s"
                                 % (" ".join(opts), r.returncode, r.stderr.strip()))
        else:
            out = json.loads(r.stdout)
            cell.scheme, cell.fmt = out["scheme"], out["format"]
            judge_written(a, cell, os.path.join(mdir, model), c, e, ctag)
            r = run([a.fp8conv, "diff", "--dequant", "-q", q, c])
            if "--exact" in opts and r.returncode != 0:
                cell.problems.append("an exact convert changed values: diff --dequant exit %d"
                                     % r.returncode)
            if tp and not a.no_tp:
                tp_cases.append((model, cell.scheme, cell.fmt, tp, ctag))
        said(cell, t1)
    for model, expect in off_block:
        t1 = time.time()
        cell = off_block_case(a, mdir, model, expect)
        cells.append(cell)
        said(cell, t1)
    t_rel = time.time()
    for family, what, opts in releases:
        t1 = time.time()
        cell = release_case(a, family, what, opts)
        cells.append(cell)
        said(cell, t1)
    if releases:
        print("loaders: release stage: %d copies, %.0f s" % (len(releases), time.time() - t_rel),
              flush=True)
    int4 = [c for c in INT4_CASES if "%s/%d" % c[:2] in a.int4.split(",")]
    if len(int4) != len([c for c in a.int4.split(",") if c]):
        raise SystemExit("harness: --int4 %s: known: %s" % (
            a.int4, ",".join("%s/%d" % c[:2] for c in INT4_CASES)))
    for model, group, hf in int4:
        if model not in models:
            continue
        cell = Cell(model, "int4-g%d" % group, "compressed-tensors")
        cell.options = ["--scheme", "int4", "--group", str(group), "--format", cell.fmt]
        cells.append(cell)
        pairs.append((cell.scheme, cell.fmt))  # for NEGATIVE_CASES
        tag = "%s-%s-%s" % (model, cell.scheme, cell.fmt)
        q, e = os.path.join(a.work, "q", tag), os.path.join(a.work, "e", tag)
        t1 = time.time()
        if quantize_cell(a, cell, os.path.join(mdir, model), q):
            rv = judge_written(a, cell, os.path.join(mdir, model), q, e, tag, hf=hf)
            emu = rv.get("emulated") or {}
            if cell.vllm == "kernel" and "No WNA16 MoE backend" in cell.vllm_note:
                g = emu.get("generation") or {}
                cell.vllm_note += " %s; with the AMX and group gates of CPUExpertsInt4 lifted, " \
                    "vLLM %s" % (INT4_MOE_GATES, "loads the experts exactly as the export holds " \
                                 "them and generates within the criterion (mean %.2f, max %.2f " \
                                 "nats)" % (g["mean_abs_delta_prompt_token"],
                                            g["max_abs_delta_prompt_token"])
                                 if emu.get("ok") else "still fails: %s" % short_error(
                                     emu.get("error") or json.dumps(emu.get("weights"))[:200]))
        said(cell, t1)
    problems = [(c.key(), p) for c in cells for p in c.problems]
    negatives = []
    for model, pair in NEGATIVE_CASES:
        if model in models and pair in pairs and os.path.isdir(
                os.path.join(a.work, "e", "%s-%s-%s" % ((model,) + pair))):
            t1 = time.time()
            row, problem = negative_control(a, model, pair)
            negatives.append(row)
            if problem:
                problems.append(("%s %s/%s scale x2" % ((model,) + pair), problem))
            print("loaders: negative control: %s (%.0f s)" % (row, time.time() - t1), flush=True)
    for case in tp_cases:
        model, scheme, fmt, tp = case[:4]
        if model not in models:
            continue
        tag = case[4] if len(case) > 4 else "%s-%s-%s" % (model, scheme, fmt)
        q, e = os.path.join(a.work, "q", tag), os.path.join(a.work, "e", tag)
        if not os.path.isdir(q) or not os.path.isdir(e):
            continue
        t1 = time.time()
        loads, errors, v = verify_cell(a, None, q, tp)
        rv = checker("vllm_check.py", ["--model", q, "--export", e, "--tp", str(tp)],
                     os.path.join(a.work, "r", tag + ".tp%d.vllm.json" % tp))
        verdict, why = judge_vllm(rv)
        row = {"model": model, "scheme": scheme, "format": fmt, "tp": tp,
               "verify": errors == 0, "vllm": verdict, "note": why,
               "converted": len(case) > 4}
        tp_rows.append(row)
        if row["verify"] != (verdict in LOADS):
            problems.append(("%s TP=%d" % (tag, tp), "verify --tp %d says %s; vLLM: %s %s"
                             % (tp, yes(row["verify"]), verdict, why)))
        print("loaders: %-40s TP=%d verify=%s vllm=%s %s(%.0f s)" % (
            tag, tp, yes(row["verify"]), verdict, why[:120] + " " if why else "",
            time.time() - t1), flush=True)
    vr = run([PY, "-c", "import vllm, transformers, compressed_tensors, sentence_transformers, torch;"
              "print('vLLM %s (CPU build), torch %s, transformers %s, compressed-tensors %s, "
              "sentence-transformers %s' % (vllm.__version__, torch.__version__.split('+')[0], "
              "transformers.__version__, compressed_tensors.__version__, "
              "sentence_transformers.__version__))"])
    md = matrix_md(cells, tp_rows, vr.stdout.strip(), cpu_line(), negatives)
    with open(os.path.join(a.work, "matrix.md"), "w") as f:
        f.write(md)
    with open(os.path.join(a.work, "matrix.json"), "w") as f:
        json.dump({"cells": [vars(c) for c in cells], "tp": tp_rows}, f, indent=1)
    print(md)
    if a.readme:
        text = open(a.readme).read()
        BEGIN, END = markers(a.readme_block)
        i, j = text.find(BEGIN), text.find(END)
        if i < 0 or j < i:
            raise SystemExit("harness: %s has no %s ... %s block" % (a.readme, BEGIN, END))
        have = text[i + len(BEGIN):j].strip() + "\n"
        if a.update_readme:
            with open(a.readme, "w") as f:
                f.write(text[:i + len(BEGIN)] + "\n" + md + text[j:])
        elif have != md:
            # a stale copy is said, not failed: the loaders' verdicts above are the test
            print("loaders: NOTE: the compatibility matrix in %s is not this run's "
                  "(make check-loaders UPDATE_README=1 rewrites it)" % a.readme)
    for key, p in problems:
        print("loaders: PROBLEM: %s: %s" % (key, p))
    n = sum(1 for c in cells if c.quantize == "written")
    print("loaders: %d cells (%d written, %d refused), %d tensor-parallel runs, %d negative "
          "controls, %d problems, %.0f s" % (len(cells), n, len(cells) - n, len(tp_rows),
                                             len(negatives), len(problems), time.time() - t0))
    print("loaders: %s" % cpu_line())
    total = len(cells) + len(tp_rows) + len(negatives)
    print("%d passed, %d failed" % (total - len(set(k for k, _ in problems)),
                                    len(set(k for k, _ in problems))))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
