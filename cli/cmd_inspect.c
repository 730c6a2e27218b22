/*
 * cmd_inspect.c - fp8conv inspect PATH: a row per tensor and a summary.
 * Reads headers only, unless --hash asks for content hashes.  The --json shape is documented in fp8conv(1) and is
 * stable: fields may be added, never renamed or removed.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define INSPECT_JSON_VERSION 1

typedef struct {
    uint64_t bytes[FP8_DTYPE_COUNT];
    size_t tensors[FP8_DTYPE_COUNT];
    uint64_t total;
    fp8_hash_hex *hashes; /* --hash: by tensor; NULL otherwise */
    fp8_hash_hex digest;
    fp8_kv_scales kv[16]; /* KV-cache scales, by naming convention */
    size_t nkv;
} dtype_totals;

enum { OPT_HASH = CLI_OPT_FIRST };

static int take_option(int code, const char *value, void *state)
{
    (void)value;
    if (code != OPT_HASH)
        return EXIT_USAGE;
    *(bool *)state = true;
    return -1;
}

static void count(const fp8_checkpoint *ck, dtype_totals *tot)
{
    memset(tot, 0, sizeof *tot); /* hashes NULL: none asked for */
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
        tot->bytes[t->dtype] += fp8_tensor_nbytes(t);
        tot->tensors[t->dtype]++;
        tot->total += fp8_tensor_nbytes(t);
    }
}

static int print_json(const char *path, const fp8_checkpoint *ck, const dtype_totals *tot)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "inspect_version", INSPECT_JSON_VERSION);
    cJSON_AddStringToObject(root, "path", path);
    cJSON_AddStringToObject(root, "kind", fp8_checkpoint_is_directory(ck) ? "directory" : "file");
    cJSON_AddBoolToObject(root, "index", fp8_checkpoint_has_index(ck));

    cJSON *shards = cJSON_AddArrayToObject(root, "shards");
    for (size_t s = 0; s < fp8_checkpoint_shard_count(ck); s++) {
        const fp8_file *f = fp8_checkpoint_shard(ck, s);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", fp8_checkpoint_shard_name(ck, s));
        cJSON_AddNumberToObject(o, "tensors", (double)fp8_file_tensor_count(f));
        cJSON_AddItemToObject(o, "header_bytes", cli_json_u64(fp8_file_header_size(f)));
        cJSON_AddItemToObject(o, "data_bytes", cli_json_u64(fp8_file_data_size(f)));
        cJSON_AddBoolToObject(o, "compressed", fp8_file_is_compressed(f));
        if (fp8_file_has_metadata(f)) {
            cJSON *m = cJSON_AddObjectToObject(o, "metadata");
            for (size_t k = 0; k < fp8_file_metadata_count(f); k++) {
                const char *key, *value;
                fp8_file_metadata(f, k, &key, &value);
                cJSON_AddStringToObject(m, key, value);
            }
        } else {
            cJSON_AddNullToObject(o, "metadata");
        }
        cJSON_AddItemToArray(shards, o);
    }

    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++) {
        size_t s;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &s);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", fp8_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", cli_json_shape(t->rank, t->shape));
        cJSON_AddItemToObject(o, "bytes", cli_json_u64(fp8_tensor_nbytes(t)));
        cJSON_AddStringToObject(o, "file", fp8_checkpoint_shard_name(ck, s));
        if (tot->hashes)
            cJSON_AddStringToObject(o, "xxh3_128", tot->hashes[i]);
        int lrank;
        uint64_t lshape[3];
        char *lname;
        const char *layout = fp8_checkpoint_fp4_weight(ck, t, &lname, &lrank, lshape);
        if (layout) { /* packed FP4: the weight it unpacks to */
            cJSON *p = cJSON_AddObjectToObject(o, "fp4");
            cJSON_AddStringToObject(p, "layout", layout);
            cJSON_AddStringToObject(p, "name", lname ? lname : "");
            cJSON_AddItemToObject(p, "shape", cli_json_shape(lrank, lshape));
            free(lname);
        }
        cJSON_AddItemToArray(tensors, o);
    }

    cJSON *sum = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(sum, "tensors", (double)fp8_checkpoint_tensor_count(ck));
    cJSON_AddNumberToObject(sum, "shards", (double)fp8_checkpoint_shard_count(ck));
    cJSON_AddItemToObject(sum, "bytes", cli_json_u64(tot->total));
    cJSON *by = cJSON_AddObjectToObject(sum, "bytes_by_dtype");
    for (int d = FP8_DTYPE_COUNT - 1; d >= 0; d--)
        if (tot->tensors[d])
            cJSON_AddItemToObject(by, fp8_dtype_name((fp8_dtype)d), cli_json_u64(tot->bytes[d]));
    uint64_t total_size;
    if (fp8_checkpoint_index_total_size(ck, &total_size))
        cJSON_AddItemToObject(sum, "index_total_size", cli_json_u64(total_size));
    else
        cJSON_AddNullToObject(sum, "index_total_size");
    if (tot->hashes)
        cJSON_AddStringToObject(sum, "digest", tot->digest);
    cJSON_AddBoolToObject(sum, "config", fp8_checkpoint_has_config(ck));
    cJSON_AddBoolToObject(sum, "quantization_config", fp8_checkpoint_has_quant_config(ck));
    const char *qm = fp8_checkpoint_quant_method(ck);
    if (qm)
        cJSON_AddStringToObject(sum, "quant_method", qm);
    else
        cJSON_AddNullToObject(sum, "quant_method");
    cJSON *kv = cJSON_AddArrayToObject(sum, "kv_cache_scales");
    for (size_t i = 0; i < tot->nkv; i++) {
        const fp8_kv_scales *k = &tot->kv[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "convention", k->convention);
        cJSON_AddNumberToObject(o, "count", (double)k->count);
        if (k->dtype == FP8_DTYPE_COUNT)
            cJSON_AddNullToObject(o, "dtype");
        else
            cJSON_AddStringToObject(o, "dtype", fp8_dtype_name(k->dtype));
        if (k->values && isfinite(k->min) && isfinite(k->max)) {
            cJSON_AddNumberToObject(o, "min", k->min);
            cJSON_AddNumberToObject(o, "max", k->max);
        } else {
            cJSON_AddNullToObject(o, "min");
            cJSON_AddNullToObject(o, "max");
        }
        cJSON_AddItemToArray(kv, o);
    }

    return cli_print_json(root);
}

static int print_text(const fp8_checkpoint *ck, const dtype_totals *tot)
{
    size_t n = fp8_checkpoint_tensor_count(ck);
    int wname = 4, wdtype = 5, wshape = 5, wfile = 4;
    char shape[512];
    for (size_t i = 0; i < n; i++) {
        size_t s;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &s);
        fp8_shape_text(t->rank, t->shape, shape, sizeof shape);
        int ln = (int)strlen(cli_esc(t->name)), ls = (int)strlen(shape);
        int ld = (int)strlen(fp8_dtype_name(t->dtype));
        int lf = (int)strlen(cli_esc(fp8_checkpoint_shard_name(ck, s)));
        wname = ln > wname ? ln : wname;
        wshape = ls > wshape ? ls : wshape;
        wdtype = ld > wdtype ? ld : wdtype;
        wfile = lf > wfile ? lf : wfile;
    }
    cli_printf("%-*s  %-*s  %-*s  %12s  %-*s%s\n", wname, "NAME", wdtype, "DTYPE", wshape, "SHAPE",
           "BYTES", tot->hashes ? wfile : 0, "FILE", tot->hashes ? "  XXH3_128" : "");
    for (size_t i = 0; i < n; i++) {
        size_t s;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &s);
        fp8_shape_text(t->rank, t->shape, shape, sizeof shape);
        cli_printf("%-*s  %-*s  %-*s  %12" PRIu64 "  %-*s%s%s\n", wname, cli_esc(t->name), wdtype,
               fp8_dtype_name(t->dtype), wshape, shape, fp8_tensor_nbytes(t),
               tot->hashes ? wfile : 0, cli_esc(fp8_checkpoint_shard_name(ck, s)),
               tot->hashes ? "  " : "", tot->hashes ? tot->hashes[i] : "");
    }
    /* packed 4-bit weights: what they unpack to (dequantize-for-export's names and shapes) */
    for (size_t i = 0, k = 0; i < n; i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
        int lrank;
        uint64_t lshape[3];
        char *lname;
        const char *layout = fp8_checkpoint_fp4_weight(ck, t, &lname, &lrank, lshape);
        if (!layout)
            continue;
        if (!k++)
            cli_printf("\npacked 4-bit weights (logical shapes):\n");
        fp8_shape_text(lrank, lshape, shape, sizeof shape);
        cli_printf("%s  %s -> %s %s\n", cli_esc(t->name), layout, lname ? cli_esc(lname) : "?",
                   shape);
        free(lname);
    }
    char size[32];
    cli_human_bytes(tot->total, size, sizeof size);
    cli_printf("\ntensors: %zu  shards: %zu%s  bytes: %s\n", n, fp8_checkpoint_shard_count(ck),
               fp8_checkpoint_has_index(ck) ? " (indexed)" : "", size);
    cli_printf("bytes by dtype:");
    for (int d = FP8_DTYPE_COUNT - 1; d >= 0; d--)
        if (tot->tensors[d]) {
            cli_human_bytes(tot->bytes[d], size, sizeof size);
            cli_printf(" %s %s (%zu tensor%s)", fp8_dtype_name((fp8_dtype)d), size,
                       tot->tensors[d], tot->tensors[d] == 1 ? "" : "s");
        }
    cli_printf("\n");
    if (tot->hashes)
        cli_printf("digest: %s (XXH3-128 of the tensor hashes; independent of sharding)\n",
               tot->digest);
    uint64_t total_size;
    if (fp8_checkpoint_index_total_size(ck, &total_size))
        cli_printf("index total_size: %" PRIu64 "%s\n", total_size,
               total_size == tot->total ? "" : " (differs from the tensor bytes)");
    if (!fp8_checkpoint_has_config(ck))
        cli_printf("config.json: none\n");
    else if (!fp8_checkpoint_has_quant_config(ck))
        cli_printf("config.json: no quantization_config\n");
    else
        cli_printf("config.json: quantization_config, quant_method %s\n",
                   fp8_checkpoint_quant_method(ck) ? cli_esc(fp8_checkpoint_quant_method(ck))
                                                   : "(none)");
    for (size_t i = 0; i < tot->nkv; i++) {
        const fp8_kv_scales *k = &tot->kv[i];
        char range[96] = "";
        if (k->values)
            snprintf(range, sizeof range, ", values %g to %g", (double)k->min, (double)k->max);
        cli_printf("kv-cache scales: %s naming, %zu tensor%s, %s%s\n", k->convention, k->count,
                   k->count == 1 ? "" : "s",
                   k->dtype == FP8_DTYPE_COUNT ? "mixed dtypes" : fp8_dtype_name(k->dtype), range);
    }
    return EXIT_OK;
}

/* The command's own long options (getopt, --help, bash completion). */
static const struct option cli_inspect_options[] = {
    { "hash", no_argument, NULL, OPT_HASH },
    { NULL, 0, NULL, 0 },
};

static int cmd_inspect(int argc, char **argv, cli_common *common)
{
    bool hash = false;
    cli_options own = { cli_inspect_options, take_option, &hash };
    int rc = cli_parse(&cli_cmd_inspect, &argc, argv, common, &own);
    if (rc >= 0)
        return rc;
    fp8_ctx *ctx = cli_ctx_create();
    fp8_checkpoint *ck = NULL;
    if (!ctx)
        return EXIT_IO;
    fp8_status st = fp8_checkpoint_open(ctx, argv[1], &ck);
    if (!st) /* as strictly as the commands that read it */
        st = fp8_checkpoint_config_check(ctx, ck);
    if (st) {
        rc = cli_fail(ctx, st);
    } else {
        dtype_totals tot;
        count(ck, &tot);
        size_t n = fp8_checkpoint_tensor_count(ck);
        st = fp8_checkpoint_kv_scales(ctx, ck, tot.kv, sizeof tot.kv / sizeof *tot.kv, &tot.nkv);
        if (!st && hash && !(tot.hashes = calloc(n + 1, sizeof *tot.hashes)))
            st = FP8_ERR_NOMEM;
        else if (!st && hash) {
            cli_progress_state prog = { .label = "inspect --hash" };
            fp8_hash_options o = { .threads = common->threads };
            if (cli_progress_wanted(common)) {
                o.progress = cli_show_progress;
                o.progress_user = &prog;
            }
            st = fp8_checkpoint_hash_with(ctx, ck, &o, tot.hashes, tot.digest);
            cli_progress_end(&prog, st == FP8_OK);
        }
        rc = st             ? cli_fail(ctx, st)
             : common->quiet ? EXIT_OK
             : common->json  ? print_json(argv[1], ck, &tot)
                             : print_text(ck, &tot);
        free(tot.hashes);
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    return rc;
}

/* The command: its synopsis, --help text, examples and exit statuses
 * (fp8conv help inspect), and its options for getopt and completion. */
const cli_command cli_cmd_inspect = { "inspect", "PATH", "list the tensors of a checkpoint, file or directory", cmd_inspect,
  "Options:\n"
  "      --hash                 also read the data: XXH3-128 of every tensor, and the\n"
  "                             checkpoint's digest (independent of sharding)\n",
  "  fp8conv inspect testdata/deepseek-moe-tiny\n"
  "  fp8conv inspect --json model/ | jq .summary.bytes_by_dtype\n"
  "  fp8conv inspect -q model/ && echo valid\n",
  "0 read; 2 usage error; 3 not a valid checkpoint; 4 I/O error; 5 device error",
  cli_inspect_options };
