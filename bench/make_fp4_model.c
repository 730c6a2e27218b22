/*
 * make_fp4_model.c - writes a packed-FP4 checkpoint directory for the
 * dequantize-for-export benchmark (bench/run.sh), streaming (a buffer of
 * 1 MiB, whatever the size): about 1 GB of bf16 once exported.
 *
 *   gpt-oss         MXFP4 experts as gpt-oss ships them: one layer of
 *                   gpt-oss-20b's shapes (hidden 2880, intermediate 2880)
 *                   with 20 of its 32 experts, mlp.experts.{gate_up,down}_proj
 *                   _blocks U8 [E, rows, G, 16], _scales U8 [E, rows, G] (E8M0
 *                   bytes), _bias BF16 [E, rows]; config quant_method mxfp4
 *                   (the layout as testdata/gen_fp4.py cites it: transformers
 *                   integrations/mxfp4.py, models/gpt_oss/modeling_gpt_oss.py)
 *   nvfp4-modelopt  two Llama-3-8B-shaped layers (hidden 4096, intermediate
 *                   14336, 8 KV heads) as ModelOpt exports NVFP4: X.weight U8
 *                   [N, K/2], X.weight_scale F8_E4M3 [N, K/16], X.weight_scale_2
 *                   F32 [], X.input_scale F32 []; hf_quant_config.json quant_algo
 *                   NVFP4, group_size 16 (vllm quantization/modelopt.py
 *                   ModelOptNvFp4LinearMethod.create_weights)
 *   nvfp4-ct        the same as compressed-tensors' nvfp4-pack-quantized:
 *                   X.weight_packed, X.weight_scale, X.weight_global_scale F32
 *                   [1] (a divisor), X.input_global_scale F32 [1]
 *                   (compressed-tensors compressors/nvfp4/)
 *   deepseek-v4     DeepSeek-V4's layout for convert's MXFP4 -> FP8 cast
 *                   (lib/ops/convert_dsv4.c; testdata/gen_fp4.py cites each
 *                   fact): one MoE layer of DeepSeek-V3's expert shapes
 *                   (config.json hidden_size 7168, moe_intermediate_size
 *                   2048: deepseek-ai/DeepSeek-V3; V4-Flash's own dims were
 *                   not found in vLLM's or DeepSeek's sources here), 21
 *                   routed experts layers.0.ffn.experts.E.w{1,2,3}.weight
 *                   I8 [out, in / 2] (E2M1 codes, element 2i in the low
 *                   nibble) with .scale F8_E8M0 [out, in / 32], a shared
 *                   expert layers.0.ffn.shared_experts.w{1,2,3}.weight
 *                   F8_E4M3 with .scale F8_E8M0 [out / 128, in / 128], the
 *                   gate F32/BF16 and norms; config model_type deepseek_v4,
 *                   expert_dtype fp4, quant_method fp8, scale_fmt ue8m0,
 *                   weight_block_size [128, 128].  About 1 GB of FP8 once
 *                   cast.  The group scale bytes spread 2^-10 .. 2^-3 (8
 *                   exponents: a tile spreads by up to 7, within the cast's
 *                   14, so every element goes through the shift of its
 *                   group, not the same one)
 *
 * Codes are pseudo-random bytes (every nibble, code 8 included), the same
 * on every run; E8M0 scales 2^-7 .. 2^-3 (deepseek-v4: 2^-10 .. 2^-3),
 * E4M3 scales 2 .. 448 and a second
 * level near amax / (6 * 448) that is no power of two, as a real
 * calibration gives (so the exported values are the rounded ones).
 *
 * usage: make_fp4_model DIR gpt-oss|nvfp4-modelopt|nvfp4-ct|deepseek-v4 [LAYERS|EXPERTS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fp8conv.h"

static uint64_t state = 0x2545F4914F6CDD1Dull;
static uint64_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static void die(fp8_ctx *ctx, const char *what)
{
    fprintf(stderr, "make_fp4_model: %s: %s\n", what, fp8_ctx_message(ctx));
    exit(1);
}

typedef enum {
    FILL_BF16, FILL_NORM, FILL_CODES, FILL_E8M0, FILL_E8M0_WIDE, FILL_E4M3, FILL_F32
} fill;

typedef struct {
    char name[112];
    fp8_dtype dtype;
    int rank;
    uint64_t shape[4];
    fill how;
    float value; /* FILL_F32 */
} spec;

static void fill_bytes(const spec *s, uint8_t *p, size_t n)
{
    switch (s->how) {
    case FILL_CODES:
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)(next() >> 32);
        break;
    case FILL_E8M0: /* 2^-7 .. 2^-3 */
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)(120 + (next() >> 33) % 5);
        break;
    case FILL_E8M0_WIDE: /* 2^-10 .. 2^-3 */
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)(117 + (next() >> 33) % 8);
        break;
    case FILL_E4M3: /* exponent field 8 .. 15 (2 .. 448), never the NaN 0x7F */
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next();
            p[i] = (uint8_t)((8 + (r >> 40) % 8) << 3 | (r >> 20) % 8);
            if (p[i] == 0x7F)
                p[i] = 0x7E;
        }
        break;
    case FILL_BF16:
    case FILL_NORM:
        for (size_t i = 0; i + 1 < n; i += 2) {
            uint64_t r = next();
            uint16_t v = s->how == FILL_NORM
                             ? 0x3F80
                             : (uint16_t)((r >> 63) << 15 | (118 + (r >> 40) % 6) << 7 |
                                          ((r >> 20) & 0x7F));
            p[i] = (uint8_t)v;
            p[i + 1] = (uint8_t)(v >> 8);
        }
        break;
    case FILL_F32:
        for (size_t i = 0; i + 3 < n; i += 4)
            memcpy(p + i, &s->value, 4);
        break;
    }
}

static void write_shard(fp8_ctx *ctx, const char *path, const spec *ts, size_t n)
{
    fp8_writer *w;
    static uint8_t buf[1 << 20];
    if (fp8_writer_create(ctx, path, &w))
        die(ctx, path);
    if (fp8_writer_set_metadata(ctx, w, "format", "pt"))
        die(ctx, path);
    for (size_t i = 0; i < n; i++)
        if (fp8_writer_add_tensor(ctx, w, ts[i].name, ts[i].dtype, ts[i].rank, ts[i].shape))
            die(ctx, ts[i].name);
    if (fp8_writer_begin(ctx, w))
        die(ctx, path);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const fp8_tensor_info *t = fp8_writer_tensor(w, i);
        const spec *s = NULL;
        for (size_t k = 0; k < n && !s; k++)
            if (!strcmp(ts[k].name, t->name))
                s = &ts[k];
        uint64_t nbytes = t->elements * fp8_dtype_bits(t->dtype) / 8;
        for (uint64_t done = 0; done < nbytes;) {
            size_t k = nbytes - done < sizeof buf ? (size_t)(nbytes - done) : sizeof buf;
            fill_bytes(s, buf, k);
            if (fp8_writer_write(ctx, w, buf, k))
                die(ctx, path);
            done += k;
        }
    }
    if (fp8_writer_commit(ctx, w))
        die(ctx, path);
    fp8_writer_free(w);
}

#define ADD(...) (ts[n++] = (spec){ __VA_ARGS__ })
#define NAME(fmt, ...) snprintf(ts[n - 1].name, sizeof ts[0].name, fmt, __VA_ARGS__)

static size_t gpt_oss(spec *ts, int experts)
{
    const uint64_t H = 2880, I = 2880;
    size_t n = 0;
    const char *p = "model.layers.0.mlp.experts.";
    const struct { const char *nm; uint64_t rows, in; } m[] = { { "gate_up_proj", 2 * I, H },
                                                                  { "down_proj", H, I } };
    for (int k = 0; k < 2; k++) {
        uint64_t E = (uint64_t)experts, R = m[k].rows, G = m[k].in / 32;
        ADD(.dtype = FP8_DTYPE_U8, .rank = 4, .shape = { E, R, G, 16 }, .how = FILL_CODES);
        NAME("%s%s_blocks", p, m[k].nm);
        ADD(.dtype = FP8_DTYPE_U8, .rank = 3, .shape = { E, R, G }, .how = FILL_E8M0);
        NAME("%s%s_scales", p, m[k].nm);
        ADD(.dtype = FP8_DTYPE_BF16, .rank = 2, .shape = { E, R }, .how = FILL_BF16);
        NAME("%s%s_bias", p, m[k].nm);
    }
    ADD(.dtype = FP8_DTYPE_BF16, .rank = 2, .shape = { (uint64_t)experts, H }, .how = FILL_BF16);
    NAME("%s", "model.layers.0.mlp.router.weight");
    ADD(.dtype = FP8_DTYPE_BF16, .rank = 1, .shape = { H }, .how = FILL_NORM);
    NAME("%s", "model.layers.0.post_attention_layernorm.weight");
    return n;
}

static size_t nvfp4(spec *ts, int layers, bool ct)
{
    const uint64_t H = 4096, KV = 1024, INTER = 14336;
    size_t n = 0;
    for (int l = 0; l < layers; l++) {
        const struct { const char *n; uint64_t r, c; } lin[] = {
            { "self_attn.q_proj", H, H },   { "self_attn.k_proj", KV, H },
            { "self_attn.v_proj", KV, H },  { "self_attn.o_proj", H, H },
            { "mlp.gate_proj", INTER, H },  { "mlp.up_proj", INTER, H },
            { "mlp.down_proj", H, INTER },
        };
        for (size_t k = 0; k < 7; k++) {
            const char *m = lin[k].n;
            /* a second level near amax / (6 * 448) for |w| ~ 0.1, no power of two */
            float g = 3.7194e-5f * (float)(1 + k) / (float)(1 + l);
            ADD(.dtype = FP8_DTYPE_U8, .rank = 2, .shape = { lin[k].r, lin[k].c / 2 },
                .how = FILL_CODES);
            NAME("model.layers.%d.%s.%s", l, m, ct ? "weight_packed" : "weight");
            ADD(.dtype = FP8_DTYPE_F8_E4M3, .rank = 2, .shape = { lin[k].r, lin[k].c / 16 },
                .how = FILL_E4M3);
            NAME("model.layers.%d.%s.weight_scale", l, m);
            ADD(.dtype = FP8_DTYPE_F32, .rank = ct ? 1 : 0, .shape = { 1 }, .how = FILL_F32,
                .value = ct ? 1.0f / g : g);
            NAME("model.layers.%d.%s.%s", l, m, ct ? "weight_global_scale" : "weight_scale_2");
            ADD(.dtype = FP8_DTYPE_F32, .rank = ct ? 1 : 0, .shape = { 1 }, .how = FILL_F32,
                .value = ct ? 512.0f : 1.0f / 512);
            NAME("model.layers.%d.%s.%s", l, m, ct ? "input_global_scale" : "input_scale");
        }
        ADD(.dtype = FP8_DTYPE_BF16, .rank = 1, .shape = { H }, .how = FILL_NORM);
        NAME("model.layers.%d.input_layernorm.weight", l);
        ADD(.dtype = FP8_DTYPE_BF16, .rank = 1, .shape = { H }, .how = FILL_NORM);
        NAME("model.layers.%d.post_attention_layernorm.weight", l);
    }
    ADD(.dtype = FP8_DTYPE_BF16, .rank = 1, .shape = { H }, .how = FILL_NORM);
    NAME("%s", "model.norm.weight");
    return n;
}

static size_t deepseek_v4(spec *ts, int experts)
{
    const uint64_t H = 7168, I = 2048;
    size_t n = 0;
    /* w1, w3: [I, H] (gate, up); w2: [H, I] (down) */
    const struct { const char *w; uint64_t out, in; } m[] = { { "w1", I, H }, { "w2", H, I },
                                                               { "w3", I, H } };
    for (int e = 0; e < experts; e++)
        for (int k = 0; k < 3; k++) {
            ADD(.dtype = FP8_DTYPE_I8, .rank = 2, .shape = { m[k].out, m[k].in / 2 },
                .how = FILL_CODES);
            NAME("layers.0.ffn.experts.%d.%s.weight", e, m[k].w);
            ADD(.dtype = FP8_DTYPE_F8_E8M0, .rank = 2, .shape = { m[k].out, m[k].in / 32 },
                .how = FILL_E8M0_WIDE);
            NAME("layers.0.ffn.experts.%d.%s.scale", e, m[k].w);
        }
    for (int k = 0; k < 3; k++) {
        ADD(.dtype = FP8_DTYPE_F8_E4M3, .rank = 2, .shape = { m[k].out, m[k].in },
            .how = FILL_E4M3);
        NAME("layers.0.ffn.shared_experts.%s.weight", m[k].w);
        ADD(.dtype = FP8_DTYPE_F8_E8M0, .rank = 2, .shape = { m[k].out / 128, m[k].in / 128 },
            .how = FILL_E8M0);
        NAME("layers.0.ffn.shared_experts.%s.scale", m[k].w);
    }
    ADD(.dtype = FP8_DTYPE_BF16, .rank = 2, .shape = { (uint64_t)experts, H }, .how = FILL_BF16);
    NAME("%s", "layers.0.ffn.gate.weight");
    ADD(.dtype = FP8_DTYPE_F32, .rank = 1, .shape = { (uint64_t)experts }, .how = FILL_F32,
        .value = 0.0f);
    NAME("%s", "layers.0.ffn.gate.bias");
    ADD(.dtype = FP8_DTYPE_BF16, .rank = 1, .shape = { H }, .how = FILL_NORM);
    NAME("%s", "layers.0.ffn_norm.weight");
    ADD(.dtype = FP8_DTYPE_BF16, .rank = 1, .shape = { H }, .how = FILL_NORM);
    NAME("%s", "norm.weight");
    return n;
}

static void write_text(const char *dir, const char *file, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        perror(path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: make_fp4_model DIR gpt-oss|nvfp4-modelopt|nvfp4-ct|deepseek-v4 "
                        "[LAYERS|EXPERTS]\n");
        return 2;
    }
    const char *dir = argv[1], *kind = argv[2];
    int count = argc > 3 ? atoi(argv[3]) : 0;
    static spec ts[256];
    size_t n;
    char cfg[4096];
    mkdir(dir, 0755);
    if (!strcmp(kind, "gpt-oss")) {
        count = count > 0 ? count : 20;
        n = gpt_oss(ts, count);
        snprintf(cfg, sizeof cfg,
                 "{\n  \"architectures\": [\"GptOssForCausalLM\"],\n  \"model_type\": \"gpt_oss\",\n"
                 "  \"hidden_size\": 2880,\n  \"intermediate_size\": 2880,\n"
                 "  \"num_local_experts\": %d,\n  \"num_experts_per_tok\": 4,\n"
                 "  \"num_hidden_layers\": 1,\n  \"torch_dtype\": \"bfloat16\",\n"
                 "  \"quantization_config\": {\"modules_to_not_convert\": [\"model.layers.*.self_attn\", "
                 "\"model.layers.*.mlp.router\", \"model.embed_tokens\", \"lm_head\"], "
                 "\"quant_method\": \"mxfp4\"}\n}\n",
                 count);
    } else if (!strcmp(kind, "nvfp4-modelopt") || !strcmp(kind, "nvfp4-ct")) {
        bool ct = !strcmp(kind, "nvfp4-ct");
        count = count > 0 ? count : 2;
        n = nvfp4(ts, count, ct);
        const char *qc =
            ct ? "{\"config_groups\": {\"group_0\": {\"input_activations\": {\"dynamic\": \"local\", "
                 "\"group_size\": 16, \"num_bits\": 4, \"observer\": \"minmax\", \"strategy\": "
                 "\"tensor_group\", \"symmetric\": true, \"type\": \"float\"}, \"output_activations\": null, "
                 "\"targets\": [\"Linear\"], \"weights\": {\"dynamic\": false, \"group_size\": 16, "
                 "\"num_bits\": 4, \"observer\": \"minmax\", \"strategy\": \"tensor_group\", "
                 "\"symmetric\": true, \"type\": \"float\", \"scale_dtype\": \"torch.float8_e4m3fn\"}}}, "
                 "\"format\": \"nvfp4-pack-quantized\", \"ignore\": [\"lm_head\"], "
                 "\"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", "
                 "\"quantization_status\": \"compressed\"}"
               : "{\"exclude_modules\": [\"lm_head\"], \"group_size\": 16, \"kv_cache_quant_algo\": null, "
                 "\"producer\": {\"name\": \"modelopt\", \"version\": \"0.37.0\"}, "
                 "\"quant_algo\": \"NVFP4\", \"quant_method\": \"modelopt\"}";
        snprintf(cfg, sizeof cfg,
                 "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                 "  \"hidden_size\": 4096,\n  \"intermediate_size\": 14336,\n"
                 "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": 32,\n"
                 "  \"num_key_value_heads\": 8,\n  \"vocab_size\": 128256,\n"
                 "  \"torch_dtype\": \"bfloat16\",\n  \"quantization_config\": %s\n}\n",
                 count, qc);
        if (!ct)
            write_text(dir, "hf_quant_config.json",
                       "{\n  \"producer\": {\"name\": \"modelopt\", \"version\": \"0.37.0\"},\n"
                       "  \"quantization\": {\"exclude_modules\": [\"lm_head\"], \"group_size\": 16, "
                       "\"kv_cache_quant_algo\": null, \"quant_algo\": \"NVFP4\"}\n}\n");
    } else if (!strcmp(kind, "deepseek-v4")) {
        count = count > 0 ? count : 21;
        n = deepseek_v4(ts, count);
        snprintf(cfg, sizeof cfg,
                 "{\n  \"architectures\": [\"DeepseekV4ForCausalLM\"],\n"
                 "  \"model_type\": \"deepseek_v4\",\n  \"expert_dtype\": \"fp4\",\n"
                 "  \"hidden_size\": 7168,\n  \"moe_intermediate_size\": 2048,\n"
                 "  \"n_routed_experts\": %d,\n  \"n_shared_experts\": 1,\n"
                 "  \"num_experts_per_tok\": 6,\n  \"num_hidden_layers\": 1,\n"
                 "  \"torch_dtype\": \"bfloat16\",\n"
                 "  \"quantization_config\": {\"activation_scheme\": \"dynamic\", "
                 "\"fmt\": \"e4m3\", "
                 "\"quant_method\": \"fp8\", \"scale_fmt\": \"ue8m0\", "
                 "\"weight_block_size\": [128, 128]}\n}\n",
                 count);
    } else {
        fprintf(stderr, "make_fp4_model: unknown kind '%s'\n", kind);
        return 2;
    }
    write_text(dir, "config.json", cfg);
    fp8_ctx *ctx = fp8_ctx_create();
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_shard(ctx, path, ts, n);
    fp8_ctx_free(ctx);
    return 0;
}
