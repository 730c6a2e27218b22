/*
 * golden.h - comparing fp8conv's outputs with the goldens the independent
 * Python oracles wrote (tests/oracle/): tensor bytes by XXH3-128, whole
 * files, and the JSON side files.
 */
#ifndef FP8_GOLDEN_H
#define FP8_GOLDEN_H

#include "testutil.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <xxhash.h>

static inline cJSON *read_json(const char *path)
{
    char *text = tu_slurp(path, NULL);
    cJSON *j = cJSON_Parse(text);
    ck_assert_msg(j != NULL, "%s: not JSON", path);
    free(text);
    return j;
}

static inline void xxh_hex(const void *data, size_t len, char hex[33])
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", c.digest[i]);
}

/* Shell-quotes an argument list into one string. */
static inline char *join_args(const cJSON *args)
{
    size_t cap = 4096, o = 0;
    char *s = calloc(1, cap);
    const cJSON *a;
    cJSON_ArrayForEach(a, args)
        o += (size_t)snprintf(s + o, cap - o, " '%s'", a->valuestring);
    ck_assert(o < cap);
    return s;
}

/* Entries of `dir` whose names start with `prefix` (temporary leftovers). */
static inline int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    ck_assert(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static inline bool exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* The file at `path` is byte for byte the oracle's shard `shard` of case `name`. */
static inline void expect_golden_file(const char *path, const char *dir, const char *name,
                               const char *shard)
{
    char gpath[512], hex[33];
    snprintf(gpath, sizeof gpath, "%s/%s.json", dir, name);
    cJSON *golden = read_json(gpath);
    size_t len;
    char *data = tu_slurp(path, &len);
    xxh_hex(data, len, hex);
    const cJSON *want = cJSON_GetObjectItem(cJSON_GetObjectItem(golden, "files"), shard);
    ck_assert_msg(want && strcmp(hex, want->valuestring) == 0,
                  "%s differs from shard %s of the oracle's case %s", path, shard, name);
    free(data);
    cJSON_Delete(golden);
}

static inline void check_tensors(const char *out, const cJSON *golden)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck = NULL;
    ck_assert_msg(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK, "%s", fp8_ctx_message(ctx));
    const cJSON *tensors = cJSON_GetObjectItem(golden, "tensors"), *g;
    ck_assert_uint_eq(fp8_checkpoint_tensor_count(ck), (size_t)cJSON_GetArraySize(tensors));
    cJSON_ArrayForEach(g, tensors)
    {
        size_t s;
        const fp8_tensor_info *t = fp8_checkpoint_find(ck, g->string, &s);
        ck_assert_msg(t != NULL, "tensor %s missing from the output", g->string);
        ck_assert_str_eq(fp8_dtype_name(t->dtype), cJSON_GetObjectItem(g, "dtype")->valuestring);
        const cJSON *shape = cJSON_GetObjectItem(g, "shape");
        ck_assert_int_eq(t->rank, cJSON_GetArraySize(shape));
        for (int d = 0; d < t->rank; d++)
            ck_assert_msg(t->shape[d] == (uint64_t)cJSON_GetArrayItem(shape, d)->valuedouble,
                          "%s: dim %d", g->string, d);
        ck_assert_str_eq(fp8_checkpoint_shard_name(ck, s),
                         cJSON_GetObjectItem(g, "shard")->valuestring);
        size_t n = (size_t)fp8_tensor_nbytes(t);
        void *buf = malloc(n ? n : 1);
        ck_assert(fp8_file_read(ctx, fp8_checkpoint_shard(ck, s), t, 0, buf, n) == FP8_OK);
        char hex[33];
        xxh_hex(buf, n, hex);
        ck_assert_msg(strcmp(hex, cJSON_GetObjectItem(g, "xxh3_128")->valuestring) == 0,
                      "tensor %s: bytes differ from the numpy/ml_dtypes oracle", g->string);
        free(buf);
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
}

/* The committed JSON object equals ours (a null or absent golden: the file
 * must not exist). */
static inline void check_json_file(const char *path, const cJSON *golden)
{
    if (!golden || cJSON_IsNull(golden)) {
        ck_assert_msg(!exists(path), "%s should not exist", path);
        return;
    }
    cJSON *ours = read_json(path);
    ck_assert_msg(cJSON_Compare(ours, golden, true), "%s differs from the oracle", path);
    cJSON_Delete(ours);
}


/* Every output of a case against its golden: tensors, shard files, the
 * index, config.json (quantization_config, when there is one, last) and
 * hf_quant_config.json, and the copied files against `input`'s. */
static inline void check_golden_output(const char *out, const char *input, const char *dir,
                                       const char *name, const cJSON *golden)
{
    char *path;
    check_tensors(out, golden);
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(golden, "files"))
    {
        ck_assert(asprintf(&path, "%s/%s", out, f->string) > 0);
        expect_golden_file(path, dir, name, f->string);
        free(path);
    }
    ck_assert(asprintf(&path, "%s/model.safetensors.index.json", out) > 0);
    check_json_file(path, cJSON_GetObjectItem(golden, "index"));
    free(path);
    ck_assert(asprintf(&path, "%s/config.json", out) > 0);
    check_json_file(path, cJSON_GetObjectItem(golden, "config"));
    if (exists(path)) {
        cJSON *ours = read_json(path), *q = cJSON_GetObjectItem(ours, "quantization_config");
        cJSON *last = ours->child;
        while (last->next)
            last = last->next;
        ck_assert(!q || strcmp(last->string, "quantization_config") == 0);
        cJSON_Delete(ours);
    }
    free(path);
    ck_assert(asprintf(&path, "%s/hf_quant_config.json", out) > 0);
    check_json_file(path, cJSON_GetObjectItem(golden, "hf_quant_config"));
    free(path);
    const cJSON *copied;
    cJSON_ArrayForEach(copied, cJSON_GetObjectItem(golden, "copied_files"))
    {
        ck_assert(asprintf(&path, "cmp -s '%s/%s' '%s/%s'", input, copied->valuestring, out,
                           copied->valuestring) > 0);
        ck_assert_msg(system(path) == 0, "%s: %s not copied byte for byte", name,
                      copied->valuestring);
        free(path);
    }
}

/* The number of cases in a case list, for tcase_add_loop_test: no ck_assert
 * outside a test, so by hand (a broken list fails the tests that read it). */
static inline int count_cases(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = fopen(path, "rb");
    if (fp) {
        if (getdelim(&text, &len, '\0', fp) < 0) {
            free(text);
            text = NULL;
        }
        fclose(fp);
    }
    cJSON *cases = text ? cJSON_Parse(text) : NULL;
    int n = cJSON_GetArraySize(cases);
    cJSON_Delete(cases);
    free(text);
    return n;
}

/* Runs fp8conv ARGV... DIR/out (argv[out_at] is set to it), sends `sig` once
 * the temporary directory exists, and expects exit 128 + sig and nothing
 * left; with --json in ARGV, stdout is the failure object of rule
 * "interrupted". */
static inline void expect_interrupt_leaves_nothing(const char *dir, const char **argv,
                                                   int out_at, int sig)
{
    char *out, *errfile, *outfile;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    ck_assert(asprintf(&errfile, "%s.err", dir) > 0);
    ck_assert(asprintf(&outfile, "%s.stdout", dir) > 0);
    argv[out_at] = out;
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        const char *args[16] = { "fp8conv" };
        for (int i = 0; argv[i] && i < 14; i++)
            args[i + 1] = argv[i];
        if (!freopen(errfile, "w", stderr) || !freopen(outfile, "w", stdout))
            _exit(126);
        execv(FP8CONV_BIN, (char *const *)args);
        _exit(127);
    }
    /* wait for the temporary directory, i.e. for the work to have started */
    for (int i = 0; i < 20000 && count_entries(dir, ".out.tmp-") == 0; i++)
        usleep(100);
    ck_assert_msg(count_entries(dir, ".out.tmp-") == 1, "the run did not start");
    usleep(20000);
    kill(pid, sig);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig,
                  "expected exit %d after signal %d, got status 0x%x", 128 + sig, sig, status);
    ck_assert(!exists(out));
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    /* issue 45.5: the stop says that nothing is kept */
    char *err = tu_slurp(errfile, NULL);
    ck_assert_msg(strstr(err, "stopped; nothing is kept"), "%s", err);
    free(err);
    bool json = false;
    for (int i = 0; argv[i]; i++)
        json |= strcmp(argv[i], "--json") == 0;
    char *report = tu_slurp(outfile, NULL);
    ck_assert_msg(!json || (strstr(report, "\"error_version\"") && strstr(report, "\"interrupted\"")),
                  "%s", report);
    free(report);
    unlink(errfile);
    unlink(outfile);
    free(errfile);
    free(outfile);
    free(out);
}

/* Runs `fp8conv quantize -q OPTIONS INPUT DIR/fp8`, which must succeed;
 * returns DIR/fp8 (the caller frees it). */
static inline char *quantize_into(const char *dir, const char *options, const char *input)
{
    char *args, *out;
    ck_assert(asprintf(&out, "%s/fp8", dir) > 0);
    ck_assert(asprintf(&args, "quantize -q %s '%s' '%s'", options, input, out) > 0);
    ck_assert_msg(tu_run(args, NULL, NULL) == 0, "fp8conv %s failed", args);
    free(args);
    return out;
}

/* ---------------------------------------------------------------- synthetic models */

/* A directory checkpoint with one bf16 tensor of rows x cols filled with a
 * deterministic pattern; `bad` >= 0 puts `bad_bits` at that element. */
static inline char *make_model(const char *dir, const char *name, uint64_t rows, uint64_t cols,
                        int64_t bad, uint16_t bad_bits)
{
    char *model, *path;
    ck_assert(asprintf(&model, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    uint64_t shape[2] = { rows, cols }, small[2] = { 64, 96 };
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "model.layers.0.mlp.down_proj.weight",
                                    FP8_DTYPE_BF16, 2, shape) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "model.layers.0.self_attn.o_proj.weight",
                                    FP8_DTYPE_BF16, 2, small) == FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    size_t chunk = 1 << 16;
    uint16_t *buf = malloc(chunk * 2);
    for (size_t t = 0; t < fp8_writer_tensor_count(w); t++) {
        const fp8_tensor_info *ti = fp8_writer_tensor(w, t);
        bool big = ti->elements == rows * cols;
        for (uint64_t i = 0; i < ti->elements; i += chunk) {
            size_t n = ti->elements - i < chunk ? (size_t)(ti->elements - i) : chunk;
            for (size_t k = 0; k < n; k++) {
                uint64_t e = i + k;
                buf[k] = (uint16_t)(0x3000 + (e * 2654435761u >> 7) % 0x1800) |
                         (uint16_t)((e & 1) << 15);
                if (big && (int64_t)e == bad)
                    buf[k] = bad_bits;
            }
            ck_assert(fp8_writer_write(ctx, w, buf, n * 2) == FP8_OK);
        }
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    free(buf);
    free(path);
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    tu_spit(path, "{\"model_type\": \"llama\"}\n", 24);
    free(path);
    return model;
}

/* A directory checkpoint `dir`/`name` (one model.safetensors) with the given
 * config.json text and bf16 tensors of the given names and shapes (rank 2 or
 * 3), filled with a deterministic pattern. */
typedef struct {
    const char *name;
    int rank;
    uint64_t shape[3];
} tu_tensor;

/* Fills the bf16 tensors the writer declares with a deterministic pattern
 * (`seed` shifts it), and commits and frees the writer. */
static inline void write_patterned(fp8_ctx *ctx, fp8_writer *w, size_t seed)
{
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const fp8_tensor_info *ti = fp8_writer_tensor(w, i);
        uint16_t *buf = malloc(ti->elements * 2 + 2);
        for (uint64_t e = 0; e < ti->elements; e++)
            buf[e] = (uint16_t)(0x3000 + ((e + i + seed) * 2654435761u >> 7) % 0x1800) |
                     (uint16_t)((e & 1) << 15);
        ck_assert(fp8_writer_write(ctx, w, buf, ti->elements * 2) == FP8_OK);
        free(buf);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
}

static inline char *make_named_model(const char *dir, const char *name, const char *config,
                                     const tu_tensor *t, size_t n)
{
    char *model, *path;
    ck_assert(asprintf(&model, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert(fp8_writer_add_tensor(ctx, w, t[i].name, FP8_DTYPE_BF16, t[i].rank,
                                        t[i].shape) == FP8_OK);
    write_patterned(ctx, w, 0);
    fp8_ctx_free(ctx);
    free(path);
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    tu_spit(path, config, strlen(config));
    free(path);
    return model;
}

/* A directory checkpoint `dir`/`name` (one model.safetensors, config.json
 * from `config`) with tensors of any dtype, as a release ships them:
 * F8_E4M3 codes of a deterministic pattern (no NaN), float scales (F32,
 * BF16, F16; names ending "_scale_inv" or "_scale", and activation scales)
 * all 2^-8, U8 bytes 0x78, BF16 weights patterned. */
typedef struct {
    const char *name;
    fp8_dtype dtype;
    int rank;
    uint64_t shape[3];
} tu_typed_tensor;

static inline char *make_typed_model(const char *dir, const char *name, const char *config,
                                     const tu_typed_tensor *t, size_t n)
{
    char *model, *path;
    ck_assert(asprintf(&model, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert(fp8_writer_add_tensor(ctx, w, t[i].name, t[i].dtype, t[i].rank, t[i].shape) ==
                  FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const fp8_tensor_info *ti = fp8_writer_tensor(w, i);
        size_t nb = (size_t)fp8_tensor_nbytes(ti);
        unsigned char *buf = malloc(nb + 4);
        uint32_t seed = 0; /* from the name: the writer may order tensors its own way */
        for (const char *c = ti->name; *c; c++)
            seed = seed * 31 + (unsigned char)*c;
        for (uint64_t e = 0; e < ti->elements; e++) {
            uint32_t h = (uint32_t)((e + seed) * 2654435761u >> 7);
            switch (ti->dtype) {
            case FP8_DTYPE_F8_E4M3: buf[e] = (unsigned char)(h % 0x7E | (e & 1) << 7); break;
            case FP8_DTYPE_U8: buf[e] = 0x78; break;
            case FP8_DTYPE_F32: memcpy(buf + 4 * e, &(uint32_t){ 0x3B800000 }, 4); break;
            case FP8_DTYPE_F16: memcpy(buf + 2 * e, &(uint16_t){ 0x1C00 }, 2); break;
            default: { /* BF16: scales 2^-8, weights patterned */
                uint16_t b = strstr(ti->name, "scale") ? 0x3B80
                                                        : (uint16_t)(0x3000 + h % 0x1800);
                memcpy(buf + 2 * e, &b, 2);
            }
            }
        }
        ck_assert(fp8_writer_write(ctx, w, buf, nb) == FP8_OK);
        free(buf);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    free(path);
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    tu_spit(path, config, strlen(config));
    free(path);
    return model;
}

/* A tensor given with its bytes (little-endian, as safetensors stores them). */
typedef struct {
    const char *name;
    fp8_dtype dtype;
    int rank;
    uint64_t shape[4];
    const void *data;
} t_spec;

static inline uint64_t t_bytes(const t_spec *t)
{
    uint64_t n = fp8_dtype_bits(t->dtype) / 8;
    for (int k = 0; k < t->rank; k++)
        n *= t->shape[k];
    return n;
}

/* A directory `dir`/`sub` with model.safetensors holding the tensors, and
 * config.json (when not NULL). */
static inline char *write_ck(const char *dir, const char *sub, const t_spec *ts, size_t n,
                             const char *config)
{
    char *model, *path;
    ck_assert(asprintf(&model, "%s/%s", dir, sub) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert(fp8_writer_add_tensor(ctx, w, ts[i].name, ts[i].dtype, ts[i].rank,
                                        ts[i].shape) == FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const t_spec *t = NULL;
        for (size_t k = 0; k < n; k++)
            if (!strcmp(ts[k].name, fp8_writer_tensor(w, i)->name))
                t = &ts[k];
        ck_assert(fp8_writer_write(ctx, w, t->data, t_bytes(t)) == FP8_OK);
    }
    ck_assert_msg(fp8_writer_commit(ctx, w) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    free(path);
    if (config) {
        ck_assert(asprintf(&path, "%s/config.json", model) > 0);
        tu_spit(path, config, strlen(config));
        free(path);
    }
    return model;
}

/* The bytes of tensor `name` of checkpoint `path`; *t its info. */
static inline unsigned char *read_tensor_bytes(const char *path, const char *name, fp8_tensor_info *t)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    size_t shard;
    ck_assert_msg(fp8_checkpoint_open(ctx, path, &ck) == FP8_OK, "%s", fp8_ctx_message(ctx));
    const fp8_tensor_info *ti = fp8_checkpoint_find(ck, name, &shard);
    ck_assert_msg(ti != NULL, "%s: no tensor %s", path, name);
    unsigned char *buf = malloc(fp8_tensor_nbytes(ti) + 1);
    ck_assert(fp8_file_read(ctx, fp8_checkpoint_shard(ck, shard), ti, 0, buf,
                            fp8_tensor_nbytes(ti)) == FP8_OK);
    if (t) {
        *t = *ti;
        t->name = NULL;
        t->shape = NULL;
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    return buf;
}

/* Mistral's FP8 releases (Ministral-3, Devstral-2): quant_method fp8 with no
 * weight_block_size and static activations; per-tensor F32 weight_scale_inv
 * and activation_scale (rank 0: [], 1: [1]).  transformers' FineGrainedFP8 reads weight_scale_inv;
 * vLLM's models/mistral3.py and SGLang's models/llama.py rename
 * .weight_scale_inv to .weight_scale and .activation_scale to .input_scale. */
static const char TU_MISTRAL3_FP8_CONFIG[] =
    "{\"architectures\": [\"Mistral3ForConditionalGeneration\"], \"model_type\": \"mistral3\", "
    "\"torch_dtype\": \"bfloat16\", \"text_config\": {\"model_type\": \"ministral3\", "
    "\"hidden_size\": 256, \"num_attention_heads\": 2, \"num_key_value_heads\": 2, "
    "\"head_dim\": 128, \"intermediate_size\": 256}, \"quantization_config\": "
    "{\"activation_scheme\": \"static\", \"quant_method\": \"fp8\", \"weight_block_size\": null, "
    "\"modules_to_not_convert\": [\"lm_head\", \"model.embed_tokens\"]}}\n";

static inline char *make_mistral3_fp8(const char *dir, const char *name, int scale_rank)
{
    const tu_typed_tensor t[] = {
        { "lm_head.weight", FP8_DTYPE_BF16, 2, { 64, 256 } },
        { "model.embed_tokens.weight", FP8_DTYPE_BF16, 2, { 64, 256 } },
        { "model.layers.0.mlp.down_proj.activation_scale", FP8_DTYPE_F32, scale_rank, { 1 } },
        { "model.layers.0.mlp.down_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.mlp.down_proj.weight_scale_inv", FP8_DTYPE_F32, scale_rank, { 1 } },
        { "model.layers.0.self_attn.q_proj.activation_scale", FP8_DTYPE_F32, scale_rank, { 1 } },
        { "model.layers.0.self_attn.q_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.self_attn.q_proj.weight_scale_inv", FP8_DTYPE_F32, scale_rank, { 1 } },
    };
    return make_typed_model(dir, name, TU_MISTRAL3_FP8_CONFIG, t, sizeof t / sizeof *t);
}

/* `fp8conv verify --json EXTRA PATH`, parsed (must be JSON); *rc its exit status. */
static inline cJSON *verify_json(const char *path, const char *extra, int *rc)
{
    char *args, *out;
    ck_assert(asprintf(&args, "verify --json %s '%s'", extra, path) > 0);
    *rc = tu_run(args, &out, NULL);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "verify %s: not JSON: %s", path, out);
    free(out);
    free(args);
    return j;
}

/* The first finding of `rule` in a verify --json report, NULL when none. */
static inline const cJSON *verify_finding(const cJSON *report, const char *rule)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
        if (strcmp(cJSON_GetObjectItem(f, "rule")->valuestring, rule) == 0)
            return f;
    return NULL;
}

#endif
