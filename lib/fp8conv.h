/*
 * fp8conv.h - the public interface of libfp8conv.
 *
 * libfp8conv reads and writes safetensors checkpoints exactly as the reference
 * implementation (huggingface/safetensors, src/tensor.rs) does, and converts
 * them between bf16 and FP8.  This header is the whole public API and also its
 * manual; cli/ uses nothing else.
 *
 * Conventions
 *   - Every fallible call returns an fp8_status and takes an fp8_ctx, which
 *     keeps a message naming the file, the tensor and the rule that failed:
 *       "model-00002-of-00004.safetensors: tensor 'x.weight': data_offsets
 *        [10, 20] overlap the previous tensor 'w' [0, 12]"
 *   - The library never prints, never exits and never aborts on bad input.
 *   - Objects come in _open/_create and _close/_free pairs; the release
 *     functions accept NULL.
 *   - Pointers returned by accessors stay valid until the owning object is
 *     released.
 */
#ifndef FP8CONV_H
#define FP8CONV_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP8CONV_VERSION "0.1.0"

/* ---------------------------------------------------------------- status */

/* Values are pinned: scripts and the --json output depend on them. */
typedef enum {
    FP8_OK = 0,
    FP8_ERR_USAGE = 1,     /* the caller passed a bad argument or option value */
    FP8_ERR_BAD_INPUT = 2, /* malformed or unsupported checkpoint data */
    FP8_ERR_IO = 3,        /* cannot read or write a file */
    FP8_ERR_NOMEM = 4,     /* out of memory */
    FP8_ERR_DEVICE = 5,    /* CUDA unavailable or a CUDA call failed */
    FP8_ERR_EXISTS = 6,    /* the output already exists */
} fp8_status;

/* A short English name for a status ("bad input"); never NULL. */
const char *fp8_status_str(fp8_status status);

/* The error context: one per thread of work. */
typedef struct fp8_ctx fp8_ctx;

fp8_ctx *fp8_ctx_create(void);
void fp8_ctx_free(fp8_ctx *ctx);
/* The message of the last failure ("" when none).  It names the file and the
 * tensor; the CLI prefixes it with "fp8conv: ". */
const char *fp8_ctx_message(const fp8_ctx *ctx);
/* The file and the tensor that message names ("" when none): its leading
 * "FILE: " (a file name without spaces) and its "tensor 'NAME'", the form
 * of lib/'s messages.  fp8conv --json puts them in its failure object. */
const char *fp8_ctx_file(const fp8_ctx *ctx);
const char *fp8_ctx_tensor(const fp8_ctx *ctx);
/* A status as an identifier ("bad_input", "io", "usage"...): the "rule" of
 * fp8conv --json's failure object. */
const char *fp8_status_rule(fp8_status status);
/* Where the library says something the user should know that is not a
 * failure (a stale temporary directory it removed); the CLI prints it as a
 * note.  Without one, such messages are dropped. */
void fp8_ctx_set_notify(fp8_ctx *ctx, void (*notify)(void *user, const char *message),
                        void *user);

/* ---------------------------------------------------------------- dtypes */

/* Every dtype string of the safetensors format, in the reference enum order,
 * which is also the writer's layout order (descending). */
typedef enum {
    FP8_DTYPE_BOOL,
    FP8_DTYPE_F4,
    FP8_DTYPE_F6_E2M3,
    FP8_DTYPE_F6_E3M2,
    FP8_DTYPE_U8,
    FP8_DTYPE_I8,
    FP8_DTYPE_F8_E5M2,
    FP8_DTYPE_F8_E4M3,
    FP8_DTYPE_F8_E8M0,
    FP8_DTYPE_F8_E4M3FNUZ,
    FP8_DTYPE_F8_E5M2FNUZ,
    FP8_DTYPE_I16,
    FP8_DTYPE_U16,
    FP8_DTYPE_F16,
    FP8_DTYPE_BF16,
    FP8_DTYPE_I32,
    FP8_DTYPE_U32,
    FP8_DTYPE_F32,
    FP8_DTYPE_C64,
    FP8_DTYPE_F64,
    FP8_DTYPE_I64,
    FP8_DTYPE_U64,
    FP8_DTYPE_COUNT
} fp8_dtype;

/* "BF16"; NULL for a value out of range. */
const char *fp8_dtype_name(fp8_dtype dtype);
/* Exact, case-sensitive lookup of a dtype string; false when unknown. */
bool fp8_dtype_from_name(const char *name, fp8_dtype *dtype);
/* Size of one element in bits (4 for F4, 6 for the F6 types). */
unsigned fp8_dtype_bits(fp8_dtype dtype);
/* A shape as "[4096, 128]" in buf (cap bytes, cut short if it must be). */
void fp8_shape_text(int rank, const uint64_t *shape, char *buf, size_t cap);

/* ---------------------------------------------------------------- tensors */

typedef struct {
    const char *name;     /* UTF-8, no NUL inside */
    fp8_dtype dtype;
    int rank;             /* number of dimensions; 0 for a scalar */
    const uint64_t *shape;
    uint64_t elements;    /* product of shape (1 for a scalar) */
    uint64_t begin, end;  /* data_offsets, relative to the data buffer */
} fp8_tensor_info;

static inline uint64_t fp8_tensor_nbytes(const fp8_tensor_info *t) { return t->end - t->begin; }

/* ---------------------------------------------------------------- files */

/*
 * One safetensors file, opened and validated.  Opening reads only the 8-byte
 * length and the header (a header-only scan never touches tensor data) and
 * applies every rule of the reference reader; see fp8conv-formats(5), CONTAINER.
 * A file whose contents start with the zstd magic number (normally named
 * *.safetensors.zst) is read through streaming decompression.
 */
typedef struct fp8_file fp8_file;

fp8_status fp8_file_open(fp8_ctx *ctx, const char *path, fp8_file **out);
/* The same from a complete file image in memory (used by the fuzzer and tests);
 * `name` is used in messages.  The memory must outlive the fp8_file. */
fp8_status fp8_file_open_memory(fp8_ctx *ctx, const char *name, const void *data,
                                size_t size, fp8_file **out);
void fp8_file_close(fp8_file *file);

const char *fp8_file_path(const fp8_file *file);
bool fp8_file_is_compressed(const fp8_file *file);
uint64_t fp8_file_header_size(const fp8_file *file); /* N, the JSON header length */
uint64_t fp8_file_data_size(const fp8_file *file);   /* bytes of the data buffer */

/* Tensors in buffer order (sorted by data_offsets). */
size_t fp8_file_tensor_count(const fp8_file *file);
const fp8_tensor_info *fp8_file_tensor(const fp8_file *file, size_t index);
/* Lookup by exact name; NULL when absent. */
const fp8_tensor_info *fp8_file_find(const fp8_file *file, const char *name);

/* __metadata__: absent, null, or an object of strings (sorted by key here). */
bool fp8_file_has_metadata(const fp8_file *file); /* false when absent or null */
size_t fp8_file_metadata_count(const fp8_file *file);
void fp8_file_metadata(const fp8_file *file, size_t index, const char **key, const char **value);
/* Value for a key, NULL when absent. */
const char *fp8_file_metadata_get(const fp8_file *file, const char *key);

/* Read `len` bytes of tensor `t` starting `offset` bytes into it.  Plain files
 * use positioned reads; compressed files are cheapest read in buffer order:
 * a stream keeps what a read skipped and a little behind, and a read before
 * that restarts the decompression.  The commands read each compressed shard
 * once, in file order.  A file's descriptor is open only while needed (a
 * pool bounded under RLIMIT_NOFILE); one replaced since its header was read
 * is an FP8_ERR_IO. */
fp8_status fp8_file_read(fp8_ctx *ctx, fp8_file *file, const fp8_tensor_info *t,
                         uint64_t offset, void *buf, size_t len);
/* Bytes read from the underlying file so far (for tests of the streaming
 * promise); for a compressed file, the bytes decompressed. */
uint64_t fp8_file_bytes_read(const fp8_file *file);
/* The bytes all compressed files of the process have decompressed so far. */
uint64_t fp8_zstd_bytes_decompressed(void);

/* ---------------------------------------------------------------- writer */

/*
 * Writes one safetensors file exactly as the reference writer lays it out:
 * `__metadata__` first (always with "format": "pt", keys sorted), tensors in
 * buffer order by dtype descending then name ascending, compact JSON, header
 * padded with spaces to a multiple of 8.  The file is built under a temporary
 * name in the destination directory and renamed into place by
 * fp8_writer_commit(), after an fsync; fp8_writer_free() without a commit
 * removes it.  A path ending in ".zst" is zstd-compressed.
 *
 * Use: create, set_metadata/add_tensor as needed, begin (fixes the layout),
 * then write every tensor's bytes in the order fp8_writer_tensor() lists,
 * then commit.
 */
typedef struct fp8_writer fp8_writer;

fp8_status fp8_writer_create(fp8_ctx *ctx, const char *path, fp8_writer **out);
void fp8_writer_free(fp8_writer *writer);
fp8_status fp8_writer_set_metadata(fp8_ctx *ctx, fp8_writer *writer, const char *key,
                                   const char *value);
fp8_status fp8_writer_add_tensor(fp8_ctx *ctx, fp8_writer *writer, const char *name,
                                 fp8_dtype dtype, int rank, const uint64_t *shape);
fp8_status fp8_writer_begin(fp8_ctx *ctx, fp8_writer *writer);
/* After begin: the tensors in the order their bytes must be written. */
size_t fp8_writer_tensor_count(const fp8_writer *writer);
const fp8_tensor_info *fp8_writer_tensor(const fp8_writer *writer, size_t index);
/* Append data bytes (any chunking). */
fp8_status fp8_writer_write(fp8_ctx *ctx, fp8_writer *writer, const void *data, size_t len);
fp8_status fp8_writer_commit(fp8_ctx *ctx, fp8_writer *writer);
/* The size of the finished file; fixes the layout like begin, without
 * creating the file (a dry run can ask). */
fp8_status fp8_writer_size(fp8_ctx *ctx, fp8_writer *writer, uint64_t *file_size);
/* Before begin: whether commit makes the file durable (fsync of the file and
 * its directory; the default) or leaves writeback to the kernel, as cp does. */
void fp8_writer_set_durable(fp8_writer *writer, bool durable);
/* After begin: a tensor of the layout by name, NULL when absent. */
const fp8_tensor_info *fp8_writer_find(const fp8_writer *writer, const char *name);
/* After begin, instead of fp8_writer_write: bytes of tensor `t` (from
 * fp8_writer_find) at `offset` into it, in any order, from any thread, as
 * long as every byte is written once.  Not for .zst outputs. */
fp8_status fp8_writer_pwrite(fp8_ctx *ctx, fp8_writer *writer, const fp8_tensor_info *t,
                             uint64_t offset, const void *data, size_t len);

/* ---------------------------------------------------------------- checkpoints */

/*
 * A checkpoint: a single .safetensors[.zst] file, or a directory holding
 * model.safetensors.index.json and its shards, or a directory of
 * *.safetensors[.zst] files without an index.  An index is checked both ways
 * (every mapped tensor is in its shard, every tensor of a shard is mapped to
 * it); a tensor name in two shards is an error.  Only headers are read.
 */
typedef struct fp8_checkpoint fp8_checkpoint;

fp8_status fp8_checkpoint_open(fp8_ctx *ctx, const char *path, fp8_checkpoint **out);
void fp8_checkpoint_close(fp8_checkpoint *ckpt);

/* config.json (of a directory) read as strictly as the commands that use it
 * read it (RFC 8259: no byte-order mark, no escaped NUL, no trailing comma;
 * fp8_checkpoint_open reads it leniently, for its quant_method only):
 * FP8_OK when there is none or it is strict, FP8_ERR_BAD_INPUT naming the
 * fault otherwise.  inspect checks it so. */
fp8_status fp8_checkpoint_config_check(fp8_ctx *ctx, const fp8_checkpoint *ckpt);
bool fp8_checkpoint_is_directory(const fp8_checkpoint *ckpt);
bool fp8_checkpoint_has_index(const fp8_checkpoint *ckpt);
/* The index's metadata.total_size; false when there is no index or no such number. */
bool fp8_checkpoint_index_total_size(const fp8_checkpoint *ckpt, uint64_t *total_size);

/* Shards, sorted by file name. */
size_t fp8_checkpoint_shard_count(const fp8_checkpoint *ckpt);
fp8_file *fp8_checkpoint_shard(const fp8_checkpoint *ckpt, size_t index);
const char *fp8_checkpoint_shard_name(const fp8_checkpoint *ckpt, size_t index); /* base name */

/* All tensors of all shards, sorted by name. */
size_t fp8_checkpoint_tensor_count(const fp8_checkpoint *ckpt);
const fp8_tensor_info *fp8_checkpoint_tensor(const fp8_checkpoint *ckpt, size_t index,
                                             size_t *shard);
const fp8_tensor_info *fp8_checkpoint_find(const fp8_checkpoint *ckpt, const char *name,
                                           size_t *shard);

/* config.json (directories only): whether one exists, whether it has a
 * quantization_config, and its quant_method (NULL when absent). */
bool fp8_checkpoint_has_config(const fp8_checkpoint *ckpt);
bool fp8_checkpoint_has_quant_config(const fp8_checkpoint *ckpt);
const char *fp8_checkpoint_quant_method(const fp8_checkpoint *ckpt);

/* Whether tensor `t` of the checkpoint is a packed-FP4 weight fp8conv reads
 * (fp8conv-formats(5), 2026 LAYOUTS: gpt-oss and DeepSeek-V4 MXFP4 experts,
 * ModelOpt and compressed-tensors NVFP4), its scale beside it: the layout's name ("gpt-oss mxfp4"), the
 * unpacked weight's name (malloc'ed into *name, may be NULL) and its
 * logical shape, as dequantize-for-export writes it (*rank dims of shape).
 * NULL when it is not one (or its packed shape fits no layout). */
const char *fp8_checkpoint_fp4_weight(const fp8_checkpoint *ckpt, const fp8_tensor_info *t,
                                      char **name, int *rank, uint64_t shape[3]);

/* FP8 KV-cache scales (fp8conv-formats(5), KV CACHE SCALES), one entry per
 * naming convention found: how many tensors, their dtype (FP8_DTYPE_COUNT
 * when they differ) and the range of their values (`values` false when not
 * read: a compressed shard, or not a float dtype).  Reads 4 bytes a scale. */
typedef struct {
    const char *convention; /* "modelopt", "llm-compressor", "fused-qkv", ... */
    size_t count;
    fp8_dtype dtype;
    bool values;
    float min, max;
} fp8_kv_scales;
fp8_status fp8_checkpoint_kv_scales(fp8_ctx *ctx, const fp8_checkpoint *ckpt, fp8_kv_scales *out,
                                    size_t cap, size_t *n);

/* ---------------------------------------------------------------- quantize */

/*
 * Quantizing a bf16/f16/f32 checkpoint to FP8 (fp8conv-formats(5), SCHEMES
 * and FORMATS), in two steps: a plan says what happens to every tensor (and
 * is all that --dry-run needs); running it writes the output.  Running
 * streams: memory does not grow with the size of a tensor or of the model,
 * and the output bytes are the same for every thread count.
 */
typedef enum {
    FP8_SCHEME_BLOCK,   /* one scale per R x C tile (default 128 x 128) */
    FP8_SCHEME_CHANNEL, /* one scale per output row */
    FP8_SCHEME_TENSOR,  /* one scale per matrix */
    FP8_SCHEME_MXFP8,   /* OCP MX: one power-of-two scale per 32 elements of a row */
    FP8_SCHEME_NVFP4,   /* E2M1 codes, an E4M3 scale per 16 elements of a row, an F32 per matrix */
    FP8_SCHEME_MXFP4,   /* E2M1 codes, an E8M0 scale per 32 elements of a row */
    FP8_SCHEME_INT4,    /* INT4 codes (-8..7), a scale in the weight's dtype per 128 or 32
                         * elements of a row (compressed-tensors pack-quantized, W4A16) */
} fp8_scheme;

typedef enum {
    FP8_FORMAT_DEFAULT,            /* the scheme's default (see fp8_format_default) */
    FP8_FORMAT_HF_FP8,             /* quant_method "fp8": DeepSeek-V3, transformers, vLLM, SGLang */
    FP8_FORMAT_COMPRESSED_TENSORS, /* llm-compressor's compressed-tensors */
    FP8_FORMAT_MODELOPT,           /* NVIDIA ModelOpt unified HF checkpoint */
    FP8_FORMAT_FBGEMM_FP8,         /* quant_method "fbgemm_fp8" (Llama-3.1-405B-Instruct-FP8):
                                    * read, not written */
} fp8_format;

typedef enum { FP8_MX_RCEIL, FP8_MX_FLOOR } fp8_mx_rounding;

/* Whose quantizer's bytes to write (fp8conv-formats(5), PROFILES): an
 * engine's or trainer's own scale and element arithmetic.  FP8CONV, the
 * default, is fp8conv's own rule; each other profile defines some schemes
 * (fp8_profile_defines) and stores F32 scales. */
typedef enum {
    FP8_PROFILE_FP8CONV,
    FP8_PROFILE_VLLM,
    FP8_PROFILE_DEEPGEMM,
    FP8_PROFILE_SGLANG,
    FP8_PROFILE_PRIME_RL,
    FP8_PROFILE_SLIME,
    FP8_PROFILE_TE,
    FP8_PROFILE_TRANSFORMERS,
    FP8_PROFILE_LLM_COMPRESSOR,
    FP8_PROFILE_COUNT
} fp8_profile;
/* "fp8conv", "vllm", ... in fp8_profile's order, NULL-terminated. */
extern const char *const fp8_profile_names[];
const char *fp8_profile_name(fp8_profile profile);
/* Whether the profile defines the scheme; `defined` (when not NULL) gets
 * the names of those it does, "block, tensor" ("none" for none). */
bool fp8_profile_defines(fp8_profile profile, fp8_scheme scheme, char *defined, size_t cap);

/* "block", "hf-fp8", ... (the command-line spellings). */
const char *fp8_scheme_name(fp8_scheme scheme);
const char *fp8_format_name(fp8_format format);
/* The same spellings, NULL-terminated, for option parsers and completion:
 * every scheme in fp8_scheme's order; every format from FP8_FORMAT_HF_FP8 on
 * (FP8_FORMAT_DEFAULT has no spelling on the command line). */
extern const char *const fp8_scheme_names[];
extern const char *const fp8_format_names[];
/* The options a scheme takes beyond --scheme, from its row of the scheme
 * table: a block size and a scale format (tiles), a rounding of its
 * power-of-two scales (MX). */
enum {
    FP8_SCHEME_TAKES_BLOCK = 1,       /* --block, weight_block_size */
    FP8_SCHEME_TAKES_SCALE_FMT = 2,   /* --scale-fmt ue8m0 */
    FP8_SCHEME_TAKES_MX_ROUNDING = 4, /* --mx-rounding */
    FP8_SCHEME_TAKES_GROUP = 8,       /* --group: the row's run or its alternative */
};
unsigned fp8_scheme_options(fp8_scheme scheme);
/* block -> hf-fp8, channel -> compressed-tensors, tensor -> hf-fp8,
 * mxfp8 -> compressed-tensors. */
fp8_format fp8_format_default(fp8_scheme scheme);
/* Whether the table of fp8conv-formats(5), FORMATS has the pair. */
bool fp8_format_supports(fp8_format format, fp8_scheme scheme);

/* What a conversion leaves in the page cache: AUTO drops what it has read
 * and written (posix_fadvise DONTNEED, as it goes) when the input is larger
 * than half of the memory, so that it does not evict the rest of the host's
 * cache, and keeps it otherwise (a warm rerun stays fast); KEEP and DROP say
 * which, whatever the size. */
typedef enum { FP8_CACHE_AUTO = 0, FP8_CACHE_KEEP = 1, FP8_CACHE_DROP = 2 } fp8_cache;

/* How a conversion is cut into parts and resumed (fp8conv(1), CONVERTING
 * ACROSS MACHINES), and what it leaves in the page cache: part I of N
 * (1 <= part <= parts) writes its share of the output shards into
 * .OUTPUT.parts beside OUTPUT and publishes nothing; `finish` checks that
 * every shard is there, whole, and publishes OUTPUT.  `resume` continues
 * the durable run on OUTPUT that died, keeping the shards it finished
 * (OUTPUT complete: nothing to do).  Options must be the same for every part
 * and the finish (FP8_ERR_USAGE names the one that differs).  The same for
 * quantize and dequantize-for-export. */
typedef struct {
    unsigned part, parts; /* parts 0: not a part */
    bool finish, resume;
    fp8_cache cache;
} fp8_run_options;

/* Where the math runs: AUTO is CUDA when a usable GPU is present, else the
 * CPU; both give the same bytes. */
typedef enum { FP8_DEVICE_AUTO = 0, FP8_DEVICE_CPU = 1, FP8_DEVICE_CUDA = 2 } fp8_device;

typedef struct {
    fp8_scheme scheme;
    fp8_format format;
    uint32_t block_rows, block_cols; /* block scheme: 1..4096 each */
    bool scale_ue8m0;                /* block scheme, hf-fp8: power-of-two scales */
    fp8_mx_rounding mx_rounding;
    /* "re:" and a POSIX extended regex matched from the start of a module's
     * name, or a POSIX extended regex searched in tensor names (fp8conv(1),
     * --ignore); one that matches no tensor is a plan warning */
    const char *const *ignore;
    size_t nignore;
    size_t nignore_like;             /* the last nignore_like of them are --like's */
    bool strict_ignore;              /* a pattern matching no tensor: FP8_ERR_USAGE */
    bool no_default_ignore;          /* drop the built-in list of what stays unquantized */
    /* --like REF (fp8_like_apply): REF's choices where they are not the
     * format's own.  scale_dtype (when scale_dtype_set): the dtype of every
     * float scale (Qwen3-*-FP8's hf-fp8 block scales are BF16); declared_ignore
     * (when declare_ignore): the config's ignore list, REF's entries in place
     * of the modules quantize keeps, and no list at all when
     * ndeclared_ignore is 0 and REF has none (declare_no_list). */
    bool scale_dtype_set;
    fp8_dtype scale_dtype;
    /* --like: REF names every weight scale with the other name its format's
     * loaders take (Mistral's per-tensor hf-fp8 weight_scale_inv:
     * fp8conv-formats(5), RELEASE FAMILIES); the output's scales are named so */
    bool scale_alt_name;
    /* --like: compressed-tensors' config_groups targets of REF's one group
     * (Granite-4's "Linear" and "GraniteMoeHybridParallelExpertsLinear");
     * 0: "Linear" */
    const char *const *ct_targets;
    size_t nct_targets;
    bool declare_ignore, declare_no_list;
    const char *const *declared_ignore;
    size_t ndeclared_ignore;
    int threads;                     /* 0: one per online CPU */
    fp8_device device;               /* AUTO (default), CPU or CUDA */
    bool force;                      /* replace an existing output */
    bool no_sync;                    /* skip fsync: faster; a power loss soon after
                                        can leave a damaged output */
    fp8_run_options run;             /* parts, resume, page cache */
    /* Called from the calling thread as work completes (bytes of input), with
     * the tensor it just worked on (NULL at the end).  The other commands'
     * options have the same callback. */
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    void *progress_user;
    /* When set and *cancel becomes nonzero (a signal handler may set it), the
     * run stops, removes what it wrote and fails with FP8_ERR_IO. */
    const volatile sig_atomic_t *cancel;
    /* The output carries static FP8 KV-cache scales: its config declares
     * them (compressed-tensors kv_cache_scheme, ModelOpt kv_cache_quant_algo
     * FP8; fp8conv-formats(5), KV CACHE SCALES).  Set by convert. */
    bool kv_cache_fp8;
    /* The output carries static per-tensor activation scales (input_scale)
     * beside its FP8 weights: its config declares static activations
     * (hf-fp8 activation_scheme static, compressed-tensors input_activations
     * dynamic false strategy tensor, ModelOpt quant_algo FP8; fp8conv(1),
     * convert, ACTIVATION SCALES).  Set by convert. */
    bool static_acts;
    /* The engine whose arithmetic the codes and scales follow (a scheme
     * the profile does not define: FP8_ERR_USAGE naming those it does). */
    fp8_profile profile;
} fp8_quant_options;

#define FP8_QUANT_OPTIONS_INIT                                                              \
    { .scheme = FP8_SCHEME_BLOCK, .format = FP8_FORMAT_DEFAULT, .block_rows = 128,        \
      .block_cols = 128, .mx_rounding = FP8_MX_RCEIL }

/* What happens to one input tensor. */
typedef struct {
    const fp8_tensor_info *tensor; /* the input tensor */
    const char *shard;             /* its file (base name) in input and output */
    bool quantize;
    /* When not quantized: why ("embedding (built-in rule)", "--ignore 'x'",
     * "not a floating-point weight", ...); NULL when quantized. */
    const char *reason;
    bool warn;                     /* the reason deserves a warning (mxfp8 shape) */
    /* When quantized: the scale tensor written beside it. */
    const char *scale_name;
    fp8_dtype scale_dtype;
    int scale_rank;
    uint64_t scale_shape[3];
    /* FP4 schemes: the packed weight's name (X.weight_packed in
     * compressed-tensors; NULL: the tensor's own), and NVFP4's second-level
     * scale, F32 of global_rank dims ([1], or [] for a scalar; NULL: none). */
    const char *packed_name;
    const char *global_name;
    int global_rank;
    /* When quantized: the codes' tensor (packed_name, or the tensor's own
     * name), its dtype and shape (the tensor's rank; E2M1 codes two to a
     * U8 byte: the last dimension halved). */
    fp8_dtype code_dtype;
    uint64_t code_shape[3];
    /* INT4: the unpacked shape's tensor, I64 [2] (X.weight_shape; NULL: none) */
    const char *shape_name;
} fp8_quant_item;

typedef struct fp8_quant_plan fp8_quant_plan;

/*
 * Opens INPUT (a checkpoint directory or a single .safetensors file) and
 * decides every tensor's fate.  Fails with FP8_ERR_USAGE for an option the
 * format cannot express, FP8_ERR_BAD_INPUT for an input that is already
 * quantized (a quantization_config, or FP8 tensors).
 */
fp8_status fp8_quant_plan_create(fp8_ctx *ctx, const char *input, const fp8_quant_options *opts,
                                 fp8_quant_plan **out);
void fp8_quant_plan_free(fp8_quant_plan *plan);

fp8_format fp8_quant_plan_format(const fp8_quant_plan *plan); /* resolved, never DEFAULT */
/* Items in the order of the input checkpoint's tensors (sorted by name). */
size_t fp8_quant_plan_count(const fp8_quant_plan *plan);
const fp8_quant_item *fp8_quant_plan_item(const fp8_quant_plan *plan, size_t index);
/* The modules written to the config's ignore list, sorted. */
size_t fp8_quant_plan_ignored_count(const fp8_quant_plan *plan);
const char *fp8_quant_plan_ignored(const fp8_quant_plan *plan, size_t index);
/* Warnings about the whole output (e.g. a block size vLLM and SGLang cannot
 * load at TP=1), each a full sentence naming the input. */
size_t fp8_quant_plan_warning_count(const fp8_quant_plan *plan);
const char *fp8_quant_plan_warning(const fp8_quant_plan *plan, size_t index);
/* What a directory output copies as it is, besides its shards, index and
 * config.json: the other files (tokenizer, generation_config.json, ...) and
 * every subfolder whole (sentence-transformers' 1_Pooling/, a release's
 * original/ with its .pth weights), unconverted.  files and bytes count the
 * subfolders' files too; folder_names: "1_Pooling/ original/" (cut short
 * past the buffer). */
typedef struct {
    uint64_t files, bytes;
    size_t folders;
    char folder_names[256];
} fp8_copy_totals;
/* Counts them (without copying); all zero for a file input. */
fp8_status fp8_quant_plan_copied(fp8_ctx *ctx, const fp8_quant_plan *plan,
                                 fp8_copy_totals *totals);
/* Bytes of tensor data read, and of the output's .safetensors files (headers
 * included). */
uint64_t fp8_quant_plan_input_bytes(const fp8_quant_plan *plan);
fp8_status fp8_quant_plan_output_bytes(fp8_ctx *ctx, const fp8_quant_plan *plan,
                                       uint64_t *bytes);

/*
 * Writes the output: a directory for a directory input (same shard files, an
 * index when the input had one or several shards, config.json with its
 * quantization_config, the other top-level files copied), a file for a file.
 * The output is built beside OUTPUT under a temporary name and renamed into
 * place at the end; on any failure nothing is left behind.  OUTPUT must not
 * exist unless opts->force (FP8_ERR_EXISTS).  A NaN or infinity in a tensor
 * to be quantized fails with FP8_ERR_BAD_INPUT naming the tensor and element.
 * With opts->device CUDA and no usable GPU, or a CUDA failure, FP8_ERR_DEVICE.
 */
fp8_status fp8_quant_plan_run(fp8_ctx *ctx, fp8_quant_plan *plan, const char *output);
/* Where the last run's math ran: CPU or CUDA (AUTO before a run). */
fp8_device fp8_quant_plan_device(const fp8_quant_plan *plan);

/* ---------------------------------------------------------------- tensors in memory */

/*
 * One tensor held in memory, quantized into exactly the bytes `fp8conv
 * quantize` stores for it under the same options (fp8_tensor_options):
 * the same plan of the
 * tensor (quantize's scale layout, dtypes and shapes) and the same band
 * quantizer, by opts->threads threads (0: one per online CPU; the bytes do
 * not depend on it), on the CPU.  The tensor is BF16, F16 or F32, C order,
 * a matrix [rows, cols] or stacked experts [experts, rows, cols] (the FP8
 * schemes; the FP4 schemes and INT4 take matrices).  No ignore rule
 * applies: a tensor the scheme cannot write (an mxfp8 row not a multiple
 * of 32) is FP8_ERR_BAD_INPUT with the reason, as is a NaN or infinity.
 * NVFP4's second level comes from this tensor's amax alone (quantize gives
 * the tensors of a fused layer the largest of theirs).  INT4's unpacked
 * shape tensor (weight_shape, I64 [rows, cols]) is the caller's to write.
 * The Python package's quantize_tensor calls these.
 */
enum { FP8_PART_CODES, FP8_PART_SCALE, FP8_PART_SCALE2, FP8_PART_COUNT };

/* fp8_quant_options' slots that apply to one tensor, the same values. */
typedef struct {
    fp8_scheme scheme;
    fp8_format format;
    uint32_t block_rows, block_cols; /* block; block_cols is INT4's --group too */
    bool scale_ue8m0;
    fp8_mx_rounding mx_rounding;
    int threads;                     /* 0: one per online CPU */
    fp8_profile profile;             /* --profile (fp8conv-formats(5), PROFILES) */
} fp8_tensor_options;

#define FP8_TENSOR_OPTIONS_INIT                                                             \
    { .scheme = FP8_SCHEME_BLOCK, .format = FP8_FORMAT_DEFAULT, .block_rows = 128,        \
      .block_cols = 128, .mx_rounding = FP8_MX_RCEIL }

/* One tensor of the quantized form, as the checkpoint holds it. */
typedef struct {
    /* its name after the module's ("weight", "weight_scale_inv",
     * "weight_packed", "weight_global_scale", "weight_scale_2"); "" when the
     * scheme has no such part (only NVFP4 has SCALE2) */
    char name[40];
    fp8_dtype dtype;
    int rank; /* 0: a scalar (ModelOpt's weight_scale_2) */
    uint64_t shape[3];
    uint64_t nbytes;
} fp8_tensor_part;

typedef struct {
    fp8_format format; /* resolved, never DEFAULT */
    fp8_tensor_part part[FP8_PART_COUNT];
} fp8_tensor_layout;

/* The parts a tensor of `dtype` and shape [rank] quantizes into; fails as
 * fp8_tensor_quantize would on its options and shape. */
fp8_status fp8_tensor_layout_get(fp8_ctx *ctx, const fp8_tensor_options *opts, fp8_dtype dtype,
                                 int rank, const uint64_t *shape, fp8_tensor_layout *out);
/* Quantizes x (dtype, shape) into the caller's buffers out[part], each of
 * the layout's nbytes (SCALE2: NULL when the scheme has none).  On failure
 * their contents are undefined. */
fp8_status fp8_tensor_quantize(fp8_ctx *ctx, const fp8_tensor_options *opts, fp8_dtype dtype,
                               int rank, const uint64_t *shape, const void *x,
                               void *const out[FP8_PART_COUNT]);
/* The same on a CUDA device, through the CUDA kernels: x and out[part] are
 * device pointers (of the current device), `stream` the caller's
 * cudaStream_t (NULL: the legacy default stream), on which everything is
 * queued; no host staging, and one wait for the stream at the end, to read
 * the kernels' flags (two for the per-tensor scheme and NVFP4, whose scale
 * is made here from the amax the device finds).  The same bytes as
 * fp8_tensor_quantize.  A NaN or infinity (or another flag) is looked for
 * again on a host copy of x and reported as fp8_tensor_quantize reports it.
 * FP8_ERR_DEVICE: a library built without CUDA (fp8_cuda_compiled()), a
 * scheme without a kernel (int4; FP4 from f16), or a CUDA call that failed. */
fp8_status fp8_tensor_quantize_cuda(fp8_ctx *ctx, const fp8_tensor_options *opts,
                                    fp8_dtype dtype, int rank, const uint64_t *shape,
                                    const void *x, void *const out[FP8_PART_COUNT], void *stream);
/* The other way, as dequantize-for-export writes the weight: the parts in[]
 * of a tensor of `dtype` and shape quantized under opts, y = q * s in fp32
 * rounded to nearest even into y (BF16, F16 or F32, rows * cols elements a
 * matrix).  A NaN code, a scale that is not finite and positive, or a value
 * that overflows `out` is FP8_ERR_BAD_INPUT. */
fp8_status fp8_tensor_dequantize(fp8_ctx *ctx, const fp8_tensor_options *opts, fp8_dtype dtype,
                                 int rank, const uint64_t *shape,
                                 const void *const in[FP8_PART_COUNT], fp8_dtype out, void *y);

/*
 * A state dict in memory: quantize's own plan (fp8_quant_plan_create's
 * rules: its ignore list and built-in keeps, fused experts written apart
 * under the FP4 schemes, the formats' names, dtypes and shapes) made over
 * tensors given by name, dtype and shape, beside the model's config.json
 * text, as if they were one checkpoint file `model.safetensors` in a
 * directory with that config.json.  Its items (fp8_quant_plan_item) are
 * what quantize writes for those tensors; fp8_quant_plan_item_quantize
 * then writes an item's tensors from the caller's data with the tensor
 * API's quantizer, so that they are the bytes quantize writes.  Given one
 * layer's tensors, the plan is quantize's for that layer, but for what it
 * cannot see: the modules of other calls in the ignore list (its
 * quantization_config lists the ones given), an --ignore pattern that
 * matches elsewhere (strict_ignore does not apply; the plan's warnings say
 * so), and a fused set (q/k/v, gate/up, an expert's gate/up) or a fused
 * experts tensor's bias split across calls.  Such a plan is not run
 * (fp8_quant_plan_run: FP8_ERR_USAGE).  The Python package's
 * quantize_state_dict calls these.
 */
typedef struct {
    fp8_tensor_options tensor;
    const char *const *ignore;       /* quantize's --ignore patterns */
    size_t nignore;
    bool no_default_ignore;          /* --no-default-ignore */
    const char *config_json;         /* the model's config.json text; NULL: none */
} fp8_state_options;

#define FP8_STATE_OPTIONS_INIT { .tensor = FP8_TENSOR_OPTIONS_INIT }

/* The plan of the n tensors (their data offsets are not read: each is of
 * its shape's bytes; names and shapes are copied).  Fails as
 * fp8_quant_plan_create does on the options, the config and the tensors
 * (a name twice, an FP8 tensor or a scale's name: already quantized). */
fp8_status fp8_quant_plan_create_memory(fp8_ctx *ctx, const fp8_state_options *opts,
                                        const fp8_tensor_info *tensors, size_t n,
                                        fp8_quant_plan **out);

/* Where item i's weight comes from, in a plan of any input: the input
 * tensor (`tensor`: its name), or, for a weight of fused experts written
 * apart (`apart`), rows [row0, row0 + rows) of expert `expert` along the
 * fused tensor's output axis, transposed when it is stored [E, in, out]
 * (`in_out`).  `set`: the fused layer the item is part of (q/k/v, gate/up
 * of a module or of one expert; else the item's own name), whose items
 * share NVFP4's second level, the largest amax of the set; valid while
 * the plan is. */
typedef struct {
    const char *tensor;
    bool apart, in_out;
    uint64_t expert, row0, rows;
    const char *set;
} fp8_item_source;
fp8_status fp8_quant_plan_item_source(fp8_ctx *ctx, const fp8_quant_plan *plan, size_t index,
                                      fp8_item_source *out);

/* The quantization_config quantize writes into config.json for the plan,
 * as JSON text (allocated: free it); NULL when out of memory. */
char *fp8_quant_plan_quantization_config(const fp8_quant_plan *plan);

/* A quantized item's tensors: codes, scale, second level (NVFP4), unpacked
 * shape (INT4's I64 [2]). */
enum { FP8_ITEM_CODES, FP8_ITEM_SCALE, FP8_ITEM_SCALE2, FP8_ITEM_SHAPE, FP8_ITEM_COUNT };

/* The largest magnitude of x, quantized item i's weight (C order: the
 * item's tensor's dtype and shape; a weight written apart as its own
 * [rows, in] matrix); a NaN or infinity is FP8_ERR_BAD_INPUT. */
fp8_status fp8_quant_plan_item_amax(fp8_ctx *ctx, const fp8_quant_plan *plan, size_t index,
                                    const void *x, float *amax);
/* Quantizes x, item i's weight as fp8_quant_plan_item_amax takes it, into
 * out[k] (the item's tensors' bytes; NULL where it has none; SHAPE may be
 * NULL: not written), by
 * opts.tensor.threads threads; `set_amax`: the largest of the set's
 * amaxes, from which NVFP4's second level is made (ignored otherwise). */
fp8_status fp8_quant_plan_item_quantize(fp8_ctx *ctx, fp8_quant_plan *plan, size_t index,
                                        const void *x, float set_amax,
                                        void *const out[FP8_ITEM_COUNT]);

/* ---------------------------------------------------------------- dequantize */

/*
 * An FP8 checkpoint back to bf16/f16/f32 (fp8conv-formats(5), DEQUANTIZATION),
 * for fine-tuning or export.  Reads every format of fp8conv-formats(5), FORMATS
 * and the official DeepSeek-V3/R1 layout: each F8_E4M3 weight W has exactly
 * one scale, W_scale_inv or W_scale, found by name anywhere in the
 * checkpoint; its shape says whether it is per tensor, per channel, per
 * block (the config's weight_block_size or block_structure, else 128 x 128)
 * or MX (U8 or F8_E8M0, [M, N/32]).  y = q * s in fp32, rounded to nearest
 * even into the output dtype.  The output keeps the
 * shard layout, drops the scales, the input_scale and the KV-cache scales
 * tensors, removes quantization_config from config.json and sets torch_dtype,
 * leaves out hf_quant_config.json and copies the other files; it is built
 * beside OUTPUT and renamed into place, as quantize's is.  An FP8 weight
 * without a scale, a scale that fits no layout, a NaN code, a scale that is
 * not finite and positive, or an f16 overflow is FP8_ERR_BAD_INPUT.
 */
typedef struct {
    fp8_dtype dtype;   /* FP8_DTYPE_BF16 (default), FP8_DTYPE_F16 or FP8_DTYPE_F32 */
    int threads;       /* 0: one per online CPU */
    fp8_device device; /* AUTO (default), CPU or CUDA */
    bool force, no_sync;
    fp8_run_options run; /* parts, resume, page cache */
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    void *progress_user;
    const volatile sig_atomic_t *cancel;
} fp8_dequant_options;

#define FP8_DEQUANT_OPTIONS_INIT { .dtype = FP8_DTYPE_BF16 }

typedef struct {
    size_t dequantized, dropped, copied; /* tensors */
    size_t kv_dropped;                   /* of `dropped`: FP8 KV-cache scales */
    uint64_t input_bytes, output_bytes;  /* tensor data */
    fp8_device device;                   /* where the math ran: CPU or CUDA */
} fp8_dequant_report;

fp8_status fp8_dequantize(fp8_ctx *ctx, const char *input, const char *output,
                          const fp8_dequant_options *opts, fp8_dequant_report *report);

/* ---------------------------------------------------------------- convert */

/*
 * An FP8 checkpoint (any layout dequantize-for-export reads) into another
 * FP8 layout, without a bf16 copy.  Each FP8 weight takes one of two paths:
 *   exact:  its codes are copied and each output scale is the input scale
 *           of the group that holds it, when every output group (block,
 *           row, tensor, MX group) lies inside one input group and the
 *           output scale dtype holds the input's values (F32 holds F32,
 *           BF16, F16 and E8M0; MX and ue8m0 scales come only from MX
 *           input): finer blocks that divide the input's, and re-labelling
 *           between hf-fp8, compressed-tensors and modelopt;
 *   values: its values q * s (one fp32 multiplication each) are quantized
 *           with quantize's own code, as quantize quantizes the F32 weights
 *           of `dequantize-for-export --dtype f32` of the input: the same
 *           bytes (compressed-tensors scales are then F32, the values'
 *           dtype).
 * Other tensors are copied; scales are replaced; static activation scales
 * (input_scale, Mistral's activation_scale, of an input whose config
 * declares static activations) are kept where the target layout
 * declares static activations (per tensor: hf-fp8, compressed-tensors,
 * ModelOpt FP8), renamed input_scale when the format changes, one needed
 * beside every FP8 weight (FP8_ERR_BAD_INPUT naming the first without),
 * and dropped elsewhere (the output declares dynamic activations);
 * KV-cache scales are kept, renamed to the target's naming (kv_names).  The
 * output is written as quantize writes (shards, index, config.json with the
 * target's quantization_config, other files), atomically, the same bytes
 * for any thread count.
 */
typedef struct {
    /* The output: scheme, format (DEFAULT: the input's, when it has the
     * scheme), block, scale_ue8m0, mx_rounding, and threads, device, force,
     * no_sync, progress, cancel as for quantize (ignore is not used);
     * profile: the arithmetic of the values path only (the exact path
     * copies under any profile; a scheme it does not define is
     * FP8_ERR_USAGE, as is a weight to re-quantize under an input's ue8m0
     * claim that an F32-scale profile cannot keep, unless scale_fmt_set; a
     * ue8m0 profile makes hf-fp8 blocks ue8m0). */
    fp8_quant_options target;
    /* false: as the input declares it (its scheme, its block size, its
     * ue8m0 claim) */
    bool scheme_set, block_set, scale_fmt_set;
    bool exact; /* a weight that cannot take the exact path is an error */
    /* The naming convention of the output's KV-cache scales ("modelopt",
     * "llm-compressor", "fused-qkv", "ct-output"); NULL: the target
     * format's (ModelOpt: modelopt, compressed-tensors: llm-compressor,
     * hf-fp8: the input's names). */
    const char *kv_names;
    /* The name of the output's static activation scales' last component
     * ("activation_scale", from --like); NULL: input_scale, or the input's
     * own names when the format stays the input's. */
    const char *act_name;
} fp8_convert_options;

#define FP8_CONVERT_OPTIONS_INIT { .target = FP8_QUANT_OPTIONS_INIT }

typedef struct {
    const char *name;   /* the FP8 weight */
    bool exact;         /* codes copied, scales copied or replicated */
    const char *why;    /* not exact: why not */
    uint64_t elements;
    uint64_t codes_changed; /* elements whose E4M3 code changed (0 when exact) */
    uint64_t changed;   /* elements whose value q * s changed (0 when exact) */
    double max_change;  /* the largest |new - old| of a value */
} fp8_convert_weight;

typedef struct fp8_convert fp8_convert;

/* Opens INPUT and decides each FP8 weight's path.  FP8_ERR_BAD_INPUT for an
 * input without FP8 weights, or one fp8conv cannot read (as
 * dequantize-for-export), or a weight the target cannot hold (MX needs N
 * divisible by 32); FP8_ERR_USAGE for a target the format table lacks, and
 * with `exact` for a weight that needs the value path. */
fp8_status fp8_convert_create(fp8_ctx *ctx, const char *input, const fp8_convert_options *opts,
                              fp8_convert **out);
/* Writes OUTPUT (as fp8_quant_plan_run); fills each weight's counts. */
fp8_status fp8_convert_run(fp8_ctx *ctx, fp8_convert *c, const char *output);
void fp8_convert_free(fp8_convert *c);
/* The target, resolved (scheme, block, format never DEFAULT). */
const fp8_quant_options *fp8_convert_target(const fp8_convert *c);
/* The quantize plan that writes the output: items, ignore list, warnings,
 * device (fp8_quant_plan_*). */
const fp8_quant_plan *fp8_convert_plan(const fp8_convert *c);
size_t fp8_convert_weight_count(const fp8_convert *c);
const fp8_convert_weight *fp8_convert_weight_at(const fp8_convert *c, size_t index);

/*
 * Packed-FP4 input is cast by the same create and run, exactly or not at
 * all (fp8conv(1), convert, CASTS): DeepSeek-V4's MXFP4 routed experts to
 * FP8 E4M3 with an F32 scale per 128x128 tile (DeepSeek's own cast), the
 * rest copied and config.json saying expert_dtype "fp8"; NVFP4 between
 * ModelOpt and compressed-tensors (opts->target.format, which must be
 * given: second-level scales inverted, a rounded reciprocal counted, or
 * with `exact` FP8_ERR_USAGE); compressed-tensors MXFP4 to NVFP4 (format
 * compressed-tensors, the default, or modelopt: each group scale 2^k two
 * E4M3 scales 2^(k - m) under a global 2^m, m = the largest k - 8).  A
 * value the cast would change is FP8_ERR_BAD_INPUT naming tensor, element
 * and rule; options asking for another layout are FP8_ERR_USAGE.  A cast
 * has no quantize plan (fp8_convert_plan NULL) and no weights.
 */
typedef struct {
    /* NULL: FP8 weights copied or re-quantized; else the cast the input
     * took: "mxfp4-experts-to-fp8", "nvfp4" or "mxfp4-to-nvfp4" */
    const char *cast;
    bool to_nvfp4;          /* a cast to NVFP4 (nvfp4, rounded), else to FP8 */
    fp8_scheme scheme;      /* the output's layout: scheme, block (when it takes one), format */
    uint32_t block_rows, block_cols;
    const char *format;
    size_t exact, requantized; /* FP8 weights, by path */
    size_t dropped;         /* activation scales (input_scale) left out */
    size_t act_scales;      /* static activation scales carried */
    /* KV-cache scales carried, how many renamed, and to what naming (or NULL) */
    size_t kv_scales, kv_renamed;
    const char *kv_names;
    /* a cast: expert weights cast (DeepSeek-V4), NVFP4 weights written,
     * second-level scales whose reciprocal was rounded, tensors copied as
     * they are, bytes of all tensors written */
    size_t experts, nvfp4, rounded, copied;
    uint64_t output_bytes;
} fp8_convert_report;

/* What fp8_convert_run wrote (the weights' own: fp8_convert_weight_at). */
void fp8_convert_get_report(const fp8_convert *c, fp8_convert_report *r);


/* ---------------------------------------------------------------- --like */

/*
 * The layout of a reference FP8 checkpoint REF (its directory, or its
 * config.json), as the options that reproduce it: quantize and convert
 * --like.  Copied from REF's quantization_config: the scheme, the format,
 * the block size, the ue8m0 claim, compressed-tensors' config group
 * targets; from its tensors: the scales' dtype and name (the format row's
 * other name where every scale has it), the KV-cache scale naming
 * (fp8_like_kv_names); its activations must be dynamic, the
 * only ones fp8conv writes, unless INPUT holds static activation scales of
 * its own (convert carries them: FP8_ERR_BAD_INPUT otherwise, static ones
 * are calibrated; or when REF declares no layout fp8conv reads, its config
 * read with ModelOpt's hf_quant_config.json as vLLM reads it).  REF's
 * calibrated KV cache (scales, kv_cache_scheme, kv_cache_quant_algo) is
 * not reproduced: a note says so.  REF's ignore list is mapped onto
 * INPUT's module names: a REF module INPUT has (by name, or by the same
 * name under another model prefix: language_model.x for model.x) or a
 * "re:" / glob pattern becomes one
 * --ignore regex; a REF module INPUT lacks is a note, a "re:" entry that is
 * no POSIX extended regex FP8_ERR_BAD_INPUT.
 */
typedef struct fp8_like fp8_like;

fp8_status fp8_like_open(fp8_ctx *ctx, const char *ref, const char *input, fp8_like **out);
void fp8_like_free(fp8_like *like);
/* Sets scheme, format, block_rows, block_cols, scale_ue8m0, the scales' dtype
 * and name, and the ignore list the output declares. */
void fp8_like_apply(const fp8_like *like, fp8_quant_options *o);
/* The naming convention of REF's KV-cache scales (fp8_convert_options'
 * kv_names), when they all have one; NULL when REF has none or several. */
const char *fp8_like_kv_names(const fp8_like *like);
/* "activation_scale" when REF names every static activation scale so
 * (Mistral's releases), the name convert --like gives the output's; NULL
 * otherwise (input_scale). */
const char *fp8_like_act_name(const fp8_like *like);
/* REF and INPUT have the same FP8 weights (by name): convert --like then
 * declares REF's ignore list, which keeps what INPUT keeps. */
bool fp8_like_same_weights(const fp8_like *like);
size_t fp8_like_ignore_count(const fp8_like *like);
const char *fp8_like_ignore(const fp8_like *like, size_t index); /* a POSIX extended regex */
/* What could not be copied, one sentence each (REF modules INPUT lacks, an
 * activation strategy fp8conv writes otherwise). */
size_t fp8_like_note_count(const fp8_like *like);
const char *fp8_like_note(const fp8_like *like, size_t index);

/* ---------------------------------------------------------------- hashes, diff */

/*
 * Content hashes: a tensor's is XXH3-128 (libxxhash) of its name, dtype,
 * shape and bytes; a checkpoint's digest is XXH3-128 of its tensors' hashes
 * in name order, so it does not depend on how the tensors are sharded.
 * Hashes are 32 lowercase hex digits.
 */
typedef char fp8_hash_hex[33];

/* hashes[i] gets the hash of fp8_checkpoint_tensor(ck, i); reads all data. */
fp8_status fp8_checkpoint_hash(fp8_ctx *ctx, fp8_checkpoint *ck, int threads,
                               fp8_hash_hex *hashes, fp8_hash_hex digest);
/* The same, with progress over the bytes read (inspect --hash on a terminal). */
typedef struct {
    int threads; /* 0: one per online CPU */
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    void *progress_user;
} fp8_hash_options;
fp8_status fp8_checkpoint_hash_with(fp8_ctx *ctx, fp8_checkpoint *ck, const fp8_hash_options *opts,
                                    fp8_hash_hex *hashes, fp8_hash_hex digest);

/*
 * Quality numbers of values b against reference values a (diff: B against
 * A; verify --against: the checkpoint's dequantized weights against the
 * source), from three sums kept in doubles: sum a^2, sum b^2 and
 * sum (a - b)^2.  Each span of a tensor (a band of a fixed number of
 * elements, or of whole rows, fixed by the tensor's shape alone) sums its
 * element i into lane i % 8, the lanes are added in order at its end, and
 * the spans in their order: the sums are the same for any thread count and
 * any CPU.  Sums of several tensors (a model's) add theirs in name order.
 */
typedef struct {
    double ref_sq, out_sq, err_sq;
    uint64_t elements; /* 0: nothing compared, no numbers */
} fp8_quality;

typedef struct {
    double rel_error; /* ||a - b|| / ||a|| (Frobenius norms); NaN when ||a|| is 0 */
    double cosine;    /* <a, b> / (||a|| ||b||); NaN when either norm is 0 */
    double snr_db;    /* 10 log10(sum a^2 / sum (a - b)^2); +inf when a = b */
} fp8_quality_numbers;

/* Adds the sums of `from` to `into`; the numbers of the sums. */
void fp8_quality_add(fp8_quality *into, const fp8_quality *from);
fp8_quality_numbers fp8_quality_of(const fp8_quality *q);

typedef enum {
    FP8_DIFF_SAME,     /* identical */
    FP8_DIFF_ONLY_A,   /* in A only */
    FP8_DIFF_ONLY_B,   /* in B only */
    FP8_DIFF_DTYPE,    /* dtypes differ */
    FP8_DIFF_SHAPE,    /* same dtype, shapes differ */
    FP8_DIFF_VALUES,   /* same dtype and shape, some elements differ */
} fp8_diff_kind;

typedef struct {
    const char *name;
    fp8_diff_kind kind;
    const fp8_tensor_info *a, *b; /* NULL on the side that lacks it */
    bool dequantized;             /* compared by dequantized value (--dequant) */
    fp8_dtype compared;           /* dequantized: the dtype the values are compared in (F32, or
                                   * the other side's BF16 or F16) */
    /* FP8_DIFF_VALUES: */
    uint64_t elements, differing, first_index;
    double max_abs;               /* largest |a - b| over numeric elements; NaN: none */
    uint64_t max_ulp;             /* largest distance in units in the last place, over the
                                   * elements whose values have the same sign */
    uint64_t sign_changes;        /* float elements of opposite signs (neither a zero): their
                                   * distance across zero is left out of max_ulp */
    /* the tensors compared element by element of dtype F32, BF16, F16,
     * F8_E4M3 or F8_E5M2, or by dequantized value: A as the reference */
    fp8_quality quality;
} fp8_diff_entry;

typedef struct {
    bool dequant; /* compare FP8 weights (with their scales) by dequantized fp32 value */
    int threads;  /* 0: one per online CPU */
    /* Called from the calling thread with bytes read so far and the total
     * (the total grows once the value comparisons are known); may be NULL. */
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    void *progress_user;
} fp8_diff_options;

typedef struct fp8_diff fp8_diff;

/*
 * Compares two checkpoints (files or directories, any sharding) tensor by
 * tensor, matched by name; element counts and indexes are flat, over the
 * tensor's elements (bytes for sub-byte and complex dtypes).  With dequant,
 * the scales and activation scales take no part, each FP8 weight is compared
 * as the fp32 values q * s, and each packed-FP4 weight (fp8conv-formats(5),
 * 2026 LAYOUTS) as its unpacked weight (its name, shape and orientation as
 * dequantize-for-export writes it, `a`/`b` an F4 tensor of that name and
 * shape), against either the other side's quantized weight (both in fp32)
 * or its float tensor, in that tensor's dtype: each quantized value rounded
 * once into it, as dequantize-for-export --dtype of it writes it; ULPs are
 * those of `compared`.
 */
fp8_status fp8_diff_run(fp8_ctx *ctx, const char *a, const char *b,
                        const fp8_diff_options *opts, fp8_diff **out);
void fp8_diff_free(fp8_diff *d);
bool fp8_diff_identical(const fp8_diff *d);
/* One entry per tensor name of A and B (with dequant: scales excluded, packed-FP4
 * weights under their unpacked names), sorted. */
size_t fp8_diff_count(const fp8_diff *d);
const fp8_diff_entry *fp8_diff_entry_at(const fp8_diff *d, size_t index);
/* The digests of A (side 0) and B (side 1). */
const char *fp8_diff_digest(const fp8_diff *d, int side);
/* The quality sums of the model: its entries', in order. */
fp8_quality fp8_diff_quality(const fp8_diff *d);

/* ---------------------------------------------------------------- verify */

/*
 * Offline checks of an FP8 checkpoint (fp8conv(1), verify; fp8conv-formats(5),
 * ERROR BOUND and PARALLELISM).  Findings are errors (the checkpoint will
 * not load, or will load with wrong values) or warnings (harmless to today's
 * loaders but wrong).  A malformed container or index is a finding too, not
 * a failure of the call.
 *
 * Checked in this version: every shard's container and the index both ways;
 * __metadata__ format; the index total_size; the format and scheme declared
 * by quantization_config against the tensors: each F8_E4M3 weight has
 * exactly one scale with the name, dtype and shape of the table of
 * fp8conv-formats(5), FORMATS, no orphan scales, no quantized module in the
 * ignore list, every unquantized 2-D weight in it (a warning); FP8 weights
 * without a quantization_config;
 * and the values: NaN codes, scales that are not finite and positive (U8
 * 0xFF), a false ue8m0 claim; and, from config.json alone, whether each
 * tensor- and expert-parallel partition fits the quantization's block (see
 * lib/layout/parallel.c).  With `against`, the bf16 source: the same tensors, the
 * kept ones bit for bit, every FP8 weight within E4M3's rounding error
 * (|x - q*s| <= max(|x|/16, s/1024)), and whether re-quantizing the source
 * with the declared scheme reproduces the FP8 bytes.
 */
/* A note is a loader that is not required (see fp8_verify_options.require)
 * and would refuse the checkpoint, or (with `against`) what is no fault but
 * worth saying (against-skipped, against-clipped): said, never a failure,
 * even --strict. */
typedef enum { FP8_SEV_ERROR, FP8_SEV_WARNING, FP8_SEV_NOTE } fp8_severity;
const char *fp8_severity_name(fp8_severity s); /* "error", "warning", "note" */

/* The loaders verify predicts (bit 1 << value in masks). */
typedef enum {
    FP8_LOADER_VLLM,
    FP8_LOADER_SGLANG,
    FP8_LOADER_TRANSFORMERS,
    FP8_LOADER_COUNT
} fp8_loader;
#define FP8_LOADERS_ALL ((1u << FP8_LOADER_COUNT) - 1)
/* The loaders verify requires by default: the serving stacks. */
#define FP8_LOADERS_SERVING ((1u << FP8_LOADER_VLLM) | (1u << FP8_LOADER_SGLANG))

/* "vllm", "sglang", "transformers"; false for an unknown name. */
const char *fp8_loader_name(fp8_loader loader);
bool fp8_loader_from_name(const char *name, fp8_loader *loader);

typedef struct {
    fp8_severity severity;
    const char *rule;  /* a stable identifier: "missing-scale", "nan-code", ... */
    char *message;     /* "FILE: TENSOR: what is wrong" */
    /* The loaders this stops (bit 1 << fp8_loader): they refuse the
     * checkpoint or would compute with wrong weights.  A finding that stops
     * a required loader is an error; one that stops only others is a
     * note. */
    unsigned loaders;
} fp8_finding;

typedef struct {
    bool values;       /* scan tensor data too (the default); false: headers only */
    int threads;       /* 0: one per online CPU */
    int tp;            /* > 0: report every layer that would not load at this TP size */
    int ep;            /* > 1: MoE experts distributed whole over this many ranks */
    const char *against; /* the bf16 source: compare (needs values) */
    unsigned require;  /* loaders that must load it (bit 1 << fp8_loader); 0: the
                          serving stacks, FP8_LOADERS_SERVING */
    /* When set and *cancel becomes nonzero, --against stops and fails with
     * FP8_ERR_IO (it compares in memory and writes nothing). */
    const volatile sig_atomic_t *cancel;
    /* For a checkpoint with no config.json (a lone file): the layout to
     * check it against, as quantize would declare it (FP8_FORMAT_DEFAULT:
     * none; scheme and block as in fp8_quant_options). */
    fp8_format assume_format;
    fp8_scheme assume_scheme;
    uint32_t assume_block_rows, assume_block_cols;
    /* A reference checkpoint (or its config.json): every difference of
     * layout from it is an error (rules like-tensors, like-dtype,
     * like-shape, like-config), but the calibrated KV cache it has and the
     * checkpoint lacks (its KV-cache scales and scheme) a warning
     * (like-calibrated). */
    const char *like;
    /* Bytes read so far of a total that grows as each pass (the values,
     * --against's bounds and re-quantization) begins; may be NULL. */
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    void *progress_user;
    /* --against: re-quantize with this engine's arithmetic (fp8_quant_options) */
    fp8_profile profile;
    /* --against: re-quantize once more with every other profile that defines
     * the declared FP8 scheme, and say which reproduce it (fp8_verify_profiles) */
    bool profile_auto;
} fp8_verify_options;

#define FP8_VERIFY_OPTIONS_INIT { .values = true }

typedef struct fp8_verify fp8_verify;

fp8_status fp8_verify_run(fp8_ctx *ctx, const char *path, const fp8_verify_options *opts,
                          fp8_verify **out);
void fp8_verify_free(fp8_verify *v);
/* Findings, errors first, then by message. */
size_t fp8_verify_count(const fp8_verify *v);
const fp8_finding *fp8_verify_finding(const fp8_verify *v, size_t index);
/* "hf-fp8, scheme block 128x128", or "none" when no quantization is declared. */
const char *fp8_verify_format(const fp8_verify *v);
size_t fp8_verify_fp8_weights(const fp8_verify *v);
/* Packed-FP4 weights (fp8conv-formats(5), 2026 LAYOUTS) with their scale. */
size_t fp8_verify_fp4_weights(const fp8_verify *v);
/* E4M3 codes at +-448 (counted when values are scanned).  Reported, not a
 * warning: without the source a clipped value looks like a group's largest. */
uint64_t fp8_verify_saturated(const fp8_verify *v);
/* Packed weights' codes at their element's largest magnitude (E2M1 +-6,
 * INT4 7 and -8), counted when values are scanned. */
uint64_t fp8_verify_saturated_packed(const fp8_verify *v);
/* Per FP8 or packed weight (values scanned, in name order): codes at +-448
 * (a packed weight's: at its element's largest magnitude), and scale
 * groups of the declared scheme whose codes are all zero, of `groups`. */
typedef struct {
    const char *name;
    uint64_t saturated, zero_groups, groups;
    /* --against: the weight's dequantized values against the source's (SRC
     * the reference; elements 0 when not compared) */
    fp8_quality quality;
} fp8_verify_stats;
size_t fp8_verify_stats_count(const fp8_verify *v);
const fp8_verify_stats *fp8_verify_stats_at(const fp8_verify *v, size_t index);
/* Whether `loader` would load the checkpoint and compute with the weights it
 * means: no finding stops it. */
bool fp8_verify_loads(const fp8_verify *v, fp8_loader loader);
/* The condition under which `loader` loads it, which no tensor shows (a
 * device, an option, remote code: "with trust_remote_code=True"), or NULL
 * (fp8conv-formats(5), LOADER CONDITIONS). */
const char *fp8_verify_condition(const fp8_verify *v, fp8_loader loader);
/* --against: the quality sums over every weight compared (each matrix's
 * rows a span, fixed bands of rows merged in order), in name order. */
fp8_quality fp8_verify_quality(const fp8_verify *v);
/* The TP sizes from 1 to 64 at which the checkpoint loads (bit t-1 for TP=t),
 * with the options' EP; 0 when config.json lacks the model's dimensions. */
uint64_t fp8_verify_tp_sizes(const fp8_verify *v);
/* Whether the TP sizes were computed: config.json has the model's
 * dimensions (at its top level or under text_config) and declares a
 * format; when false, fp8_verify_tp_sizes' 0 says nothing. */
bool fp8_verify_tp_known(const fp8_verify *v);
/* With `against`: how many of the *requantized weights re-quantizing the
 * source reproduced byte for byte (weight and scale; a packed FP4 weight's
 * second-level scale too), and the first one it did not, in name order; -1
 * when it was not tried (no source, or the source cannot be quantized with
 * the declared scheme). */
long fp8_verify_reproduced(const fp8_verify *v, long *requantized, const char **first_miss);
/* With `profile_auto`: the profiles (bit 1 << fp8_profile) whose arithmetic
 * reproduces every re-quantized weight byte for byte, of those tried (*tried:
 * the profiles that define the declared scheme); -1 when not tried. */
long fp8_verify_profiles(const fp8_verify *v, unsigned *tried);
/* Of those *requantized weights, how many are packed FP4 (NVFP4 and MXFP4
 * as quantize writes them, and their ModelOpt twin; the others are FP8);
 * -1 when not tried. */
long fp8_verify_requantized_fp4(const fp8_verify *v);

/* ---------------------------------------------------------------- devices */

/* fp8_device (where the math runs) is declared with the options, above. */

typedef struct {
    char name[96];
    int major, minor;      /* compute capability */
    uint64_t memory_bytes;
} fp8_gpu_info;

/* Whether this build contains the CUDA kernels, and for which architectures
 * ("sm_90 sm_100"); "" when built without CUDA. */
bool fp8_cuda_compiled(void);
const char *fp8_cuda_architectures(void);
/* The GPUs the CUDA runtime can see.  On a machine without a GPU or driver,
 * returns FP8_OK with *count = 0 (the runtime's error there means "no GPU"). */
fp8_status fp8_cuda_devices(fp8_ctx *ctx, fp8_gpu_info *gpus, int max, int *count);
/* Resolve --device: AUTO becomes CUDA when a usable GPU exists, else CPU;
 * CUDA with no usable GPU fails with FP8_ERR_DEVICE. */
fp8_status fp8_device_resolve(fp8_ctx *ctx, fp8_device requested, fp8_device *resolved);
/* "auto", "cpu" or "cuda". */
const char *fp8_device_name(fp8_device device);
/* The CPU code paths compiled in ("scalar", later "avx2" ...). */
const char *fp8_cpu_paths(void);

#ifdef __cplusplus
}
#endif
#endif /* FP8CONV_H */
