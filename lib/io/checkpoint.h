/*
 * checkpoint.h - what lib/ shares about checkpoint directories beyond the
 * public API: side JSON files, the index, copying, removal.
 */
#ifndef FP8_CHECKPOINT_H
#define FP8_CHECKPOINT_H

#include <cjson/cJSON.h>

#include "common/internal.h"

#define CK_INDEX_NAME "model.safetensors.index.json"

/* The path the checkpoint was opened with. */
const char *ck_path(const fp8_checkpoint *ck);
/* fp8_checkpoint_find of name's first `keep` bytes then suffix (a scale
 * from its weight's name), with no buffer for the name. */
const fp8_tensor_info *ck_find_with(const fp8_checkpoint *ck, const char *name, size_t keep,
                                    const char *suffix, size_t *shard);
/* The fp8_jobs lane of a job reading tensor `t` of shard `shard` from byte
 * `at` of its data: lane `base + shard` when the shard is compressed (a
 * stream, read forward), else FP8_NO_LANE; *offset is where the read starts
 * in the shard.  `base` keeps two checkpoints' lanes apart. */
size_t ck_lane(const fp8_checkpoint *ck, size_t shard, const fp8_tensor_info *t, uint64_t at,
               size_t base, uint64_t *offset);

/* A checkpoint of tensors held in memory, not in a file (the state-dict
 * API's, fp8_quant_plan_create_memory): one shard, `name`, that has no
 * fp8_file (fp8_checkpoint_shard is NULL: no data is read), holding copies
 * of the n tensors' names, dtypes and shapes (begin 0, end their bytes).  A
 * tensor without a name, of more than 64 dimensions or an unknown dtype is
 * FP8_ERR_USAGE, a name twice FP8_ERR_BAD_INPUT. */
fp8_status ck_open_tensors(fp8_ctx *ctx, const char *name, const fp8_tensor_info *tensors,
                           size_t n, fp8_checkpoint **out);

/* Whether `name` is a shard file name (*.safetensors, *.safetensors.zst). */
bool ck_is_shard_name(const char *name);

/* dir/config.json parsed with every number kept as its exact text (see
 * st_json_parse_exact); *config is NULL when there is none. */
fp8_status ck_config_read(fp8_ctx *ctx, const char *dir, cJSON **config);
/* A config.json's text (len bytes), parsed as ck_config_read parses the
 * file; `path` names it in messages. */
fp8_status ck_json_parse(fp8_ctx *ctx, const char *path, const char *text, size_t len,
                         cJSON **root);
/* The same for another JSON object file of the directory. */
fp8_status ck_json_read(fp8_ctx *ctx, const char *dir, const char *name, cJSON **root);

/* Writes `root` to dir/name as transformers writes its JSON files (2-space
 * indent, keys in tree order, a final newline), durably. */
fp8_status ck_json_write(fp8_ctx *ctx, const char *dir, const char *name, const cJSON *root);
/* The same, then frees the tree (NULL: the caller ran out of memory building it). */
fp8_status ck_json_write_owned(fp8_ctx *ctx, const char *dir, const char *name, cJSON *root);

/* Writes dir/model.safetensors.index.json: metadata.total_size (the bytes of
 * all tensors, as transformers writes it) and the weight_map sorted by name.
 * Sorts `map` in place. */
typedef struct {
    const char *name, *shard;
} ck_index_entry;
fp8_status ck_index_write(fp8_ctx *ctx, const char *dir, ck_index_entry *map, size_t n,
                          uint64_t total_size);

/* Copies every regular top-level file of the checkpoint directory (symbolic
 * links followed, as in a Hugging Face cache snapshot) into `to`, except the
 * shards, the index, other *.safetensors files and the names in `skip`
 * (NULL-terminated); and every subfolder whole (sentence-transformers'
 * 1_Pooling/, 2_Dense/ with its own weights, unconverted).  Hidden entries
 * and symbolic links to directories are skipped. */
fp8_status ck_copy_other_files(fp8_ctx *ctx, const fp8_checkpoint *ck, const char *to,
                               const char *const *skip,
                               const volatile sig_atomic_t *cancel);

/* What ck_copy_other_files would copy, counted without copying: the files
 * (those in subfolders too), their bytes, and the subfolders, by name
 * ("1_Pooling/ original/", cut short past the buffer). */
fp8_status ck_other_files_count(fp8_ctx *ctx, const fp8_checkpoint *ck,
                                const char *const *skip, fp8_copy_totals *totals);

/* The file names a converted copy of `ck` writes: the shards' own, without
 * a .zst ending (outputs are plain); two that would coincide are bad input.
 * Free with ck_output_names_free. */
fp8_status ck_output_names(fp8_ctx *ctx, const fp8_checkpoint *ck, char ***names);
void ck_output_names_free(char **names, size_t n);

/* Removes a file or a directory tree; quiet, best effort (for cleanup). */
void ck_remove_tree(const char *path);
/* Opens a file to read, refusing what is not a regular file (a FIFO would
 * block) and naming a dangling symbolic link; *fd is -1 and FP8_OK when
 * the file does not exist and `may_be_absent`. */
fp8_status ck_open_regular(fp8_ctx *ctx, const char *path, bool may_be_absent, int *fd);

#endif
