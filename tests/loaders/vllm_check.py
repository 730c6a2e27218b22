#!/usr/bin/env python3
"""Does vLLM compute with the weights fp8conv meant?

Usage:
    python vllm_check.py --model Q --export E [--tp N] --json OUT.json
           [--prompts K] [--timeout S] [--no-emulate] [--sequential]
    python vllm_check.py --break-scale Q OUT [--tensor NAME] [--factor F]
           (negative control: a copy of Q with one scale tensor times F)
    --language-model-only: LLM(language_model_only=True) in both children, a
    multimodal model served as a text model (matrix.py's Mistral release copy).
    --allow-deprecated-quantization: LLM(allow_deprecated_quantization=True),
    which vLLM 0.32 requires for fbgemm_fp8 (matrix.py's fbgemm release copy).

Q is an FP8 checkpoint written by `fp8conv quantize`, E its bf16 export
(`fp8conv dequantize-for-export Q E`: every FP8 weight q*s computed in fp32
and rounded once to bf16). vLLM's CPU build runs in child processes of this
script, one for Q and one for E (side by side at TP=1; a crash or a hang
there is reported, not fatal), with LLM(dtype="bfloat16",
enforce_eager=True, max_model_len=128, skip_tokenizer_init=True except for
pooling models, TP=N with distributed_executor_backend="mp" for N > 1),
VLLM_CPU_OMP_THREADS_BIND = the usable cores cut into N groups ("0|1" on 2
cores), VLLM_CPU_KVCACHE_SPACE=1. One JSON report is written (OUT.json;
child logs and results in OUT.work/). Exit 0 whenever the report was
written, whatever the verdict; non-zero only for a bug of this harness.

1. Weights (Q only). Each layer is compared with this rank's part of E's
   tensors (merged layers stacked: qkv_proj = q,k,v (BERT query,key,value);
   gate_up_proj = gate,up; DeepSeek fused_qkv_a_proj = q_a_proj,
   kv_a_proj_with_mqa; DeepSeek-V3.2 indexer.wk_weights_proj = wk,
   weights_proj; MoE w13 = gate,up (Mixtral w1,w3) and w2 = down, per
   expert; row slices for column-parallel layers (k/v by KV-head group),
   column slices for row-parallel ones), in bf16 ulps (ordered bit patterns):
   * "loaded": the parameters exactly as vLLM's weight loaders filled them,
     captured just before process_weights_after_loading by a hook installed
     in every process that builds the model (the TP workers import this
     file as __mp_main__), and compared there and then (so a failure later
     in processing or in a kernel does not lose it): q*s in fp32 rounded to
     bf16, per the scale's layout (per tensor, per logical shard, per row,
     per block, MX). This is the layout fp8conv promises: it must be
     bit-equal to E. Unquantized layers (embeddings, lm_head, routers, ...)
     are compared as loaded, cast to the model dtype: bit-equal too.
   * "computed" (linear layers): an identity matrix pushed through the
     layer's own quant method after processing (quant_method.apply(layer,
     eye) through llm.apply_model), i.e. the weight vLLM's kernel really
     multiplies with. Dynamic FP8 activation quantization of an identity
     row (amax 1: scale fl(1/448), code 448) and the kernel's fp32 epilogue
     round twice where E rounds once, so up to ULP_TOL bf16 ulp is
     accepted; bit-equal layers are counted. Fused MoE experts have no
     linear apply (routing, activation): they get "loaded" only.
   A layer is bad when "loaded" differs at all, or "computed" by more than
   ULP_TOL, or E has no tensor for a quantized layer. Where vLLM itself
   requantizes the per-tensor shards of a fused layer (qkv, gate_up) to
   their largest scale (requantize_with_max_scale: q.to(float16) * s, then
   / max(s) to E4M3), "computed" differs from E by FP8 rounding; such a
   layer is listed in "requantized_by_vllm", not "bad", only if it equals
   (within ULP_TOL) that requantization recomputed here from the loaded q, s.
2. Generation (causal LMs): K fixed token-id prompts (TokensPrompt), greedy,
   SamplingParams(max_tokens=4, temperature=0, prompt_logprobs=5,
   logprobs=5), for Q and for E loaded the same way. Criterion GEN_CRITERION:
   the logprob of each prompt position's own token (reported by both) must
   agree, mean |delta| <= MEAN_TOL and max |delta| <= MAX_TOL. E computes in
   bf16 while Q quantizes activations to FP8 on this CPU (dynamic per token
   or per tensor), so a small difference is expected; the tolerances come
   from measured correct checkpoints and negative controls (one scale
   tensor x2, --break-scale), which fail (see the numbers at MEAN_TOL).
   Greedy tokens, top-1 agreement and the top-5 deltas are reported, not
   judged (a random tiny model has near-ties). Pooling models
   (all-MiniLM-L6-v2): embeddings of the K prompts, min cosine >= COS_TOL.
3. Failures: {"loaded": false, "stage": "load", "error": "Type: message",
   "traceback_tail": ...}; at TP > 1 "error" is the TP worker's exception
   (the root cause; "error_engine" has what LLM() raised). "stage" is
   "weights" or "generate" for a failure after the load. Where vLLM loaded
   the weights and then failed (processing them, a kernel), "weights" still
   holds the "loaded" comparison, with a "stage" saying so.
   "kernel_unavailable": true when the error says this vLLM build has no
   kernel or op for a layer on this CPU (its FP8 block linear and FP8 MoE
   kernels need AMX; no MXFP8 linear kernel; the static per-tensor FP8
   quant op is a stub). A kernel failing after a successful load is
   "missing_kernel" (the exact error).
   Then, unless --no-emulate, Q is run once more with stand-ins appended to
   vLLM's CPU kernel lists (vLLM's own EmulationMxfp8LinearKernel and
   EmulationNvFp4LinearKernel, and this file's reference FP8 block kernel,
   y = x @ (q*s)^T in fp32 as vLLM's W8A16 CPU block kernel computes), a
   reference for the static quant op, CPUExpertsInt4 with its gates lifted,
   the dense MLA backend for sparse attention and the CPU MLA block size
   for DeepSeek-V3.2's indexer KV cache; E's run is reused. Each
   stand-in that was used, with vLLM's reason for refusing, is listed under
   "emulated"."stand_ins"; "kernel_why" says why an op is missing where
   the error does not (KERNEL_WHY). Its results go under "emulated" (its "computed" and
   generation check the layout through stand-in kernels, not a real one).
   When the first run loaded nothing, the stand-in run's "loaded"
   comparisons (vLLM's real weight loaders) become "weights", with a
   "stage" saying so. If the stand-in run fails for another reason,
   "refused_past_missing_kernel" has that error: what vLLM raises on a
   machine that has the kernel. "ok" is true only for a run with vLLM's own
   kernels that loaded, whose weights are all good and whose generation
   passed; the stand-in run never makes it true.
"""

import time

_T_START = time.time()  # before vLLM's import (the hooks below import it)

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import traceback

# ---- criteria -------------------------------------------------------------
ULP_TOL = 1  # computed weights: bf16 ulps accepted (activation-quant rounding)
# Measured (tests/loaders/make_models.py models, 4 prompts x 23 positions):
# correct checkpoints: mean 0.08 / max 0.49 with FP8 per-token activations
# (channel), 0.13 / 0.86 per-tensor activations, 0.02 / 0.09 bf16 activations
# (block, emulated); negative controls (layer 0 o_proj scale x2): mean >= 1.08,
# max >= 5.2. MiniLM cosine: correct >= 0.997, negative <= 0.933.
MEAN_TOL = 0.3  # nats: mean |logprob_Q - logprob_E| of the prompts' own tokens
MAX_TOL = 2.0  # nats: largest such |delta|
COS_TOL = 0.99  # pooling models: smallest cosine(embedding_Q, embedding_E)
GEN_CRITERION = (
    f"prompt-token logprobs of Q vs E at every prompt position: mean |delta| <= "
    f"{MEAN_TOL} and max |delta| <= {MAX_TOL} nats (pooling models: min cosine of "
    f"the embeddings >= {COS_TOL}); greedy tokens and top-1 agreement reported only"
)
WEIGHT_CRITERION = (
    f"loaded q*s (fp32, rounded to bf16) bit-equal to the export; computed "
    f"(identity through quant_method.apply) within {ULP_TOL} bf16 ulp; unquantized "
    f"layers bit-equal"
)
# vLLM's CPU W8A16 FP8 kernel (torch.ops._C.fp8_scaled_mm_cpu, AMX BRGEMM on
# VNNI-prepacked weights; CPUFp8BlockScaledMMKernel, and
# CPUFp8PerTensorScaledMMLinearKernel which reuses it) widens E4M3 to bf16 with
# exponent arithmetic only (bf16 exponent = E4M3 exponent field + 120, mantissa
# shifted in): exponent field 0 is taken for a normal exponent, so a subnormal
# code (m/8)*2^-6 becomes (1 + m/8)*2^-7 and a zero may become 2^-7, sign kept
# (the conversion cvt_e4m3_bf16_intrinsic_no_nan of its CPU kernels, which
# vLLM took from sgl-kernel; SGLang guards it behind SGLANG_CPU_FP8_CVT_FTZ and
# uses a conversion with denormals by default). A loader bug: the checkpoint
# holds the right codes. It runs only where torch.cpu._is_amx_tile_supported()
# (Sapphire Rapids and later); seen with vLLM 0.32.0 (vllm-cpu).
AMX_FP8_KERNELS = ("CPUFp8BlockScaledMMKernel", "CPUFp8PerTensorScaledMMLinearKernel")
AMX_DECODE_BUG = (
    "vLLM's CPU AMX W8A16 FP8 kernel (fp8_scaled_mm_cpu) decodes E4M3 codes with exponent "
    "field 0 as normal numbers: a subnormal (m/8)*2^-6 as (1+m/8)*2^-7, a zero as 2^-7 "
    "(sign kept); the loaded weights are bit-exact, only the kernel's product differs there")
# Errors a kernel raises for what it cannot compute (not the checkpoint's
# fault): (text in the error, text that must be in the error or its traceback
# or log, what it means).
KERNEL_LIMITS = (
    # CPUFp8BlockScaledMMKernel.apply_weights passes the layer's bias as is;
    # the op reads it as float (data_ptr<float>), so a bf16 model's bias fails.
    # Checked on the op itself (selftest.py).
    ("expected scalar type Float but found BFloat16", "fp8_scaled_mm_cpu",
     "vLLM's AMX W8A16 FP8 kernel (fp8_scaled_mm_cpu) reads a layer's bf16 bias as float"),
)
# Error texts meaning "this vLLM build has no kernel for it on this CPU".
# "FP8 KV cache on CPU requires x86 with AVX-512 or AMX": vLLM 0.32 resolves a checkpoint's
# kv_cache_quant_algo FP8 to an FP8 KV cache (utils/torch_utils.py resolve_kv_cache_dtype_string)
# and its CPU attention backend has no FP8 cache kernel without AVX-512 or AMX
# (v1/attention/backends/cpu_attn.py): a CPU limit, met on an AVX2-only AMD EPYC.
# "No WNA16 MoE backend supports": INT4 experts (fused_moe/oracle/int_wna16.py
# select_wna16_moe_backend; on a CPU its backends are ZEN_CPU, AMD's zentorch ops, and CPU,
# CPUExpertsInt4, x86 with AMX tiles).
# "'_C' object has no attribute": an op the CPU build does not compile (fbgemm_fp8.py's
# process_weights_after_loading repacks for Marlin, gptq_marlin_repack, on any non-CUDA-capable
# platform). "FP8 KV cache requires head_size divisible by 32 on CPU": cpu_attn.py _get_attn_isa.
KERNEL_UNAVAILABLE = ("Failed to find a kernel", "'_C' object has no attribute",
                      "FP8 KV cache requires head_size divisible by", "MoE backend: NONE", "requires AMX",
                      "expected at most 0 argument(s)", "No supported backend", "not supported on CPU",
                      "FP8 KV cache on CPU requires", "Sparse Attention is not supported on CPU",
                      "No WNA16 MoE backend supports the deployment configuration")
# Why a missing op is missing, where the error alone does not say: (text in the error, why).
KERNEL_WHY = (
    ("gptq_marlin_repack", "quantization/fbgemm_fp8.py FBGEMMFp8LinearMethod takes its Marlin path "
     "where the device capability is under 8.9 (use_marlin; a CPU has none), and the CPU build "
     "compiles no Marlin op"),
)
# Error texts, after a successful load, meaning "a kernel/op is missing here"
# (vLLM's MXFP8 MoE EMULATION backend runs a Triton kernel: CPU has no Triton).
MISSING_OP = ("NotImplementedError", "not implemented for", "Could not run", "no kernel",
              "No kernel", "not supported", "Unsupported", "undefined symbol", "has no attribute '_C",
              "triton", "expected at most 0 argument(s)")


# =============================================================================
# shared helpers (no vLLM import)


def _err(e):
    return f"{type(e).__name__}: {e}"


def _tb_tail(n=15):
    return "".join(traceback.format_exc().splitlines(True)[-n:])


def cpu_binding(tp):
    """VLLM_CPU_OMP_THREADS_BIND: the usable cores cut into tp groups."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < tp:
        return "|".join([str(cores[0])] * tp)
    per = len(cores) // tp
    groups = []
    for r in range(tp):
        g = cores[r * per : (r + 1) * per]
        groups.append(f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]))
    return "|".join(groups)


def child_env(tp, role, emulate):
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_binding(tp))
    # TP=1: no engine-core process, apply_model calls the probe in-process.
    if tp == 1:
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # apply_model ships the probe function to the TP workers (cloudpickle).
    env["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env.setdefault("TQDM_DISABLE", "1")
    env["FP8CHECK_ROLE"] = role
    env["FP8CHECK_EMULATE"] = "1" if emulate else "0"
    return env


def read_config(path):
    with open(os.path.join(path, "config.json")) as f:
        return json.load(f)


def is_pooling(cfg):
    archs = cfg.get("architectures") or []
    return cfg.get("model_type") == "bert" or any(a in ("BertModel", "RobertaModel") for a in archs)


def block_size_of(cfg):
    qc = cfg.get("quantization_config") or {}
    if qc.get("weight_block_size"):
        return list(qc["weight_block_size"])
    for grp in (qc.get("config_groups") or {}).values():
        bs = (grp.get("weights") or {}).get("block_structure")
        if bs:
            return list(bs)
    return None


def make_prompts(vocab, k, length=24):
    """k fixed prompts of token ids in [3, min(vocab, 30000)) from an LCG."""
    hi = min(vocab, 30000)
    x = 12345
    out = []
    for _ in range(k):
        p = []
        for _ in range(length):
            x = (1103515245 * x + 12345) % (1 << 31)
            p.append(3 + (x >> 8) % (hi - 3))
        out.append(p)
    return out


# =============================================================================
# in the processes that build the model (child and its TP workers)

_RAW_ATTR = "_fp8check_raw"


def _e8m0(s):
    import torch

    b = s.view(torch.uint8) if s.dtype != torch.uint8 else s
    return torch.exp2(b.to(torch.float32) - 127.0)


def e4m3_exp0_as_normal(q):
    """fp32 values of E4M3 codes q as AMX_DECODE_BUG describes: exponent field
    0 read as a normal exponent, (1 + m/8) * 2^-7 with the code's sign; every
    other code its own value."""
    import torch

    b = q.view(torch.uint8).to(torch.int32)
    m = (b & 7).to(torch.float32)
    as_normal = (1.0 + m / 8.0) * 2.0 ** -7
    as_normal = torch.where((b & 0x80) != 0, -as_normal, as_normal)
    return torch.where((b & 0x78) == 0, as_normal, q.float())


def _dequant_block(w, s, bn, bk, decode=None):
    import torch

    n, k = w.shape
    sf = _e8m0(s) if s.dtype in (torch.uint8, torch.float8_e8m0fnu) else s.float()
    se = sf.repeat_interleave(bn, 0)[:n].repeat_interleave(bk, 1)[:, :k]
    return (decode(w) if decode else w.float()) * se


def amx_path():
    """Whether vLLM takes its AMX W8A16 FP8 linear kernels in this process:
    the CPU has AMX (vLLM's own test, torch.cpu._is_amx_tile_supported) and
    FP8CHECK_AMX did not turn them off, or FP8CHECK_AMX=on forced them."""
    import torch

    return os.environ.get("FP8CHECK_AMX") == "on" or bool(torch.cpu._is_amx_tile_supported())


def _amx_switch():
    """FP8CHECK_AMX=off|on|auto (default auto: what this CPU has), so that one
    machine gives the verdicts of both kinds of CPU:
      off: vLLM takes every path it takes on a CPU without AMX
           (torch.cpu._is_amx_tile_supported, which every AMX kernel's
           is_supported and the attention backends ask, says False);
      on:  vLLM takes its AMX W8A16 FP8 linear kernels (AMX_FP8_KERNELS) even
           where the CPU has no AMX: their op, fp8_scaled_mm_cpu, runs on any
           AVX-512 CPU, with the same E4M3 conversion (checked: exponent-0
           codes come out as AMX_DECODE_BUG says, as on a Xeon with AMX).
           vLLM's other AMX paths (attention, MLA, fused MoE) keep this
           CPU's answer: their code needs AMX instructions.
    A run with stand-in kernels turns AMX off: the stand-ins replace kernels
    this CPU lacks or that cannot run the model, which an AMX kernel would
    otherwise shadow."""
    mode = os.environ.get("FP8CHECK_AMX", "auto")
    if mode == "off" or os.environ.get("FP8CHECK_EMULATE") == "1":
        import torch

        torch.cpu._is_amx_tile_supported = lambda: False
        os.environ["FP8CHECK_AMX"] = "off"
    elif mode == "on":
        from vllm.model_executor.kernels.linear.scaled_mm import cpu as scaled_mm_cpu

        for name in AMX_FP8_KERNELS:
            cls = getattr(scaled_mm_cpu, name)
            orig = cls.is_supported.__func__

            def is_supported(cls, compute_capability=None, _orig=orig):
                ok, why = _orig(cls, compute_capability)
                if not ok and why and "AMX" in why:
                    from vllm import _custom_ops as ops

                    if ops._supports_cpu_fp8_w8a16:  # forced: the op needs only AVX-512
                        return True, None
                    return False, "fp8_scaled_mm_cpu op not available."
                return ok, why

            cls.is_supported = classmethod(is_supported)


def install_hooks():
    """Snapshot every quantized-or-not layer's parameters as loaded, before
    process_weights_after_loading; with FP8CHECK_EMULATE=1, fallback kernels.
    Runs at import in the child and in its TP workers (spawned; they import
    this file as __mp_main__)."""
    _amx_switch()
    import vllm.model_executor.model_loader.base_loader as bl

    orig = bl.process_weights_after_loading
    if getattr(orig, "_fp8check", False):
        return

    def hooked(model, model_config, target_device):
        raw = {}
        for name, mod in model.named_modules():
            if getattr(mod, "quant_method", None) is None:
                continue
            params = {
                pn: p.detach().to("cpu", copy=True)
                for pn, p in mod.named_parameters(recurse=False)
                if p is not None
            }
            if params:
                raw[name] = params
        object.__setattr__(model, _RAW_ATTR, raw)
        out = os.environ.get("FP8CHECK_LOADED_OUT")
        if out:
            # The "loaded" comparison now, before vLLM processes the weights:
            # it survives a processing step or kernel that fails later.
            t = time.time()
            try:
                res = Probe(model, os.environ["FP8CHECK_EXPORT"],
                            json.loads(os.environ.get("FP8CHECK_BLOCK") or "null")).run(computed=False)
            except Exception as e:
                res = {"error": _err(e), "traceback_tail": _tb_tail()}
            res["seconds"] = round(time.time() - t, 2)
            rank = res.get("rank", os.environ.get("RANK", "0"))
            with open(f"{out}.rank{rank}.json", "w") as f:
                json.dump(res, f)
        return orig(model, model_config, target_device)

    hooked._fp8check = True
    bl.process_weights_after_loading = hooked
    if os.environ.get("FP8CHECK_EMULATE") == "1":
        _install_emulation()


def _install_emulation():
    from vllm.model_executor.kernels import linear as kl
    from vllm.model_executor.kernels.linear.mxfp8.emulation import EmulationMxfp8LinearKernel
    from vllm.model_executor.kernels.linear.scaled_mm.BlockScaledMMLinearKernel import (
        Fp8BlockScaledMMLinearKernel,
    )
    from vllm.platforms import PlatformEnum

    class RefFp8BlockKernel(Fp8BlockScaledMMLinearKernel):
        """fp8check emulation: y = x @ (q*s)^T in fp32, bf16 activations
        (what vLLM's W8A16 CPU block kernel computes, without AMX)."""

        apply_input_quant = False

        @classmethod
        def is_supported(cls, compute_capability=None):
            return True, None

        @classmethod
        def can_implement(cls, config):
            return True, None

        def process_weights_after_loading(self, layer):
            pass

        def apply_weights(self, layer, x, bias=None, **kw):
            s = getattr(layer, "weight_scale_inv", None)
            if s is None:
                s = layer.weight_scale
            g = self.weight_group_shape
            wd = _dequant_block(layer.weight, s, g.row, g.col)
            y = x.reshape(-1, x.shape[-1]).float() @ wd.t()
            if bias is not None:
                y = y + bias.float()
            return y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])

        def apply_block_scaled_mm(self, A, B, As, Bs):
            raise NotImplementedError

    # The static per-tensor FP8 quant op is a stub in the CPU build
    # ("_C::static_scaled_fp8_quant() -> ()"); vLLM calls it to requantize
    # per-tensor shards of fused layers to their largest scale. Reference:
    # x / scale, saturated to +-448, rounded to E4M3 (torch's cast, RNE).
    from vllm import _custom_ops as ops

    orig_quant = ops.scaled_fp8_quant

    def scaled_fp8_quant(input, scale=None, *args, **kw):
        if scale is None or scale.numel() != 1 or args or any(
            kw.get(k) is not None for k in ("num_token_padding", "output", "group_shape")
        ):
            return orig_quant(input, scale, *args, **kw)
        q = (input.float() / scale.float().reshape(())).clamp(-448.0, 448.0)
        return q.to(torch.float8_e4m3fn), scale

    import torch

    ops.scaled_fp8_quant = scaled_fp8_quant

    cpu = PlatformEnum.CPU
    kl._POSSIBLE_FP8_BLOCK_KERNELS[cpu] = list(kl._POSSIBLE_FP8_BLOCK_KERNELS.get(cpu, [])) + [
        RefFp8BlockKernel
    ]
    kl._POSSIBLE_MXFP8_KERNELS[cpu] = list(kl._POSSIBLE_MXFP8_KERNELS.get(cpu, [])) + [
        EmulationMxfp8LinearKernel
    ]
    # INT4 (W4A16) MoE experts: vLLM's CPU backend, CPUExpertsInt4 (fused_moe/experts/cpu_moe.py),
    # runs only on x86 with AMX tiles (_supports_current_device) and takes the QuantKey
    # kInt4Static only (_supports_quant_scheme), which compressed_tensors_moe_wna16.py gives every
    # group but 32 (group 32 is kInt4Static32). Told it runs here and takes both, vLLM creates and
    # loads the experts' weights, which the snapshot above compares, and then fails where the AMX
    # kernel is needed (reported as the missing kernel).
    from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUExpertsInt4
    from vllm.model_executor.layers.quantization.utils.quant_utils import kInt4Static, kInt4Static32

    CPUExpertsInt4._supports_current_device = staticmethod(lambda: True)
    CPUExpertsInt4._supports_quant_scheme = staticmethod(
        lambda w, a: a is None and w in (kInt4Static, kInt4Static32))
    # Any other gate of CPUExpertsInt4 (Kimi-K2-Thinking's copy: another one refuses it): lifted
    # too, and vLLM's own reason recorded (STAND_INS), so the report names what is missing.
    orig_cfg = CPUExpertsInt4.is_supported_config

    def is_supported_config(*args, **kw):  # a staticmethod taking the class first
        ok, why = orig_cfg(*args, **kw)
        if not ok:
            _stand_in("CPUExpertsInt4 (fused_moe/experts/cpu_moe.py)", why)
        return True, None

    CPUExpertsInt4.is_supported_config = staticmethod(is_supported_config)
    # NVFP4 linear layers (ModelOpt MIXED_PRECISION's MLP): vLLM lists no NVFP4 kernel for the
    # CPU platform (kernels/linear/__init__.py _POSSIBLE_NVFP4_KERNELS has CUDA and ROCm only);
    # its own EmulationNvFp4LinearKernel stands in, as EmulationMxfp8LinearKernel does above.
    from vllm.model_executor.kernels.linear.nvfp4.emulation import EmulationNvFp4LinearKernel

    class StandInNvFp4(EmulationNvFp4LinearKernel):
        @classmethod
        def can_implement(cls, config):
            _stand_in("an NVFP4 linear kernel (vLLM's EmulationNvFp4LinearKernel stood in)",
                      "kernels/linear/__init__.py _POSSIBLE_NVFP4_KERNELS lists none for the CPU "
                      "platform")
            return True, None

    kl._POSSIBLE_NVFP4_KERNELS[cpu] = list(kl._POSSIBLE_NVFP4_KERNELS.get(cpu, [])) + [
        StandInNvFp4
    ]
    # DeepSeek-V3.2's sparse (indexer) attention: CpuPlatform.get_attn_backend_cls raises for
    # use_sparse ("Sparse Attention is not supported on CPU", platforms/cpu.py); the dense MLA
    # backend stands in (with fewer tokens than index_topk, sparse attention attends to all).
    from vllm.platforms.cpu import CpuPlatform

    orig_attn = CpuPlatform.get_attn_backend_cls.__func__

    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
        if attn_selector_config.use_sparse:  # selector.py AttentionSelectorConfig, a NamedTuple
            _stand_in("sparse attention backend (platforms/cpu.py get_attn_backend_cls)",
                      "Sparse Attention is not supported on CPU")
            attn_selector_config = attn_selector_config._replace(use_sparse=False)
        return orig_attn(cls, selected_backend, attn_selector_config, num_heads)

    CpuPlatform.get_attn_backend_cls = classmethod(get_attn_backend_cls)
    # DeepSeek-V3.2's indexer KV cache: DeepseekV32IndexerBackend.get_supported_kernel_block_sizes
    # gives [64] on every platform but ROCm (v1/attention/backends/mla/indexer.py), the CPU MLA
    # backend [16] (mla/cpu_mla.py CPUMLABackend), so select_common_block_size
    # (v1/worker/utils.py) raises "No common block size for 16 (DEEPSEEK_V32_INDEXER: [64];
    # CPU_MLA: [16])." The indexer takes the CPU MLA backend's sizes too (as it takes multiples
    # of 16 on ROCm); what it would compute with is not judged (its kernels are CUDA's).
    from vllm.v1.attention.backends.mla.cpu_mla import CPUMLABackend
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend

    orig_sizes = DeepseekV32IndexerBackend.get_supported_kernel_block_sizes

    def supported_kernel_block_sizes(kv_cache_spec=None):
        sizes, cpu = orig_sizes(kv_cache_spec), CPUMLABackend.get_supported_kernel_block_sizes()
        extra = [x for x in cpu if x not in sizes]
        if extra:
            _stand_in("DeepSeek-V3.2 indexer KV-cache block size (v1/attention/backends/mla/"
                      "indexer.py DeepseekV32IndexerBackend.get_supported_kernel_block_sizes)",
                      "v1/worker/utils.py select_common_block_size: no common block size "
                      "(DEEPSEEK_V32_INDEXER: %s; CPU_MLA: %s)" % (sizes, cpu))
        return list(sizes) + extra

    DeepseekV32IndexerBackend.get_supported_kernel_block_sizes = staticmethod(
        supported_kernel_block_sizes)


# What the stand-in run replaced, with vLLM's own reason: [{"kernel", "why"}] (child reports).
STAND_INS = []


def _stand_in(kernel, why):
    rec = {"kernel": kernel, "why": str(why or "")}
    if rec not in STAND_INS:
        STAND_INS.append(rec)


if os.environ.get("FP8CHECK_ROLE"):
    install_hooks()


class Probe:
    """Compares one worker's layers with the export (see the module doc)."""

    def __init__(self, model, export_dir, block_size):
        import torch
        from safetensors import safe_open

        self.torch = torch
        self.safe_open = safe_open
        self.dir = export_dir
        self.block = list(block_size or [128, 128])
        idx = os.path.join(export_dir, "model.safetensors.index.json")
        if os.path.exists(idx):
            with open(idx) as f:
                self.wmap = json.load(f)["weight_map"]
        else:
            self.wmap = {}
            for fn in sorted(os.listdir(export_dir)):
                if fn.endswith(".safetensors"):
                    with safe_open(os.path.join(export_dir, fn), "pt") as f:
                        for k in f.keys():
                            self.wmap[k] = fn
        self.handles = {}
        try:
            from vllm.distributed import (
                get_tensor_model_parallel_rank,
                get_tensor_model_parallel_world_size,
            )

            self.rank = get_tensor_model_parallel_rank()
            self.tp = get_tensor_model_parallel_world_size()
        except Exception:
            self.rank, self.tp = 0, 1
        self.packed = {
            "qkv_proj": [["q_proj", "k_proj", "v_proj"], ["query", "key", "value"]],
            "gate_up_proj": [["gate_proj", "up_proj"], ["w1", "w3"]],
            "fused_qkv_a_proj": [["q_a_proj", "kv_a_proj_with_mqa"]],
            # DeepSeek-V3.2's indexer: one MergedColumnParallelLinear, output sizes [index_head_dim,
            # index_n_heads], wk's rows then weights_proj's (models/deepseek_v2.py Indexer.__init__,
            # load_weights' indexer_fused_mapping: shard 0 = wk, 1 = weights_proj), unquantized
            # (quant_config=None; an FP8 wk is dequantized to bf16 at load,
            # _try_load_fp8_indexer_wk). Not in the model's packed_modules_mapping.
            "wk_weights_proj": [["wk", "weights_proj"]],
        }
        for k, v in (getattr(model, "packed_modules_mapping", None) or {}).items():
            alts = self.packed.setdefault(k, [])
            if list(v) not in alts:
                alts.insert(0, list(v))
        self.model = model
        self.raw_all = getattr(model, _RAW_ATTR, None)

    # -- export access ---------------------------------------------------------
    def find(self, name):
        cands = [name, name[len("model.") :] if name.startswith("model.") else "model." + name]
        for c in cands:
            if c in self.wmap:
                return c
        return None

    def get(self, name):
        fn = self.wmap[name]
        if fn not in self.handles:
            self.handles[fn] = self.safe_open(os.path.join(self.dir, fn), "pt")
        return self.handles[fn].get_tensor(name)

    # -- comparison --------------------------------------------------------------
    def ordered(self, t):
        torch = self.torch
        i = t.contiguous().view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)

    def ulps(self, got, exp):
        """Per element bf16 ulps between got and exp (NaN = NaN; NaN vs a number: 2^16)."""
        torch = self.torch
        g, e = got.to(torch.bfloat16), exp.to(torch.bfloat16)
        ulps = (self.ordered(g) - self.ordered(e)).abs()
        gn, en = torch.isnan(g.float()), torch.isnan(e.float())
        return torch.where(gn | en, torch.where(gn & en, 0, 1 << 16), ulps), g, e

    def compare(self, got, exp):
        torch = self.torch
        if tuple(got.shape) != tuple(exp.shape):
            return {"shape_mismatch": [list(got.shape), list(exp.shape)], "max_ulp": None}
        ulps, g, e = self.ulps(got, exp)
        d = torch.nan_to_num((g.float() - e.float()).abs(), nan=float("inf"))
        out = {
            "max_abs_diff": float(d.max()) if d.numel() else 0.0,
            "max_ulp": int(ulps.max()) if ulps.numel() else 0,
            "n_diff": int((ulps > 0).sum()),
            "n_over_tol": int((ulps > ULP_TOL).sum()),
            "elements": int(ulps.numel()),
        }
        if out["n_over_tol"] and ulps.dim() == 2:
            # which output rows are off, as "a-b,c-d" (rows of the layer as vLLM holds it, merged
            # parts stacked): a scale placed on the wrong rows shows as whole row ranges
            bad = (ulps > ULP_TOL).any(dim=1).nonzero().flatten().tolist()
            spans = []
            for r in bad:
                if spans and spans[-1][1] == r - 1:
                    spans[-1][1] = r
                else:
                    spans.append([r, r])
            out["rows_over_tol"] = ",".join("%d-%d" % (a, b) for a, b in spans)
        return out

    def dequant(self, q, s, widths, blk, decode=None):
        """fp32 q*s for q [N, K] as loaded and its scale as loaded; the layout
        is read from the scale's shape. decode: codes to fp32 (default: E4M3)."""
        torch = self.torch
        n, k = q.shape
        qf = decode(q) if decode else q.float()
        if s.dtype in (torch.uint8, torch.float8_e8m0fnu):
            if s.dim() == 2 and s.shape[0] == n and k % s.shape[1] == 0:
                gsz = k // s.shape[1]
                return qf * _e8m0(s).repeat_interleave(gsz, 1), f"mx{gsz}"
            raise ValueError(f"MX scale {tuple(s.shape)} fits no layout for weight {tuple(q.shape)}")
        sf = s.float()
        if sf.numel() == 1:
            return qf * sf.reshape(()), "tensor"
        if sf.dim() == 1 and len(widths) > 1 and sf.numel() == len(widths) and sum(widths) == n:
            rows = torch.cat([sf[i].expand(w) for i, w in enumerate(widths)])
            return qf * rows[:, None], "tensor-per-shard"
        if sf.numel() == n and (sf.dim() == 1 or sf.shape[-1] == 1):
            return qf * sf.reshape(n, 1), "channel"
        if sf.dim() == 2:
            bn, bk = blk
            if (sf.shape[0] - 1) * bn < n <= sf.shape[0] * bn and (sf.shape[1] - 1) * bk < k <= sf.shape[1] * bk:
                return _dequant_block(q, s, bn, bk, decode), f"block{bn}x{bk}"
        raise ValueError(f"scale {tuple(s.shape)} fits no layout for weight {tuple(q.shape)}")

    def requant_max(self, q, s, widths):
        """vLLM's requantize_with_max_scale, recomputed: every shard to max(s),
        dequantized as its per_tensor_dequantize does, in float16 (q.to(fp16)
        * s: a float16 product, which rounds and underflows), then x / max(s)
        saturated and cast to E4M3."""
        torch = self.torch
        sf = s.float().reshape(-1)
        smax = sf.max()
        out, r0 = [], 0
        for i, w in enumerate(widths):
            dq = (q[r0 : r0 + w].to(torch.float16) * sf[i]).float()
            rq = (dq / smax).clamp(-448, 448).to(torch.float8_e4m3fn)
            out.append(rq.float() * smax)
            r0 += w
        return torch.cat(out, 0)

    def exp0_decode_bug(self, got, exp, q, s, widths, blk):
        """Does AMX_DECODE_BUG account for every element of the computed
        weight `got` that is more than ULP_TOL from the export `exp`? Each
        such element must hold a code with exponent field 0 and be within
        ULP_TOL of that code read as a normal number times its scale. Counts
        the differing elements by code, and the exponent-0 codes the kernel
        got right (a zero it kept at zero)."""
        torch = self.torch
        alt, _ = self.dequant(q, s, widths, blk, decode=e4m3_exp0_as_normal)
        codes = q.view(torch.uint8)
        exp0 = (codes & 0x78) == 0
        over = self.ulps(got, exp)[0] > ULP_TOL
        fits_bug = self.ulps(got, alt)[0] <= ULP_TOL
        unexplained = over & ~(exp0 & fits_bug)
        hist = torch.bincount(codes[over].to(torch.int64), minlength=256)
        return {
            "explained": int(unexplained.sum()) == 0,
            "elements_differing": int(over.sum()),
            "elements_unexplained": int(unexplained.sum()),
            "codes_differing": {f"0x{c:02x}": int(hist[c]) for c in range(256) if hist[c]},
            "subnormal_elements": int((over & exp0 & ((codes & 7) != 0)).sum()),
            "zero_elements": int((over & exp0 & ((codes & 7) == 0)).sum()),
            "exponent0_elements_right": int((exp0 & ~over).sum()),
            "exponent0_elements": int(exp0.sum()),
            "max_abs_diff": float((got.float() - exp.float()).abs().max()),
        }

    # -- expected tensors --------------------------------------------------------
    def linear_expected(self, name, mod, n_p, k_p):
        cls = type(mod).__name__
        mro = {c.__name__ for c in type(mod).__mro__}  # GateLinear is a ReplicatedLinear
        tp_size = getattr(mod, "tp_size", 1) or 1
        tp_rank = getattr(mod, "tp_rank", 0) or 0
        parent, _, last = name.rpartition(".")
        parts = None
        one = self.find(name + ".weight")
        if one is not None:
            parts = [one]
        else:
            for alt in self.packed.get(last, []):
                names = [self.find(f"{parent}.{c}.weight") for c in alt]
                if all(names):
                    parts = names
                    break
        if parts is None:
            return None, None
        widths = list(getattr(mod, "logical_widths", None) or getattr(mod, "output_partition_sizes", None) or [n_p])
        if len(widths) != len(parts):
            widths = [n_p // len(parts)] * len(parts)
        rep = getattr(mod, "num_kv_head_replicas", 1) or 1
        out = []
        for i, pn in enumerate(parts):
            t = self.get(pn)
            if t.dim() != 2:
                return None, parts
            if "RowParallelLinear" in mro and tp_size > 1:
                t = t[:, tp_rank * k_p : (tp_rank + 1) * k_p]
            elif tp_size > 1 and "ReplicatedLinear" not in mro:
                w = widths[i]
                r = tp_rank // rep if ("QKVParallelLinear" in mro and i > 0) else tp_rank
                t = t[r * w : (r + 1) * w]
            out.append(t)
        return self.torch.cat(out, 0), parts

    # -- per kind ---------------------------------------------------------------
    def linear(self, rec, name, mod, qm, raw, blk, computed):
        torch = self.torch
        w = raw["weight"]
        n_p, k_p = w.shape
        exp, parts = self.linear_expected(name, mod, n_p, k_p)
        rec["export"] = parts
        if exp is None:
            rec["skipped" if not rec["quantized"] else "error"] = "no export tensor for this layer"
            return
        widths = list(getattr(mod, "logical_widths", None) or [n_p])
        if rec["quantized"]:
            sname = next((s for s in ("weight_scale_inv", "weight_scale") if s in raw), None)
            if sname is None:
                rec["error"] = f"no weight scale among loaded parameters {sorted(raw)}"
                return
            deq, layout = self.dequant(w, raw[sname], widths, blk)
            rec["layout"] = layout
            rec["loaded"] = self.compare(deq, exp)
        else:
            rec["loaded"] = self.compare(w.to(exp.dtype if exp.dtype != torch.float32 else w.dtype), exp)
        if not computed:
            return
        # computed: the identity through the processed layer's quant method
        try:
            got = self.through(qm, mod, k_p, n_p)
            rec["computed"] = self.compare(got, exp)
            if rec["computed"].get("n_over_tol") and rec["quantized"] and amx_path():
                bug = self.exp0_decode_bug(got, exp, w, raw[sname], widths, blk)
                rec["kernel_decode_check"] = bug
                if bug["explained"]:
                    rec["kernel_decode_bug"] = AMX_DECODE_BUG
            if rec["computed"].get("n_over_tol") and rec.get("layout") in ("tensor-per-shard",):
                alt = self.requant_max(w, raw["weight_scale"] if "weight_scale" in raw else raw["weight_scale_inv"], widths)
                c2 = self.compare(got, alt)
                rec["computed_vs_vllm_requant"] = c2
                if c2.get("n_over_tol") == 0:
                    rec["requantized_by_vllm"] = True
        except Exception as e:
            rec["computed_error"] = _err(e)
            rec["computed_traceback_tail"] = _tb_tail(8)

    def through(self, qm, mod, k_p, n_p):
        """The identity through a processed layer's quant method: the [n_p, k_p] weight it
        computes with."""
        torch = self.torch
        eye = torch.eye(k_p, dtype=torch.bfloat16)
        with torch.no_grad():
            y = qm.apply(mod, eye, None) if "bias" in _params(qm.apply) else qm.apply(mod, eye)
        return y.float().t()[:n_p]

    def int4_dequant(self, wp, s):
        """I32 [N, K/8] codes and their scales [N, K/G] -> (bf16 [N, K], layout), decoded as
        int4_linear says."""
        from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

        torch = self.torch
        n_p, k_p = wp.shape[0], wp.shape[1] * 8
        group = k_p // s.shape[1]
        codes = unpack_from_int32(wp, 4, torch.Size([n_p, k_p]), packed_dim=1)
        deq = (codes.to(s.dtype) * s.repeat_interleave(group, 1)).to(torch.bfloat16)
        return deq, f"int4 group {group}, {s.dtype}".replace("torch.", "")

    def int4_linear(self, rec, name, mod, qm, raw, computed):
        """compressed-tensors pack-quantized INT4 (W4A16) as vLLM's weight loaders filled it
        (compressed_tensors_wNa16.py, CompressedTensorsWNA16.create_weights: weight_packed I32
        [N, K/8] packed along the input, weight_scale [N, K/G] in the model's dtype, weight_shape
        I64 [2]; fused layers stack their shards' rows). "loaded": the codes unpacked by
        compressed-tensors' own unpacker (compressors/pack_quantized/helpers.py
        unpack_from_int32: nibble i of word w is element 8w + i, minus 8) times the group's
        scale, as its dequantize computes it (x_q.to(scale.dtype) * scale: the product of a
        4-bit code and a bf16 scale is exact, rounded once to bf16), bit for bit against the
        export. "computed": the identity through the processed layer's quant method (vLLM's
        CPUWNA16LinearKernel on a CPU): the weight its cpu_gemm_wna16 multiplies with."""
        torch = self.torch
        wp, s = raw["weight_packed"], raw["weight_scale"]
        n_p, k_p = wp.shape[0], wp.shape[1] * 8
        exp, parts = self.linear_expected(name, mod, n_p, k_p)
        rec["export"] = parts
        rec["weight_shape_loaded"] = [int(x) for x in raw["weight_shape"].flatten()]
        if exp is None:
            rec["error"] = "no export tensor for this layer"
            return
        if s.dim() != 2 or s.shape[0] != n_p or k_p % s.shape[1]:
            rec["error"] = f"weight_scale {tuple(s.shape)} fits no group of weight [{n_p}, {k_p}]"
            return
        deq, rec["layout"] = self.int4_dequant(wp, s)
        rec["loaded"] = self.compare(deq, exp)
        if not computed:
            return
        try:
            rec["computed"] = self.compare(self.through(qm, mod, k_p, n_p), exp)
        except Exception as e:
            rec["computed_error"] = _err(e)
            rec["computed_traceback_tail"] = _tb_tail(8)

    def nvfp4_linear(self, rec, name, mod, raw, modelopt=False):
        """compressed-tensors NVFP4 as vLLM's weight loaders filled it (CompressedTensorsW4A4Fp4
        .create_weights, compressed_tensors_w4a4_nvfp4.py: weight_packed U8 [N, K/2],
        weight_scale F8_E4M3 [N, K/16], weight_global_scale F32 one per logical shard, a
        divisor: its process_weights_after_loading takes 1 / max of them), decoded exactly
        (e2m1 * scale / global of the row's shard, rounded once to bf16: fp4_check.py's oracle,
        the value fp8conv's export holds) and compared bit for bit. "loaded" only: vLLM 0.32's
        CPU build has no NVFP4 kernel to compute with (fp4_check.py says which).
        modelopt: ModelOpt NVFP4 (quantization/modelopt.py KNvfp4Static.create_weights: weight U8
        [N, K/2], weight_scale F8_E4M3 [N, K/group_size], weight_scale_2 F32 one per logical
        shard, a multiplier: its process keeps weight_scale_2.max()), decoded as
        e2m1 * scale * scale_2 of the row's shard (exact in float64: 2 + 4 + 24 significant
        bits), rounded once."""
        import numpy as np

        import fp4_check as F

        torch = self.torch
        wp = raw["weight" if modelopt else "weight_packed"]
        n_p, half = wp.shape
        exp, parts = self.linear_expected(name, mod, n_p, 2 * half)
        rec["export"] = parts
        if exp is None:
            rec["error"] = "no export tensor for this layer"
            return
        widths = list(getattr(mod, "logical_widths", None) or [n_p])
        g = raw["weight_scale_2" if modelopt else "weight_global_scale"].float().reshape(-1) \
            .numpy().astype(np.float64)
        if len(g) != len(widths) or sum(widths) != n_p:
            rec["error"] = f"global scales {g.tolist()} do not fit shard widths {widths}"
            return
        codes = F.unpack_e2m1(wp.numpy())
        sv = np.repeat(F.e4m3(raw["weight_scale"].view(torch.uint8).numpy()), 16, axis=-1)
        if sv.shape != codes.shape:
            rec["error"] = f"weight_scale {tuple(raw['weight_scale'].shape)} does not fit codes " \
                f"{codes.shape} in groups of 16"
            return
        gv = np.broadcast_to(np.repeat(g, widths)[:, None], sv.shape)
        if modelopt:
            bits = F.exact_bf16_bits(F.E2M1[codes] * sv * gv)
        else:
            bits = F.exact_bf16_bits(F.E2M1[codes] * sv, gv)
        deq = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)
        rec["layout"] = "nvfp4 %s, global per shard %s" % (
            "modelopt (weight_scale_2, a multiplier)" if modelopt else "compressed-tensors",
            g.tolist())
        rec["loaded"] = self.compare(deq, exp)
        if len(set(g.tolist())) > 1:
            # process_weights_after_loading keeps one global scale for the fused layer, the
            # largest (with a warning): the shards whose own is smaller are then computed with
            # e2m1 * scale / max, not the checkpoint's value. Counted, not judged (a loader rule
            # that a checkpoint with shared scales never meets: llm-compressor shares them,
            # modifiers/utils/helpers.py update_fused_layer_weight_global_scales).
            alt = F.exact_bf16_bits(F.E2M1[codes] * sv * g.max()) if modelopt else \
                F.exact_bf16_bits(F.E2M1[codes] * sv, np.full(sv.shape, g.max()))
            rec["vllm_max_global_differs"] = int(np.sum(alt != bits))

    def moe(self, rec, name, mod, raw, blk):
        torch = self.torch
        mpc = getattr(getattr(mod, "moe_config", None), "moe_parallel_config", None)
        tp_size = getattr(mpc, "tp_size", self.tp) if mpc is not None else self.tp
        tp_rank = getattr(mpc, "tp_rank", self.rank) if mpc is not None else self.rank
        if mpc is not None and getattr(mpc, "ep_size", 1) > 1:
            rec["skipped"] = "expert parallelism: not handled by this probe"
            return
        # INT4 experts (CompressedTensorsWNA16MoEMethod.create_weights: w13/w2_weight_packed
        # I32 [E, N, K/8], N first as in the checkpoint; w13/w2_weight_scale [E, N, K/G])
        packed = "w13_weight_packed" in raw
        w13, w2 = (raw["w13_weight_packed"], raw["w2_weight_packed"]) if packed else \
            (raw["w13_weight"], raw["w2_weight"])
        E, n13, hdim = w13.shape
        ip = w2.shape[2] * (8 if packed else 1)
        s13 = next((raw[k] for k in ("w13_weight_scale_inv", "w13_weight_scale") if k in raw), None)
        s2 = next((raw[k] for k in ("w2_weight_scale_inv", "w2_weight_scale") if k in raw), None)
        worst = {"loaded": None}
        layouts = set()
        exports = 0
        # vLLM 0.32 nests the routed experts one level down
        # (mlp.experts.routed_experts); the checkpoint names mlp.experts.{e}.
        base = name[: -len(".routed_experts")] if name.endswith(".routed_experts") else name
        for e in range(E):
            names = None
            for g, u, d in (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2")):
                ns = [self.find(f"{base}.{e}.{x}.weight") for x in (g, u, d)]
                if all(ns):
                    names = ns
                    break
            if names is None:
                rec["error"] = f"no export tensors for expert {e} of {name}"
                return
            exports += 3
            gt, ut, dt = (self.get(x) for x in names)
            if tp_size > 1:
                gt = gt[tp_rank * ip : (tp_rank + 1) * ip]
                ut = ut[tp_rank * ip : (tp_rank + 1) * ip]
                dt = dt[:, tp_rank * ip : (tp_rank + 1) * ip]
            exp13 = torch.cat([gt, ut], 0)
            for wt, st, exp, widths in ((w13[e], s13, exp13, [n13 // 2, n13 // 2]), (w2[e], s2, dt, [w2.shape[1]])):
                if packed:
                    deq, layout = self.int4_dequant(wt, st[e])
                    layouts.add(layout)
                    c = self.compare(deq, exp)
                elif rec["quantized"]:
                    deq, layout = self.dequant(wt, st[e], widths, blk)
                    layouts.add(layout)
                    c = self.compare(deq, exp)
                else:
                    c = self.compare(wt, exp)
                worst["loaded"] = _worse(worst["loaded"], c)
        rec["experts"] = E
        rec["export"] = f"{exports} per-expert tensors"
        if layouts:
            rec["layout"] = ",".join(sorted(layouts))
        rec["loaded"] = worst["loaded"]
        rec["computed_skipped"] = "fused MoE experts: no linear apply to push an identity through"

    def embedding(self, rec, name, mod, raw):
        w = raw["weight"]
        pn = self.find(name + ".weight")
        if pn is None and name.endswith("lm_head"):
            pn = self.find(name.rsplit("lm_head", 1)[0] + "embed_tokens.weight") or self.find("model.embed_tokens.weight")
            rec["tied"] = pn is not None
        if pn is None:
            rec["skipped"] = "no export tensor for this layer"
            return
        exp = self.get(pn)
        si = getattr(mod, "shard_indices", None)
        if si is not None:
            a, b = si.org_vocab_start_index, si.org_vocab_end_index
            exp = exp[a:b]
            w = w[: b - a]
        rec["export"] = [pn]
        rec["loaded"] = self.compare(w, exp.to(w.dtype))

    def kv_scales(self, name, mod, qm, computed):
        """An attention layer's KV-cache scales: the parameters k_scale/v_scale
        (q_scale, prob_scale) as vLLM's weight loader left them, and their
        dtype (created -1.0 in the default dtype, i.e. the model's,
        BaseKVCacheMethod.create_weights in quantization/kv_cache.py: a scale
        the loader never filled stays -1.0) and, after processing, the scales
        the layer computes with (_k_scale_float, _v_scale_float; 1.0 whenever
        kv_cache_dtype is "auto", process_weights_after_loading there).
        Not a weight: listed under not_compared; matrix.py's release stage
        holds them against the checkpoint's."""
        raw = (self.raw_all or {}).get(name) or {}
        rec = {"name": name, "module": type(mod).__name__, "quant_method": type(qm).__name__,
               "skipped": "KV-cache scales, not a weight (kv_scales)",
               "kv_scales": {pn: [float(x) for x in p.float().flatten()] for pn, p in raw.items()},
               "kv_scales_dtype": {pn: str(p.dtype).replace("torch.", "") for pn, p in raw.items()}}
        if computed:
            rec["kv_scales_processed"] = {
                k: float(getattr(mod, "_%s_float" % k)) for k in ("k_scale", "v_scale")
                if getattr(mod, "_%s_float" % k, None) is not None}
            rec["kv_cache_dtype"] = getattr(mod, "kv_cache_dtype", None)
        return rec

    def run(self, computed=True):
        torch = self.torch
        layers = []
        missing = None
        for name, mod in self.model.named_modules():
            qm = getattr(mod, "quant_method", None)
            if qm is None:
                continue
            if "KVCache" in type(qm).__name__:
                layers.append(self.kv_scales(name, mod, qm, computed))
                continue
            rec = {"name": name, "module": type(mod).__name__, "quant_method": type(qm).__name__}
            scheme = getattr(mod, "scheme", None)
            if scheme is not None:
                rec["scheme"] = type(scheme).__name__
            for holder in (qm, scheme):
                for attr in ("fp8_linear", "kernel", "mxfp8_linear"):
                    k = getattr(holder, attr, None) if holder is not None else None
                    if k is not None and not isinstance(k, (bool, str)):
                        rec["kernel"] = type(k).__name__
            for attr in ("fp8_backend", "mxfp8_backend", "moe_backend"):
                if getattr(qm, attr, None) is not None:
                    rec["backend"] = str(getattr(qm, attr))
            raw = (self.raw_all or {}).get(name)
            try:
                if raw is None:
                    rec["skipped"] = "no parameters captured at load"
                else:
                    rec["quantized"] = any(p.dtype == torch.float8_e4m3fn for p in raw.values())
                    blk = list(getattr(mod, "weight_block_size", None) or self.block)
                    if "w13_weight" in raw or "w13_weight_packed" in raw:
                        rec["quantized"] = rec["quantized"] or "w13_weight_packed" in raw
                        self.moe(rec, name, mod, raw, blk)
                    elif "Embedding" in rec["module"] or "LMHead" in rec["module"]:
                        self.embedding(rec, name, mod, raw)
                    elif {"weight", "weight_scale", "weight_scale_2"} <= set(raw) and \
                            raw["weight"].dtype == torch.uint8:
                        rec["quantized"] = True
                        self.nvfp4_linear(rec, name, mod, raw, modelopt=True)
                    elif "weight" in raw and raw["weight"].dim() == 2:
                        self.linear(rec, name, mod, qm, raw, blk, computed)
                    elif {"weight_packed", "weight_scale", "weight_shape"} <= set(raw) and \
                            raw["weight_packed"].dtype == torch.int32:
                        rec["quantized"] = True
                        self.int4_linear(rec, name, mod, qm, raw, computed)
                    elif {"weight_packed", "weight_scale", "weight_global_scale"} <= set(raw):
                        rec["quantized"] = True
                        self.nvfp4_linear(rec, name, mod, raw)
                    else:
                        rec["skipped"] = f"parameters {sorted(raw)}: a layout this probe does not know"
            except Exception as e:
                rec["error"] = _err(e)
                rec["traceback_tail"] = _tb_tail(8)
            if rec.get("computed_error") and missing is None:
                missing = rec["computed_error"]
            layers.append(rec)
        return {"rank": self.rank, "tp": self.tp, "layers": layers, "missing_kernel": missing,
                "computed": computed}


def _params(fn):
    import inspect

    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _worse(a, b):
    if a is None:
        return b
    if b.get("shape_mismatch"):
        return b
    if a.get("shape_mismatch"):
        return a
    out = dict(a)
    out["max_abs_diff"] = max(a["max_abs_diff"], b["max_abs_diff"])
    out["max_ulp"] = max(a["max_ulp"], b["max_ulp"])
    for k in ("n_diff", "n_over_tol", "elements"):
        out[k] = a[k] + b[k]
    return out


def run_probe(model, export_dir, block_size):
    return Probe(model, export_dir, block_size).run()


def _logprob_positions(seq):
    """list over positions of {token_id: [logprob, rank]} (None where vLLM gives none)."""
    out = []
    for pos in seq or []:
        if pos is None:
            out.append(None)
            continue
        out.append({str(int(t)): [float(lp.logprob), lp.rank] for t, lp in pos.items()})
    return out


def child_main(a):
    """One vLLM instance: load a.model, probe weights (role q), generate."""
    t0 = _T_START
    res = {"role": a.child, "model": a.model, "tp": a.tp, "timings": {}}

    def save():
        res["timings"]["total"] = round(time.time() - t0, 2)
        if STAND_INS:
            res["stand_ins"] = STAND_INS
        with open(a.out, "w") as f:
            json.dump(res, f)

    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    res["vllm"] = vllm.__version__
    res["amx"] = amx_path()
    res["timings"]["import"] = round(time.time() - t0, 2)
    cfg = read_config(a.model)
    pooling = is_pooling(cfg)
    kw = dict(
        model=a.model,
        dtype="bfloat16",
        enforce_eager=True,
        max_model_len=128,
        tensor_parallel_size=a.tp,
        skip_tokenizer_init=not pooling,  # vLLM's pooling path wants the tokenizer
        seed=0,
    )
    if a.tp > 1:
        kw["distributed_executor_backend"] = "mp"
    if a.language_model_only:
        # vLLM's MultiModalConfig.language_model_only (config/multimodal.py): every
        # modality limit 0, so the model's multimodal processor, which wants a
        # tokenizer (Mistral3MultiModalProcessor), is not built
        kw["language_model_only"] = True
    if a.allow_deprecated_quantization:
        # ModelConfig refuses a quant_method listed in quantization/__init__.py
        # DEPRECATED_QUANTIZATION_METHODS (fbgemm_fp8 in 0.32) unless this is set
        kw["allow_deprecated_quantization"] = True
    if pooling:
        kw["runner"] = "pooling"
    import torch
    if (os.environ.get("FP8CHECK_EMULATE") == "1" and not torch.cpu._is_avx512_supported()
            and not torch.cpu._is_amx_tile_supported()):
        # the stand-in run on a CPU without vLLM's FP8 KV-cache kernel (KERNEL_UNAVAILABLE):
        # a bf16 cache, so that the weights and the KV-cache scales vLLM's loaders fill are
        # still captured (the scales are loaded either way; only the cache's dtype differs)
        kw["kv_cache_dtype"] = "bfloat16"
        res["kv_cache_dtype_forced"] = "bfloat16 (no FP8 KV-cache kernel on this CPU)"
    t1 = time.time()
    try:
        llm = LLM(**kw)
    except BaseException as e:
        res.update(loaded=False, stage="load", error=_err(e), traceback_tail=_tb_tail())
        save()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # as below: no teardown; the parent kills the process group
    res["loaded"] = True
    res["timings"]["load"] = round(time.time() - t1, 2)
    save()
    if a.child == "q":
        t1 = time.time()
        try:
            fn = functools.partial(run_probe, export_dir=os.path.abspath(a.export), block_size=block_size_of(cfg))
            res["weights_raw"] = llm.apply_model(fn)
        except BaseException as e:
            res["weights_error"] = _err(e)
            res["weights_traceback_tail"] = _tb_tail()
        res["timings"]["weights"] = round(time.time() - t1, 2)
        save()
    t1 = time.time()
    vocab = int(cfg.get("vocab_size") or 512)
    prompts = make_prompts(vocab, a.prompts)
    try:
        tps = [TokensPrompt(prompt_token_ids=p) for p in prompts]
        if pooling:
            outs = llm.embed(tps, use_tqdm=False)
            res["generation_raw"] = {"pooling": True, "prompts": prompts,
                                     "embeddings": [list(map(float, o.outputs.embedding)) for o in outs]}
        else:
            sp = SamplingParams(max_tokens=4, temperature=0.0, prompt_logprobs=5, logprobs=5)
            outs = llm.generate(tps, sp, use_tqdm=False)
            gen = []
            for p, o in zip(prompts, outs):
                c = o.outputs[0]
                gen.append({
                    "prompt": p,
                    "prompt_logprobs": _logprob_positions(o.prompt_logprobs),
                    "tokens": list(map(int, c.token_ids)),
                    "logprobs": _logprob_positions(c.logprobs),
                })
            res["generation_raw"] = {"pooling": False, "outputs": gen}
    except BaseException as e:
        res["generate_error"] = _err(e)
        res["generate_traceback_tail"] = _tb_tail()
    res["timings"]["generate"] = round(time.time() - t1, 2)
    save()
    # Everything is reported: skip vLLM's teardown (4-5 s). The parent kills
    # this child's process group (its TP workers, engine core) afterwards.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# =============================================================================
# parent side


_CHILDREN = []


def _on_signal(signum, frame):
    """Parent killed: take the vLLM children (own sessions) down too."""
    import signal

    for c in _CHILDREN:
        try:
            os.killpg(c.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    sys.exit(128 + signum)


# Under the fork server (forkserver.py: `vllm_check.py --serve`, what matrix.py and fp4_check.py
# run), a run's TP=1 children are forked from the run, itself forked from the server that has
# imported vLLM once: vLLM's import is 10-20 s of CPU here, paid once a matrix instead of once per
# child. What the children read from the environment at import time is set before the import
# (_zygote), the rest is each child's own environment, set after the fork. A lone run starts its
# children as processes of their own (it would import serially what they import side by side),
# and so are TP > 1 children (vLLM's CPU platform spawns their workers anyway); FP8CHECK_NO_FORK=1
# starts every child so.
_ZYGOTE = {"ready": False}


class _Forked:
    """A forked child, with the part of Popen's interface the parent uses."""

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def wait(self, timeout=None):
        if self.returncode is not None:
            return self.returncode
        end = None if timeout is None else time.time() + timeout
        while True:
            pid, status = os.waitpid(self.pid, 0 if end is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                return self.returncode
            if time.time() >= end:
                raise subprocess.TimeoutExpired(["vllm_check child"], timeout)
            time.sleep(0.05)


def _zygote():
    if not _ZYGOTE["ready"]:
        for k, v in child_env(1, "q", False).items():
            if k.startswith(("HF_", "TRANSFORMERS_", "TQDM_", "VLLM_LOGGING")):
                os.environ.setdefault(k, v)
        import vllm  # noqa: F401
        from vllm import LLM, SamplingParams  # noqa: F401
        from vllm.inputs import TokensPrompt  # noqa: F401
        _ZYGOTE["ready"] = True


def _fork_child(cmd, env, log):
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return _Forked(pid)
    code = 1
    try:  # the child: its own session (killpg), log, environment and arguments
        global _T_START
        import signal

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)  # not the parent's: it kills the children
        del _CHILDREN[:]
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__  # fds 1, 2: the log
        os.environ.clear()
        os.environ.update(env)
        sys.argv = cmd[1:]
        _T_START = time.time()
        install_hooks()
        code = main()
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)


def run_child(role, a, model, emulate):
    out = os.path.join(a.workdir, f"{role}{'-emu' if emulate else ''}.json")
    log = os.path.join(a.workdir, f"{role}{'-emu' if emulate else ''}.log")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", role, "--model", model,
           "--export", a.export, "--tp", str(a.tp), "--prompts", str(a.prompts), "--_out", out]
    if a.language_model_only:
        cmd.append("--language-model-only")
    if a.allow_deprecated_quantization:
        cmd.append("--allow-deprecated-quantization")
    env = child_env(a.tp, role, emulate)
    loaded_out = None
    if role == "q":
        loaded_out = os.path.join(a.workdir, f"q{'-emu' if emulate else ''}-loaded")
        for fn in os.listdir(a.workdir):
            if fn.startswith(os.path.basename(loaded_out) + ".rank"):
                os.unlink(os.path.join(a.workdir, fn))
        env["FP8CHECK_LOADED_OUT"] = loaded_out
        env["FP8CHECK_EXPORT"] = os.path.abspath(a.export)
        env["FP8CHECK_BLOCK"] = json.dumps(block_size_of(read_config(a.model)))
    t0 = time.time()
    if a.tp == 1 and _ZYGOTE["ready"] and os.environ.get("FP8CHECK_NO_FORK") != "1":
        p = _fork_child(cmd, env, log)
    else:
        with open(log, "w") as lf:
            p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
    _CHILDREN.append(p)
    return {"proc": p, "out": out, "log": log, "t0": t0, "role": role, "loaded_out": loaded_out}


def worker_root_cause(log):
    """With TP > 1 vLLM's LLM() raises "Engine core initialization failed.
    See root cause above.": the root cause is the exception a TP worker
    logged. Returns (worker, its exception line and the lines continuing
    it, the log prefix removed), or None."""
    import re

    rx = re.compile(r"^\((Worker[^ )]*) pid=\d+\) ERROR [^\[]*\[[^\]]+\] ?(.*)$")
    exc = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)(: |$)")
    per = {}
    for line in log.splitlines():
        m = rx.match(line)
        if m:
            per.setdefault(m.group(1), []).append(m.group(2))
    for w in sorted(per):
        lines = per[w]
        idx = [i for i, t in enumerate(lines) if exc.match(t)]
        if not idx:
            continue
        out = [lines[idx[-1]]]
        for t in lines[idx[-1] + 1 :]:
            if t.startswith(("Traceback", "WorkerProc", "  File ")) or exc.match(t):
                break
            out.append(t)
        return w, "\n".join(out).rstrip()
    return None


def wait_child(c, timeout):
    p = c["proc"]
    timed_out = False
    try:
        p.wait(timeout=max(1, timeout - (time.time() - c["t0"])))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, 9)  # the child's own session: it and its TP workers
        except ProcessLookupError:
            pass
        p.wait()
    secs = round(time.time() - c["t0"], 2)
    try:  # leftovers of the child's session: TP workers, the engine core
        os.killpg(p.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass
    if p in _CHILDREN:  # reaped: its pid may be another process's from now on
        _CHILDREN.remove(p)
    res = None
    if os.path.exists(c["out"]):
        with open(c["out"]) as f:
            res = json.load(f)
    with open(c["log"], errors="replace") as f:
        log = f.read()
    tail = log[-3000:]
    if res is None:
        res = {"loaded": False, "stage": "load",
               "error": f"child process {'timed out' if timed_out else 'exited with status ' + str(p.returncode)} before reporting",
               "traceback_tail": tail}
    elif timed_out or p.returncode != 0:
        # Reported some stages, then died or hung: the missing stages say so.
        why = "timed out" if timed_out else f"died (exit status {p.returncode})"
        last = tail.strip().splitlines()[-1] if tail.strip() else ""
        res["child_exit"] = f"child process {why}"
        res["child_log_tail"] = tail
        if res.get("role") == "q" and "weights_raw" not in res and "weights_error" not in res:
            res["weights_error"] = f"child process {why} in the weight probe: {last}"
        elif "generation_raw" not in res and "generate_error" not in res:
            res["generate_error"] = f"child process {why} while generating: {last}"
    res["seconds"] = secs
    res["log_path"] = c["log"]
    for k in ("error", "weights_error", "generate_error"):
        if res.get(k) and any(x in res[k] for x in ("root cause", "EngineCore", "EngineDead", "WorkerProc")):
            rc = worker_root_cause(log)
            if rc:
                res[k + "_engine"] = res[k]  # what LLM() raised in the child
                res[k + "_worker"] = rc[0]
                res[k] = rc[1]  # the TP worker's exception: the root cause
    if c.get("loaded_out"):
        d, b = os.path.split(c["loaded_out"])
        hook = []
        for fn in sorted(os.listdir(d)):
            if fn.startswith(b + ".rank") and fn.endswith(".json"):
                with open(os.path.join(d, fn)) as f:
                    hook.append(json.load(f))
        res["hook_loaded"] = hook
    return res


def summarize_weights(per_rank):
    layers, exact, max_ulp = 0, 0, 0
    bad, requant, skipped, computed_skipped, decode_bug = [], [], [], [], []
    decode_counts = {"elements": 0, "subnormal_elements": 0, "zero_elements": 0, "codes": {}}
    per_layer = []
    tp = len(per_rank)
    for r in per_rank:
        for rec in r["layers"]:
            nm = rec["name"] + (f"@rank{r['rank']}" if tp > 1 else "")
            row = {k: v for k, v in rec.items() if k not in ("traceback_tail", "computed_traceback_tail")}
            row["name"] = nm
            per_layer.append(row)
            if rec.get("skipped"):
                skipped.append(f"{nm}: {rec['skipped']}")
                continue
            if rec.get("error"):
                bad.append(f"{nm}: {rec['error']}")
                layers += 1
                continue
            layers += 1
            lo, co = rec.get("loaded"), rec.get("computed")
            is_bad = False
            ulps = []
            for c in (lo, co):
                if c is None:
                    continue
                if c.get("shape_mismatch"):
                    is_bad = True
                else:
                    ulps.append(c["max_ulp"])
            if lo is not None and not lo.get("shape_mismatch") and lo["n_diff"]:
                is_bad = True
            if co is not None and not co.get("shape_mismatch") and co["n_over_tol"]:
                if rec.get("requantized_by_vllm"):
                    requant.append(nm)
                elif rec.get("kernel_decode_bug"):
                    decode_bug.append(nm)
                    chk = rec["kernel_decode_check"]
                    decode_counts["elements"] += chk["elements_differing"]
                    decode_counts["subnormal_elements"] += chk["subnormal_elements"]
                    decode_counts["zero_elements"] += chk["zero_elements"]
                    for c, n in chk["codes_differing"].items():
                        decode_counts["codes"][c] = decode_counts["codes"].get(c, 0) + n
                else:
                    is_bad = True
            if rec.get("quantized") and co is None:
                computed_skipped.append(nm)
            if is_bad:
                bad.append(nm)
            if ulps:
                max_ulp = max(max_ulp, *ulps)
            if not is_bad and all(c is None or (not c.get("shape_mismatch") and c["n_diff"] == 0) for c in (lo, co)):
                exact += 1
    return {
        "layers": layers,
        "exact": exact,
        "max_ulp": max_ulp,
        "bad": bad,
        "requantized_by_vllm": requant,
        "kernel_decode_bug": decode_bug,
        "kernel_decode_bug_counts": decode_counts if decode_bug else None,
        "loaded_only": computed_skipped,
        "not_compared": skipped,
        "criterion": WEIGHT_CRITERION,
        "per_layer": per_layer,
    }


def compare_generation(gq, ge):
    if gq.get("pooling"):
        import math

        cos = []
        for a, b in zip(gq["embeddings"], ge["embeddings"]):
            dot = sum(x * y for x, y in zip(a, b))
            na = math.sqrt(sum(x * x for x in a))
            nb = math.sqrt(sum(y * y for y in b))
            cos.append(dot / (na * nb) if na and nb else 0.0)
        mn = min(cos) if cos else 0.0
        return {"pooling": True, "prompts": len(cos), "cosine": cos, "min_cosine": mn,
                "criterion": GEN_CRITERION, "pass": bool(cos) and mn >= COS_TOL}
    deltas, top_deltas, top1_same, top1_n = [], [], 0, 0
    greedy_equal = 0
    first_tok_delta = []
    for oq, oe in zip(gq["outputs"], ge["outputs"]):
        pr = oq["prompt"]
        for pos in range(1, len(pr)):
            dq, de = oq["prompt_logprobs"][pos], oe["prompt_logprobs"][pos]
            if dq is None or de is None:
                continue
            t = str(pr[pos])
            deltas.append(abs(dq[t][0] - de[t][0]))
            tq = min(dq, key=lambda k: dq[k][1])
            te = min(de, key=lambda k: de[k][1])
            top1_n += 1
            top1_same += tq == te
            for tok, (lp, rank) in de.items():
                if rank is not None and rank <= 5 and tok in dq:
                    top_deltas.append(abs(dq[tok][0] - lp))
        greedy_equal += oq["tokens"] == oe["tokens"]
        if oq["tokens"] and oe["tokens"] and oq["logprobs"] and oe["logprobs"]:
            t0 = str(oe["tokens"][0])
            if t0 in oq["logprobs"][0]:
                first_tok_delta.append(abs(oq["logprobs"][0][t0][0] - oe["logprobs"][0][t0][0]))
    n = len(deltas)
    mean = sum(deltas) / n if n else float("inf")
    mx = max(deltas) if n else float("inf")
    return {
        "pooling": False,
        "prompts": len(gq["outputs"]),
        "positions": n,
        "mean_abs_delta_prompt_token": mean,
        "max_abs_delta_prompt_token": mx,
        "max_abs_delta_top5": max(top_deltas) if top_deltas else None,
        "top1_agreement": top1_same / top1_n if top1_n else None,
        "greedy_equal": f"{greedy_equal}/{len(gq['outputs'])}",
        "greedy_all_equal": greedy_equal == len(gq["outputs"]),
        "first_generated_token_abs_delta": max(first_tok_delta) if first_tok_delta else None,
        "greedy_tokens_q": [o["tokens"] for o in gq["outputs"]],
        "greedy_tokens_e": [o["tokens"] for o in ge["outputs"]],
        "criterion": GEN_CRITERION,
        "pass": n > 0 and mean <= MEAN_TOL and mx <= MAX_TOL,
    }


def kernel_limit(err, context=""):
    """The KERNEL_LIMITS entry an error is, or None."""
    for text, where, meaning in KERNEL_LIMITS:
        if err and text in err and (where in err or where in (context or "")):
            return meaning
    return None


def kernel_unavailable(err, context=""):
    """No kernel for the layout on this CPU, or one that cannot run it
    (KERNEL_LIMITS; context: the traceback and log the error came with)."""
    return bool(err) and (any(s in err for s in KERNEL_UNAVAILABLE) or kernel_limit(err, context) is not None)


def _context(r, *keys):
    """Tracebacks and the child's log, where a kernel's name shows."""
    out = [r.get(k) or "" for k in keys]
    try:
        with open(r.get("log_path") or "", errors="replace") as f:
            out.append(f.read())
    except OSError:
        pass
    return "\n".join(out)


def evaluate(a, emulate, keep_e=False, prev_e=None):
    """One Q run and one E run (concurrently for TP=1); the report's body.
    keep_e: when Q fails to load, let E finish anyway and return its result
    (body["_e"]) for a later evaluate(prev_e=...): E is a plain bf16
    checkpoint, emulation changes nothing there."""
    body = {"loaded": False, "stage": None, "error": None, "missing_kernel": None,
            "kernel_unavailable": False, "weights": None, "generation": None, "ok": False}
    cq = run_child("q", a, a.model, emulate)
    ce = None
    if prev_e is None and a.tp == 1 and not a.sequential:
        ce = run_child("e", a, a.export, emulate)
    rq = wait_child(cq, a.timeout)
    body["vllm"] = rq.get("vllm")
    body["amx"] = rq.get("amx")
    body["timings"] = {"q": dict(rq.get("timings", {}), wall=rq["seconds"])}
    body["loaded"] = bool(rq.get("loaded"))
    if rq.get("stand_ins"):
        body["stand_ins"] = rq["stand_ins"]
    hook = [h for h in rq.get("hook_loaded", []) if "layers" in h]
    if not body["loaded"]:
        ctx = _context(rq, "traceback_tail")
        body.update(stage="load", error=rq.get("error"), traceback_tail=rq.get("traceback_tail"),
                    kernel_unavailable=kernel_unavailable(rq.get("error"), ctx))
        why = [w for t, w in KERNEL_WHY if t in (rq.get("error") or "")]
        if why:
            body["kernel_why"] = why[0]
        if kernel_limit(rq.get("error"), ctx):
            body["kernel_limit"] = "%s: %s" % (kernel_limit(rq.get("error"), ctx), rq.get("error"))
        if rq.get("error_worker"):
            body["error_worker"] = rq["error_worker"]
            body["error_engine"] = rq["error_engine"]
        if hook:
            # vLLM loaded the weights, then failed (processing them or later):
            # the comparison made at load time is still a result.
            body["_wraw"] = hook
            body["weights"] = summarize_weights(hook)
            body["weights"]["stage"] = ("loaded parameters only, compared before "
                                        "process_weights_after_loading; vLLM then failed")
        for h in rq.get("hook_loaded", []):
            if "error" in h:
                body["weights_probe_error"] = h["error"]
        if ce is not None and keep_e and body["kernel_unavailable"]:
            body["_e"] = wait_child(ce, a.timeout)
        elif ce is not None:
            try:
                os.killpg(ce["proc"].pid, 9)
            except ProcessLookupError:
                pass
            ce["proc"].wait()
        return body
    for k in ("child_exit", "child_log_tail"):
        if k in rq:
            body[k] = rq[k]
    if "weights_raw" in rq:
        body["_wraw"] = rq["weights_raw"]
        body["weights"] = summarize_weights(rq["weights_raw"])
    elif hook:
        body["_wraw"] = hook
        body["weights"] = summarize_weights(hook)
        body["weights"]["stage"] = "loaded parameters only (the probe through the kernels did not run)"
        mk = next((r["missing_kernel"] for r in rq["weights_raw"] if r.get("missing_kernel")), None)
        if mk:
            body["missing_kernel"] = mk
    else:
        body.update(stage="weights", error=rq.get("weights_error", "no weight report"),
                    traceback_tail=rq.get("weights_traceback_tail"))
    if "generate_error" in rq:
        body["stage"] = body["stage"] or "generate"
        body["error"] = body["error"] or rq["generate_error"]
        body["traceback_tail"] = rq.get("generate_traceback_tail")
        lim = kernel_limit(rq["generate_error"], _context(rq, "generate_traceback_tail"))
        if lim:
            body["kernel_limit"] = "%s: %s" % (lim, rq["generate_error"])
        if (lim or any(s in rq["generate_error"] for s in MISSING_OP)) and not body["missing_kernel"]:
            body["missing_kernel"] = rq["generate_error"]
    re_ = prev_e
    if ce is None and prev_e is None and "generation_raw" in rq:
        ce = run_child("e", a, a.export, emulate)
    if ce is not None:
        re_ = wait_child(ce, a.timeout)
    if re_ is not None:
        body["timings"]["e"] = dict(re_.get("timings", {}), wall=re_["seconds"])
        if "generation_raw" in rq:
            if "generation_raw" in re_:
                body["generation"] = compare_generation(rq["generation_raw"], re_["generation_raw"])
            else:
                err = re_.get("error") or re_.get("generate_error") or "no generation from the export"
                body["generation"] = {"pass": False, "error": f"export run: {err}",
                                      "traceback_tail": re_.get("traceback_tail") or re_.get("generate_traceback_tail")}
        body["_e"] = re_
    w = body["weights"]
    body["ok"] = bool(
        body["loaded"] and w is not None and w["layers"] > 0 and not w["bad"]
        and not body["missing_kernel"] and body["error"] is None
        and body["generation"] is not None and body["generation"].get("pass")
    )
    return body


def parent_main(a):
    import signal

    t0 = time.time()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    a.workdir = a.workdir or os.path.splitext(os.path.abspath(a.json))[0] + ".work"
    os.makedirs(a.workdir, exist_ok=True)
    report = {"model": a.model, "export": a.export, "tp": a.tp}
    emulate = not a.no_emulate
    body = evaluate(a, emulate=False, keep_e=emulate)
    prev_e = body.pop("_e", None)
    body.pop("_wraw", None)
    report.update(body)
    if emulate and (report["kernel_unavailable"] or report["missing_kernel"]):
        emu = evaluate(a, emulate=True, prev_e=prev_e)
        emu.pop("_e", None)
        wraw = emu.pop("_wraw", None)
        if prev_e is not None and "e" in emu.get("timings", {}):
            emu["timings"]["e"]["note"] = "the export's run of the first attempt, reused"
        if report["weights"] is None and wraw:
            # vLLM refused before loading any weight (no kernel for a layer on
            # this CPU). The stand-in run's "loaded" comparisons are vLLM's own
            # weight loaders at work (the stand-in only replaces the kernel,
            # which runs after the snapshot): reported here, without the
            # stand-in's "computed" ones.
            report["weights"] = summarize_weights([
                dict(r, layers=[{k: v for k, v in rec.items()
                                 if not k.startswith("computed") and k != "requantized_by_vllm"}
                                for rec in r["layers"]]) for r in wraw])
            report["weights"]["stage"] = (
                "loaded parameters only, filled by vLLM's weight loaders in the run with stand-in "
                "kernels (see emulated); no kernel of this vLLM build computed with them")
        emu["note"] = ("vLLM's MXFP8 emulation kernel and a reference FP8 block kernel "
                       "(y = x @ (q*s)^T in fp32) stood in for kernels this CPU lacks, and "
                       "vLLM's INT4 MoE experts (CPUExpertsInt4) ran with their AMX and group-32 "
                       "gates lifted: vLLM's weight loading is checked, not a kernel it offers "
                       "here")
        report["emulated"] = emu
        if not emu.get("loaded") and emu.get("error") and not kernel_unavailable(
                emu["error"], emu.get("traceback_tail") or ""):
            # With a kernel (AMX CPU, GPU) vLLM would still refuse: say so.
            report["refused_past_missing_kernel"] = {
                "stage": emu.get("stage"), "error": emu["error"],
                "note": "raised by vLLM in the run with stand-in kernels, i.e. after the "
                        "kernel this CPU lacks; on a machine with the kernel this is the refusal"}
    report["seconds"] = round(time.time() - t0, 2)
    tmp = a.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.json)
    g = report.get("generation") or {}
    w = report.get("weights") or {}
    print(f"vllm_check: {a.model} tp={a.tp}: loaded={report['loaded']} "
          f"weights={w.get('layers')} layers, {w.get('exact')} exact, max_ulp={w.get('max_ulp')}, bad={len(w.get('bad', []) or [])} "
          f"generation={'pass' if g.get('pass') else ('FAIL' if g else None)} ok={report['ok']} "
          f"({report['seconds']} s){' error: ' + report['error'] if report.get('error') else ''}")
    return 0


def break_scale(src, out, tensor, factor):
    """Negative control: copy src to out with one scale tensor times factor
    (an MX U8 exponent scale gets log2(factor) added)."""
    import math

    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    if os.path.exists(out):
        shutil.rmtree(out)
    shutil.copytree(src, out)
    idx = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wmap = json.load(f)["weight_map"]
    else:
        wmap = {}
        for fn in os.listdir(out):
            if fn.endswith(".safetensors"):
                with safe_open(os.path.join(out, fn), "pt") as f:
                    wmap.update({k: fn for k in f.keys()})
    scales = sorted(k for k in wmap if k.endswith(("weight_scale", "weight_scale_inv")))
    if tensor is None:
        pref = [k for k in scales if "layers.0." in k and ("o_proj" in k or "attention.output.dense" in k)]
        tensor = (pref or scales or [None])[0]
    if tensor not in wmap:
        raise SystemExit(f"break-scale: no scale tensor {tensor!r} in {src}")
    fn = os.path.join(out, wmap[tensor])
    with safe_open(fn, "pt") as f:
        meta = f.metadata()
        ts = {k: f.get_tensor(k) for k in f.keys()}
    t = ts[tensor]
    if t.dtype == torch.uint8:
        ts[tensor] = (t.to(torch.int32) + round(math.log2(factor))).clamp(0, 254).to(torch.uint8)
    else:
        ts[tensor] = (t.float() * factor).to(t.dtype)
    save_file(ts, fn, metadata=meta)
    print(f"break-scale: {out}: {tensor} x{factor} ({wmap[tensor]})")
    return 0


def main(argv=None):
    """The command line (argv: its arguments; None: sys.argv's). The fork server (forkserver.py)
    calls it in a child of the process that imported vLLM once, whose TP=1 children then fork
    from it too."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--export")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per vLLM child (default 900)")
    ap.add_argument("--sequential", action="store_true", help="TP=1: run the export after Q, not beside it")
    ap.add_argument("--no-emulate", action="store_true",
                    help="no second run with stand-in kernels when this CPU lacks one")
    ap.add_argument("--emulate-missing-kernels", action="store_true",
                    help=argparse.SUPPRESS)  # the default; kept for old command lines
    ap.add_argument("--workdir", help="child logs and results (default: OUT.json minus .json, plus .work)")
    ap.add_argument("--allow-deprecated-quantization", action="store_true",
                    help="LLM(allow_deprecated_quantization=True): the condition verify names "
                         "for a deprecated quant_method (fbgemm_fp8)")
    ap.add_argument("--language-model-only", action="store_true",
                    help="LLM(language_model_only=True): a multimodal model's text part only")
    ap.add_argument("--break-scale", nargs=2, metavar=("Q", "OUT"))
    ap.add_argument("--tensor")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--_child", choices=["q", "e"], help=argparse.SUPPRESS)
    ap.add_argument("--_out", dest="out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.break_scale:
        return break_scale(a.break_scale[0], a.break_scale[1], a.tensor, a.factor)
    if a._child:
        a.child = a._child
        child_main(a)
        return 0
    if not (a.model and a.export and a.json):
        ap.error("--model, --export and --json are required")
    return parent_main(a)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import forkserver

        sys.exit(forkserver.serve(main, _zygote))
    sys.exit(main())
