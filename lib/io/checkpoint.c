/*
 * checkpoint.c - checkpoint directories: the shard index, shards without an
 * index, config.json.  Only headers are read here.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/zio.h"

#define INDEX_NAME CK_INDEX_NAME
#define CK_MAX_RANK 64 /* ck_open_tensors: the most dimensions a tensor is given */
/* config.json and the index are small; refuse monsters.  The fuzz build makes
 * it small too: reading allocates it whole, several times per command. */
#ifndef FP8_MAX_SIDE_JSON
#define FP8_MAX_SIDE_JSON (64u << 20)
#endif
#define MAX_SIDE_JSON ((unsigned)(FP8_MAX_SIDE_JSON))

typedef struct {
    const fp8_tensor_info *t;
    size_t shard;
} ck_entry;

struct fp8_checkpoint {
    char *path;
    bool is_dir, has_index, has_total_size, has_config, has_quant_config;
    uint64_t total_size;
    char *quant_method;
    size_t nshards;
    char **shard_names;
    fp8_file **shards;
    size_t ntensors;
    ck_entry *entries; /* sorted by name */
    fp8_tensor_info *mem; /* ck_open_tensors': the tensors, their names and shapes owned */
};

/* What a path that is not a regular file is, for messages. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a regular file";
}

fp8_status ck_open_regular(fp8_ctx *ctx, const char *path, bool may_be_absent, int *fd)
{
    struct stat sb;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0) {
        int e = errno;
        if (e == ENOENT && lstat(path, &sb) == 0) /* a symbolic link to nothing */
            return fp8_fail(ctx, FP8_ERR_IO, "%s: a symbolic link to a file that does not exist",
                            path);
        if (e == ENOENT && may_be_absent)
            return FP8_OK;
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    if (fstat(*fd, &sb) == 0 && S_ISREG(sb.st_mode))
        return FP8_OK;
    close(*fd);
    *fd = -1;
    return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: %s, not a regular file; fp8conv reads files",
                    path, file_kind(sb.st_mode));
}

/* The first key that appears twice in one object of `j`, at any depth, or
 * NULL; *oom on a failed allocation.  Objects' keys are sorted, so an index's
 * weight_map of 100,000 names costs n log n. */
static const char *duplicate_key(const cJSON *j, bool *oom)
{
    size_t n = 0, k = 0;
    const cJSON *c;
    const char *dup = NULL;
    cJSON_ArrayForEach(c, j)
    {
        n++;
        if (!dup && (cJSON_IsObject(c) || cJSON_IsArray(c)))
            dup = duplicate_key(c, oom);
    }
    if (dup || !cJSON_IsObject(j) || n < 2)
        return dup;
    const char **keys = fp8_xcalloc(n, sizeof *keys);
    if (!keys) {
        *oom = true;
        return NULL;
    }
    cJSON_ArrayForEach(c, j) keys[k++] = c->string;
    qsort(keys, n, sizeof *keys, fp8_cmp_str);
    for (k = 1; k < n && !dup; k++)
        dup = strcmp(keys[k - 1], keys[k]) ? NULL : keys[k];
    free(keys);
    return dup;
}

static fp8_status json_parse(fp8_ctx *ctx, const char *path, const char *buf, size_t n,
                             bool exact, cJSON **root)
{
    fp8_status st = FP8_OK;
    *root = NULL;
    if (exact)
        st = st_json_parse_exact(ctx, path, buf, n, root);
    else if (!(*root = cJSON_ParseWithLength(buf, n)))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: not valid JSON", path);
    if (!st && !cJSON_IsObject(*root))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: not a JSON object", path);
    bool oom = false;
    const char *dup = st ? NULL : duplicate_key(*root, &oom);
    if (oom)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    else if (dup)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: key '%s' appears twice in one object: the loaders (Python's json) "
                      "take the last, other readers the first; fp8conv will not guess which "
                      "is meant",
                      path, dup);
    if (st) {
        cJSON_Delete(*root);
        *root = NULL;
    }
    return st;
}

fp8_status ck_json_parse(fp8_ctx *ctx, const char *path, const char *text, size_t len,
                         cJSON **root)
{
    return json_parse(ctx, path, text, len, true, root);
}

/* Reads a small JSON file; *root is NULL (and FP8_OK) when the file does not
 * exist.  With `exact`, numbers keep their source text (st_json_parse_exact).
 * A key twice in one object is bad input: cJSON finds the first, Python's
 * json (every loader) keeps the last, so which one is meant is a guess. */
static fp8_status read_json_file(fp8_ctx *ctx, const char *path, bool exact, cJSON **root)
{
    *root = NULL;
    int fd;
    fp8_status st = ck_open_regular(ctx, path, true, &fd);
    if (st || fd < 0)
        return st;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        close(fd);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    }
    char *buf = malloc(MAX_SIDE_JSON + 1);
    size_t n = buf ? fread(buf, 1, MAX_SIDE_JSON + 1, fp) : 0;
    if (!buf)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    else if (ferror(fp))
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    else if (n > MAX_SIDE_JSON)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: larger than %u bytes", path, MAX_SIDE_JSON);
    else
        st = json_parse(ctx, path, buf, n, exact, root);
    free(buf);
    fclose(fp);
    return st;
}

static fp8_status read_json(fp8_ctx *ctx, const char *path, cJSON **root)
{
    return read_json_file(ctx, path, false, root);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const ck_entry *)a)->t->name, ((const ck_entry *)b)->t->name);
}

static fp8_status add_shard_name(fp8_ctx *ctx, fp8_checkpoint *ck, const char *name)
{
    char **p = fp8_xreallocarray(ck->shard_names, ck->nshards + 1, sizeof *p);
    if (!p)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", ck->path);
    ck->shard_names = p;
    if (!(p[ck->nshards] = fp8_strdup(name)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", ck->path);
    ck->nshards++;
    return FP8_OK;
}

bool ck_is_shard_name(const char *name)
{
    return fp8_has_suffix(name, ".safetensors") || fp8_has_suffix(name, ".safetensors.zst");
}

/* Shard names from the index's weight_map (deduplicated), checking its form. */
static fp8_status index_shards(fp8_ctx *ctx, fp8_checkpoint *ck, const char *ipath,
                               const cJSON *index)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(index, "metadata");
    const cJSON *total = meta ? cJSON_GetObjectItemCaseSensitive(meta, "total_size") : NULL;
    if (cJSON_IsNumber(total) && total->valuedouble >= 0 && total->valuedouble < 0x1p64) {
        ck->has_total_size = true;
        ck->total_size = (uint64_t)total->valuedouble;
    }
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
    if (!cJSON_IsObject(map))
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: no \"weight_map\" object", ipath);
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !ck_is_shard_name(e->valuestring))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: weight_map entry '%s' does not name a .safetensors file in the "
                            "directory",
                            ipath, e->string);
        bool seen = false;
        for (size_t i = 0; i < ck->nshards && !seen; i++)
            seen = strcmp(ck->shard_names[i], e->valuestring) == 0;
        fp8_status st = seen ? FP8_OK : add_shard_name(ctx, ck, e->valuestring);
        if (st)
            return st;
    }
    return FP8_OK;
}

/* Calls `fn` for each entry of directory `path` until it fails. */
static fp8_status each_entry(fp8_ctx *ctx, const char *path,
                             fp8_status (*fn)(fp8_ctx *ctx, void *arg, const char *name),
                             void *arg)
{
    DIR *d = opendir(path);
    if (!d)
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot list directory: %s", path, strerror(errno));
    fp8_status st = FP8_OK;
    struct dirent *de;
    while (!st && (de = readdir(d)))
        st = fn(ctx, arg, de->d_name);
    closedir(d);
    return st;
}

static fp8_status add_if_shard(fp8_ctx *ctx, void *ck, const char *name)
{
    return ck_is_shard_name(name) ? add_shard_name(ctx, ck, name) : FP8_OK;
}

/* What a directory without safetensors holds instead, for the message. */
typedef struct {
    const char *pickle, *gguf;
} other_weights;

static fp8_status note_other(fp8_ctx *ctx, void *arg, const char *name)
{
    (void)ctx;
    other_weights *o = arg;
    if (!o->pickle && (fp8_has_suffix(name, ".bin") || fp8_has_suffix(name, ".pt") ||
                       fp8_has_suffix(name, ".pth")))
        o->pickle = strdup(name);
    if (!o->gguf && fp8_has_suffix(name, ".gguf"))
        o->gguf = strdup(name);
    return FP8_OK;
}

static fp8_status dir_shards(fp8_ctx *ctx, fp8_checkpoint *ck)
{
    fp8_status st = each_entry(ctx, ck->path, add_if_shard, ck);
    if (st || ck->nshards)
        return st;
    other_weights o = { 0 };
    each_entry(ctx, ck->path, note_other, &o);
    if (o.pickle)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: no *.safetensors file, but PyTorch pickle weights (%s): fp8conv reads "
                      "safetensors; convert them first with transformers: "
                      "from_pretrained(...).save_pretrained(DIR, safe_serialization=True)",
                      ck->path, o.pickle);
    else if (o.gguf)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: no *.safetensors file, but a GGUF file (%s, llama.cpp's format): "
                      "fp8conv reads safetensors checkpoints",
                      ck->path, o.gguf);
    else
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: not a checkpoint: no *.safetensors file in it", ck->path);
    free((char *)o.pickle);
    free((char *)o.gguf);
    return st;
}

static fp8_status read_config(fp8_ctx *ctx, fp8_checkpoint *ck)
{
    char *cpath = fp8_path_join(ck->path, "config.json");
    cJSON *config = NULL;
    if (!cpath)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", ck->path);
    fp8_status st = read_json(ctx, cpath, &config);
    if (!st && config) {
        ck->has_config = true;
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
        ck->has_quant_config = q && !cJSON_IsNull(q);
        if (ck->has_quant_config && !cJSON_IsObject(q))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: quantization_config is %s, expected an object (or null)", cpath,
                          cJSON_IsString(q) ? "a string" : cJSON_IsArray(q) ? "an array"
                          : cJSON_IsNumber(q) ? "a number" : "a boolean");
        const cJSON *m = q ? cJSON_GetObjectItemCaseSensitive(q, "quant_method") : NULL;
        if (!st && cJSON_IsString(m) && !(ck->quant_method = fp8_strdup(m->valuestring)))
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", cpath);
    }
    cJSON_Delete(config);
    free(cpath);
    return st;
}

/* Mistral's native format (params.json beside consolidated.safetensors, no
 * config.json: fp8conv-formats(5), Mistral native format) is not read: its
 * own names (layers.L.attention.wq, qscale_weight, qscale_act) and its
 * declaration in params.json are what vLLM's --load-format mistral maps
 * (models/llama.py MistralForCausalLM.mistral_mapping,
 * transformers_utils/configs/mistral.py); one message for every command
 * rather than a missing config.json or scale further on. */
static fp8_status refuse_mistral_native(fp8_ctx *ctx, const fp8_checkpoint *ck)
{
    char *ppath = fp8_path_join(ck->path, "params.json");
    struct stat sb;
    fp8_status st = FP8_OK;
    if (!ppath)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", ck->path);
    if (!ck->has_config && stat(ppath, &sb) == 0)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: params.json and no config.json: this is Mistral's native format "
                      "(consolidated.safetensors, qscale_weight/qscale_act), which fp8conv does "
                      "not read: use the release's Hugging Face format files (config.json and "
                      "model*.safetensors, in the same repository for most Mistral releases) or "
                      "convert it with transformers' convert_mistral_weights_to_hf.py",
                      ck->path);
    free(ppath);
    return st;
}

fp8_status fp8_checkpoint_config_check(fp8_ctx *ctx, const fp8_checkpoint *ck)
{
    cJSON *config = NULL;
    fp8_status st = ck->is_dir ? ck_config_read(ctx, ck->path, &config) : FP8_OK;
    cJSON_Delete(config);
    return st;
}

/* The index, checked both ways against the shards' headers. */
static fp8_status check_index(fp8_ctx *ctx, fp8_checkpoint *ck, const char *ipath,
                              const cJSON *index)
{
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
    for (const cJSON *e = map->child; e; e = e->next) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_find(ck, e->string, &shard);
        if (!t || strcmp(ck->shard_names[shard], e->valuestring) != 0)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s' is mapped to %s, which does not hold it", ipath,
                            e->string, e->valuestring);
    }
    for (size_t i = 0; i < ck->ntensors; i++) {
        const char *name = ck->entries[i].t->name;
        if (!cJSON_GetObjectItemCaseSensitive(map, name))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s' is in %s but not in %s",
                            ck->path, name, ck->shard_names[ck->entries[i].shard], INDEX_NAME);
    }
    /* cJSON finds the first of two equal keys: a repeated key would slip by */
    size_t mapped = (size_t)cJSON_GetArraySize(map);
    if (mapped != ck->ntensors)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: weight_map names a tensor twice", ipath);
    return FP8_OK;
}

static fp8_status sort_entries(fp8_ctx *ctx, fp8_checkpoint *ck);

static fp8_status open_shards(fp8_ctx *ctx, fp8_checkpoint *ck)
{
    fp8_status st;
    if (ck->nshards) /* an index may map no tensor: no names, a NULL array */
        qsort(ck->shard_names, ck->nshards, sizeof *ck->shard_names, fp8_cmp_str);
    ck->shards = fp8_xcalloc(ck->nshards, sizeof *ck->shards);
    if (!ck->shards)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", ck->path);
    size_t total = 0;
    for (size_t i = 0; i < ck->nshards; i++) {
        if (!ck->is_dir) {
            st = fp8_file_open(ctx, ck->path, &ck->shards[i]);
        } else {
            char *p = fp8_path_join(ck->path, ck->shard_names[i]);
            struct stat sb;
            if (!p)
                st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", ck->path);
            else if (stat(p, &sb) != 0 && errno == ENOENT)
                st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: shard %s is named by %s but does not exist",
                              ck->path, ck->shard_names[i], INDEX_NAME);
            else
                st = fp8_file_open(ctx, p, &ck->shards[i]);
            free(p);
        }
        if (st)
            return st;
        total += fp8_file_tensor_count(ck->shards[i]);
    }
    ck->entries = fp8_xcalloc(total, sizeof *ck->entries);
    if (!ck->entries)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", ck->path);
    for (size_t i = 0; i < ck->nshards; i++)
        for (size_t k = 0; k < fp8_file_tensor_count(ck->shards[i]); k++)
            ck->entries[ck->ntensors++] = (ck_entry){ fp8_file_tensor(ck->shards[i], k), i };
    return sort_entries(ctx, ck);
}

/* The entries in name order; a name twice is bad input. */
static fp8_status sort_entries(fp8_ctx *ctx, fp8_checkpoint *ck)
{
    qsort(ck->entries, ck->ntensors, sizeof *ck->entries, cmp_entry);
    for (size_t i = 1; i < ck->ntensors; i++) {
        const ck_entry *a = &ck->entries[i - 1], *b = &ck->entries[i];
        if (strcmp(a->t->name, b->t->name) == 0)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s' is in both %s and %s",
                            ck->path, b->t->name, ck->shard_names[a->shard],
                            ck->shard_names[b->shard]);
    }
    return FP8_OK;
}

fp8_status fp8_checkpoint_open(fp8_ctx *ctx, const char *path, fp8_checkpoint **out)
{
    fp8_status st;
    cJSON *index = NULL;
    char *ipath = NULL;
    fp8_checkpoint *ck = calloc(1, sizeof *ck);
    *out = NULL;
    if (!ck || !(ck->path = fp8_strdup(path))) {
        free(ck);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    ck->is_dir = S_ISDIR(sb.st_mode);
    if (!ck->is_dir) {
        if ((st = add_shard_name(ctx, ck, fp8_basename(path))))
            goto out;
    } else {
        if (!(ipath = fp8_path_join(path, INDEX_NAME))) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        if ((st = read_config(ctx, ck)) || (st = refuse_mistral_native(ctx, ck)) ||
            (st = read_json(ctx, ipath, &index)))
            goto out;
        ck->has_index = index != NULL;
        st = index ? index_shards(ctx, ck, ipath, index) : dir_shards(ctx, ck);
        if (st)
            goto out;
    }
    if ((st = open_shards(ctx, ck)))
        goto out;
    if (index)
        st = check_index(ctx, ck, ipath, index);
out:
    cJSON_Delete(index);
    free(ipath);
    if (st)
        fp8_checkpoint_close(ck);
    else
        *out = ck;
    return st;
}

fp8_status ck_open_tensors(fp8_ctx *ctx, const char *name, const fp8_tensor_info *tensors,
                           size_t n, fp8_checkpoint **out)
{
    fp8_status st = FP8_OK;
    fp8_checkpoint *ck = calloc(1, sizeof *ck);
    *out = NULL;
    if (!ck || !(ck->path = fp8_strdup(name)) || add_shard_name(ctx, ck, name) ||
        !(ck->shards = fp8_xcalloc(1, sizeof *ck->shards)) ||
        !(ck->mem = fp8_xcalloc(n ? n : 1, sizeof *ck->mem)) ||
        !(ck->entries = fp8_xcalloc(n ? n : 1, sizeof *ck->entries))) {
        fp8_checkpoint_close(ck);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n && !st; i++) {
        const fp8_tensor_info *t = &tensors[i];
        fp8_tensor_info *m = &ck->mem[ck->ntensors++]; /* freed by close from here */
        uint64_t *shape = fp8_xcalloc(t->rank > 0 ? (size_t)t->rank : 1, sizeof *shape);
        *m = (fp8_tensor_info){ .name = t->name ? fp8_strdup(t->name) : NULL, .dtype = t->dtype,
                                .rank = t->rank, .shape = shape, .elements = 1 };
        ck->entries[i] = (ck_entry){ m, 0 };
        if (!t->name || t->rank < 0 || t->rank > CK_MAX_RANK || !fp8_dtype_name(t->dtype))
            st = fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor %zu ('%s'): no name, a rank of %d or "
                          "an unknown dtype", name, i, t->name ? t->name : "", t->rank);
        else if (!m->name || !shape)
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        for (int k = 0; !st && k < t->rank; k++) {
            shape[k] = t->shape[k];
            m->elements = shape[k] && m->elements > UINT64_MAX / 8 / shape[k]
                              ? UINT64_MAX / 8 : m->elements * shape[k];
        }
        m->end = m->elements * fp8_dtype_bits(t->dtype) / 8;
    }
    if (!st)
        st = sort_entries(ctx, ck);
    if (st)
        fp8_checkpoint_close(ck);
    else
        *out = ck;
    return st;
}

void fp8_checkpoint_close(fp8_checkpoint *ck)
{
    if (!ck)
        return;
    for (size_t i = 0; ck->mem && i < ck->ntensors; i++) {
        free((char *)(uintptr_t)ck->mem[i].name);
        free((uint64_t *)(uintptr_t)ck->mem[i].shape);
    }
    free(ck->mem);
    for (size_t i = 0; i < ck->nshards; i++) {
        if (ck->shards)
            fp8_file_close(ck->shards[i]);
        free(ck->shard_names[i]);
    }
    free(ck->shards);
    free(ck->shard_names);
    free(ck->entries);
    free(ck->quant_method);
    free(ck->path);
    free(ck);
}

bool fp8_checkpoint_is_directory(const fp8_checkpoint *ck) { return ck->is_dir; }
bool fp8_checkpoint_has_index(const fp8_checkpoint *ck) { return ck->has_index; }
bool fp8_checkpoint_has_config(const fp8_checkpoint *ck) { return ck->has_config; }
bool fp8_checkpoint_has_quant_config(const fp8_checkpoint *ck) { return ck->has_quant_config; }
const char *fp8_checkpoint_quant_method(const fp8_checkpoint *ck) { return ck->quant_method; }
size_t fp8_checkpoint_shard_count(const fp8_checkpoint *ck) { return ck->nshards; }
size_t fp8_checkpoint_tensor_count(const fp8_checkpoint *ck) { return ck->ntensors; }

bool fp8_checkpoint_index_total_size(const fp8_checkpoint *ck, uint64_t *total_size)
{
    if (ck->has_total_size)
        *total_size = ck->total_size;
    return ck->has_total_size;
}

fp8_file *fp8_checkpoint_shard(const fp8_checkpoint *ck, size_t index)
{
    return index < ck->nshards ? ck->shards[index] : NULL;
}

const char *fp8_checkpoint_shard_name(const fp8_checkpoint *ck, size_t index)
{
    return index < ck->nshards ? ck->shard_names[index] : NULL;
}

const fp8_tensor_info *fp8_checkpoint_tensor(const fp8_checkpoint *ck, size_t index, size_t *shard)
{
    if (index >= ck->ntensors)
        return NULL;
    if (shard)
        *shard = ck->entries[index].shard;
    return ck->entries[index].t;
}

static const char *entry_name(const void *arg, size_t i)
{
    return ((const fp8_checkpoint *)arg)->entries[i].t->name;
}

const fp8_tensor_info *fp8_checkpoint_find(const fp8_checkpoint *ck, const char *name,
                                           size_t *shard)
{
    return fp8_checkpoint_tensor(ck, fp8_name_find(name, ck->ntensors, entry_name, ck), shard);
}

const fp8_tensor_info *ck_find_with(const fp8_checkpoint *ck, const char *name, size_t keep,
                                    const char *suffix, size_t *shard)
{
    return fp8_checkpoint_tensor(
        ck, fp8_name_find_with(name, keep, suffix, ck->ntensors, entry_name, ck), shard);
}

size_t ck_lane(const fp8_checkpoint *ck, size_t shard, const fp8_tensor_info *t, uint64_t at,
               size_t base, uint64_t *offset)
{
    *offset = t->begin + at;
    return shard < ck->nshards && fp8_file_is_compressed(ck->shards[shard]) ? base + shard
                                                                             : FP8_NO_LANE;
}

/* ---------------------------------------------------------------- writing */

const char *ck_path(const fp8_checkpoint *ck) { return ck->path; }

fp8_status ck_json_read(fp8_ctx *ctx, const char *dir, const char *name, cJSON **root)
{
    char *path = fp8_path_join(dir, name);
    if (!path)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", dir);
    fp8_status st = read_json_file(ctx, path, true, root);
    free(path);
    return st;
}

fp8_status ck_config_read(fp8_ctx *ctx, const char *dir, cJSON **config)
{
    return ck_json_read(ctx, dir, "config.json", config);
}

static void jb_indent(fp8_text *b, int level)
{
    fp8_text_str(b, "\n");
    for (int i = 0; i < level; i++)
        fp8_text_str(b, "  ");
}

/* Python's json.dumps(indent=2) layout; raw items (numbers kept as their
 * source text) verbatim, other scalars as cJSON prints them. */
static void print_pretty(fp8_text *b, const cJSON *item, int level)
{
    bool object = cJSON_IsObject(item);
    if (cJSON_IsString(item)) {
        fp8_text_json_string(b, item->valuestring);
        return;
    }
    if (!object && !cJSON_IsArray(item)) {
        char *text = cJSON_PrintUnformatted(item);
        if (!text)
            b->oom = true;
        else
            fp8_text_str(b, text);
        free(text);
        return;
    }
    if (!item->child) {
        fp8_text_str(b, object ? "{}" : "[]");
        return;
    }
    fp8_text_str(b, object ? "{" : "[");
    for (const cJSON *c = item->child; c; c = c->next) {
        jb_indent(b, level + 1);
        if (object) {
            fp8_text_json_string(b, c->string);
            fp8_text_str(b, ": ");
        }
        print_pretty(b, c, level + 1);
        if (c->next)
            fp8_text_str(b, ",");
    }
    jb_indent(b, level);
    fp8_text_str(b, object ? "}" : "]");
}

fp8_status ck_json_write(fp8_ctx *ctx, const char *dir, const char *name, const cJSON *root)
{
    fp8_text b = { 0 };
    print_pretty(&b, root, 0);
    fp8_text_str(&b, "\n");
    char *path = fp8_path_join(dir, name);
    zio_writer *w = NULL;
    fp8_status st;
    if (b.oom || !path)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s/%s: out of memory", dir, name);
    else if (!(st = zio_writer_create(ctx, path, b.len, &w)) &&
             !(st = zio_writer_write(ctx, w, b.p, b.len)))
        st = zio_writer_commit(ctx, w);
    zio_writer_free(w);
    free(path);
    free(b.p);
    return st;
}

fp8_status ck_index_write(fp8_ctx *ctx, const char *dir, ck_index_entry *map, size_t n,
                          uint64_t total_size)
{
    qsort(map, n, sizeof *map, fp8_cmp_str);
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)total_size);
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddItemToObject(meta, "total_size", cJSON_CreateRaw(num));
    cJSON *wm = cJSON_AddObjectToObject(root, "weight_map");
    for (size_t i = 0; i < n; i++)
        cJSON_AddStringToObject(wm, map[i].name, map[i].shard);
    return ck_json_write_owned(ctx, dir, INDEX_NAME, root);
}

fp8_status ck_json_write_owned(fp8_ctx *ctx, const char *dir, const char *name, cJSON *root)
{
    fp8_status st = root ? ck_json_write(ctx, dir, name, root)
                         : fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", name);
    cJSON_Delete(root);
    return st;
}

static fp8_status copy_file(fp8_ctx *ctx, const char *from, const char *to, uint64_t size,
                            const volatile sig_atomic_t *cancel)
{
    zio_writer *w = NULL;
    char *buf = malloc(FP8_CHUNK_BYTES / 4);
    fp8_status st = buf ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", from);
    /* zio_reader_open would decompress a zstd file: copy the bytes as they are */
    int fd = -1;
    if (!st)
        st = ck_open_regular(ctx, from, false, &fd);
    if (!st)
        st = zio_writer_create(ctx, to, size, &w);
    for (uint64_t done = 0; !st && done < size;) {
        ssize_t n = read(fd, buf, FP8_CHUNK_BYTES / 4);
        if (n < 0 && errno == EINTR)
            continue;
        if (cancel && *cancel)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", from);
        else if (n < 0)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot read: %s", from, strerror(errno));
        else if (n == 0)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: the file shrank while being copied", from);
        else if (!(st = zio_writer_write(ctx, w, buf, (size_t)n)))
            done += (uint64_t)n;
    }
    if (!st)
        st = zio_writer_commit(ctx, w);
    if (fd >= 0)
        close(fd);
    zio_writer_free(w);
    free(buf);
    return st;
}

typedef struct {
    const char *from, *to;  /* the directories being copied */
    bool top;               /* the checkpoint's own directory: skip its shards and index */
    const char *const *skip;
    const volatile sig_atomic_t *cancel;
    int depth;
    fp8_copy_totals *count; /* non-NULL: count what would be copied, copy nothing */
} copy_job;

static fp8_status copy_tree(fp8_ctx *ctx, const copy_job *c);

/* At the top level every file but the checkpoint's own (shards, index and
 * the `skip` list, which the command writes itself); in subfolders
 * (sentence-transformers' 1_Pooling/, 2_Dense/ ...) every file, weights
 * included, since those modules are not converted.  Hidden entries (.git,
 * .cache, fp8conv's own temporary directories) and symbolic links to
 * directories (which could loop) are skipped. */
static fp8_status copy_if_other(fp8_ctx *ctx, void *arg, const char *name)
{
    const copy_job *c = arg;
    bool skipped = name[0] == '.' ||
                   (c->top && (ck_is_shard_name(name) || strcmp(name, INDEX_NAME) == 0));
    for (size_t i = 0; c->top && c->skip && c->skip[i] && !skipped; i++)
        skipped = strcmp(name, c->skip[i]) == 0;
    if (skipped)
        return FP8_OK;
    char *from = fp8_path_join(c->from, name), *dest = fp8_path_join(c->to, name);
    struct stat sb, lsb;
    fp8_status st = FP8_OK;
    if (!from || !dest)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", c->from);
    else if (stat(from, &sb) != 0 || lstat(from, &lsb) != 0)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot stat: %s", from, strerror(errno));
    else if (S_ISREG(sb.st_mode) && c->count) {
        c->count->files++;
        c->count->bytes += (uint64_t)sb.st_size;
    } else if (S_ISREG(sb.st_mode))
        st = copy_file(ctx, from, dest, (uint64_t)sb.st_size, c->cancel);
    else if (S_ISDIR(lsb.st_mode) && c->depth < 16) {
        copy_job sub = { from, dest, false, NULL, c->cancel, c->depth + 1, c->count };
        if (c->count && c->top) {
            size_t used = strlen(c->count->folder_names);
            snprintf(c->count->folder_names + used, sizeof c->count->folder_names - used,
                     "%s%s/", used ? " " : "", name);
            c->count->folders++;
        }
        if (c->count)
            st = copy_tree(ctx, &sub);
        else if (mkdir(dest, 0777) != 0)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create directory: %s", dest,
                          strerror(errno));
        else
            st = copy_tree(ctx, &sub);
    } else if (!S_ISDIR(sb.st_mode)) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: %s, not a regular file; fp8conv copies files and folders only", from,
                      file_kind(sb.st_mode));
    }
    free(from);
    free(dest);
    return st;
}

static fp8_status copy_tree(fp8_ctx *ctx, const copy_job *c)
{
    return each_entry(ctx, c->from, copy_if_other, (void *)c);
}

fp8_status ck_copy_other_files(fp8_ctx *ctx, const fp8_checkpoint *ck, const char *to,
                               const char *const *skip,
                               const volatile sig_atomic_t *cancel)
{
    copy_job c = { ck->path, to, true, skip, cancel, 0, NULL };
    return copy_tree(ctx, &c);
}

fp8_status ck_other_files_count(fp8_ctx *ctx, const fp8_checkpoint *ck,
                                const char *const *skip, fp8_copy_totals *totals)
{
    memset(totals, 0, sizeof *totals);
    copy_job c = { ck->path, "", true, skip, NULL, 0, totals };
    return copy_tree(ctx, &c);
}

fp8_status ck_output_names(fp8_ctx *ctx, const fp8_checkpoint *ck, char ***names)
{
    char **out = fp8_xcalloc(ck->nshards + 1, sizeof *out);
    *names = out;
    if (!out)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < ck->nshards; s++) {
        const char *name = ck->shard_names[s];
        size_t n = strlen(name) - (fp8_has_suffix(name, ".zst") ? 4 : 0);
        if (!(out[s] = strndup(name, n)))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < s; k++)
            if (strcmp(out[k], out[s]) == 0)
                return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                                "%s: shards %s and %s would both be written as %s", ck->path,
                                ck->shard_names[k], name, out[s]);
    }
    return FP8_OK;
}

void ck_output_names_free(char **names, size_t n)
{
    fp8_strings_free(names, n);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void ck_remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
