/*
 * check_parts.c - a conversion cut into parts, and a run resumed:
 *   - quantize --part I/3 run at once as three processes, then --finish,
 *     gives what one plain run gives (diff -r), for other -j too;
 *     dequantize-for-export in two parts likewise;
 *   - a finish with a part missing, a part or finish with other options,
 *     and a recorded shard damaged afterwards are refused, naming them;
 *   - a durable run killed with SIGKILL and run again with --resume keeps
 *     the shards it had finished (same inode) and redoes the others;
 *     --resume on a complete OUTPUT does nothing.
 */
#include "golden.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>

#include "io/parts.h"

/* A checkpoint directory of `n` shards, shard s holding an [rows_s, 512]
 * bf16 weight (rows growing with s, so the shards differ in size) and a
 * norm, with an index, config.json and a tokenizer file to copy. */
static char *make_sharded(const char *dir, const char *name, size_t n, uint64_t rows)
{
    char *model, *path;
    ck_assert(asprintf(&model, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_text index = { 0 };
    fp8_text_str(&index, "{\"metadata\": {}, \"weight_map\": {");
    for (size_t s = 0; s < n; s++) {
        char shard[64], weight[96], norm[96];
        snprintf(shard, sizeof shard, "model-%05zu-of-%05zu.safetensors", s + 1, n);
        snprintf(weight, sizeof weight, "model.layers.%zu.mlp.down_proj.weight", s);
        snprintf(norm, sizeof norm, "model.layers.%zu.input_layernorm.weight", s);
        ck_assert(asprintf(&path, "%s/%s", model, shard) > 0);
        uint64_t shape[2] = { rows + 64 * s, 512 }, nshape[1] = { 512 };
        fp8_writer *w;
        ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
        ck_assert(fp8_writer_add_tensor(ctx, w, weight, FP8_DTYPE_BF16, 2, shape) == FP8_OK);
        ck_assert(fp8_writer_add_tensor(ctx, w, norm, FP8_DTYPE_BF16, 1, nshape) == FP8_OK);
        write_patterned(ctx, w, s);
        free(path);
        char entry[512];
        snprintf(entry, sizeof entry, "%s\"%s\": \"%s\", \"%s\": \"%s\"", s ? ", " : "", weight,
                 shard, norm, shard);
        fp8_text_str(&index, entry);
    }
    fp8_text_str(&index, "}}\n");
    ck_assert(asprintf(&path, "%s/model.safetensors.index.json", model) > 0);
    tu_spit(path, index.p, index.len);
    free(path);
    free(index.p);
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    tu_spit(path, "{\"model_type\": \"llama\"}\n", 24);
    free(path);
    ck_assert(asprintf(&path, "%s/tokenizer.json", model) > 0);
    tu_spit(path, "{}\n", 3);
    free(path);
    fp8_ctx_free(ctx);
    return model;
}

/* Runs fp8conv with the formatted arguments and expects exit status `rc`. */
static void expect_exit(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect_exit(int rc, const char *fmt, ...)
{
    char *args, *err;
    va_list ap;
    va_start(ap, fmt);
    ck_assert(vasprintf(&args, fmt, ap) > 0);
    va_end(ap);
    int got = tu_run(args, NULL, &err);
    ck_assert_msg(got == rc, "fp8conv %s: exit %d, not %d: %s", args, got, rc, err);
    free(err);
    free(args);
}

/* Starts `fp8conv ARGS` through the shell, its output dropped. */
static pid_t spawn(const char *args)
{
    char *cmd;
    ck_assert(asprintf(&cmd, "exec %s %s >/dev/null 2>&1 </dev/null", FP8CONV_BIN, args) > 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    free(cmd);
    return pid;
}

static int wait_exit(pid_t pid)
{
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status), "fp8conv died: status 0x%x", status);
    return WEXITSTATUS(status);
}

static void expect_same_tree(const char *a, const char *b)
{
    char *cmd;
    ck_assert(asprintf(&cmd, "diff -r '%s' '%s' >/dev/null", a, b) > 0);
    ck_assert_msg(system(cmd) == 0, "%s and %s differ", a, b);
    free(cmd);
}

static ino_t inode_of(const char *dir, const char *name)
{
    char path[1024];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(stat(path, &sb) == 0, "%s missing", path);
    return sb.st_ino;
}

/* Flips one byte in the middle of the file (its size stays). */
static void flip_byte(const char *path)
{
    size_t len;
    char *data = tu_slurp(path, &len);
    data[len / 2] ^= 0x40;
    tu_spit(path, data, len);
    free(data);
}

/* ---------------------------------------------------------------- the split */

START_TEST(test_split_is_contiguous_balanced_and_covers_every_shard)
{
    const uint64_t bytes[] = { 10, 10, 10, 10, 60, 10, 10, 10, 10, 10 };
    for (unsigned parts = 1; parts <= 12; parts++) {
        unsigned last = 1;
        for (size_t s = 0; s < 10; s++) {
            unsigned p = fp8_part_of(bytes, 10, s, parts);
            ck_assert(p >= last && p <= parts); /* contiguous ranges, in order */
            last = p;
        }
        ck_assert_uint_eq(fp8_part_of(bytes, 10, 0, parts), 1);
    }
    /* 3 parts of 150 bytes: [0, 50), [50, 100), [100, 150) by middle bytes:
     * the big shard (40 to 100, middle 70) is part 2 alone */
    ck_assert_uint_eq(fp8_part_of(bytes, 10, 3, 3), 1);
    ck_assert_uint_eq(fp8_part_of(bytes, 10, 4, 3), 2);
    ck_assert_uint_eq(fp8_part_of(bytes, 10, 5, 3), 3);
    ck_assert_uint_eq(fp8_part_of(bytes, 10, 6, 3), 3);
    ck_assert_uint_eq(fp8_part_of(bytes, 10, 9, 3), 3);
}
END_TEST

/* ---------------------------------------------------------------- parts, finish */

START_TEST(test_three_parts_at_once_then_finish_equal_one_run)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 7, 256), *plain;
    ck_assert(asprintf(&plain, "%s/plain", dir) > 0);
    expect_exit(0, "quantize -q -j 2 --block 64x64 %s %s", model, plain);
    for (int round = 0; round < 2; round++) { /* parts at -j 1, 2, 3; then all at -j 2 */
        pid_t pid[3];
        for (int i = 0; i < 3; i++) {
            char *args;
            ck_assert(asprintf(&args, "quantize -q -j %d --block 64x64 --part %d/3 %s %s/out%d",
                               round ? 2 : i + 1, i + 1, model, dir, round) > 0);
            pid[i] = spawn(args);
            free(args);
        }
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(wait_exit(pid[i]), 0);
        char *out, *staging;
        ck_assert(asprintf(&out, "%s/out%d", dir, round) > 0);
        ck_assert(asprintf(&staging, "%s/.out%d.parts", dir, round) > 0);
        ck_assert_msg(!exists(out) && exists(staging), "a part published or staged nothing");
        /* issue 23: finishes at once (round 1) all succeed, one publishing;
         * a finish after that has nothing to do */
        for (int i = 0; i < 1 + 2 * round; i++) {
            char *args;
            ck_assert(asprintf(&args, "quantize -q --block 64x64 --finish %s %s", model, out) > 0);
            pid[i] = spawn(args);
            free(args);
        }
        for (int i = 0; i < 1 + 2 * round; i++)
            ck_assert_int_eq(wait_exit(pid[i]), 0);
        expect_same_tree(out, plain);
        ck_assert_msg(!exists(staging), "the staging directory is left");
        char *err;
        ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --block 64x64 --finish %s %s", model, out),
                         0);
        ck_assert_msg(strstr(err, "finished already"), "%s", err);
        free(err);
        /* issue 45: other options than the published output's: refused, named */
        ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --block 32x32 --finish %s %s", model, out),
                         2);
        ck_assert_msg(strstr(err, "published already with other options: its config.json's "
                                  "quantization_config has \"weight_block_size\": [64,64], this "
                                  "command writes [32,32]"), "%s", err);
        free(err);
        ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --scheme channel --finish %s %s", model, out),
                         2);
        ck_assert_msg(strstr(err, "\"quant_method\": \"fp8\", this command writes "
                                  "\"compressed-tensors\""), "%s", err);
        free(err);
        expect_same_tree(out, plain);
        free(staging);
        free(out);
    }
    free(plain);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_finish_with_a_part_missing_names_its_shards)
{
    /* shard bytes 256:320:384:448:512 (x 1 KiB): part 2 of 3 is shards 3 and 4 */
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 5, 256), *err;
    expect_exit(0, "quantize -q --part 1/3 %s %s/out", model, dir);
    expect_exit(0, "quantize -q --part 3/3 %s %s/out", model, dir);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --finish %s %s/out", model, dir), 2);
    ck_assert_msg(strstr(err, "2 of 5 shards not finished") &&
                      strstr(err, "model-00003-of-00005.safetensors (part 2 of 3: not written)") &&
                      strstr(err, "model-00004-of-00005.safetensors (part 2 of 3: not written)") &&
                      !strstr(err, "model-00005-of-00005.safetensors ("),
                  "%s", err);
    free(err);
    char *out, *plain;
    ck_assert(asprintf(&out, "%s/out", dir) > 0 && asprintf(&plain, "%s/plain", dir) > 0);
    ck_assert(!exists(out));
    ck_assert_int_eq(count_entries(dir, ".out.parts"), 1); /* kept for the missing part */
    expect_exit(0, "quantize -q --part 2/3 %s %s", model, out);
    expect_exit(0, "quantize -q --finish %s %s", model, out);
    expect_exit(0, "quantize -q %s %s", model, plain);
    expect_same_tree(out, plain);
    free(plain);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_part_or_finish_with_other_options_is_refused)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 3, 128), *err;
    expect_exit(0, "quantize -q --block 64x64 --part 1/2 %s %s/out", model, dir);
    static const struct {
        const char *args, *option, *values;
    } cases[] = {
        { "--scheme channel --part 2/2", "option --scheme differs", "'channel' here, 'block' there" },
        { "--block 32x32 --part 2/2", "option --block differs", "'32x32' here, '64x64' there" },
        /* issue 23: options as the user gives them, not --parts */
        { "--block 64x64 --part 2/3", "option N of --part I/N differs", "'3' here, '2' there" },
        { "--block 64x64 --ignore down_proj --part 2/2", "option --ignore differs",
          "'down_proj' here, 'none' there" },
        { "--block 32x32 --finish", "option --block differs", "'32x32' here, '64x64' there" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ck_assert_int_eq(tu_run_fmt(&err, "quantize -q %s %s %s/out", cases[i].args, model, dir), 2);
        ck_assert_msg(strstr(err, cases[i].option) && strstr(err, cases[i].values), "%s: %s",
                      cases[i].args, err);
        free(err);
    }
    /* issue 23: a changed shard named with its size and time, not --input-shard and
     * seconds since 1970 */
    char *cmd;
    ck_assert(asprintf(&cmd, "touch -d '2001-02-03 04:05:06Z' %s/model-00002-of-00003.safetensors",
                       model) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --block 64x64 --part 2/2 %s %s/out", model,
                                dir), 2);
    ck_assert_msg(strstr(err, "INPUT is not the one") &&
                      strstr(err, "'model-00002-of-00003.safetensors of ") &&
                      strstr(err, "bytes modified 2001-02-03 04:05:06 UTC' here") &&
                      !strstr(err, "--input-shard") && !strstr(err, "981173106"),
                  "%s", err);
    free(err);
    /* nothing of theirs was written: part 1's shards only */
    char *staging;
    ck_assert(asprintf(&staging, "%s/.out.parts", dir) > 0);
    ck_assert_int_eq(count_entries(staging, "model-"), 2);
    /* parts split the shards of a directory, not a file */
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --part 1/2 testdata/quant-edge/model.safetensors "
                                "%s/one.safetensors", dir), 2);
    ck_assert_msg(strstr(err, "single file"), "%s", err);
    free(err);
    expect_exit(2, "quantize -q --part 1/2 --finish %s %s/out", model, dir);
    expect_exit(2, "quantize -q --part 0/2 %s %s/out", model, dir);
    free(staging);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_damaged_shard_is_found_by_finish_and_redone_by_its_part)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 3, 128), *err, *shard;
    for (int i = 1; i <= 2; i++) {
        expect_exit(0, "quantize -q --part %d/2 %s %s/out", i, model, dir);
    }
    ck_assert(asprintf(&shard, "%s/.out.parts/model-00001-of-00003.safetensors", dir) > 0);
    flip_byte(shard);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --finish %s %s/out", model, dir), 4);
    ck_assert_msg(strstr(err, "model-00001-of-00003.safetensors (part 1 of 2: its size or hash "
                              "does not match its record)"), "%s", err);
    free(err);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    expect_exit(0, "quantize -q --part 1/2 %s %s/out", model, dir);
    expect_exit(0, "quantize -q --finish %s %s/out", model, dir);
    expect_exit(0, "quantize -q %s %s/plain", model, dir);
    char *out, *plain;
    ck_assert(asprintf(&out, "%s/out", dir) > 0 && asprintf(&plain, "%s/plain", dir) > 0);
    expect_same_tree(out, plain);
    free(out);
    free(plain);
    free(shard);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dequantize_in_two_parts_then_finish_equals_one_run)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 4, 128), *err, *fp8, *plain, *out;
    ck_assert(asprintf(&fp8, "%s/fp8", dir) > 0 && asprintf(&plain, "%s/plain", dir) > 0 &&
              asprintf(&out, "%s/out", dir) > 0);
    expect_exit(0, "quantize -q --block 64x64 %s %s", model, fp8);
    expect_exit(0, "dequantize-for-export -q --dtype f32 %s %s", fp8, plain);
    pid_t pid[2];
    for (int i = 0; i < 2; i++) {
        char *args;
        ck_assert(asprintf(&args, "dequantize-for-export -q -j %d --dtype f32 --part %d/2 %s %s",
                           i + 1, i + 1, fp8, out) > 0);
        pid[i] = spawn(args);
        free(args);
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(wait_exit(pid[i]), 0);
    ck_assert(!exists(out));
    ck_assert_int_eq(tu_run_fmt(&err, "dequantize-for-export -q --finish %s %s", fp8, out), 2);
    ck_assert_msg(strstr(err, "option --dtype differs"), "%s", err);
    free(err);
    expect_exit(0, "dequantize-for-export -q --dtype f32 --finish %s %s", fp8, out);
    expect_same_tree(out, plain);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    /* issue 23: made with --dtype f32, it is no complete bf16 export */
    ck_assert_int_eq(tu_run_fmt(&err, "dequantize-for-export --resume %s %s", fp8, out), 2);
    ck_assert_msg(strstr(err, "is not what this command writes"), "%s", err);
    free(err);
    ck_assert_int_eq(tu_run_fmt(&err, "dequantize-for-export --dtype f32 --resume %s %s", fp8,
                                out), 0);
    ck_assert_msg(strstr(err, "complete already"), "%s", err);
    free(err);
    expect_same_tree(out, plain);
    free(out);
    free(plain);
    free(fp8);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- resume */

/* The temporary directory of a run on DIR/out, NULL when there is none. */
static char *tmp_of(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char *found = NULL;
    while (d && !found && (de = readdir(d)))
        if (strncmp(de->d_name, ".out.tmp-", 9) == 0)
            ck_assert(asprintf(&found, "%s/%s", dir, de->d_name) > 0);
    if (d)
        closedir(d);
    return found;
}

/* Shards recorded in `records` (0 while it does not exist yet). */
static int count_done(const char *records)
{
    DIR *d = records ? opendir(records) : NULL;
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        n += strncmp(de->d_name, "model-", 6) == 0;
    if (d)
        closedir(d);
    return n;
}

START_TEST(test_kill_9_then_resume_keeps_finished_shards_and_redoes_the_rest)
{
    enum { N = 10 };
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", N, 8192), *err, *tmp = NULL;
    char *args, *records = NULL;
    ck_assert(asprintf(&args, "quantize -q -j 1 --scheme tensor %s %s/out", model, dir) > 0);
    pid_t pid = spawn(args);
    /* kill -9 once two shards are recorded (of the first four written at once) */
    for (int i = 0; i < 200000 && count_done(records) < 2; i++) {
        if (!tmp && (tmp = tmp_of(dir)))
            ck_assert(asprintf(&records, "%s/%s", tmp, FP8_RECORDS) > 0);
        usleep(50);
    }
    kill(pid, SIGKILL);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
    ck_assert_msg(records, "the run did not start");
    /* what the dead run recorded: their inodes must survive the resume */
    char names[N][64];
    ino_t inodes[N];
    int done = 0;
    for (int s = 0; s < N; s++) {
        char rec[1024];
        snprintf(names[done], sizeof names[done], "model-%05d-of-%05d.safetensors", s + 1, N);
        snprintf(rec, sizeof rec, "%s/%s.done", records, names[done]);
        if (!exists(rec))
            continue;
        /* a link holds the inode, so that a new file cannot get its number */
        char from[1024], to[1024];
        snprintf(from, sizeof from, "%s/%s", tmp, names[done]);
        snprintf(to, sizeof to, "%s/held-%d", dir, s);
        ck_assert(link(from, to) == 0);
        inodes[done] = inode_of(tmp, names[done]);
        done++;
    }
    ck_assert_msg(done >= 2 && done < N, "%d of %d shards recorded at the kill", done, N);
    /* the first recorded one is damaged since: it must be redone */
    char damaged[1024];
    snprintf(damaged, sizeof damaged, "%s/%s", tmp, names[0]);
    flip_byte(damaged);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -j 2 --scheme tensor --resume %s %s/out", model, dir), 0);
    ck_assert_msg(strstr(err, "resuming the run") && strstr(err, "kept"), "%s", err);
    free(err);
    char *out, *plain;
    ck_assert(asprintf(&out, "%s/out", dir) > 0 && asprintf(&plain, "%s/plain", dir) > 0);
    ck_assert_msg(inode_of(out, names[0]) != inodes[0], "the damaged shard was kept");
    for (int k = 1; k < done; k++)
        ck_assert_msg(inode_of(out, names[k]) == inodes[k], "%s was written again", names[k]);
    expect_exit(0, "quantize -q --no-sync --scheme tensor %s %s", model, plain);
    expect_same_tree(out, plain);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    free(out);
    free(plain);
    free(records);
    free(tmp);
    free(args);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_resume_leaves_a_dead_run_made_with_other_options)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 2, 128), *err, *dead, host[256] = "";
    gethostname(host, sizeof host - 1);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    ck_assert(waitpid(child, NULL, 0) == child); /* a pid that is gone */
    ck_assert(asprintf(&dead, "%s/.out.tmp-AAAAAA", dir) > 0);
    ck_assert(mkdir(dead, 0755) == 0);
    char path[1024], text[512];
    snprintf(path, sizeof path, "%s/.fp8conv-owner", dead);
    snprintf(text, sizeof text, "pid %d\nstart 1\nhost %s\noutput out\n", (int)child, host);
    tu_spit(path, text, strlen(text));
    snprintf(path, sizeof path, "%s/%s", dead, FP8_RECORDS);
    ck_assert(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/%s/options", dead, FP8_RECORDS);
    tu_spit(path, "--scheme channel\n", 17);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize --resume %s %s/out", model, dir), 0);
    ck_assert_msg(strstr(err, "not made with these options") && strstr(err, "not resumed") &&
                      strstr(err, "removed") && !strstr(err, "resuming"), "%s", err);
    free(err);
    ck_assert(!exists(dead));
    expect_exit(0, "quantize -q %s %s/plain", model, dir);
    char *out, *plain;
    ck_assert(asprintf(&out, "%s/out", dir) > 0 && asprintf(&plain, "%s/plain", dir) > 0);
    expect_same_tree(out, plain);
    free(out);
    free(plain);
    free(dead);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* issue 43.6: a shard edited in place with its mtime put back (touch -r,
 * rsync -t, cp -p of a re-made file) is another INPUT: a later part and
 * --finish refuse it (exit 2) naming the shard, --resume leaves the dead
 * run's work and starts over (exit 0) */
START_TEST(test_edit_in_place_with_mtime_restored_is_seen)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 3, 128), *err, *shard, *cmd;
    expect_exit(0, "quantize -q --part 1/2 %s %s/out", model, dir);
    /* a dead run of the same options (part 1's, less --parts) for --resume */
    char host[256] = "", path[1024], text[512];
    gethostname(host, sizeof host - 1);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    ck_assert(waitpid(child, NULL, 0) == child);
    snprintf(path, sizeof path, "%s/.out2.tmp-AAAAAA", dir);
    ck_assert(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/.out2.tmp-AAAAAA/.fp8conv-owner", dir);
    snprintf(text, sizeof text, "pid %d\nstart 1\nhost %s\noutput out2\n", (int)child, host);
    tu_spit(path, text, strlen(text));
    ck_assert(asprintf(&cmd, "mkdir %s/.out2.tmp-AAAAAA/%s && grep -v '^--parts ' "
                       "%s/.out.parts/%s/options >%s/.out2.tmp-AAAAAA/%s/options", dir,
                       FP8_RECORDS, dir, FP8_RECORDS, dir, FP8_RECORDS) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    /* one byte of the first weight's data changed, the mtime put back */
    ck_assert(asprintf(&shard, "%s/model-00002-of-00003.safetensors", model) > 0);
    ck_assert(asprintf(&cmd, "cp -p %s %s/ref && printf '\\001' | dd of=%s bs=1 seek=4000 "
                       "conv=notrunc status=none && touch -r %s/ref %s", shard, dir, shard, dir,
                       shard) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --part 2/2 %s %s/out", model, dir), 2);
    ck_assert_msg(strstr(err, "INPUT is not the one") &&
                      strstr(err, "model-00002-of-00003.safetensors of ") &&
                      strstr(err, "content sample"), "%s", err);
    free(err);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --finish %s %s/out", model, dir), 2);
    ck_assert_msg(strstr(err, "INPUT is not the one") &&
                      strstr(err, "model-00002-of-00003.safetensors of "), "%s", err);
    free(err);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize --resume %s %s/out2", model, dir), 0);
    ck_assert_msg(strstr(err, "not made with these options") && strstr(err, "not resumed") &&
                      strstr(err, "no stopped run of this OUTPUT to resume on this host: "
                                  "converting from the beginning"), "%s", err);
    free(err);
    free(shard);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_resume_on_a_complete_output_does_nothing)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 2, 128), *err, *out;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    expect_exit(0, "quantize -q %s %s", model, out);
    ino_t before = inode_of(out, "model-00001-of-00002.safetensors");
    ino_t marker = inode_of(out, ".fp8conv-output");
    ck_assert_int_eq(tu_run_fmt(&err, "quantize --resume %s %s", model, out), 0);
    ck_assert_msg(strstr(err, "complete already"), "%s", err);
    free(err);
    ck_assert(inode_of(out, "model-00001-of-00002.safetensors") == before);
    ck_assert(inode_of(out, ".fp8conv-output") == marker);
    /* issue 23: other options, or another INPUT, are no finished output
     * of this command: refused, OUTPUT unchanged */
    ck_assert_int_eq(tu_run_fmt(&err, "quantize --json --resume --scheme channel %s %s", model,
                                out), 2);
    ck_assert_msg(strstr(err, "is not what this command writes"), "%s", err);
    free(err);
    char *other_model = make_sharded(dir, "m2", 3, 128);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize --resume %s %s", other_model, out), 2);
    ck_assert_msg(strstr(err, "is not what this command writes"), "%s", err);
    free(err);
    free(other_model);
    ck_assert(inode_of(out, "model-00001-of-00002.safetensors") == before);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    /* a directory fp8conv did not write is no finished output */
    char *other;
    ck_assert(asprintf(&other, "%s/mine", dir) > 0);
    ck_assert(mkdir(other, 0755) == 0);
    expect_exit(2, "quantize -q --resume %s %s", model, other);
    free(other);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- page cache */

/* Pages of the file in the page cache, of all its pages. */
static double resident(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat sb;
    ck_assert(fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size > 0);
    long page = sysconf(_SC_PAGE_SIZE);
    size_t pages = ((size_t)sb.st_size + (size_t)page - 1) / (size_t)page, in = 0;
    unsigned char *vec = malloc(pages);
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert(map != MAP_FAILED && mincore(map, (size_t)sb.st_size, vec) == 0);
    for (size_t i = 0; i < pages; i++)
        in += vec[i] & 1;
    munmap(map, (size_t)sb.st_size);
    free(vec);
    close(fd);
    return (double)in / (double)pages;
}

/* Whether this file system drops pages on POSIX_FADV_DONTNEED (tmpfs does not). */
static bool fadvise_drops(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/probe", dir);
    char *data = calloc(1, 1 << 20);
    tu_spit(path, data, 1 << 20);
    free(data);
    int fd = open(path, O_RDONLY);
    ck_assert(fd >= 0 && fsync(fd) == 0);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    bool drops = resident(path) < 0.5;
    unlink(path);
    return drops;
}

START_TEST(test_page_cache_drop_leaves_input_and_output_uncached_same_bytes)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 2, 4096), *shard, *outshard;
    ck_assert(asprintf(&shard, "%s/model-00002-of-00002.safetensors", model) > 0);
    ck_assert(asprintf(&outshard, "%s/drop/model-00002-of-00002.safetensors", dir) > 0);
    expect_exit(0, "quantize -q --page-cache keep %s %s/keep", model, dir);
    bool checkable = fadvise_drops(dir);
    if (checkable)
        ck_assert_msg(resident(shard) > 0.5, "a keep run dropped its input");
    expect_exit(0, "quantize -q --page-cache drop %s %s/drop", model, dir);
    if (checkable) { /* a drop run leaves neither its input nor its output cached */
        ck_assert_msg(resident(shard) < 0.1, "input %.0f%% cached", 100 * resident(shard));
        ck_assert_msg(resident(outshard) < 0.1, "output %.0f%% cached", 100 * resident(outshard));
    }
    char *keep, *drop;
    ck_assert(asprintf(&keep, "%s/keep", dir) > 0 && asprintf(&drop, "%s/drop", dir) > 0);
    expect_same_tree(keep, drop);
    expect_exit(2, "quantize -q --page-cache sometimes %s %s/x", model, dir);
    free(keep);
    free(drop);
    free(outshard);
    free(shard);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("parts");
    TCase *tc = tcase_create("parts");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_split_is_contiguous_balanced_and_covers_every_shard);
    tcase_add_test(tc, test_three_parts_at_once_then_finish_equal_one_run);
    tcase_add_test(tc, test_finish_with_a_part_missing_names_its_shards);
    tcase_add_test(tc, test_part_or_finish_with_other_options_is_refused);
    tcase_add_test(tc, test_damaged_shard_is_found_by_finish_and_redone_by_its_part);
    tcase_add_test(tc, test_dequantize_in_two_parts_then_finish_equals_one_run);
    tcase_add_test(tc, test_kill_9_then_resume_keeps_finished_shards_and_redoes_the_rest);
    tcase_add_test(tc, test_resume_leaves_a_dead_run_made_with_other_options);
    tcase_add_test(tc, test_resume_on_a_complete_output_does_nothing);
    tcase_add_test(tc, test_edit_in_place_with_mtime_restored_is_seen);
    tcase_add_test(tc, test_page_cache_drop_leaves_input_and_output_uncached_same_bytes);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
